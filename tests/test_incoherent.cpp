// Incoherent processing (src/model/incoherent.hpp) on the host: the integer Walsh–Hadamard transform with
// random signs leaves every dot product of Q and K rows unchanged, exactly in integers (times d); rounded to
// e4m3 and descaled, within the bound e4m3's 3-bit rounding gives; the host twin the checker uses equals
// make_inputs; and the error against the unquantized inputs that every fp8 record carries
// (add_exact_inputs_error) sees a planted error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "case_support.hpp"
#include "model/case.hpp"
#include "model/incoherent.hpp"
#include "model/tensor.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

__extension__ typedef __int128 Int128;  // the dot products of rotated rows reach 2^61 and more

const std::int64_t kHeadDims[] = {32, 64, 128, 256};
const InputDistribution kDistributions[] = {InputDistribution::normal, InputDistribution::outliers};

// Row `row` of a tensor (head_dim consecutive elements) as the generator's integers (units of 2^-16).
std::vector<std::int32_t> units_row(std::uint64_t key, std::int64_t row, std::int64_t head_dim,
                                    InputDistribution distribution) {
  std::vector<std::int32_t> units(static_cast<std::size_t>(head_dim));
  for (std::int64_t c = 0; c < head_dim; ++c) {
    units[std::size_t(c)] = input_units(key, std::uint64_t(row * head_dim + c), distribution);
  }
  return units;
}

// H·D·x in integers, with the signs of signs_key.
std::vector<std::int32_t> rotated(std::vector<std::int32_t> x, std::uint64_t signs_key) {
  for (std::size_t c = 0; c < x.size(); ++c) {
    if (incoherent_sign_negative(signs_key, c)) x[c] = -x[c];
  }
  walsh_hadamard(x.data(), int(x.size()));
  return x;
}

Int128 dot(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  Int128 sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += Int128(a[i]) * Int128(b[i]);
  return sum;
}

TEST(Incoherent, TheTransformTwiceIsHeadDimTimesTheIdentity) {
  for (const std::int64_t head_dim : kHeadDims) {
    const std::vector<std::int32_t> x = units_row(tensor_key(1, TensorId::q), 3, head_dim, InputDistribution::outliers);
    std::vector<std::int32_t> twice = x;
    walsh_hadamard(twice.data(), int(head_dim));
    EXPECT_NE(twice, x);
    walsh_hadamard(twice.data(), int(head_dim));
    for (std::size_t c = 0; c < x.size(); ++c) ASSERT_EQ(twice[c], std::int32_t(head_dim) * x[c]) << head_dim << " " << c;
  }
}

// (H D q)·(H D k) = qᵀ D Hᵀ H D k = d · q·k, exactly, for rows of Q and K of either distribution.
TEST(Incoherent, RotatedDotProductsAreHeadDimTimesTheOriginalExactly) {
  const std::uint64_t signs_key = incoherent_signs_key(7);
  for (const InputDistribution distribution : kDistributions) {
    for (const std::int64_t head_dim : kHeadDims) {
      for (std::int64_t row = 0; row < 40; ++row) {
        const std::vector<std::int32_t> q = units_row(tensor_key(7, TensorId::q), row, head_dim, distribution);
        const std::vector<std::int32_t> k = units_row(tensor_key(7, TensorId::k), row * 3 + 1, head_dim, distribution);
        ASSERT_TRUE(dot(rotated(q, signs_key), rotated(k, signs_key)) == Int128(head_dim) * dot(q, k))
            << "head_dim " << head_dim << " row " << row;
        // The guard: signs that differ between Q and K break it.
        ASSERT_FALSE(dot(rotated(q, signs_key), rotated(k, incoherent_signs_key(8))) == Int128(head_dim) * dot(q, k));
      }
    }
  }
}

TEST(Incoherent, ScalesArePowersOfTwoFromTheRotatedBoundAndQCarriesTheOneOverD) {
  // d · bound: 128 · 6 = 768 -> 2^1 (768 / 2 = 384 <= 448); 128 · 60 = 7680 -> 2^5 (240); 64 · 6 = 384 -> 2^0.
  EXPECT_EQ(incoherent_scale_exponent(128, InputDistribution::normal), 1);
  EXPECT_EQ(incoherent_scale_exponent(128, InputDistribution::outliers), 5);
  EXPECT_EQ(incoherent_scale_exponent(64, InputDistribution::normal), 0);
  EXPECT_EQ(incoherent_descale(TensorId::k, 128, InputDistribution::normal), 2.0f);
  EXPECT_EQ(incoherent_descale(TensorId::q, 128, InputDistribution::normal), 2.0f / 128.0f);
  Case c;
  c.dtype = DType::fp8_e4m3;
  c.head_dim = 256;
  c.inputs = InputDistribution::outliers;
  EXPECT_EQ(c.fp8_descale(TensorId::q, QkTransform::incoherent), 64.0f / 256.0f);  // 15360 / 64 = 240
  EXPECT_EQ(c.fp8_descale(TensorId::k, QkTransform::incoherent), 64.0f);
  EXPECT_EQ(c.fp8_descale(TensorId::v, QkTransform::incoherent), 0.25f);  // V is not rotated
  EXPECT_EQ(c.fp8_descale(TensorId::k), 0.25f);
}

