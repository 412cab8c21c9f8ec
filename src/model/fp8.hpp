// fp8_e4m3 cases, following FlashAttention-3's FP8 forward: Q, K and V are stored as e4m3 codes with one
// scale per tensor (FA-3's q_descale, k_descale, v_descale). An input value x of tensor t is stored as
// float_to_e4m3(x / scale_t) and stands for e4m3_to_float(code) · scale_t: that dequantized value is what
// round_to(fp8_e4m3, x) returns and what the reference and the checker use. The output is bf16
// (output_dtype in dtype.hpp), as FA-3's FP8 forward writes it.
//
// The codec is e4m3 "fn" (OCP FP8 E4M3, what sm_89 and sm_90 tensor cores take): a sign, 4 exponent bits
// with bias 7, 3 fraction bits; no infinities, 0x7F and 0xFF are NaN, subnormals in steps of 2^-9, largest
// finite 448. float_to_e4m3 rounds to nearest even and saturates like PTX cvt.rn.satfinite.e4m3x2.f32: a
// finite value or an infinity beyond 448 becomes ±448, NaN becomes 0x7F, the sign of zero is kept. It is
// written once with integer arithmetic (e4m3_magnitude_code, on the fp32 significand, or on an exact fixed-point
// value for fixed_to_e4m3: incoherent processing's rotated integers, rounded once) and compiled for host and
// device (__host__ __device__ under nvcc), so the device input generator's codes equal the host's bit for bit
// with no conversion instruction involved. Cost: ~15 integer operations per value: fine for filling inputs, not
// meant for a kernel's inner loop (that is cvt's job, in the instruction layer).
//
// The scale: amax / 448 is the usual per-tensor choice (Transformer Engine); amax is the generator's exact
// bound, input_bound = 6 for normal inputs and 60 with outliers (inputs.hpp: input_bound_of), so no pass over a
// tensor is needed and host and device agree. With outliers the scale is 2^-2 (60 / 448 rounded up), and
// everything below holds the same way. But
// 6/448 = 3/224 would make x / scale and code · scale inexact in fp32 (two more roundings, and a dequantized
// value that differs between fp32 and float64). faprobe rounds the scale up to a power of two instead,
// 2^ceil(log2(6/448)) = 2^-6: |x| / scale < 384 <= 448 never saturates, scaling is exact both ways, and
// (Σ q_code·k_code)·scale_q·scale_k equals the dot product of the dequantized values bit for bit. Cost: codes
// span [0, 384) instead of [0, 448), with the same 3-bit relative precision; e4m3 turns subnormal below
// |x| = 2^-12 instead of 2^-12.2 (a few in 10^4 inputs are that small).
#pragma once

#include <cstdint>
#include <cstring>

#include "model/inputs.hpp"

#if defined(__CUDACC__)
#define FAPROBE_FP8_HOST_DEVICE __host__ __device__ inline
#else
#define FAPROBE_FP8_HOST_DEVICE inline
#endif

namespace faprobe {

inline constexpr float e4m3_max = 448.0f;
inline constexpr std::uint8_t e4m3_max_code = 0x7E;  // 1.75 · 2^8
inline constexpr std::uint8_t e4m3_nan_code = 0x7F;

namespace fp8_detail {
FAPROBE_FP8_HOST_DEVICE std::uint32_t bits_of(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}
FAPROBE_FP8_HOST_DEVICE float float_of(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}
// The index of the leading one of a non-zero value.
FAPROBE_FP8_HOST_DEVICE int leading_bit(std::uint64_t value) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(value));
#else
  return 63 - __builtin_clzll(value);
#endif
}
}  // namespace fp8_detail

// magnitude · 2^unit_exponent rounded to the nearest e4m3 code without its sign bit, ties to even, saturating to
// 448 (0x7E): the one rounding of the codec, for fp32 bits (float_to_e4m3) and for exact fixed-point values
// (fixed_to_e4m3) alike.
FAPROBE_FP8_HOST_DEVICE std::uint32_t e4m3_magnitude_code(std::uint64_t magnitude, int unit_exponent) {
  if (magnitude == 0) return 0;
  const int top = fp8_detail::leading_bit(magnitude);
  const int exponent = top + unit_exponent;  // of the value's leading one
  // Below 2^-10 (half the smallest subnormal, 2^-9) everything rounds to zero; from 2^9 up everything is past
  // 448 and saturates.
  if (exponent < -10) return 0;
  if (exponent > 8) return e4m3_max_code;
  // Keep the leading one and 3 fraction bits (normal, exponent >= -6), or whole 2^-9 steps (subnormal).
  const int shift = exponent >= -6 ? top - 3 : -9 - unit_exponent;
  std::uint64_t kept = magnitude;
  if (shift <= 0) {
    kept <<= -shift;  // fewer bits than e4m3 keeps: exact
  } else {
    kept >>= shift;
    const std::uint64_t rest = magnitude & ((std::uint64_t{1} << shift) - 1u), half = std::uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u) != 0)) ++kept;  // to nearest, ties to even
  }
  // Normal: (biased exponent << 3) + fraction = ((exponent + 6) << 3) + kept, kept holding the implicit 8, so
  // a carry out of the fraction moves into the next binade by itself; subnormal: the 2^-9 steps themselves.
  std::uint64_t code = exponent >= -6 ? (static_cast<std::uint64_t>(exponent + 6) << 3) + kept : kept;
  if (code > e4m3_max_code) code = e4m3_max_code;  // rounded past 448 (0x7F would be NaN): satfinite
  return static_cast<std::uint32_t>(code);
}

