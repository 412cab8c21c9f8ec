// The checker: what it samples, that it passes the reference itself, and that it catches damage that is
// just above the tolerance, NaNs, and wrong rows that only the sampled edges would reveal.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

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

// The float64 reference rounded to the dtype: the best output an implementation can produce.
HostTensor reference_output(const Case& c) {
  HostTensor out = make_output(c);
  const GeneratedInputs inputs(c);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const HeadReference reference(c, inputs, b, c.kv_head_of(h));
      for (std::int64_t row = 0; row < c.seq_q; ++row) {
        const Eigen::VectorXd values = reference.output_row(inputs, h, row);
        for (std::int64_t col = 0; col < c.head_dim; ++col) out.set(out.offset(b, row, h) + col, float(values(col)));
      }
    }
  return out;
}

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

}  // namespace
}  // namespace faprobe
