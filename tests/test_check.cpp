// The checker: what it samples, that it passes the reference itself, and that it catches damage that is
// just above the tolerance, NaNs, and wrong rows that only the sampled edges would reveal; the NaN poison
// of outputs and NaN differences in records; the LSE check (its tolerance against the reference and a
// kernel-style fp32 computation, wrong LSEs of every kind, -inf for rows that see no key).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/fp8.hpp"
#include "model/fp8_accumulation.hpp"
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
  EXPECT_EQ(result.note, "non-finite output (inf) at batch 0 head 2 row 5 col 9, in 1 of 264 rows checked");
}

// ---------------------------------------------------------------------------------------------------------
// The NaN poison of outputs (PreparedCase::poison_outputs) and the records' NaN differences.

TEST(CheckPoison, ThePoisonIsNanInEveryDtypeAndAnUnwrittenRowIsNamed) {
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    HostTensor tensor(dtype, 1, 3, 2, 8);
    fill_nan(tensor);
    for (std::int64_t i = 0; i < tensor.elements(); ++i) {
      ASSERT_TRUE(std::isnan(tensor.get(i))) << to_string(dtype) << " element " << i;
    }
  }
  const Case c = small_case(DType::bf16);
  LseTensor lse(c);
  fill_nan(lse);
  for (std::int64_t i = 0; i < lse.elements(); ++i) ASSERT_TRUE(std::isnan(lse.data()[i])) << i;

  // The reference everywhere but in the last two rows of every head, which a kernel did not write.
  HostTensor out = reference_output(c);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t row : {31, 32})
        for (std::int64_t col = 0; col < c.head_dim; ++col) out.set(out.offset(b, row, h) + col, NAN);
  const VerifyResult result = check_output(c, GeneratedInputs(c), out);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.note, "non-finite output (NaN) at batch 0 head 0 row 31 col 0, in 16 of 264 rows checked");
}

TEST(CheckPoison, NonFiniteDifferencesSurviveTheRecord) {
  VerifyResult result;
  result.max_abs_diff = std::numeric_limits<double>::quiet_NaN();  // a NaN output
  result.max_rel_diff = std::numeric_limits<double>::quiet_NaN();
  result.tolerance = 2e-3;
  result.rows_checked = 10;
  result.heads_checked = 1;
  result.lse_checked = true;
  result.lse_max_abs_diff = std::numeric_limits<double>::infinity();  // an LSE of +inf where keys are seen
  result.lse_tolerance = 1e-5;
  result.note = "non-finite output (NaN) at batch 0 head 0 row 3 col 0, in 1 of 10 rows checked";
  const nlohmann::json written = nlohmann::json::parse(nlohmann::json(result).dump());  // as a record file holds it
  EXPECT_TRUE(written.at("max_abs_diff").is_null()) << written.dump();  // JSON has no NaN: null
  const VerifyResult back = written.get<VerifyResult>();
  EXPECT_TRUE(std::isnan(back.max_abs_diff));
  EXPECT_TRUE(std::isnan(back.lse_max_abs_diff));  // not a number it can compare, whichever it was
  EXPECT_EQ(back.tolerance, 2e-3);
  EXPECT_TRUE(back.lse_checked);
  EXPECT_EQ(back.lse_tolerance, 1e-5);
  EXPECT_EQ(back.note, result.note);
  EXPECT_THROW(nlohmann::json::parse(R"({"max_abs_diff": "big", "max_rel_diff": 0, "tolerance": 0,
    "rows_checked": 1, "heads_checked": 1, "passed": true})").get<VerifyResult>(), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// The LSE check (check.hpp): the reference's LSE passes, a kernel-style fp32 computation passes, every kind
// of wrong LSE fails, and rows that see no key must hold -inf.

// The float64 reference's LSE of every row of c, rounded to fp32 as a kernel stores it.
LseTensor reference_lse(const Case& c) {
  LseTensor lse(c);
  const GeneratedInputs inputs(c);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const HeadReference reference(c, inputs, b, c.kv_head_of(h));
      for (std::int64_t row = 0; row < c.seq_q; ++row) {
        double value = 0;
        reference.output_row(inputs, h, row, &value);
        lse.data()[lse.offset(b, h, row)] = float(value);
      }
    }
  return lse;
}

