// The checker: what it samples, that it passes the reference itself, and that it catches damage that is
// just above the tolerance, NaNs, and wrong rows that only the sampled edges would reveal.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "model/fp8.hpp"
#include "reference/check.hpp"

namespace faprobe {
namespace {

Case small_case(DType dtype) {
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 33;
  c.seq_k = 40;
  c.head_dim = 16;
  c.dtype = dtype;
  c.mask = Mask::causal;
  return c;
}

// Every row of c as HeadReference computes it (reference: the float64 rows; otherwise the plain rows),
// rounded to the output dtype.
HostTensor rows_output(const Case& c, bool reference_rows) {
  HostTensor out = make_output(c);
  const GeneratedInputs inputs(c);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const HeadReference reference(c, inputs, b, c.kv_head_of(h));
      for (std::int64_t row = 0; row < c.seq_q; ++row) {
        const Eigen::VectorXd values =
            reference_rows ? reference.output_row(inputs, h, row) : reference.plain_row(inputs, h, row);
        for (std::int64_t col = 0; col < c.head_dim; ++col) out.set(out.offset(b, row, h) + col, float(values(col)));
      }
    }
  return out;
}

// The float64 reference rounded to the dtype: the best output an implementation can produce.
HostTensor reference_output(const Case& c) { return rows_output(c, true); }

TEST(Check, SmallCasesCheckEveryRowLargeOnesSampleTheEdges) {
  const CheckPlan small = plan_check(small_case(DType::fp32));
  EXPECT_TRUE(small.every_row);
  EXPECT_EQ(small.heads.size(), 8u);
  EXPECT_EQ(small.rows.size(), 33u);

  Case large = small_case(DType::fp32);
  large.seq_q = 65536;
  large.seq_k = 65536;
  large.heads = 32;
  large.kv_heads = 32;
  large.head_dim = 128;
  const CheckPlan sampled = plan_check(large);
  EXPECT_FALSE(sampled.every_row);
  EXPECT_EQ(sampled.heads.size(), 4u);
  EXPECT_EQ(sampled.heads.front(), std::make_pair(std::int64_t(0), std::int64_t(0)));
  EXPECT_EQ(sampled.heads.back(), std::make_pair(std::int64_t(1), std::int64_t(31)));
  EXPECT_EQ(sampled.rows.size(), 64u);
  EXPECT_EQ(sampled.rows.front(), 0);
  EXPECT_EQ(sampled.rows.back(), 65535);

  large.seq_q = 70000;  // causal with seq_q > seq_k: rows below 70000 - 65536 see nothing
  const CheckPlan edge = plan_check(large);
  for (std::int64_t row : {4463, 4464, 4465}) {
    EXPECT_NE(std::find(edge.rows.begin(), edge.rows.end(), row), edge.rows.end()) << row;
  }
}

TEST(Check, TheReferenceItselfPassesInEveryDtype) {
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16}) {
    const Case c = small_case(dtype);
    const VerifyResult result = check_output(c, GeneratedInputs(c), reference_output(c));
    EXPECT_TRUE(result.passed) << to_string(dtype) << ": " << result.note;
    EXPECT_EQ(result.rows_checked, 8 * 33);
    EXPECT_GT(result.tolerance, tolerance_floor(dtype));
  }
}

TEST(Check, ToleranceGrowsWithCoarserDtypes) {
  const double fp32 = check_output(small_case(DType::fp32), GeneratedInputs(small_case(DType::fp32)),
                                   reference_output(small_case(DType::fp32))).tolerance;
  const double fp16 = check_output(small_case(DType::fp16), GeneratedInputs(small_case(DType::fp16)),
                                   reference_output(small_case(DType::fp16))).tolerance;
  const double bf16 = check_output(small_case(DType::bf16), GeneratedInputs(small_case(DType::bf16)),
                                   reference_output(small_case(DType::bf16))).tolerance;
  EXPECT_LT(fp32, 1e-5);
  EXPECT_LT(fp32, fp16);
  EXPECT_LT(fp16, bf16);
  EXPECT_LT(bf16, 0.05);
}

TEST(Check, OneElementJustAboveTheToleranceFails) {
  const Case c = small_case(DType::fp32);
  HostTensor out = reference_output(c);
  const double tolerance = check_output(c, GeneratedInputs(c), out).tolerance;
  const std::int64_t index = out.offset(1, 32, 3) + 15;  // the very last element
  out.set(index, out.get(index) + float(3.0 * tolerance));
  const VerifyResult result = check_output(c, GeneratedInputs(c), out);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.note.find("batch 1 head 3 row 32"), std::string::npos) << result.note;
}

