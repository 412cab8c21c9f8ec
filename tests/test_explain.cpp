// The mismatch explainer (reference/explain.hpp): for each usual mistake, an output made with that mistake by
// a plain attention written here (independent of the reference and of every kernel) fails the check, and the
// diagnosis names the mistake; a correct output passes with no diagnosis. Where the error lives is named too
// (rows from N on, the last partial query block, block boundaries, only the rows the causal mask cuts,
// columns from N on, one batch entry, one query head, NaN).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reference/check.hpp"

namespace faprobe {
namespace {

enum class Defect {
  none, no_mask, top_left, bottom_right, diagonal_later, diagonal_earlier, scale_one, scale_over_d,
  log2e_twice, log2e_missing, kv_swapped, gqa_modulo, unnormalized, normalized_twice, bhsd_output,
  rows_from_64, rows_from_32, block_end_16, cut_rows, columns_from_16, batch_1, head_2, nan_row
};

struct Planted {
  Defect defect;
  Mask mask;               // the case's mask
  std::string expected;    // in one diagnosis line
};

// Uniform in [-1, 1), from a fixed sequence.
float draw(std::uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return float(double(state >> 11) / double(1ull << 53) * 2.0 - 1.0);
}

// Plain attention in double, the defect planted: O as a kernel with that mistake would write it.
HostTensor attention(const Case& c, const HostTensor& q, const HostTensor& k, const HostTensor& v, Defect defect) {
  HostTensor o(DType::fp32, c.batch, c.seq_q, c.heads, c.head_dim);
  double scale = 1.0 / std::sqrt(double(c.head_dim));
  if (defect == Defect::scale_one) scale = 1.0;
  if (defect == Defect::scale_over_d) scale = 1.0 / double(c.head_dim);
  if (defect == Defect::log2e_twice) scale *= 1.4426950408889634;
  if (defect == Defect::log2e_missing) scale *= std::log(2.0);
  const std::int64_t group = c.heads / c.kv_heads;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::int64_t kv = defect == Defect::gqa_modulo ? h % c.kv_heads : h / group;
      const HostTensor& keys = defect == Defect::kv_swapped ? v : k;
      const HostTensor& values = defect == Defect::kv_swapped ? k : v;
      for (std::int64_t i = 0; i < c.seq_q; ++i) {
        // Row i sees keys j < limit.
        Mask mask = c.mask;
        if (defect == Defect::no_mask) mask = Mask::none;
        if (defect == Defect::top_left) mask = Mask::causal_top_left;
        if (defect == Defect::bottom_right) mask = Mask::causal;
        std::int64_t limit = c.seq_k;
        if (mask == Mask::causal) limit = i + c.seq_k - c.seq_q + 1;
        if (mask == Mask::causal_top_left) limit = i + 1;
        if (defect == Defect::diagonal_later) ++limit;
        if (defect == Defect::diagonal_earlier) --limit;
        limit = std::clamp<std::int64_t>(limit, 0, c.seq_k);
        std::vector<double> weight(static_cast<std::size_t>(limit));
        double top = -1e300, sum = 0;
        for (std::int64_t j = 0; j < limit; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < c.head_dim; ++d) {
            dot += double(q.get(q.offset(b, i, h) + d)) * keys.get(keys.offset(b, j, kv) + d);
          }
          weight[std::size_t(j)] = dot * scale;
          top = std::max(top, weight[std::size_t(j)]);
        }
        for (double& w : weight) sum += (w = std::exp(w - top));
        if (defect == Defect::unnormalized) sum = 1;
        if (defect == Defect::normalized_twice) sum *= sum;
        // (batch, heads, seq) order when the layout is planted: row (b, h, i) goes to the place of the
        // (b, seq, heads) row with the same index.
        std::int64_t base = o.offset(b, i, h);
        if (defect == Defect::bhsd_output) base = ((b * c.heads + h) * c.seq_q + i) * c.head_dim;
        for (std::int64_t d = 0; d < c.head_dim; ++d) {
          double out = 0;
          for (std::int64_t j = 0; j < limit; ++j) {
            out += weight[std::size_t(j)] * values.get(values.offset(b, j, kv) + d);
          }
          out = limit == 0 ? 0.0 : out / sum;
          if (defect == Defect::rows_from_64 && i >= 64) out += 0.5;
          if (defect == Defect::rows_from_32 && i >= 32) out += 0.5;
          if (defect == Defect::block_end_16 && i % 16 == 15) out += 0.5;
          if (defect == Defect::cut_rows && limit < c.seq_k) out += 0.25;
          if (defect == Defect::head_2 && h == 2) out = -out;
          if (defect == Defect::columns_from_16 && d >= 16) out *= 2.0;
          if (defect == Defect::batch_1 && b == 1) out = -out;
          if (defect == Defect::nan_row && i == 7) out = std::nan("");
          o.set(base + d, float(out));
        }
      }
    }
  }
  return o;
}