// The LSE as the flash-style kernels compute it, in fp32, written out from their algorithm rather than from
// plain_row: dot products accumulated 16 products at a time (mma.sync's k-step), scores multiplied by
// scale·log2(e) folded into one fp32 factor, an online max and row sum of exp2 over key blocks of 64 (each
// block's sum added into the rescaled running sum), and ln 2 · (max + log2(sum)) at the end.
// fp8_e4m3: each dot product through Hopper's e4m3 adder in k-groups of 32 (model/fp8_accumulation.hpp), as
// the fp8 kernels' wgmma adds it; with drop_k_group, head_dim's last k-group left out (a defect).
LseTensor kernel_style_lse(const Case& c, bool drop_k_group = false) {
  LseTensor lse(c);
  const GeneratedInputs inputs(c);
  const float scale_log2 = float(c.scale() * 1.4426950408889634);
  std::vector<double> q(std::size_t(c.head_dim)), k(q.size());
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t row = 0; row < c.seq_q; ++row) {
        inputs.row(TensorId::q, b, row, h, q.data());
        const std::int64_t visible = c.visible_keys(b, row);
        float row_max = -INFINITY, row_sum = 0.0f;
        for (std::int64_t start = 0; start < visible; start += 64) {
          std::vector<float> scores;
          for (std::int64_t j = start; j < std::min(visible, start + 64); ++j) {
            inputs.row(TensorId::k, b, j, c.kv_head_of(h), k.data());
            float dot = 0.0f;
            if (c.dtype == DType::fp8_e4m3) {
              const std::vector<float> q_values(q.begin(), q.end()), k_values(k.begin(), k.end());
              const std::size_t length = drop_k_group ? q.size() - e4m3_mma_k : q.size();
              dot = hopper_e4m3_dot(q_values.data(), 1, k_values.data(), 1, length);
            } else {
              for (std::size_t d0 = 0; d0 < q.size(); d0 += 16) {
                float step = 0.0f;
                for (std::size_t d = d0; d < std::min(q.size(), d0 + 16); ++d) step += float(q[d]) * float(k[d]);
                dot += step;
              }
            }
            scores.push_back(dot * scale_log2);
          }
          const float new_max = std::max(row_max, *std::max_element(scores.begin(), scores.end()));
          float block_sum = 0.0f;
          for (float score : scores) block_sum += std::exp2(score - new_max);
          row_sum = std::exp2(row_max - new_max) * row_sum + block_sum;
          row_max = new_max;
        }
        lse.data()[lse.offset(b, h, row)] =
            row_sum > 0.0f ? 0.693147180559945309f * (row_max + std::log2(row_sum)) : -INFINITY;
      }
  return lse;
}

Case lse_case(std::int64_t seq_q, std::int64_t seq_k, std::int64_t head_dim, DType dtype) {
  Case c = small_case(dtype);
  c.batch = 1;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = head_dim;
  return c;
}

TEST(CheckLse, TheReferenceAndAKernelStyleComputationPassWithinADocumentedTolerance) {
  for (const Case& c : {small_case(DType::fp16), lse_case(45, 40, 64, DType::bf16), lse_case(3, 4096, 128, DType::fp16),
                        lse_case(17, 1000, 256, DType::bf16), lse_case(17, 300, 128, DType::fp8_e4m3)}) {
    SCOPED_TRACE(c.label());
    const HostTensor out = reference_output(c);
    const LseTensor reference = reference_lse(c);
    const VerifyResult result = check_output(c, GeneratedInputs(c), out, &reference);
    EXPECT_TRUE(result.passed) << result.note;
    EXPECT_TRUE(result.lse_checked);
    EXPECT_GE(result.lse_tolerance, lse_tolerance_floor(c.dtype));
    EXPECT_LT(result.lse_max_abs_diff, 1e-6);  // the reference's value rounded to fp32
    const LseTensor kernel = kernel_style_lse(c);
    const VerifyResult kernel_result = check_output(c, GeneratedInputs(c), out, &kernel);
    EXPECT_TRUE(kernel_result.passed) << kernel_result.note;
    EXPECT_LT(kernel_result.lse_max_abs_diff, 0.5 * kernel_result.lse_tolerance) << "a margin for the GPU's own";
    std::printf("%s: LSE max_abs_diff %.2e, tolerance %.2e\n", c.label().c_str(), kernel_result.lse_max_abs_diff,
                kernel_result.lse_tolerance);
  }
  EXPECT_EQ(lse_tolerance_floor(DType::bf16), 1e-5);
  EXPECT_EQ(lse_tolerance_floor(DType::fp8_e4m3), 2.5e-4);
}

TEST(CheckLse, Fp8ScoresWithAKGroupMissingFail) {
  // fp8's tolerance follows Hopper's adder (2.5e-4 floor, not 1e-3): a score missing 32 of its 128 products
  // (a k-loop that stops one wgmma early) is far outside it, on the LSE alone.
  const Case c = lse_case(17, 300, 128, DType::fp8_e4m3);
  const HostTensor out = reference_output(c);
  const LseTensor right = kernel_style_lse(c), dropped = kernel_style_lse(c, true);
  EXPECT_TRUE(check_output(c, GeneratedInputs(c), out, &right).passed);
  const VerifyResult result = check_output(c, GeneratedInputs(c), out, &dropped);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.note.find("LSE off by"), std::string::npos) << result.note;
}