TEST(Check, NanAndRowsThatShouldBeZeroAreCaught) {
  Case c = small_case(DType::fp16);
  c.seq_q = 45;  // rows 0..4 see no key and must be exactly zero
  HostTensor out = reference_output(c);
  out.set(out.offset(0, 2, 0), 0.5f);
  EXPECT_FALSE(check_output(c, GeneratedInputs(c), out).passed);
  out.set(out.offset(0, 2, 0), 0.0f);
  EXPECT_TRUE(check_output(c, GeneratedInputs(c), out).passed);
  out.set(out.offset(1, 20, 1) + 3, std::numeric_limits<float>::quiet_NaN());
  const VerifyResult result = check_output(c, GeneratedInputs(c), out);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.note.find("non-finite"), std::string::npos);
}

// Inputs with one NaN in K: the float64 reference itself is NaN in every row that sees that key. A check
// must fail there even when the output is "right" (std::max(x, NaN) is x: a NaN difference must not
// vanish from max_abs_diff, nor a NaN row from the tolerance).
class OneNanKey final : public InputSource {
 public:
  explicit OneNanKey(const Case& c) : generated_(c) {}
  void row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const override {
    generated_.row(id, b, s, h, out);
    if (id == TensorId::k && b == 1 && s == 7) out[2] = std::numeric_limits<double>::quiet_NaN();
  }

 private:
  GeneratedInputs generated_;
};

TEST(Check, ANonFiniteReferenceIsNeverDroppedByAMaximum) {
  const Case c = small_case(DType::fp32);
  const HostTensor out = reference_output(c);  // the output of clean inputs, finite everywhere
  const VerifyResult result = check_output(c, OneNanKey(c), out);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.note.find("non-finite reference at batch 1"), std::string::npos) << result.note;
  EXPECT_NE(result.note.find("an input holds NaN or Inf"), std::string::npos) << result.note;
  EXPECT_TRUE(std::isnan(result.max_abs_diff)) << result.max_abs_diff;
}

TEST(Check, TheFirstNonFiniteOutputElementIsNamed) {
  const Case c = small_case(DType::fp32);
  HostTensor out = reference_output(c);
  out.set(out.offset(0, 5, 2) + 9, std::numeric_limits<float>::infinity());
  const VerifyResult result = check_output(c, GeneratedInputs(c), out);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.note, "non-finite output at batch 0 head 2 row 5 col 9");
}

// ---------------------------------------------------------------------------------------------------------
// fp8_e4m3: the plain computation is FlashAttention-3's FP8 forward (plain_fp8_row); the output is bf16.

// The plain rows themselves, as an output.
HostTensor plain_output(const Case& c) { return rows_output(c, false); }

enum class Fp8Defect { none, p_not_rounded, v_scale_dropped, q_scale_dropped };

// An FA-3-style fp8 kernel written out on the codes, from the paper's algorithm rather than from
// plain_fp8_row: keys in blocks of block_k, S = (Σ q_code·k_code)·scale_q·scale_k·scale in fp32, an online
// softmax (running max, rescaled row sum and accumulator), each block's P̃ = exp(S − running max) rounded to
// e4m3, O += e4m3(P̃)·v_code in fp32, and at the end O·scale_v / row sum rounded to bf16.
HostTensor fp8_kernel_output(const Case& c, std::int64_t block_k, Fp8Defect defect) {
  HostTensor out = make_output(c);
  const GeneratedInputs inputs(c);
  const float q_scale = fp8_tensor_scale(TensorId::q), k_scale = fp8_tensor_scale(TensorId::k),
              v_scale = fp8_tensor_scale(TensorId::v);
  const float score_scale = (defect == Fp8Defect::q_scale_dropped ? 1.0f : q_scale) * k_scale * float(c.scale());
  const std::size_t d = std::size_t(c.head_dim);
  std::vector<double> row(d);
  const auto codes = [&](TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, float scale) {
    inputs.row(id, b, s, h, row.data());
    std::vector<float> values(d);
    for (std::size_t i = 0; i < d; ++i) values[i] = e4m3_to_float(quantize_e4m3(float(row[i]), scale));
    return values;
  };
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      std::vector<std::vector<float>> keys, values;
      for (std::int64_t j = 0; j < c.seq_k_of(b); ++j) {
        keys.push_back(codes(TensorId::k, b, j, c.kv_head_of(h), k_scale));
        values.push_back(codes(TensorId::v, b, j, c.kv_head_of(h), v_scale));
      }
      for (std::int64_t r = 0; r < c.seq_q; ++r) {
        const std::vector<float> q = codes(TensorId::q, b, r, h, q_scale);
        const std::int64_t visible = c.visible_keys(b, r);
        float running_max = -INFINITY, row_sum = 0.0f;
        std::vector<float> o(d, 0.0f);
        for (std::int64_t start = 0; start < visible; start += block_k) {
          const std::int64_t end = std::min(visible, start + block_k);
          std::vector<float> scores;
          for (std::int64_t j = start; j < end; ++j) {
            float dot = 0.0f;
            for (std::size_t i = 0; i < d; ++i) dot += q[i] * keys[std::size_t(j)][i];
            scores.push_back(dot * score_scale);
          }
          const float new_max = std::max(running_max, *std::max_element(scores.begin(), scores.end()));
          const float rescale = std::exp(running_max - new_max);
          row_sum *= rescale;
          for (float& value : o) value *= rescale;
          for (std::size_t j = 0; j < scores.size(); ++j) {
            const float p = std::exp(scores[j] - new_max);
            row_sum += p;
            const float p_fp8 = defect == Fp8Defect::p_not_rounded ? p : e4m3_to_float(float_to_e4m3(p));
            for (std::size_t i = 0; i < d; ++i) o[i] += p_fp8 * values[std::size_t(start) + j][i];
          }
          running_max = new_max;
        }
        const float o_scale = defect == Fp8Defect::v_scale_dropped ? 1.0f : v_scale;
        for (std::size_t i = 0; i < d; ++i) {
          out.set(out.offset(b, r, h) + std::int64_t(i), visible == 0 ? 0.0f : o[i] * o_scale / row_sum);
        }
      }
    }
  return out;
}