class Explainer : public testing::TestWithParam<Planted> {};

struct Inputs {
  HostTensor q, k, v;
};

// Q, K and V of case c in fp32, uniform in [-1, 1) from `seed`.
Inputs random_inputs(const Case& c, std::uint64_t seed) {
  Inputs in{HostTensor(DType::fp32, c.batch, c.seq_q, c.heads, c.head_dim),
            HostTensor(DType::fp32, c.batch, c.seq_k, c.kv_heads, c.head_dim),
            HostTensor(DType::fp32, c.batch, c.seq_k, c.kv_heads, c.head_dim)};
  for (HostTensor* tensor : {&in.q, &in.k, &in.v})
    for (std::int64_t i = 0; i < tensor->elements(); ++i) tensor->set(i, draw(seed));
  return in;
}

VerifyResult check_planted(Mask mask, Defect defect) {
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 100;
  c.seq_k = mask == Mask::none ? 100 : 300;
  c.head_dim = 32;
  c.mask = mask;
  const Inputs in = random_inputs(c, 7);
  return check_output(c, TensorInputs(in.q, in.k, in.v), attention(c, in.q, in.k, in.v, defect));
}

TEST(Explainer, ACorrectOutputPassesWithNoDiagnosis) {
  for (Mask mask : {Mask::none, Mask::causal, Mask::causal_top_left}) {
    const VerifyResult result = check_planted(mask, Defect::none);
    EXPECT_TRUE(result.passed) << to_string(mask) << ": " << result.note;
    EXPECT_TRUE(result.diagnosis.empty()) << to_string(mask);
  }
}

TEST_P(Explainer, NamesThePlantedMistake) {
  const Planted planted = GetParam();
  const VerifyResult result = check_planted(planted.mask, planted.defect);
  ASSERT_FALSE(result.passed);
  std::string all;
  bool named = false;
  for (const std::string& line : result.diagnosis) {
    all += "\n  " + line;
    named = named || line.find(planted.expected) != std::string::npos;
  }
  EXPECT_TRUE(named) << "expected '" << planted.expected << "' in:" << all;
  // A planted mistake is explained by that hypothesis alone; a planted corruption by none.
  int matches = 0;
  for (const std::string& line : result.diagnosis) matches += line.rfind("matches ", 0) == 0;
  EXPECT_EQ(matches, planted.defect < Defect::rows_from_64 ? 1 : 0) << all;
  // The verdict is the check's: the diagnosis is in the record, the rest as without it.
  const nlohmann::json json = result;
  EXPECT_EQ(json.at("diagnosis").size(), result.diagnosis.size());
  EXPECT_EQ(json.get<VerifyResult>().diagnosis, result.diagnosis);
}

// (batch, seq, heads) tensor `t` with axes 1 and 2 exchanged: what numpy's t.transpose(0, 2, 1, 3) holds.
HostTensor transposed(const HostTensor& t, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                      std::int64_t head_dim) {
  HostTensor out(t.dtype(), batch, heads, seq, head_dim);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t s = 0; s < seq; ++s)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < head_dim; ++d) out.set(out.offset(b, h, s) + d, t.get(t.offset(b, s, h) + d));
  return out;
}

