// The online softmax of one query row (Milakov & Gimelshein 2018), shared by cpu.tiled, cpu.decode and
// cpu.decode-splitk: the running row_max and row_sum of the scores seen so far, the factor by which the
// caller rescales its output accumulator when row_max grows, the final normalisation, and the merge of two
// partial states of the same row (the split-K combine). It is associative: folding the keys in any blocks,
// or merging states computed on disjoint key ranges, gives the full softmax up to rounding.
//
// The accumulator itself stays with the caller (a row of an Eigen tile, or a head_dim vector), because
// callers keep it in different shapes; this struct only says by how much to scale it.
//
// A row that has seen no key (every score -inf, or no score at all) keeps row_max = -inf and row_sum = 0;
// exp(-inf - -inf) would be NaN, so absorb() never subtracts a -inf maximum, and inverse_sum() is 0 for it,
// which makes the output row zeros.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "model/eigen.hpp"

namespace faprobe::cpu {

struct OnlineSoftmax {
  static constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  static constexpr float kMinWeight = std::numeric_limits<float>::min();  // smallest normal float

  float row_max = kMinusInf;  // largest score seen so far (-inf while no key has been seen)
  float row_sum = 0.0f;       // sum over seen keys of exp(score - row_max)

  // Folds `count` scores (already multiplied by the softmax scale; masked keys are -inf) into the state,
  // overwriting them with their unnormalised probabilities exp(score - row_max). Returns alpha, the factor
  // by which the caller must multiply what it accumulated before this block (1 when row_max did not grow,
  // 0 for the first block that sees a key), before adding probabilities · V.
  float absorb(float* scores, std::int64_t count) {
    if (count == 0) return 1.0f;
    Eigen::Map<Eigen::ArrayXf> block(scores, Eigen::Index(count));
    const float new_max = std::max(row_max, block.maxCoeff());
    if (new_max == kMinusInf) {  // still no key: nothing to add, and exp(-inf - -inf) must not happen
      block.setZero();
      return 1.0f;
    }
    const float alpha = std::exp(row_max - new_max);  // exp(-inf) = 0 on the first block that sees a key
    block = (block - new_max).exp();
    // Eigen's vectorised exp clamps its argument, so exp(-inf) comes out as ~2.6e-39, not 0. A weight below
    // FLT_MIN (a key 87 nats under the row's max) is zero in every sum it joins; flushing it makes masked
    // keys weigh exactly 0 and keeps denormals out of P·V. (This loop vectorises; Eigen's select does not.)
    for (std::int64_t j = 0; j < count; ++j) scores[j] = scores[j] < kMinWeight ? 0.0f : scores[j];
    row_sum = row_sum * alpha + block.sum();
    row_max = new_max;
    return alpha;
  }

  // The factor that turns the accumulator into the output row: 1/row_sum, or 0 for a row that saw no key.
  float inverse_sum() const { return row_sum > 0.0f ? 1.0f / row_sum : 0.0f; }

  // Factors applied to two partial accumulators before they are added, so that the sum is the accumulator
  // of the merged state.
  struct MergeFactors {
    float self;
    float other;
  };

  // Merges the state of the same row over another, disjoint key range into this one. Returns the factors
  // for this state's accumulator and for the other's: merged_acc = self·acc + other·other_acc.
  MergeFactors merge(const OnlineSoftmax& other) {
    const float new_max = std::max(row_max, other.row_max);
    if (new_max == kMinusInf) return {1.0f, 0.0f};  // neither saw a key: both accumulators are zero
    const MergeFactors factors{std::exp(row_max - new_max), std::exp(other.row_max - new_max)};
    row_sum = row_sum * factors.self + other.row_sum * factors.other;
    row_max = new_max;
    return factors;
  }
};

}  // namespace faprobe::cpu
