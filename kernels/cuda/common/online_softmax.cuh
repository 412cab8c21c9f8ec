// The online softmax on the device (Milakov & Gimelshein 2018), written once for every flash-style CUDA
// kernel on the instruction layer (cuda.fa1, cuda.fa2, cuda.fa3, FlashDecoding), in the spirit of
// flash-attention's Softmax (softmax_rescale_o / online_softmax / normalize_softmax_lse). The host twin is
// kernels/cpu/online_softmax.hpp.
//
// It works on scores held in mma.sync m16n8k16 accumulators, or wgmma's, which repeat them (PTX ISA "Matrix
// Fragments for mma.m16n8k16 with floating point type", the C/D layout): a warp's 16 x (8·Tiles) score tile is
// Tiles fragments of four floats per lane, elements 0 and 1 in row groupID = lane / 4 and elements 2 and 3 in
// row groupID + 8. So each lane holds parts of two rows, and the other parts of those rows sit in the four
// lanes of its quad (lanes 4·groupID .. 4·groupID + 3).
//
// The instruction budget, per score: one FMNMX for the row max, one FFMA for x·scale·log2(e) − max·scale·log2(e)
// (the scale is folded into the exponent's argument, as flash-attention's scale_softmax_log2: scores come
// in raw, never multiplied separately), one MUFU.EX2 (ex2.approx.ftz: no range-check wrapper), one FADD
// for the row sum; per pair one cvt.rn.{bf16,f16}x2.f32 when the caller packs P. Per block and row: two
// shuffles for the max (the quad's allreduce) and one ex2 for alpha. The row sum is this lane's share
// only (its own keys), reduced over the quad once, by finalize(), at the end: the shares add up exactly to
// what a per-block reduction would give, without 4 shuffles per block.
//
// Is the block the row's first (no earlier state: alpha is not computed, the sum starts from this block) and
// may a row of the block be entirely masked (CheckInf)? Both are template arguments, so that a kernel's
// steady-state loop over unmasked blocks (every score finite) carries neither the -inf test nor a branch:
// the kernels peel the masked blocks (the causal diagonal, the ragged last key block) off that loop.
//
// Masked scores are -inf. A row whose keys are all masked keeps row_max = -inf and row_sum = 0: with CheckInf
// its exponent base is 0 (not -inf, which would make -inf − -inf = NaN), so every probability and alpha is
// exp2(-inf) = 0; inverse_sum() is then 0 and the output row zeros, never NaN; log_sum_exp() is -inf.
#pragma once

#include <cmath>
#include <limits>

#include "cuda/common/isa.hpp"

namespace faprobe::cuda {

// The exponential and the maximum the softmax runs on: ex2.approx.ftz (one MUFU.EX2) and max.f32 (one
// FMNMX). A policy, so that tests/static_checks_planted.cu can compile a kernel with slower ones and show
// that the static checks catch it.
struct SoftmaxMath {
  static FAPROBE_DEVICE float exp2(float x) { return isa::ex2_approx_ftz(x); }
  static FAPROBE_DEVICE float max(float a, float b) { return isa::max_f32(a, b); }
};

struct OnlineSoftmax {
  static constexpr float minus_infinity = -std::numeric_limits<float>::infinity();
  static constexpr float ln2 = 0.693147180559945309f;
  static constexpr int rows = 2;  // groupID and groupID + 8 of the m16n8 accumulator

  float row_max[rows];  // largest raw score seen so far (not scaled), -inf while no key has been seen
  float row_sum[rows];  // this lane's share of Σ exp2((s − row_max)·scale_log2); the quad's total after finalize()
  float scale_log2;     // softmax scale · log2(e)

  // No key seen yet.
  FAPROBE_DEVICE void reset(float scale_log2_of_scores) {
    scale_log2 = scale_log2_of_scores;
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) {
      row_max[r] = minus_infinity;
      row_sum[r] = 0.0f;
    }
  }