TEST(CheckLse, WithoutAnLseNothingIsCheckedAndTheRecordSaysSo) {
  const Case c = small_case(DType::fp32);
  const VerifyResult result = check_output(c, GeneratedInputs(c), reference_output(c));
  EXPECT_TRUE(result.passed);
  EXPECT_FALSE(result.lse_checked);
  const nlohmann::json json = result;
  EXPECT_EQ(json.at("lse_checked"), false);
  EXPECT_FALSE(json.contains("lse_max_abs_diff"));
  EXPECT_FALSE(json.contains("lse_tolerance"));
  // A record written before the LSE was checked has no lse_checked: not checked.
  nlohmann::json old = json;
  old.erase("lse_checked");
  EXPECT_FALSE(old.get<VerifyResult>().lse_checked);
  EXPECT_TRUE(old.get<VerifyResult>().passed);
}

TEST(CheckLse, AWrongLseFailsWithTheRowAndTheOutputComesFirst) {
  const Case c = small_case(DType::fp16);
  const HostTensor out = reference_output(c);
  const LseTensor reference = reference_lse(c);
  const double tolerance = check_output(c, GeneratedInputs(c), out, &reference).lse_tolerance;

  LseTensor off = reference_lse(c);  // one row just beyond the tolerance
  off.data()[off.offset(1, 3, 32)] += float(3.0 * tolerance);
  const VerifyResult one_row = check_output(c, GeneratedInputs(c), out, &off);
  EXPECT_FALSE(one_row.passed);
  EXPECT_NE(one_row.note.find("LSE off by"), std::string::npos) << one_row.note;
  EXPECT_NE(one_row.note.find("at batch 1 head 3 row 32"), std::string::npos) << one_row.note;
  EXPECT_LE(one_row.max_abs_diff, one_row.tolerance) << "the output itself is right";

  LseTensor log2_units = reference_lse(c);  // log2 where the natural log is meant
  for (std::int64_t i = 0; i < log2_units.elements(); ++i) log2_units.data()[i] /= 0.693147180559945309f;
  EXPECT_FALSE(check_output(c, GeneratedInputs(c), out, &log2_units).passed);
  LseTensor shifted = reference_lse(c);  // each head's rows written one place late
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t row = 1; row < c.seq_q; ++row) {
        shifted.data()[shifted.offset(b, h, row)] = reference.at(b, h, row - 1);
      }
  const VerifyResult shifted_result = check_output(c, GeneratedInputs(c), out, &shifted);
  EXPECT_FALSE(shifted_result.passed);
  EXPECT_GT(shifted_result.lse_max_abs_diff, 0.01);

  LseTensor unwritten = reference_lse(c);
  unwritten.data()[unwritten.offset(0, 2, 7)] = NAN;
  const VerifyResult nan = check_output(c, GeneratedInputs(c), out, &unwritten);
  EXPECT_FALSE(nan.passed);
  EXPECT_EQ(nan.note, "non-finite LSE (NaN) at batch 0 head 2 row 7");
  EXPECT_TRUE(std::isnan(nan.lse_max_abs_diff));
  unwritten.data()[unwritten.offset(0, 2, 7)] = -INFINITY;  // a row that sees keys
  EXPECT_EQ(check_output(c, GeneratedInputs(c), out, &unwritten).note, "non-finite LSE (-inf) at batch 0 head 2 row 7");

  // A wrong output is named before a wrong LSE.
  HostTensor wrong = reference_output(c);
  wrong.set(wrong.offset(0, 1, 1), 7.0f);
  const VerifyResult both = check_output(c, GeneratedInputs(c), wrong, &off);
  EXPECT_FALSE(both.passed);
  EXPECT_EQ(both.note.rfind("max_abs_diff", 0), 0u) << both.note;
}

TEST(CheckLse, RowsThatSeeNoKeyMustHoldMinusInfinity) {
  Case c = small_case(DType::bf16);
  c.seq_q = 45;  // causal, 40 keys: rows 0..4 see none
  const HostTensor out = reference_output(c);
  LseTensor lse = reference_lse(c);
  EXPECT_EQ(lse.at(1, 2, 4), -INFINITY) << "the reference's LSE of a row without keys is ln 0";
  EXPECT_TRUE(std::isfinite(lse.at(1, 2, 5)));
  const VerifyResult right = check_output(c, GeneratedInputs(c), out, &lse);
  EXPECT_TRUE(right.passed) << right.note;
  EXPECT_TRUE(std::isfinite(right.lse_max_abs_diff));  // -inf against -inf is no difference
  for (const float wrong : {INFINITY, 0.0f, -1e30f, NAN}) {  // +inf is flash-attention's convention
    lse.data()[lse.offset(1, 2, 4)] = wrong;
    const VerifyResult result = check_output(c, GeneratedInputs(c), out, &lse);
    EXPECT_FALSE(result.passed) << wrong;
    EXPECT_NE(result.note.find("batch 1 head 2 row 4"), std::string::npos) << result.note;
    const std::string expected = std::isnan(wrong) ? "non-finite LSE (NaN)" : "sees no key (must be -inf)";
    EXPECT_NE(result.note.find(expected), std::string::npos) << result.note;
  }
}

