// Incoherent processing for FP8 (FlashAttention-3, Shah et al. 2024, section 3.3): Q and K are multiplied by
// the same random orthogonal matrix M = H·D/√d before they are rounded to e4m3, D a diagonal of random signs
// and H the d × d Walsh–Hadamard matrix. (QM)(KM)ᵀ = QKᵀ since M·Mᵀ = I, and an outlier in one column of a row
// is spread over all d columns of the rotated row (each |entry| of H·D/√d is 1/√d), so the per-tensor fp8
// scale and e4m3's 3-bit rounding meet values of similar size instead of a few large ones among small ones.
// V is not rotated. The implementations cuda.fa3-incoherent and emu.fa3-incoherent run cuda.fa3's fp8
// kernel unchanged on the rotated Q and K.
//
// Exact by construction. The generator's values are integers times 2^-16 (inputs.hpp: input_units), so the
// rotation is done in integers: y = H·(D·x) with the unnormalized ±1 Hadamard matrix by the fast
// Walsh–Hadamard transform (log2 d butterfly passes of d/2 additions and d/2 subtractions, no
// multiplication), exact in int32: |y_i| <= Σ|x_j| < d · 60 · 65536 <= 2^30 for d <= 256. Each y_i is then
// rounded once to e4m3 (fixed_to_e4m3, fp8.hpp) with a power-of-two scale from a provable bound on it,
// |y_i| < d · input_bound_of(distribution), so nothing saturates. The 1/√d is left out of the transform:
// H·Hᵀ = d·I, so (H D q)·(H D k) = d · q·k exactly, and the factor 1/d is folded into Q's descale
// (incoherent_descale: the storage scale over d, still a power of two), so that the kernel's
// S = (Σ q_code·k_code) · q_descale · k_descale · scale is QKᵀ·scale up to the e4m3 rounding of the rotated
// values alone. The device fill (kernels/cuda/common/fill_inputs.cuh) and the host (the checker's
// GeneratedInputs, make_inputs for --save) call the same functions below, so their codes are equal bit for
// bit; the checker then computes its float64 reference on exactly the values the kernel consumed.
//
// Costs: per row of d values the plain fill's draws, d·log2(d) integer additions and subtractions (d = 128:
// 896, 7 per element) and d roundings to e4m3. faprobe fills inputs outside the timed region, for plain fp8
// too (its quantization is not timed either), so the rotation is in no timing. Fused into the quantization
// that an fp8 pipeline runs anyway (read 2 bytes of bf16, write 1 byte of e4m3 per element of Q and K), it
// adds log2(d) adds per element: at d 128 and the seed's shape (batch 8, heads 32, seq 8192) Q and K are
// 2 · 2^28 elements, 3.8 · 10^9 adds against 1.6 GB moved: about 0.5 ms of an H100's 3.35 TB/s for the bytes,
// and the adds (in fp32, as a pipeline with bf16 inputs would: ~0.13 ms at 132 SMs × 128 per clock × 1.7 GHz,
// plus the shuffles of the strides that cross lanes) mostly hide behind them.
#pragma once
#include <cstdint>

#include "model/fp8.hpp"
#include "model/inputs.hpp"

namespace faprobe {

// An implementation's transform of Q and K before quantization (Implementation::qk_transform): none, or
// incoherent processing (this file). The checker regenerates Q and K through it (GeneratedInputs).
enum class QkTransform { none, incoherent };

// The head dims the integer transform takes: powers of two from 32 (a warp's lanes, one value each, in the
// device fill) to 256 (the largest head_dim of the fp8 kernel; the int32 bound above).
inline constexpr int incoherent_min_head_dim = 32, incoherent_max_head_dim = 256;
constexpr bool incoherent_head_dim(std::int64_t head_dim) {
  return head_dim >= incoherent_min_head_dim && head_dim <= incoherent_max_head_dim && (head_dim & (head_dim - 1)) == 0;
}
static_assert(std::int64_t{incoherent_max_head_dim} * input_bound_of(InputDistribution::outliers) * 65536 < 2147483647.0,
              "the rotated values fit int32");

// The key of the random signs D, one per column, the same for Q and K of every row, head and batch entry.
constexpr std::uint64_t incoherent_signs_key(std::uint64_t seed) { return mix64(mix64(seed) ^ 0x2545f4914f6cdd1dULL); }
// Whether D's entry in column `column` is -1.
constexpr bool incoherent_sign_negative(std::uint64_t signs_key, std::uint64_t column) {
  return (mix64(signs_key + column) >> 63) != 0;
}

// row ← H·row in place for a power-of-two length (the Sylvester-ordered Walsh–Hadamard matrix, entries ±1,
// H = Hᵀ, H·H = length·I), by the fast transform: passes over strides 1, 2, 4, ..., each replacing pairs
// (a, b) by (a + b, a − b).
FAPROBE_FP8_HOST_DEVICE constexpr void walsh_hadamard(std::int32_t* row, int length) {
  for (int stride = 1; stride < length; stride *= 2) {
    for (int start = 0; start < length; start += 2 * stride) {
      for (int i = start; i < start + stride; ++i) {
        const std::int32_t a = row[i], b = row[i + stride];
        row[i] = a + b;
        row[i + stride] = a - b;
      }
    }
  }
}

// The storage scale of rotated Q and K codes: the smallest power of two with d · bound / scale <= 448, as its
// exponent.
FAPROBE_FP8_HOST_DEVICE constexpr int incoherent_scale_exponent(std::int64_t head_dim, InputDistribution distribution) {
  return fp8_scale_exponent(double(head_dim) * double(input_bound_of(distribution)));
}

// The descale of a rotated Q or K (AttentionArgs' q_scale, k_scale; real value = e4m3_to_float(code) · descale):
// K's is its storage scale, Q's the storage scale over head_dim (the d of H·Hᵀ = d·I), both powers of two. V,
// not rotated, keeps fp8_tensor_scale.
FAPROBE_FP8_HOST_DEVICE constexpr float incoherent_descale(TensorId tensor, std::int64_t head_dim,
                                                           InputDistribution distribution) {
  const float storage = power_of_two(incoherent_scale_exponent(head_dim, distribution));
  return tensor == TensorId::q ? storage / float(head_dim) : storage;
}

// The e4m3 codes of one rotated row: elements first_index .. first_index + head_dim − 1 of the tensor whose
// key is `key` (one (batch, seq, head) row of Q or K), times the signs, through the Walsh–Hadamard transform,
// each rounded once to e4m3 with the storage scale 2^scale_exponent. head_dim: incoherent_head_dim.
FAPROBE_FP8_HOST_DEVICE void incoherent_row_codes(std::uint64_t key, std::uint64_t first_index, int head_dim,
                                                  InputDistribution distribution, std::uint64_t signs_key,
                                                  int scale_exponent, std::uint8_t* codes) {
  std::int32_t row[incoherent_max_head_dim] = {};
  for (int c = 0; c < head_dim; ++c) {
    const std::int32_t units = input_units(key, first_index + std::uint64_t(c), distribution);
    row[c] = incoherent_sign_negative(signs_key, std::uint64_t(c)) ? -units : units;
  }
  walsh_hadamard(row, head_dim);
  // row[c] · 2^-16 / 2^scale_exponent, rounded once
  for (int c = 0; c < head_dim; ++c) codes[c] = fixed_to_e4m3(row[c], -16 - scale_exponent);
}

}  // namespace faprobe