  // Folds a block of raw scores (masked keys -inf) into the state and overwrites each with its unnormalised
  // probability exp2((s − row_max)·scale_log2). Unless IsFirst, alpha[r] receives exp2((old row_max − new
  // row_max)·scale_log2), the factor for what the caller accumulated before this block (1 when the max did
  // not grow, 0 when no earlier key was seen); with IsFirst it is left alone. CheckInf: some row of the block
  // may see no key at all (the block went through a mask); without it every score must be finite.
  template <bool IsFirst, bool CheckInf, class Math = SoftmaxMath, int Tiles>
  FAPROBE_DEVICE void absorb(float (&scores)[Tiles][4], float (&alpha)[rows]) {
    float new_max[rows];
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) new_max[r] = IsFirst ? scores[0][2 * r] : row_max[r];
    FAPROBE_UNROLL
    for (int t = 0; t < Tiles; ++t) {
      FAPROBE_UNROLL
      for (int e = 0; e < 4; ++e) new_max[e / 2] = Math::max(new_max[e / 2], scores[t][e]);
    }
    float max_scaled[rows];
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) {
      new_max[r] = quad_max<Math>(new_max[r]);
      // The -inf row: the base 0 makes every exp2(-inf·scale − 0) = 0, never -inf − -inf.
      max_scaled[r] = (CheckInf && new_max[r] == minus_infinity ? 0.0f : new_max[r]) * scale_log2;
      if constexpr (!IsFirst) alpha[r] = Math::exp2(isa::fma_rn(row_max[r], scale_log2, -max_scaled[r]));
      row_max[r] = new_max[r];
    }
    // Two partial sums per row (even and odd tiles) halve the dependent chain of adds.
    float block_sum[2][rows] = {};
    FAPROBE_UNROLL
    for (int t = 0; t < Tiles; ++t) {
      FAPROBE_UNROLL
      for (int e = 0; e < 4; ++e) {
        scores[t][e] = Math::exp2(isa::fma_rn(scores[t][e], scale_log2, -max_scaled[e / 2]));
        block_sum[t % 2][e / 2] += scores[t][e];
      }
    }
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) {
      const float sum = block_sum[0][r] + block_sum[1][r];
      row_sum[r] = IsFirst ? sum : isa::fma_rn(alpha[r], row_sum[r], sum);
    }
  }

  // The row sums made whole: each lane's share reduced over its quad, once, after the last block.
  FAPROBE_DEVICE void finalize() {
    FAPROBE_UNROLL
    for (int r = 0; r < rows; ++r) row_sum[r] = quad_sum(row_sum[r]);
  }

  // After finalize(): the factor that turns the accumulator into the output row, 1/row_sum, or 0 for a row
  // that saw no key.
  FAPROBE_DEVICE float inverse_sum(int r) const { return row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f; }

  // After finalize(): the row's natural-log sum of exponentials of the scaled scores, ln Σ exp(scale·s) =
  // ln 2 · (row_max·scale_log2 + log2 row_sum); -inf for a row that saw no key.
  FAPROBE_DEVICE float log_sum_exp(int r) const {
    return row_sum[r] > 0.0f ? ln2 * (row_max[r] * scale_log2 + std::log2(row_sum[r])) : minus_infinity;
  }

  // Reductions over the four lanes of a quad (lane ^ 1, lane ^ 2 stay inside it).
  template <class Math = SoftmaxMath>
  static FAPROBE_DEVICE float quad_max(float value) {
    value = Math::max(value, isa::shfl_xor_sync(isa::full_warp_mask, value, 1));
    return Math::max(value, isa::shfl_xor_sync(isa::full_warp_mask, value, 2));
  }
  static FAPROBE_DEVICE float quad_sum(float value) {
    value += isa::shfl_xor_sync(isa::full_warp_mask, value, 1);
    return value + isa::shfl_xor_sync(isa::full_warp_mask, value, 2);
  }
};

}  // namespace faprobe::cuda