// Files saved in PyTorch's (batch, heads, seq, head_dim) and read as faprobe's (batch, seq, heads,
// head_dim): 12 positions of 4 heads over 2 KV heads read as 4 positions of 12 heads over 2 keys of 12 KV
// heads. The output is right for the true case; the check of the case as read fails, and the diagnosis
// names the transposition and nothing else.
TEST(Explainer, NamesTensorsSavedWithHeadsBeforeSeq) {
  for (Mask mask : {Mask::none, Mask::causal}) {
    Case truth;
    truth.batch = 2;
    truth.heads = 4;
    truth.kv_heads = 2;
    truth.seq_q = truth.seq_k = 12;
    truth.head_dim = 32;
    truth.mask = mask;
    const auto [q, k, v] = random_inputs(truth, 11);
    const HostTensor o = attention(truth, q, k, v, Defect::none);

    Case as_read = truth;
    as_read.seq_q = truth.heads;
    as_read.heads = truth.seq_q;
    as_read.seq_k = truth.kv_heads;
    as_read.kv_heads = truth.seq_k;
    const int d = int(truth.head_dim);
    const HostTensor q_read = transposed(q, truth.batch, truth.seq_q, truth.heads, d);
    const HostTensor k_read = transposed(k, truth.batch, truth.seq_k, truth.kv_heads, d);
    const HostTensor v_read = transposed(v, truth.batch, truth.seq_k, truth.kv_heads, d);
    const HostTensor o_read = transposed(o, truth.batch, truth.seq_q, truth.heads, d);
    const VerifyResult result = check_output(as_read, TensorInputs(q_read, k_read, v_read), o_read);
    ASSERT_FALSE(result.passed) << to_string(mask);
    std::string all;
    int matches = 0;
    for (const std::string& line : result.diagnosis) {
      all += "\n  " + line;
      matches += line.rfind("matches ", 0) == 0;
    }
    EXPECT_NE(all.find("matches Q, K, V and O in (batch, heads, seq, head_dim) read as (batch, seq, heads, head_dim)"),
              std::string::npos)
        << to_string(mask) << all;
    EXPECT_EQ(matches, 1) << to_string(mask) << all;

    // The same tensors read the right way pass.
    EXPECT_TRUE(check_output(truth, TensorInputs(q, k, v), o).passed) << to_string(mask);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Planted, Explainer,
    testing::Values(Planted{Defect::no_mask, Mask::causal, "matches no mask"},
                    Planted{Defect::top_left, Mask::causal, "matches causal-top-left (PyTorch's is_causal)"},
                    Planted{Defect::bottom_right, Mask::causal_top_left, "matches causal bottom-right"},
                    Planted{Defect::bottom_right, Mask::none, "matches causal (bottom-right"},
                    Planted{Defect::diagonal_later, Mask::causal, "one key later"},
                    Planted{Defect::diagonal_earlier, Mask::causal, "one key earlier"},
                    Planted{Defect::diagonal_later, Mask::causal_top_left, "one key later"},
                    Planted{Defect::scale_one, Mask::none, "softmax scale 1 "},
                    Planted{Defect::scale_over_d, Mask::causal, "softmax scale 1/head_dim"},
                    Planted{Defect::log2e_twice, Mask::none, "log2(e) applied twice"},
                    Planted{Defect::log2e_missing, Mask::causal, "log2(e) not applied"},
                    Planted{Defect::kv_swapped, Mask::none, "K and V swapped"},
                    Planted{Defect::gqa_modulo, Mask::causal, "KV head h % kv_heads"},
                    Planted{Defect::unnormalized, Mask::none, "left unnormalized"},
                    Planted{Defect::normalized_twice, Mask::causal, "normalized twice"},
                    Planted{Defect::bhsd_output, Mask::none, "(batch, heads, seq, head_dim)"},
                    Planted{Defect::rows_from_64, Mask::none,
                            "rows from 64 on are wrong, the rows before are right: the last, partial query block of "
                            "64 (rows 64..99)"},
                    Planted{Defect::rows_from_32, Mask::causal,
                            "rows from 32 on are wrong, the rows before are right (a multiple of 32)"},
                    Planted{Defect::block_end_16, Mask::none,
                            "only rows at block boundaries are wrong: the last row of each block of 16 (48 wrong rows "
                            "checked)"},
                    Planted{Defect::cut_rows, Mask::causal, "only rows the causal mask cuts are wrong"},
                    Planted{Defect::columns_from_16, Mask::causal, "only columns from 16 on are wrong"},
                    Planted{Defect::batch_1, Mask::none, "only batch entry 1 is wrong"},
                    Planted{Defect::head_2, Mask::causal, "only query head 2 is wrong (of 4 checked)"},
                    Planted{Defect::nan_row, Mask::none, "hold NaN or Inf"}),
    [](const testing::TestParamInfo<Planted>& planted) {
      return std::to_string(planted.index) + "_" + std::string(to_string(planted.param.mask)).substr(0, 6);
    });

}  // namespace
}  // namespace faprobe
