// The online softmax on the device (Milakov & Gimelshein 2018), written once for every flash-style CUDA
// kernel on the instruction layer (cuda.fa1 now; FA-2 and FlashDecoding later), in the spirit of
// flash-attention's softmax_rescale_o / normalize_softmax_lse. The host twin is kernels/cpu/online_softmax.hpp.
//
// It works on scores held in mma.sync m16n8k16 accumulators (PTX ISA "Matrix Fragments for mma.m16n8k16
// with floating point type", the C/D layout): a warp's 16 x (8·Tiles) score tile is Tiles fragments of
// four floats per lane, elements 0 and 1 in row groupID = lane / 4 and elements 2 and 3 in row groupID + 8.
// So each lane holds parts of two rows, and the other parts of those rows sit in the four lanes of its quad
// (lanes 4·groupID .. 4·groupID + 3): row maxima and sums are reduced over the quad with two butterfly
// shuffles each.
//
// Scores come in already multiplied by scale·log2(e) (folded on the host, as flash-attention's
// scale_softmax_log2), so every exponential is one ex2.approx; row_max is in those log2 units. The
// accumulator of P·V stays with the caller (FA-1 keeps it in global memory, FA-2 in registers); absorb()
// returns the factor alpha by which the caller rescales it.
//
// A row whose keys are all masked (-inf) keeps row_max = -inf and row_sum = 0: exp2(-inf - -inf) would be
// NaN, so the exponent's base is 0 for such a row, which makes every probability and alpha exp2(-inf) = 0;
// inverse_sum() is then 0 and the output row zeros, never NaN; log_sum_exp() is -inf.
//
// Cost per absorb(): 8·Tiles compares, 8·Tiles ex2 and adds per lane, and 8 shuffles (max and sum, two rows,
// two butterfly steps). row_sum is kept complete (reduced over the quad at every call), which FA-1 needs at
// every step; a kernel that only needs it at the end pays 4 shuffles per key block for that, next to the
// 2·block_k mma.sync of the block.
#pragma once

#include <cmath>
#include <limits>

#include "cuda/common/isa.hpp"

namespace faprobe::cuda {

struct OnlineSoftmax {
  static constexpr float minus_infinity = -std::numeric_limits<float>::infinity();
  static constexpr float ln2 = 0.693147180559945309f;
  static constexpr int rows = 2;  // groupID and groupID + 8 of the m16n8 accumulator

  float row_max[rows];  // largest score seen so far in log2 units, -inf while no key has been seen
  float row_sum[rows];  // sum over seen keys of exp2(score - row_max), complete over the row

  // No key seen yet.
  FAPROBE_DEVICE void reset() {
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) {
      row_max[r] = minus_infinity;
      row_sum[r] = 0.0f;
    }
  }

  // Folds a block of scores (log2 units, masked keys -inf) into the state and overwrites each with its
  // unnormalised probability exp2(score - row_max). alpha[r] receives exp2(old row_max - new row_max), the
  // factor for what the caller accumulated before this block (1 when the max did not grow, 0 for the first
  // block that sees a key).
  template <int Tiles>
  FAPROBE_DEVICE void absorb(float (&scores)[Tiles][4], float (&alpha)[rows]) {
    float block_max[rows] = {minus_infinity, minus_infinity};
    FAPROBE_UNROLL
    for (int t = 0; t < Tiles; ++t) {
      FAPROBE_UNROLL
      for (int e = 0; e < 4; ++e) block_max[e / 2] = max_of(block_max[e / 2], scores[t][e]);
    }
    float base[rows];
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) {
      const float new_max = max_of(row_max[r], quad_max(block_max[r]));
      base[r] = new_max == minus_infinity ? 0.0f : new_max;  // the -inf row: exp2(x - 0), never -inf - -inf
      alpha[r] = isa::ex2_approx(row_max[r] - base[r]);
      row_max[r] = new_max;
    }
    float block_sum[rows] = {0.0f, 0.0f};
    FAPROBE_UNROLL
    for (int t = 0; t < Tiles; ++t) {
      FAPROBE_UNROLL
      for (int e = 0; e < 4; ++e) {
        scores[t][e] = isa::ex2_approx(scores[t][e] - base[e / 2]);
        block_sum[e / 2] += scores[t][e];
      }
    }
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) row_sum[r] = alpha[r] * row_sum[r] + quad_sum(block_sum[r]);
  }

  // The factor that turns the accumulator into the output row: 1/row_sum, or 0 for a row that saw no key.
  FAPROBE_DEVICE float inverse_sum(int r) const { return row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f; }

  // The row's natural-log sum of exponentials of the scaled scores, ln Σ exp(scale·s) =
  // ln 2 · (row_max + log2 row_sum); -inf for a row that saw no key.
  FAPROBE_DEVICE float log_sum_exp(int r) const {
    return row_sum[r] > 0.0f ? ln2 * (row_max[r] + std::log2(row_sum[r])) : minus_infinity;
  }

 private:
  static FAPROBE_DEVICE float max_of(float a, float b) { return a > b ? a : b; }
  // Reductions over the four lanes of a quad (lane ^ 1, lane ^ 2 stay inside it).
  static FAPROBE_DEVICE float quad_max(float value) {
    value = max_of(value, isa::shfl_xor_sync(isa::full_warp_mask, value, 1));
    return max_of(value, isa::shfl_xor_sync(isa::full_warp_mask, value, 2));
  }
  static FAPROBE_DEVICE float quad_sum(float value) {
    value += isa::shfl_xor_sync(isa::full_warp_mask, value, 1);
    return value + isa::shfl_xor_sync(isa::full_warp_mask, value, 2);
  }
};

}  // namespace faprobe::cuda