// The float64 dot product of the rotated, e4m3-rounded, descaled rows against that of the unquantized ones:
// with y = H·D·x (values, not units) and each rounding error |e_i| <= 2^-4 · |y_i| (3 fraction bits) +
// 2^-10 · s (half the subnormal step, at the storage scale s), q'·k' − q·k = Σ (y_q e_k + e_q y_k + e_q e_k) / d,
// bounded by Σ (|y_q| E_k + E_q |y_k| + E_q E_k) / d. Rows of a case's Q and K as the checker regenerates
// them (GeneratedInputs with QkTransform::incoherent), against GeneratedInputs::exact.
TEST(Incoherent, RoundedRotationKeepsQkWithinE4m3Rounding) {
  for (const InputDistribution distribution : kDistributions) {
    for (const std::int64_t head_dim : kHeadDims) {
      Case c;
      c.batch = 1;
      c.heads = c.kv_heads = 2;
      c.seq_q = c.seq_k = 24;
      c.head_dim = head_dim;
      c.dtype = DType::fp8_e4m3;
      c.seed = 3;
      c.inputs = distribution;
      const GeneratedInputs consumed(c, QkTransform::incoherent), exact = GeneratedInputs::exact(c);
      const double storage = std::ldexp(1.0, incoherent_scale_exponent(head_dim, distribution));
      const double d = double(head_dim);
      std::vector<double> q(static_cast<std::size_t>(head_dim)), k(q.size()), q_rotated(q.size()), k_rotated(q.size());
      double worst_share = 0;  // of the bound
      for (std::int64_t h = 0; h < c.heads; ++h) {
        for (std::int64_t i = 0; i < c.seq_q; ++i) {
          exact.row(TensorId::q, 0, i, h, q.data());
          consumed.row(TensorId::q, 0, i, h, q_rotated.data());
          const std::vector<std::int32_t> y_q =
              rotated(units_row(tensor_key(c.seed, TensorId::q), i * c.heads + h, head_dim, distribution),
                      incoherent_signs_key(c.seed));
          for (std::int64_t j = 0; j < c.seq_k; ++j) {
            exact.row(TensorId::k, 0, j, h, k.data());
            consumed.row(TensorId::k, 0, j, h, k_rotated.data());
            const std::vector<std::int32_t> y_k =
                rotated(units_row(tensor_key(c.seed, TensorId::k), j * c.heads + h, head_dim, distribution),
                        incoherent_signs_key(c.seed));
            double original = 0, quantized = 0, bound = 0;
            for (std::size_t e = 0; e < q.size(); ++e) {
              original += q[e] * k[e];
              quantized += q_rotated[e] * k_rotated[e];
              const double yq = std::abs(std::ldexp(double(y_q[e]), -16)), yk = std::abs(std::ldexp(double(y_k[e]), -16));
              const double eq = yq / 16 + std::ldexp(storage, -10), ek = yk / 16 + std::ldexp(storage, -10);
              bound += (yq * ek + eq * yk + eq * ek) / d;
              // The rounding itself, value by value: Q' is (y + e) / d, K' is y + e.
              ASSERT_LE(std::abs(q_rotated[e] * d - std::ldexp(double(y_q[e]), -16)), eq);
              ASSERT_LE(std::abs(k_rotated[e] - std::ldexp(double(y_k[e]), -16)), ek);
            }
            ASSERT_LE(std::abs(quantized - original), bound * (1 + 1e-9)) << "h " << h << " i " << i << " j " << j;
            worst_share = std::max(worst_share, std::abs(quantized - original) / bound);
          }
        }
      }
      EXPECT_GT(worst_share, 0.01) << "the bound is not vacuous: some product comes near it";
    }
  }
}

TEST(Incoherent, TheCheckersRowsAreMakeInputsRowsAndTheTensorsCarryTheDescales) {
  Case c = test_support::make_case(2, 4, 2, 5, 9, 64, DType::fp8_e4m3, Mask::none);
  c.inputs = InputDistribution::outliers;
  const AttentionInputs inputs = make_inputs(c, QkTransform::incoherent);
  EXPECT_EQ(inputs.q.fp8_scale(), c.fp8_descale(TensorId::q, QkTransform::incoherent));
  EXPECT_EQ(inputs.k.fp8_scale(), c.fp8_descale(TensorId::k, QkTransform::incoherent));
  EXPECT_EQ(inputs.v.fp8_scale(), c.fp8_descale(TensorId::v));
  const GeneratedInputs generated(c, QkTransform::incoherent), plain(c);
  const TensorInputs stored(inputs.q, inputs.k, inputs.v);
  std::vector<double> a(64), b(64), p(64);
  for (const TensorId id : {TensorId::q, TensorId::k, TensorId::v}) {
    for (std::int64_t s = 0; s < 5; ++s) {
      generated.row(id, 1, s, 1, a.data());
      stored.row(id, 1, s, 1, b.data());
      ASSERT_EQ(a, b);
      plain.row(id, 1, s, 1, p.data());
      if (id == TensorId::v) {
        ASSERT_EQ(a, p);  // V is not rotated
      } else {
        ASSERT_NE(a, p);
      }
    }
  }
  c.dtype = DType::bf16;
  EXPECT_THROW(GeneratedInputs(c, QkTransform::incoherent), std::invalid_argument);
  EXPECT_THROW(make_inputs(c, QkTransform::incoherent), std::invalid_argument);
  c.dtype = DType::fp8_e4m3;
  c.head_dim = 96;  // not a power of two
  EXPECT_THROW(GeneratedInputs(c, QkTransform::incoherent), std::invalid_argument);
}

