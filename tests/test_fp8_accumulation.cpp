// The model of Hopper's e4m3 tensor-core adder (model/fp8_accumulation.hpp): what it keeps, what it drops, and
// that it commutes with the power-of-two scales faprobe's fp8 inputs carry. Its agreement with the H200 is
// tested on the recorded GPU run (test_fp8_h200.cpp) and, through the emulator, in test_emu_fa3.cpp.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/fp8.hpp"
#include "model/fp8_accumulation.hpp"

namespace faprobe {
namespace {

// Random e4m3 values (every finite code but the largest binades, so products stay far from overflow).
std::vector<float> random_e4m3(std::size_t count, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<float> values(count);
  for (float& value : values) {
    std::uint8_t code = 0;
    do code = static_cast<std::uint8_t>(generator() & 0xFF); while ((code & 0x7F) >= 0x70);
    value = e4m3_to_float(code);
  }
  return values;
}

double exact_dot(const std::vector<float>& a, const std::vector<float>& b, double c = 0.0) {
  for (std::size_t k = 0; k < a.size(); ++k) c += double(a[k]) * double(b[k]);
  return c;
}

TEST(Fp8Accumulation, SmallIntegersAreExact) {
  // Sums that fit in 14 significant bits lose nothing: the probes' small-integer wgmma stays bit for bit.
  std::vector<float> a(32), b(32);
  for (std::size_t k = 0; k < 32; ++k) {
    a[k] = float(int(k % 7) - 3);
    b[k] = float(int(k % 5) - 2);
  }
  EXPECT_EQ(hopper_e4m3_accumulate(5.0f, a.data(), 1, b.data(), 1, 32), float(exact_dot(a, b, 5.0)));
  EXPECT_EQ(hopper_e4m3_accumulate(0.0f, a.data(), 1, b.data(), 1, 0), 0.0f);
}

TEST(Fp8Accumulation, AddendsBelowTheLargestsThirteenthFractionBitAreTruncated) {
  // c = 2^14: the alignment grid is 2^(14 − 13) = 2, so a product of ±1 falls off entirely (toward zero),
  // where an fp32 sum keeps it.
  const float one = 1.0f, minus_one = -1.0f;
  EXPECT_EQ(hopper_e4m3_accumulate(16384.0f, &one, 1, &one, 1, 1), 16384.0f);
  EXPECT_EQ(hopper_e4m3_accumulate(16384.0f, &minus_one, 1, &one, 1, 1), 16384.0f);
  EXPECT_EQ(16384.0f + 1.0f, 16385.0f);
  // c = 2^13: the grid is 1, the product kept.
  EXPECT_EQ(hopper_e4m3_accumulate(8192.0f, &one, 1, &one, 1, 1), 8193.0f);
}

TEST(Fp8Accumulation, TheSumIsTruncatedToThirteenFractionBits) {
  // 16383 + 1 + 1: every addend on the grid of 1 (the largest, 16383, is below 2^14), the exact sum 16385
  // needs 15 significant bits and is truncated to 16384.
  const float ones[2] = {1.0f, 1.0f};
  EXPECT_EQ(hopper_e4m3_accumulate(16383.0f, ones, 1, ones, 1, 2), 16384.0f);
  EXPECT_EQ(hopper_e4m3_accumulate(-16383.0f, ones, 1, ones, 1, 2), -16381.0f);  // |−16381| fits: exact
  const float minus_ones[2] = {-1.0f, -1.0f};
  EXPECT_EQ(hopper_e4m3_accumulate(-16383.0f, minus_ones, 1, ones, 1, 2), -16384.0f);  // toward zero
}

TEST(Fp8Accumulation, CommutesWithPowerOfTwoScales) {
  // faprobe's fp8 scales are powers of two, so the model on dequantized values equals the model on the codes
  // times the scales, bit for bit: what lets the reference work on dequantized values.
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> a = random_e4m3(128, seed), b = random_e4m3(128, seed + 100);
    std::vector<float> a_scaled(a), b_scaled(b);
    for (float& x : a_scaled) x *= 0.015625f;  // 2^-6
    for (float& x : b_scaled) x *= 0.25f;      // 2^-2
    const float on_codes = hopper_e4m3_dot(a.data(), 1, b.data(), 1, 128);
    EXPECT_EQ(hopper_e4m3_dot(a_scaled.data(), 1, b_scaled.data(), 1, 128), on_codes * 0.00390625f) << seed;
  }
}

TEST(Fp8Accumulation, ADotProductChainsWgmmaKGroupsOf32AndHonoursStrides) {
  const std::vector<float> a = random_e4m3(96, 7), b = random_e4m3(96, 8);
  float chained = hopper_e4m3_accumulate(0.0f, a.data(), 1, b.data(), 1, 32);
  chained = hopper_e4m3_accumulate(chained, a.data() + 32, 1, b.data() + 32, 1, 32);
  chained = hopper_e4m3_accumulate(chained, a.data() + 64, 1, b.data() + 64, 1, 32);
  EXPECT_EQ(hopper_e4m3_dot(a.data(), 1, b.data(), 1, 96), chained);
  // b read with a stride of 3 from an interleaved copy.
  std::vector<float> interleaved(3 * 96, -1.0f);
  for (std::size_t k = 0; k < 96; ++k) interleaved[3 * k] = b[k];
  EXPECT_EQ(hopper_e4m3_dot(a.data(), 1, interleaved.data(), 3, 96), chained);
}

TEST(Fp8Accumulation, ErrorIsWithinTheTruncationBoundAndAboveFp32s) {
  // Each step loses less than (count + 2) units of 2^(E − 13), E the largest addend's exponent: one per
  // truncated addend and one for the sum. Over many random dot products the model loses far more than an
  // fp32 sum does, as the H200 does (its LSE errors are ~10× the fp32 ones).
  double model_error = 0.0, fp32_error = 0.0;
  for (std::uint32_t seed = 0; seed < 200; ++seed) {
    const std::vector<float> a = random_e4m3(32, seed), b = random_e4m3(32, seed + 1000);
    const float c = a[0] * 3.0f;
    double largest = std::fabs(double(c));
    for (std::size_t k = 0; k < 32; ++k) largest = std::fmax(largest, std::fabs(double(a[k]) * double(b[k])));
    int exponent = 0;
    std::frexp(largest, &exponent);
    const double unit = std::ldexp(1.0, exponent - 1 - e4m3_accumulator_fraction_bits);
    const double exact = exact_dot(a, b, double(c));
    const float got = hopper_e4m3_accumulate(c, a.data(), 1, b.data(), 1, 32);
    EXPECT_LE(std::fabs(double(got) - exact), 34.0 * unit) << seed;
    float fp32 = c;
    for (std::size_t k = 0; k < 32; ++k) fp32 += a[k] * b[k];
    model_error += std::fabs(double(got) - exact);
    fp32_error += std::fabs(double(fp32) - exact);
  }
  EXPECT_GT(model_error, 8.0 * fp32_error);
}

TEST(Fp8Accumulation, NanAndZerosFollowIeee) {
  const float nan = std::nanf(""), one = 1.0f, zero = 0.0f, minus_one = -1.0f;
  EXPECT_TRUE(std::isnan(hopper_e4m3_accumulate(0.0f, &nan, 1, &one, 1, 1)));
  EXPECT_EQ(hopper_e4m3_accumulate(0.0f, &zero, 1, &one, 1, 1), 0.0f);
  EXPECT_EQ(hopper_e4m3_accumulate(2.0f, &one, 1, &minus_one, 1, 1), 1.0f);
  EXPECT_EQ(hopper_e4m3_accumulate(1.0f, &one, 1, &minus_one, 1, 1), 0.0f);
}

}  // namespace
}  // namespace faprobe