// value rounded to the nearest e4m3 code, ties to even, saturating to ±448; NaN gives 0x7F.
FAPROBE_FP8_HOST_DEVICE std::uint8_t float_to_e4m3(float value) {
  const std::uint32_t bits = fp8_detail::bits_of(value);
  const std::uint32_t sign = (bits >> 24) & 0x80u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return e4m3_nan_code;
  const int exponent = static_cast<int>(magnitude >> 23) - 127;  // -127 for zero and fp32 subnormals
  if (exponent < -10) return static_cast<std::uint8_t>(sign);  // zero, fp32 subnormals and anything below 2^-10
  if (exponent > 8) return static_cast<std::uint8_t>(sign | e4m3_max_code);  // infinity included
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;  // 24 bits, the implicit one included
  return static_cast<std::uint8_t>(sign | e4m3_magnitude_code(significand, exponent - 23));
}

// units · 2^unit_exponent, an exact fixed-point value (the input generator's integers times 2^-16, and sums of
// them), rounded once to the nearest e4m3 code, ties to even, saturating to ±448; zero is +0.
FAPROBE_FP8_HOST_DEVICE std::uint8_t fixed_to_e4m3(std::int64_t units, int unit_exponent) {
  const std::uint32_t sign = units < 0 ? 0x80u : 0u;
  const std::uint64_t magnitude = units < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(units)
                                            : static_cast<std::uint64_t>(units);
  return static_cast<std::uint8_t>(sign | e4m3_magnitude_code(magnitude, unit_exponent));
}

// The value of an e4m3 code (exact in fp32); 0x7F and 0xFF are NaN.
FAPROBE_FP8_HOST_DEVICE float e4m3_to_float(std::uint8_t code) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const std::uint32_t exponent = (code >> 3) & 0xfu, fraction = code & 0x7u;
  if (exponent == 0xfu && fraction == 0x7u) return fp8_detail::float_of(sign | 0x7fc00000u);
  if (exponent == 0) return fp8_detail::float_of(sign | fp8_detail::bits_of(float(fraction) * (1.0f / 512.0f)));
  return fp8_detail::float_of(sign | ((exponent + 120u) << 23) | (fraction << 20));  // 2^(e-7): bias 127 - 7
}

// 2^exponent in fp32 (exponent within fp32's normal range), as a constant expression.
FAPROBE_FP8_HOST_DEVICE constexpr float power_of_two(int exponent) {
  float value = 1.0f;
  for (; exponent > 0; --exponent) value *= 2.0f;
  for (; exponent < 0; ++exponent) value *= 0.5f;
  return value;
}

// The exponent of the smallest power of two s with bound / s <= 448: the per-tensor scale of values below bound.
FAPROBE_FP8_HOST_DEVICE constexpr int fp8_scale_exponent(double bound) {
  int exponent = 0;
  while (bound / double(power_of_two(exponent)) > double(e4m3_max)) ++exponent;
  while (bound / double(power_of_two(exponent - 1)) <= double(e4m3_max)) --exponent;
  return exponent;
}

// The scale of every fp8 input tensor of a distribution (inputs.hpp): the smallest power of two with
// input_bound_of(distribution) / scale <= 448: 2^-6 for normal inputs (6 / 448 = 2^-6.2), 2^-2 with outliers
// (60 / 448 = 2^-2.9; |x| / scale < 240).
FAPROBE_FP8_HOST_DEVICE constexpr float fp8_input_scale_of(InputDistribution distribution) {
  return power_of_two(fp8_scale_exponent(input_bound_of(distribution)));
}
// The normal inputs' scale, 2^-6.
inline constexpr float fp8_input_scale = fp8_input_scale_of(InputDistribution::normal);
static_assert(fp8_input_scale == 1.0f / 64.0f && input_bound / fp8_input_scale <= e4m3_max &&
                  input_bound / (fp8_input_scale / 2) > e4m3_max,
              "fp8_input_scale is the smallest power of two that keeps the inputs below e4m3's 448");
static_assert(fp8_input_scale_of(InputDistribution::outliers) == 0.25f,
              "inputs with outliers (|x| < 60) are scaled by 2^-2");

// The per-tensor scale of Q, K or V in an fp8_e4m3 case: real value = e4m3_to_float(code) · scale (FA-3's
// descale). The same for all three tensors of a case, from its input distribution; kernels get it through
// AttentionArgs (q_scale, k_scale, v_scale). Incoherent processing gives Q and K scales of their own
// (incoherent.hpp).
FAPROBE_FP8_HOST_DEVICE constexpr float fp8_tensor_scale(TensorId,
                                                         InputDistribution distribution = InputDistribution::normal) {
  return fp8_input_scale_of(distribution);
}

// x stored with a tensor scale, and back.
FAPROBE_FP8_HOST_DEVICE std::uint8_t quantize_e4m3(float value, float scale) { return float_to_e4m3(value / scale); }
FAPROBE_FP8_HOST_DEVICE float dequantize_e4m3(std::uint8_t code, float scale) { return e4m3_to_float(code) * scale; }

}  // namespace faprobe
