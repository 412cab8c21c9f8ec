// How Hopper's e4m3 tensor cores add: the model faprobe's emulator runs and its fp8 tolerance is derived from.
//
// A `wgmma ... .f32.e4m3.e4m3` computes, for each output element, d = c + Σ_{k<32} a_k·b_k. Its result is not
// the fp32 sum a CUDA-core loop would give: the tensor core adds with a narrower datapath. What is known:
//   - DeepSeek-V3's technical report (2024, section 3.3.2) measured "around 14 bits" of accumulation
//     precision for FP8 GEMMs on H800 and promotes partial sums to fp32 every 128 products;
//   - SageAttention2 (Zhang et al. 2024) found an "FP22" accumulator in the fp8 mma,
//     1 sign, 8 exponent and 13 fraction bits: truncating the 10 low fraction bits of an fp32 result leaves
//     the hardware's output unchanged;
//   - tensor cores align the addends of one step to the largest exponent and truncate what falls below
//     (Fasi, Higham, Mikaitis, Pranesh 2021 for V100–A100; Khattak and Mikaitis 2025 for H100 and B200).
// The model puts these together, per output element and per instruction (K = 32 products):
//   1. each product a_k·b_k exactly (two e4m3 significands of 4 bits: at most 8 bits);
//   2. E = the exponent of the largest magnitude among c and the products (2^E <= |x| < 2^(E+1));
//   3. c and every product truncated toward zero to a multiple of 2^(E − 13);
//   4. those added exactly, and the sum truncated toward zero to 13 fraction bits below its own leading bit
//      (the FP22 register), then held in the fp32 accumulator as it is (exact: 14 significant bits).
// Evidence: on the H200 run of 2026-12-04 (results/h200/2026-12-04/verify/fp8-lse.jsonl, 600 cases, seeds
// 0–4) the LSE error of cuda.fa3 where a row sees one key (the LSE is then one score, so only the dot
// product's accumulation errs) was at worst 9.84e-4, 1.77e-3 and 2.39e-3 at head_dim 64, 128 and 256; this
// model on the same inputs and rows gives 9.84e-4, 1.77e-3 and 2.39e-3 (tests/test_fp8_h200.cpp), where
// exact fp32 accumulation, the emulator's model before, gave errors 10 to 100 times smaller, and 12 fraction
// bits instead of 13 about twice as large (on sampled rows of the same cases). The
// probe "wgmma m64n64k32 e4m3 ss swizzle 64B" (small integers, exact under both) stays bit for bit; the
// probe "wgmma m64n64k32 e4m3 ss many binades" (products spanning many binades) tells, on the next GPU run,
// whether the GPU agrees with the model bit for bit on every element (faprobe probes).
//
// Costs: a multiply, a conversion and an add per product (integers on the alignment grid); used by the
// emulator's e4m3 wgmma and by the checker's plain fp8 rows, never on a hot path of a timed kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace faprobe {

// The fraction bits kept below the leading bit of the largest addend (step 3) and of the sum (step 4).
inline constexpr int e4m3_accumulator_fraction_bits = 13;
// Products per alignment step: one wgmma k-group of e4m3 (K = 32).
inline constexpr std::size_t e4m3_mma_k = 32;

namespace fp8_accumulation_detail {
inline std::uint64_t bits_of(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
// 2^exponent for exponents in double's normal range, built from its bits.
inline double grid_scale(int exponent) {
  const std::uint64_t bits = std::uint64_t(exponent + 1023) << 52;
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
}  // namespace fp8_accumulation_detail

// c + Σ_{k<count} a[k·stride_a]·b[k·stride_b] as Hopper's e4m3 tensor core computes it (the model above);
// a and b hold e4m3 values, possibly scaled by powers of two (the model commutes with those). count <= 32.
// On the grid of 2^(E − 13) every addend is an integer below 2^14 in magnitude, so the alignment, the sum and
// its truncation are integer operations (the products are exact in double: two 4-bit significands).
inline float hopper_e4m3_accumulate(float c, const float* a, std::size_t stride_a, const float* b,
                                    std::size_t stride_b, std::size_t count) {
  using namespace fp8_accumulation_detail;
  double terms[e4m3_mma_k + 1];
  std::size_t n = 0;
  terms[n++] = double(c);
  for (std::size_t k = 0; k < count && k < e4m3_mma_k; ++k) terms[n++] = double(a[k * stride_a]) * double(b[k * stride_b]);
  // The largest biased exponent among the addends: that of the largest magnitude (zeros have 0).
  unsigned largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned exponent = unsigned(bits_of(terms[i]) >> 52) & 0x7FFu;
    largest = exponent > largest ? exponent : largest;
  }
  if (largest == 0 || largest == 0x7FFu) {  // all zero, or a NaN/inf: IEEE's answer
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += terms[i];
    return float(sum);
  }
  const int step = int(largest) - 1023 - e4m3_accumulator_fraction_bits;  // the grid: 2^step
  const double to_grid = grid_scale(-step);
  std::int64_t sum = 0;  // exact: at most 33 addends below 2^14
  for (std::size_t i = 0; i < n; ++i) sum += std::int64_t(terms[i] * to_grid);  // truncated toward zero
  if (sum == 0) return 0.0f;
  // The sum truncated (toward zero) to 14 significant bits: 13 fraction bits below its leading one.
  std::uint64_t magnitude = sum < 0 ? std::uint64_t(-sum) : std::uint64_t(sum);
  const int leading = 63 - __builtin_clzll(magnitude);  // magnitude > 0
  if (leading > e4m3_accumulator_fraction_bits) {
    const int dropped = leading - e4m3_accumulator_fraction_bits;
    magnitude = (magnitude >> dropped) << dropped;
  }
  const double result = double(magnitude) * grid_scale(step);
  return float(sum < 0 ? -result : result);
}

// A dot product of e4m3 values over `length` elements as a chain of wgmma k-groups (the first from c = 0),
// as a kernel's S = Q·Kᵀ over head_dim or O = P·V over keys accumulates it.
inline float hopper_e4m3_dot(const float* a, std::size_t stride_a, const float* b, std::size_t stride_b,
                             std::size_t length, float c = 0.0f) {
  for (std::size_t k = 0; k < length; k += e4m3_mma_k) {
    const std::size_t count = length - k < e4m3_mma_k ? length - k : e4m3_mma_k;
    c = hopper_e4m3_accumulate(c, a + k * stride_a, stride_a, b + k * stride_b, stride_b, count);
  }
  return c;
}

}  // namespace faprobe
