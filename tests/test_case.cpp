// The case model: bottom-right causal visibility, the FLOP formula's mean visible keys, validation.
#include <gtest/gtest.h>

#include "case.hpp"
#include "errors.hpp"

namespace faprobe {
namespace {

Case causal_case(std::int64_t seq_q, std::int64_t seq_k) {
  Case c;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.mask = Mask::causal;
  return c;
}

TEST(Case, CausalIsBottomRightAligned) {
  const Case square = causal_case(4, 4);
  EXPECT_EQ(square.visible_keys(0), 1);
  EXPECT_EQ(square.visible_keys(3), 4);
  const Case fewer_queries = causal_case(2, 5);  // the last query row sees every key
  EXPECT_EQ(fewer_queries.visible_keys(0), 4);
  EXPECT_EQ(fewer_queries.visible_keys(1), 5);
  const Case more_queries = causal_case(5, 2);  // the first rows see no key at all
  EXPECT_EQ(more_queries.visible_keys(0), 0);
  EXPECT_EQ(more_queries.visible_keys(2), 0);
  EXPECT_EQ(more_queries.visible_keys(3), 1);
  EXPECT_EQ(more_queries.visible_keys(4), 2);
}

TEST(Case, AverageKeysMatchesCounting) {
  for (std::int64_t seq_q : {1, 2, 7, 64, 129}) {
    for (std::int64_t seq_k : {1, 3, 64, 200}) {
      for (Mask mask : {Mask::none, Mask::causal}) {
        Case c = causal_case(seq_q, seq_k);
        c.mask = mask;
        double total = 0;
        for (std::int64_t row = 0; row < seq_q; ++row) total += double(c.visible_keys(row));
        EXPECT_DOUBLE_EQ(c.avg_keys(), total / double(seq_q)) << c.label();
      }
    }
  }
}

TEST(Case, FlopsAndBytesFollowTheDesignFormulas) {
  Case c;
  c.batch = 2;
  c.heads = 8;
  c.kv_heads = 2;
  c.seq_q = c.seq_k = 1024;
  c.head_dim = 64;
  c.dtype = DType::fp16;
  EXPECT_DOUBLE_EQ(c.flops(), 4.0 * 2 * 8 * 1024 * 1024 * 64);
  EXPECT_DOUBLE_EQ(c.min_bytes(), 2.0 * (2.0 * 2 * 1024 * 8 * 64 + 2.0 * 2 * 1024 * 2 * 64));
  c.mask = Mask::causal;  // (n + 1) / 2 keys per row on average
  EXPECT_DOUBLE_EQ(c.flops(), 4.0 * 2 * 8 * 1024 * (1025.0 / 2.0) * 64);
  EXPECT_EQ(c.group_size(), 4);
  EXPECT_EQ(c.kv_head_of(5), 1);
}

TEST(Case, ValidateNamesTheOffendingField) {
  Case c;
  c.kv_heads = 3;
  try {
    c.validate();
    FAIL() << "heads 8 with kv_heads 3 must be refused";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("--kv-heads 3"), std::string::npos);
  }
  c.kv_heads = 8;
  c.head_dim = 0;
  EXPECT_THROW(c.validate(), UsageError);
  c.head_dim = 64;
  c.mode = Mode::decode;
  c.seq_q = 4;
  EXPECT_THROW(c.validate(), UsageError);
  c.seq_q = 1;
  EXPECT_NO_THROW(c.validate());
}

TEST(Case, JsonRoundTrip) {
  Case c = causal_case(17, 129);
  c.dtype = DType::bf16;
  c.kv_heads = 1;
  c.seed = 42;
  EXPECT_EQ(nlohmann::json(c).get<Case>().key(), c.key());
}

}  // namespace
}  // namespace faprobe
