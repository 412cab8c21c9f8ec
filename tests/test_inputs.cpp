// The counter-based input generator: deterministic, exact in fp32, close to a standard normal, and the
// checker's regenerated rows equal the tensors implementations receive.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "model/inputs.hpp"
#include "model/tensor.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

TEST(Inputs, DeterministicAndKeyedByTensorAndSeed) {
  const std::uint64_t q_key = tensor_key(7, TensorId::q);
  EXPECT_EQ(input_value(q_key, 12345), input_value(tensor_key(7, TensorId::q), 12345));
  EXPECT_NE(input_value(q_key, 12345), input_value(tensor_key(7, TensorId::k), 12345));
  EXPECT_NE(input_value(q_key, 12345), input_value(tensor_key(8, TensorId::q), 12345));
  EXPECT_NE(input_value(q_key, 12345), input_value(q_key, 12346));
}

TEST(Inputs, ValuesAreExactMultiplesOfTwoToTheMinus16) {
  const std::uint64_t key = tensor_key(1, TensorId::v);
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const double scaled = double(input_value(key, i)) * 65536.0;
    ASSERT_EQ(scaled, std::round(scaled));
    ASSERT_LE(std::abs(input_value(key, i)), 6.0f);
  }
}

TEST(Inputs, MomentsAreThoseOfAStandardNormal) {
  const std::uint64_t key = tensor_key(3, TensorId::q);
  constexpr int kCount = 200000;
  double sum = 0, squares = 0, fourth = 0;
  for (int i = 0; i < kCount; ++i) {
    const double x = input_value(key, std::uint64_t(i));
    sum += x;
    squares += x * x;
    fourth += x * x * x * x;
  }
  EXPECT_NEAR(sum / kCount, 0.0, 0.01);
  EXPECT_NEAR(squares / kCount, 1.0, 0.02);
  EXPECT_NEAR(fourth / kCount, 2.9, 0.1);  // Irwin–Hall(12) kurtosis is 2.9; a normal's is 3
}

// The outliers distribution (FlashAttention-3's FP8 test: 0.1 % of entries with standard deviation 10).
TEST(InputsWithOutliers, OneInAThousandIsTenTimesItsNormalValue) {
  const std::uint64_t key = tensor_key(4, TensorId::k);
  constexpr int kCount = 1000000;
  int outliers = 0;
  double squares = 0;
  float largest = 0;
  for (int i = 0; i < kCount; ++i) {
    const float normal = input_value(key, std::uint64_t(i));
    const float x = input_value(key, std::uint64_t(i), InputDistribution::outliers);
    const bool outlier = is_outlier(key, std::uint64_t(i));
    outliers += outlier ? 1 : 0;
    ASSERT_EQ(x, outlier ? 10.0f * normal : normal) << i;  // exact: integers times 2^-16 below 2^22
    const std::int32_t units = input_units(key, std::uint64_t(i));
    ASSERT_EQ(input_units(key, std::uint64_t(i), InputDistribution::outliers), outlier ? 10 * units : units);
    squares += double(x) * double(x);
    largest = std::max(largest, std::abs(x));
  }
  // Binomial(10^6, 1/1000): mean 1000, standard deviation 31.6; five of them either way.
  EXPECT_GE(outliers, 842);
  EXPECT_LE(outliers, 1158);
  // Variance 0.999 · 1 + 0.001 · 100 = 1.099; the estimate's standard deviation is sqrt(E x^4 / n) ~ 0.0056
  // (E x^4 = 0.999 · 2.9 + 0.001 · 2.9 · 10^4 = 31.9).
  EXPECT_NEAR(squares / kCount, 1.099, 0.03);
  EXPECT_LT(largest, input_bound_of(InputDistribution::outliers));
  EXPECT_GT(largest, input_bound);  // some outlier lies beyond the normal inputs' bound
  EXPECT_EQ(input_bound_of(InputDistribution::outliers), 60.0f);
}

TEST(InputsWithOutliers, EachTensorHasItsOwnOutliers) {
  int both = 0, q_only = 0;
  for (std::uint64_t i = 0; i < 200000; ++i) {
    const bool q = is_outlier(tensor_key(1, TensorId::q), i), k = is_outlier(tensor_key(1, TensorId::k), i);
    both += q && k ? 1 : 0;
    q_only += q && !k ? 1 : 0;
  }
  EXPECT_GT(q_only, 100);  // ~200
  EXPECT_LT(both, 5);      // ~0.2: independent draws
}

TEST(Inputs, RegeneratedRowsEqualTheTensorsImplementationsGet) {
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 5;
  c.seq_k = 9;
  c.head_dim = 16;
  for (const InputDistribution distribution : {InputDistribution::normal, InputDistribution::outliers}) {
    for (DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
      c.dtype = dtype;
      c.inputs = distribution;
      const AttentionInputs inputs = make_inputs(c);
      const GeneratedInputs generated(c);
      const TensorInputs stored(inputs.q, inputs.k, inputs.v);
      std::vector<double> a(16), b(16);
      for (std::int64_t s = 0; s < 9; ++s) {
        generated.row(TensorId::v, 1, s, 1, a.data());
        stored.row(TensorId::v, 1, s, 1, b.data());
        ASSERT_EQ(a, b);
      }
      generated.row(TensorId::q, 1, 4, 3, a.data());
      stored.row(TensorId::q, 1, 4, 3, b.data());
      ASSERT_EQ(a, b);
      for (double value : a) {  // rounded once, with the distribution's fp8 scale
        ASSERT_EQ(double(round_to(dtype, float(value), c.fp8_descale(TensorId::q))), value);
      }
    }
  }
}

}  // namespace
}  // namespace faprobe
