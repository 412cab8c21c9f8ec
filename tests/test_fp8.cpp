// The e4m3 codec of src/fp8.hpp against an independent model of the format: every one of the 256 codes
// decoded from the format's definition (std::ldexp), and rounding done by searching those values for the
// nearest one (ties to the even code, beyond 448 saturated); then the fp8 case's scales, its host storage
// (one code per element, dequantized on read) and its output dtype. Each test is a few milliseconds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "model/fp8.hpp"
#include "model/tensor.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

bool is_nan_code(int code) { return (code & 0x7f) == 0x7f; }

// The value of a code from the format's definition: bias 7, 3 fraction bits, subnormals k · 2^-9.
double model_value(int code) {
  const int exponent = (code >> 3) & 0xf, fraction = code & 7;
  const double magnitude = exponent == 0 ? std::ldexp(fraction, -9) : std::ldexp(1.0 + fraction / 8.0, exponent - 7);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

// The code cvt.rn.satfinite.e4m3 gives for x, by search: NaN is 0x7F; |x| beyond 448 is ±448; else the code
// of x's sign whose value is nearest, the even code on a tie (a zero keeps x's sign). Over a double, so that
// fixed-point values wider than fp32 are rounded once too.
int model_round(double x) {
  if (std::isnan(x)) return 0x7f;
  const int sign = std::signbit(x) ? 0x80 : 0x00;
  const double target = std::min(std::abs(x), 448.0);
  static const std::vector<double> values = [] {
    std::vector<double> positive;
    for (int magnitude = 0; magnitude <= 0x7e; ++magnitude) positive.push_back(model_value(magnitude));
    return positive;
  }();
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int magnitude = 0; magnitude <= 0x7e; ++magnitude) {
    const double distance = std::abs(values[std::size_t(magnitude)] - target);
    if (distance < best_distance || (distance == best_distance && magnitude % 2 == 0)) {
      best = magnitude;
      best_distance = distance;
    }
  }
  return sign | best;
}

float from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

TEST(Fp8Codec, EveryCodeDecodesAsTheFormatSaysAndRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    const float value = e4m3_to_float(std::uint8_t(code));
    if (is_nan_code(code)) {
      EXPECT_TRUE(std::isnan(value)) << code;
      EXPECT_EQ(float_to_e4m3(value), e4m3_nan_code) << code;
      continue;
    }
    EXPECT_EQ(double(value), model_value(code)) << code;
    EXPECT_EQ(std::signbit(value), code >= 0x80) << code;  // 0x80 is -0
    EXPECT_EQ(float_to_e4m3(value), code) << code;
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // the smallest normal
}

TEST(Fp8Codec, TiesGoToTheEvenCode) {
  // Every midpoint between two neighbouring positive codes (exact in fp32), and just either side of it.
  for (int code = 0; code < 0x7e; ++code) {
    const float low = e4m3_to_float(std::uint8_t(code)), high = e4m3_to_float(std::uint8_t(code + 1));
    const float middle = (low + high) / 2;
    ASSERT_EQ(double(middle), (model_value(code) + model_value(code + 1)) / 2);  // exact
    const int even = code % 2 == 0 ? code : code + 1;
    EXPECT_EQ(float_to_e4m3(middle), even) << "between " << low << " and " << high;
    EXPECT_EQ(float_to_e4m3(-middle), 0x80 | even) << "between " << -low << " and " << -high;
    EXPECT_EQ(float_to_e4m3(std::nextafter(middle, 0.0f)), code) << middle;
    EXPECT_EQ(float_to_e4m3(std::nextafter(middle, 1000.0f)), code + 1) << middle;
  }
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);  // 1 + 1/16: between 1 (0x38, even) and 1.125 (0x39)
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3a);  // between 1.125 (0x39) and 1.25 (0x3A, even)
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 subnormal steps: to 2
}

TEST(Fp8Codec, SaturatesBeyond448AndNanIs0x7F) {
  for (const float big : {448.0f, 449.0f, 464.0f, 465.0f, 480.0f, 1e6f, 3e38f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(float_to_e4m3(big), 0x7e) << big;
    EXPECT_EQ(float_to_e4m3(-big), 0xfe) << -big;
  }
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(float_to_e4m3(from_bits(0x7f800001u)), 0x7f);  // a signalling NaN
}

TEST(Fp8Codec, SubnormalsAndTheSignOfZero) {
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: a tie, to 0
  EXPECT_EQ(float_to_e4m3(-std::ldexp(1.0f, -10)), 0x80);
  EXPECT_EQ(float_to_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(-1e-7f), 0x80);                               // underflow keeps the sign
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);  // an fp32 subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(7.0f, -9)), 0x07);                 // the largest subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(7.5f, -9)), 0x08);                 // a tie up into the first normal
}

