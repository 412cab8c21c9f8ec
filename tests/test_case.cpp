// The case model: bottom-right causal visibility, the FLOP formula's mean visible keys, validation; the
// paged and variable-length K/V layouts (kv_layout.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "case_support.hpp"
#include "model/case.hpp"
#include "model/errors.hpp"
#include "model/kv_layout.hpp"

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

TEST(Case, CausalTopLeftIsPyTorchsIsCausal) {
  Case c = causal_case(4, 4);  // square: the two alignments agree
  c.mask = Mask::causal_top_left;
  EXPECT_EQ(c.visible_keys(0), 1);
  EXPECT_EQ(c.visible_keys(3), 4);
  c = causal_case(2, 5);  // row i sees keys j <= i, however many keys there are
  c.mask = Mask::causal_top_left;
  EXPECT_EQ(c.visible_keys(0), 1);
  EXPECT_EQ(c.visible_keys(1), 2);
  EXPECT_EQ(c.diagonal(0), 0);
  c = causal_case(5, 2);  // no row is left without a key; the later ones see them all
  c.mask = Mask::causal_top_left;
  EXPECT_EQ(c.visible_keys(0), 1);
  EXPECT_EQ(c.visible_keys(1), 2);
  EXPECT_EQ(c.visible_keys(4), 2);
  EXPECT_TRUE(c.masked());
  EXPECT_FALSE(c.causal());  // causal() is the bottom-right mask the kernels implement
  EXPECT_EQ(parse_mask("causal-top-left", "--mask"), Mask::causal_top_left);
  EXPECT_EQ(to_string(Mask::causal_top_left), "causal-top-left");
  EXPECT_NE(c.label().find(" causal-top-left"), std::string::npos) << c.label();
  EXPECT_NE(c.key(), causal_case(5, 2).key());
}

TEST(Case, AverageKeysMatchesCounting) {
  for (std::int64_t seq_q : {1, 2, 7, 64, 129}) {
    for (std::int64_t seq_k : {1, 3, 64, 200}) {
      for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left}) {
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

Case varlen_decode(std::vector<std::int64_t> seqlens, std::int64_t page_size = 0) {
  return test_support::make_decode_case(std::move(seqlens), page_size, 8, 2, 64);
}

std::string usage_error(const Case& c) {
  try {
    c.validate();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Case, VariableLengthsCountTheirRealKeys) {
  const Case c = varlen_decode({1000, 17, 300});
  EXPECT_EQ(c.total_keys(), 1317);
  EXPECT_EQ(c.seq_k_of(1), 17);
  EXPECT_EQ(c.visible_keys(2, 0), 300);
  EXPECT_EQ(c.kv_elements(), 1317 * 2 * 64);
  EXPECT_DOUBLE_EQ(c.flops(), 4.0 * 8 * 64 * 1317);  // 4 · heads · d · Σ lengths: no padding to 1000
  EXPECT_DOUBLE_EQ(c.min_bytes(), 4.0 * (2 * 3 * 8 * 64 + 2 * 1317 * 2 * 64));
  EXPECT_EQ(c.label(), "b3 h8:2 q1 k[1000,17,300] d64 fp32 decode");
}

TEST(Case, LayoutFieldsAreValidatedWithTheFlagNamed) {
  Case c = varlen_decode({64, 3});
  c.page_size = 24;
  EXPECT_NE(usage_error(c).find("--page-size"), std::string::npos) << usage_error(c);
  c.page_size = 512;
  EXPECT_NE(usage_error(c).find("16 to 256"), std::string::npos);
  c.page_size = 32;
  c.splits = 300;
  EXPECT_NE(usage_error(c).find("--splits"), std::string::npos);
  c.splits = 4;
  EXPECT_EQ(usage_error(c), "(no error)");
  c.mode = Mode::prefill;
  EXPECT_NE(usage_error(c).find("--mode decode"), std::string::npos) << "variable lengths are decode only";
  c.mode = Mode::decode;
  c.seqlens = {64, 0};
  EXPECT_NE(usage_error(c).find("at least 1"), std::string::npos);
  c.seqlens = {64, 3, 5};  // three lengths for a batch of two
  EXPECT_NE(usage_error(c).find("--seqlens has 3 lengths"), std::string::npos);
}

TEST(Case, LayoutFieldsRoundTripAndStayOutOfPlainKeys) {
  Case plain = causal_case(17, 129);
  EXPECT_EQ(plain.key().find("page_size"), std::string::npos) << "a plain case keeps the key it always had";
  EXPECT_EQ(plain.key().find("seqlens"), std::string::npos);
  Case c = varlen_decode({1000, 17}, 64);
  c.splits = 8;
  const Case back = nlohmann::json(c).get<Case>();
  EXPECT_EQ(back.key(), c.key());
  EXPECT_EQ(back.seqlens, c.seqlens);
  EXPECT_EQ(back.page_size, 64);
  EXPECT_EQ(back.splits, 8);
}

TEST(KvLayout, ContiguousRowsArePackedWithoutPadding) {
  const KvLayout layout = make_kv_layout(varlen_decode({5, 1, 3}));
  EXPECT_FALSE(layout.paged());
  EXPECT_EQ(layout.rows, 9);
  EXPECT_EQ(layout.seq_starts, (std::vector<std::int32_t>{0, 5, 6, 9}));
  EXPECT_EQ(layout.storage_row(2, 1), 7);
}

TEST(KvLayout, PagesArePermutedAndFoundThroughTheBlockTable) {
  const Case c = varlen_decode({100, 17, 40}, 16);
  const KvLayout layout = make_kv_layout(c);
  ASSERT_TRUE(layout.paged());
  EXPECT_EQ(layout.pages_per_seq, 7);           // ceil(100 / 16)
  EXPECT_EQ(layout.rows, (7 + 2 + 3) * 16);     // whole pages per entry
  EXPECT_EQ(layout.block_table[std::size_t(1 * 7 + 2)], -1) << "entry 1 has two pages";
  // Every key has its own storage row, and the pages' contents invert the table.
  const KvLayout::PageContents contents = layout.page_contents();
  std::vector<int> seen(std::size_t(layout.rows), 0);
  bool in_order = true;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t key = 0; key < c.seq_k_of(b); ++key) {
      const std::int64_t row = layout.storage_row(b, key);
      ++seen[std::size_t(row)];
      const std::size_t page = std::size_t(row / 16);
      EXPECT_EQ(contents.first_row[page] + row % 16, layout.seq_starts[std::size_t(b)] + key);
      EXPECT_LT(row % 16, contents.valid_rows[page]);
      in_order = in_order && row == layout.seq_starts[std::size_t(b)] + key;
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 157);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), layout.rows - 157) << "the padding rows";
  EXPECT_FALSE(in_order) << "pages placed at random, not in order";
  // The placement is deterministic: the same case gives the same table.
  EXPECT_EQ(make_kv_layout(c).block_table, layout.block_table);
}

}  // namespace
}  // namespace faprobe