// ---------------------------------------------------------------------------------------------------------
// fp8_e4m3: the plain computation is FlashAttention-3's FP8 forward (plain_fp8_row); the output is bf16.

// The plain rows themselves, as an output.
HostTensor plain_output(const Case& c) { return rows_output(c, false); }

enum class Fp8Defect {
  none,
  p_not_rounded,
  v_scale_dropped,
  q_scale_dropped,
  softmax_scale_twice,  // the 1/√d applied to the scores twice
  k_group_dropped,      // each block's second 32-key group left out of P·V (its P̃ still in the row sum)
  v_off_by_one_row,     // V read one key further on, as a V transpose off by a row would
};

// An FA-3-style fp8 kernel written out on the codes, from the paper's algorithm rather than from
// plain_fp8_row: keys in blocks of block_k, S = (Σ q_code·k_code)·scale_q·scale_k·scale in fp32, an online
// softmax (running max, rescaled row sum and accumulator), each block's P̃ = exp(S − running max) rounded to
// e4m3, O += e4m3(P̃)·v_code, and at the end O·scale_v / row sum rounded to bf16. Both products are added as
// Hopper's e4m3 tensor core adds them (model/fp8_accumulation.hpp): S over head_dim in k-groups of 32, P·V
// over each block's keys in k-groups of 32 into the rescaled fp32 accumulator.
HostTensor fp8_kernel_output(const Case& c, std::int64_t block_k, Fp8Defect defect) {
  HostTensor out = make_output(c);
  const GeneratedInputs inputs(c);
  const float q_scale = fp8_tensor_scale(TensorId::q), k_scale = fp8_tensor_scale(TensorId::k),
              v_scale = fp8_tensor_scale(TensorId::v);
  const float score_scale = (defect == Fp8Defect::q_scale_dropped ? 1.0f : q_scale) * k_scale * float(c.scale()) *
                            (defect == Fp8Defect::softmax_scale_twice ? float(c.scale()) : 1.0f);
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
            scores.push_back(hopper_e4m3_dot(q.data(), 1, keys[std::size_t(j)].data(), 1, d) * score_scale);
          }
          const float new_max = std::max(running_max, *std::max_element(scores.begin(), scores.end()));
          const float rescale = std::exp(running_max - new_max);
          row_sum *= rescale;
          for (float& value : o) value *= rescale;
          std::vector<float> p_fp8(scores.size()), v_block(scores.size() * d);  // v_block: (key, i)
          for (std::size_t j = 0; j < scores.size(); ++j) {
            const float p = std::exp(scores[j] - new_max);
            row_sum += p;
            p_fp8[j] = defect == Fp8Defect::p_not_rounded ? p : e4m3_to_float(float_to_e4m3(p));
            if (defect == Fp8Defect::k_group_dropped && j / e4m3_mma_k == 1) p_fp8[j] = 0.0f;
            const std::int64_t key = defect == Fp8Defect::v_off_by_one_row ? std::min(start + std::int64_t(j) + 1, visible - 1)
                                                                             : start + std::int64_t(j);
            for (std::size_t i = 0; i < d; ++i) v_block[j * d + i] = values[std::size_t(key)][i];
          }
          for (std::size_t i = 0; i < d; ++i) o[i] = hopper_e4m3_dot(p_fp8.data(), 1, &v_block[i], d, scores.size(), o[i]);
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
    const VerifyResult scaled_twice = check_output(c, inputs, fp8_kernel_output(c, 64, Fp8Defect::softmax_scale_twice));
    EXPECT_FALSE(scaled_twice.passed) << "max_abs_diff " << scaled_twice.max_abs_diff;
    const VerifyResult off_by_row = check_output(c, inputs, fp8_kernel_output(c, 64, Fp8Defect::v_off_by_one_row));
    EXPECT_FALSE(off_by_row.passed) << "max_abs_diff " << off_by_row.max_abs_diff;
    if (c.seq_k > std::int64_t(e4m3_mma_k)) {  // a block of 64 keys has a second k-group only past key 32
      const VerifyResult dropped = check_output(c, inputs, fp8_kernel_output(c, 64, Fp8Defect::k_group_dropped));
      EXPECT_FALSE(dropped.passed) << "max_abs_diff " << dropped.max_abs_diff;
    }
  }
}

}  // namespace
}  // namespace faprobe