TEST(Fp8Codec, MatchesTheSearchOverAMillionFloatsOfEveryMagnitude) {
  // Bit patterns in steps of 4093 cover every exponent of both signs, NaNs and infinities included.
  std::size_t mismatches = 0;
  for (std::uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) {
    const float x = from_bits(std::uint32_t(bits));
    const int expected = model_round(x);
    if (float_to_e4m3(x) != expected && mismatches++ < 5) {
      ADD_FAILURE() << "bits " << std::hex << bits << " (" << x << "): got " << int(float_to_e4m3(x)) << ", want "
                    << expected;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Fp8Codec, FixedPointValuesRoundOnceAsTheSearchSays) {
  // fixed_to_e4m3(units, e) rounds units · 2^e itself, with no fp32 rounding first: integers of up to 31 bits
  // (the rotated rows of incoherent processing reach 2^30) at the exponents those rows use, plus the edges.
  std::uint64_t state = 12345;
  std::size_t mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    state = mix64(state);
    const int bits = 1 + int(state % 31);
    const std::int64_t magnitude = std::int64_t((state >> 8) & ((std::uint64_t{1} << bits) - 1u));
    const std::int64_t units = (state >> 63) != 0 ? -magnitude : magnitude;
    const int exponent = -26 - int((state >> 40) % 12);
    // The search over the exact value: a double holds 31 bits, and 2^e scales it exactly.
    const int expected = model_round(std::ldexp(double(units), exponent));
    if (fixed_to_e4m3(units, exponent) != expected && mismatches++ < 5) {
      ADD_FAILURE() << units << " * 2^" << exponent << ": got " << int(fixed_to_e4m3(units, exponent)) << ", want "
                    << expected;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  // A value that fp32 would round onto a tie first: 1 + 2^-4 + 2^-30 is above the tie between 1 and 1.125,
  // so it rounds up; through fp32 (1 + 2^-4, a tie) it would round to the even 1.
  const std::int64_t above_tie = (std::int64_t{1} << 30) + (std::int64_t{1} << 26) + 1;
  EXPECT_EQ(fixed_to_e4m3(above_tie, -30), float_to_e4m3(1.125f));
  EXPECT_EQ(float_to_e4m3(float(std::ldexp(double(above_tie), -30))), float_to_e4m3(1.0f));
  EXPECT_EQ(fixed_to_e4m3(-(std::int64_t{1} << 40), -30), float_to_e4m3(-448.0f));  // -1024 saturates
  EXPECT_EQ(fixed_to_e4m3(1, -9), 0x01);   // the smallest subnormal, from a shift to the left
  EXPECT_EQ(fixed_to_e4m3(1, -10), 0x00);  // its half: a tie to the even zero
  EXPECT_EQ(fixed_to_e4m3(3, -11), 0x01);  // 0.75 of it: up
}

TEST(Fp8Scales, OnePowerOfTwoForEveryTensorThatNeverSaturates) {
  EXPECT_EQ(fp8_tensor_scale(TensorId::q), fp8_input_scale);
  EXPECT_EQ(fp8_tensor_scale(TensorId::k), fp8_input_scale);
  EXPECT_EQ(fp8_tensor_scale(TensorId::v), fp8_input_scale);
  EXPECT_EQ(fp8_input_scale, std::ldexp(1.0f, -6));
  EXPECT_LE(input_bound / fp8_input_scale, e4m3_max);
  const std::uint64_t key = tensor_key(5, TensorId::k);
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const float x = input_value(key, i);
    const std::uint8_t code = quantize_e4m3(x, fp8_input_scale);
    ASSERT_LT(std::abs(e4m3_to_float(code)), 448.0f) << x;  // no saturation
    ASSERT_EQ(round_to(DType::fp8_e4m3, x), e4m3_to_float(code) * fp8_input_scale);
    // The scale is exact both ways: rounding x / scale is rounding x on a grid 64 times finer.
    ASSERT_EQ(double(round_to(DType::fp8_e4m3, x)), model_value(model_round(x * 64.0f)) / 64.0);
    // Within half a step of e4m3 (3 fraction bits: relative 2^-4), or of the 2^-15 subnormal grid.
    ASSERT_LE(std::abs(round_to(DType::fp8_e4m3, x) - x), std::max(std::abs(x) / 16, std::ldexp(1.0f, -16)));
  }
}

TEST(Fp8Scales, InputsWithOutliersScaleBy2ToTheMinus2AndNeverSaturate) {
  // 60 / 448 = 2^-2.9: the scale is 2^-2, and 2^-3 would put 60 at 480, past 448.
  EXPECT_EQ(fp8_input_scale_of(InputDistribution::outliers), 0.25f);
  EXPECT_EQ(fp8_tensor_scale(TensorId::v, InputDistribution::outliers), 0.25f);
  EXPECT_GT(input_bound_of(InputDistribution::outliers) / 0.125f, e4m3_max);
  EXPECT_EQ(fp8_scale_exponent(6.0), -6);
  EXPECT_EQ(fp8_scale_exponent(60.0), -2);
  EXPECT_EQ(fp8_scale_exponent(448.0), 0);
  EXPECT_EQ(fp8_scale_exponent(449.0), 1);
  Case c;
  c.dtype = DType::fp8_e4m3;
  c.inputs = InputDistribution::outliers;
  EXPECT_EQ(c.fp8_descale(TensorId::q), 0.25f);
  c.dtype = DType::bf16;
  EXPECT_EQ(c.fp8_descale(TensorId::q), 1.0f);
  const std::uint64_t key = tensor_key(5, TensorId::k);
  int outliers = 0;
  for (std::uint64_t i = 0; i < 50000; ++i) {
    const float x = input_value(key, i, InputDistribution::outliers);
    outliers += std::abs(x) > 6.0f ? 1 : 0;
    const std::uint8_t code = quantize_e4m3(x, 0.25f);
    ASSERT_LT(std::abs(e4m3_to_float(code)), 448.0f) << x;  // no saturation
    ASSERT_LE(std::abs(round_to(DType::fp8_e4m3, x, 0.25f) - x), std::max(std::abs(x) / 16, std::ldexp(1.0f, -12)));
  }
  EXPECT_GT(outliers, 0);
}

TEST(Fp8HostTensor, StoresOneCodePerElementAndReadsDequantizedValues) {
  HostTensor tensor(DType::fp8_e4m3, 1, 4, 1, 2);
  tensor.set(0, 1.0f);
  tensor.set(1, -3.0f);
  tensor.set(2, 0.1f);
  tensor.set(3, 100.0f);  // 6400 after scaling: saturates to 448 · 2^-6 = 7
  EXPECT_EQ(tensor.data<std::uint8_t>()[0], float_to_e4m3(64.0f));
  EXPECT_EQ(tensor.data<std::uint8_t>()[1], float_to_e4m3(-192.0f));
  EXPECT_EQ(tensor.get(0), 1.0f);
  EXPECT_EQ(tensor.get(1), -3.0f);
  EXPECT_EQ(tensor.get(2), round_to(DType::fp8_e4m3, 0.1f));
  EXPECT_EQ(tensor.get(3), 7.0f);
  EXPECT_EQ(tensor.row(0, 1, 0), (std::vector<double>{double(tensor.get(2)), 7.0}));
}

TEST(Fp8HostTensor, InputsAreCodesAndTheOutputIsBf16) {
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 5;
  c.seq_k = 9;
  c.head_dim = 16;
  c.dtype = DType::fp8_e4m3;
  const AttentionInputs inputs = make_inputs(c);
  EXPECT_EQ(inputs.q.dtype(), DType::fp8_e4m3);
  const std::uint64_t v_key = tensor_key(c.seed, TensorId::v);
  for (std::int64_t i = 0; i < inputs.v.elements(); ++i) {
    ASSERT_EQ(inputs.v.data<std::uint8_t>()[i], quantize_e4m3(input_value(v_key, std::uint64_t(i)), fp8_input_scale));
  }
  EXPECT_EQ(output_dtype(DType::fp8_e4m3), DType::bf16);
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16}) EXPECT_EQ(output_dtype(dtype), dtype);
  EXPECT_EQ(make_output(c).dtype(), DType::bf16);
  // Q, K, V read once at 1 byte, O written once at 2.
  EXPECT_DOUBLE_EQ(c.min_bytes(), 1.0 * (2 * 5 * 4 * 16 + 2 * 2 * 9 * 2 * 16) + 2.0 * (2 * 5 * 4 * 16));
}

}  // namespace
}  // namespace faprobe