// Outliers, spread: a rotated row's largest entry relative to its norm (max |y| / (‖y‖ / √d)) is far below an
// unrotated row's when the row holds an outlier, which is why incoherent processing helps e4m3.
TEST(Incoherent, OutliersAreSpreadOverTheRow) {
  const std::int64_t head_dim = 128;
  const std::uint64_t key = tensor_key(11, TensorId::k);
  double worst_plain = 0, worst_rotated = 0;
  int rows_with_outliers = 0;
  for (std::int64_t row = 0; row < 2000; ++row) {
    const std::vector<std::int32_t> x = units_row(key, row, head_dim, InputDistribution::outliers);
    bool outlier = false;
    for (std::int64_t c = 0; c < head_dim; ++c) outlier = outlier || is_outlier(key, std::uint64_t(row * head_dim + c));
    if (!outlier) continue;
    ++rows_with_outliers;
    const auto crest = [](const std::vector<std::int32_t>& v) {
      double squares = 0, largest = 0;
      for (std::int32_t e : v) {
        squares += double(e) * double(e);
        largest = std::max(largest, std::abs(double(e)));
      }
      return largest / std::sqrt(squares / double(v.size()));
    };
    worst_plain = std::max(worst_plain, crest(x));
    worst_rotated = std::max(worst_rotated, crest(rotated(x, incoherent_signs_key(11))));
  }
  EXPECT_GT(rows_with_outliers, 100);  // 1 - 0.999^128 = 12 % of rows
  EXPECT_GT(worst_plain, 8.0);          // an outlier of ~10 among ~128 values of ~1
  EXPECT_LT(worst_rotated, 5.0);        // Gaussian-like rows after the rotation
}

// add_exact_inputs_error: zero (to fp32 rounding) for an output that is the exact inputs' attention, and it
// sees a planted error of 0.5 in one element (max 0.5, RMS 0.5 / √elements); records keep the fields and
// read them back, and a record without them reads as not measured.
TEST(ExactInputsError, MeasuresTheDistanceFromTheUnquantizedAttention) {
  Case c;
  c.batch = 1;
  c.heads = c.kv_heads = 2;
  c.seq_q = c.seq_k = 16;
  c.head_dim = 32;
  c.dtype = DType::fp32;
  c.inputs = InputDistribution::outliers;
  const GeneratedInputs exact = GeneratedInputs::exact(c);
  HostTensor output = make_output(c);
  for (std::int64_t h = 0; h < c.heads; ++h) {
    const HeadReference reference(c, exact, 0, h);
    for (std::int64_t row = 0; row < c.seq_q; ++row) {
      const Eigen::VectorXd o = reference.output_row(exact, h, row);
      for (std::int64_t col = 0; col < c.head_dim; ++col) output.set(output.offset(0, row, h) + col, float(o(col)));
    }
  }
  VerifyResult result;
  add_exact_inputs_error(c, output, result);
  EXPECT_TRUE(result.exact_inputs_checked);
  EXPECT_LT(result.exact_inputs_o_max_abs, 1e-6);
  const std::int64_t at = output.offset(0, 7, 1) + 5;
  output.set(at, output.get(at) + 0.5f);
  add_exact_inputs_error(c, output, result);
  EXPECT_NEAR(result.exact_inputs_o_max_abs, 0.5, 1e-6);
  EXPECT_NEAR(result.exact_inputs_o_rms, 0.5 / std::sqrt(double(2 * 16 * 32)), 1e-6);
  const nlohmann::json written = result;
  EXPECT_EQ(written.at("exact_inputs_o_max_abs").get<double>(), result.exact_inputs_o_max_abs);
  VerifyResult read = written.get<VerifyResult>();
  EXPECT_TRUE(read.exact_inputs_checked);
  EXPECT_EQ(read.exact_inputs_o_rms, result.exact_inputs_o_rms);
  nlohmann::json older = written;
  older.erase("exact_inputs_o_rms");
  older.erase("exact_inputs_o_max_abs");
  EXPECT_FALSE(older.get<VerifyResult>().exact_inputs_checked);
  EXPECT_FALSE(nlohmann::json(VerifyResult{}).contains("exact_inputs_o_rms"));
}

}  // namespace
}  // namespace faprobe