Case fp8_case(std::int64_t seq_q, std::int64_t seq_k, std::int64_t head_dim, Mask mask) {
  Case c = small_case(DType::fp8_e4m3);
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = head_dim;
  c.mask = mask;
  return c;
}

TEST(CheckFp8, ThePlainComputationAndTheReferencePassWithABf16Output) {
  const Case c = small_case(DType::fp8_e4m3);
  const HostTensor plain = plain_output(c);
  EXPECT_EQ(plain.dtype(), DType::bf16);
  const VerifyResult result = check_output(c, GeneratedInputs(c), plain);
  EXPECT_TRUE(result.passed) << result.note;
  EXPECT_EQ(result.rows_checked, 8 * 33);
  EXPECT_GT(result.max_abs_diff, 0.0);  // e4m3 probabilities: the plain rows are not the reference
  EXPECT_GT(result.tolerance, tolerance_floor(DType::fp8_e4m3));
  // Coarser than bf16 (P in e4m3 has 3 bits), yet far below what a dropped scale does to an output.
  const Case bf16 = small_case(DType::bf16);
  EXPECT_GT(result.tolerance, check_output(bf16, GeneratedInputs(bf16), reference_output(bf16)).tolerance);
  EXPECT_LT(result.tolerance, 0.2);
  const VerifyResult exact = check_output(c, GeneratedInputs(c), reference_output(c));
  EXPECT_TRUE(exact.passed) << exact.note;
}

TEST(CheckFp8, ABlockedOnlineSoftmaxKernelPassesAndDroppedScalesFail) {
  // Rows that see a few keys (where P̃'s rounding moves with the running max the most) to a few hundred; one
  // key per block (each P̃ rounded against a different max) to blocks longer than the row.
  for (const Case& c : {fp8_case(33, 40, 16, Mask::causal), fp8_case(70, 200, 64, Mask::none),
                        fp8_case(129, 129, 128, Mask::causal), fp8_case(1, 300, 64, Mask::none),
                        fp8_case(1, 3, 64, Mask::none)}) {
    SCOPED_TRACE(c.label());
    const GeneratedInputs inputs(c);
    for (const std::int64_t block_k : {1, 16, 176}) {
      const VerifyResult kernel = check_output(c, inputs, fp8_kernel_output(c, block_k, Fp8Defect::none));
      EXPECT_TRUE(kernel.passed) << "block_k " << block_k << ": " << kernel.note;
    }
    // Not rounding P is more accurate, not a defect.
    const VerifyResult unrounded = check_output(c, inputs, fp8_kernel_output(c, 64, Fp8Defect::p_not_rounded));
    EXPECT_TRUE(unrounded.passed) << unrounded.note;
    // V's scale dropped: the output is 64 times too large. Q's scale dropped: scores 64 times too peaked.
    const VerifyResult no_v_scale = check_output(c, inputs, fp8_kernel_output(c, 64, Fp8Defect::v_scale_dropped));
    EXPECT_FALSE(no_v_scale.passed) << "max_abs_diff " << no_v_scale.max_abs_diff;
    const VerifyResult no_q_scale = check_output(c, inputs, fp8_kernel_output(c, 64, Fp8Defect::q_scale_dropped));
    EXPECT_FALSE(no_q_scale.passed) << "max_abs_diff " << no_q_scale.max_abs_diff;
  }
}

}  // namespace
}  // namespace faprobe
