// The counter-based input generator: deterministic, exact in fp32, close to a standard normal, and the
// checker's regenerated rows equal the tensors implementations receive.
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

TEST(Inputs, RegeneratedRowsEqualTheTensorsImplementationsGet) {
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 5;
  c.seq_k = 9;
  c.head_dim = 16;
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    c.dtype = dtype;
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
    for (double value : a) ASSERT_EQ(double(round_to(dtype, float(value))), value);  // rounded once
  }
}

}  // namespace
}  // namespace faprobe
