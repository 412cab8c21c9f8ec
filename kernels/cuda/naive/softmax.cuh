// cuda.naive's softmax: P = softmax(scale · S), row by row, over the fp32 scores S that cuBLAS wrote
// (batch·heads·seq_q rows of seq_k, contiguous), with the bottom-right causal mask applied by index (query
// row i of a seq_q × seq_k block sees keys j ≤ i + seq_k − seq_q; no mask tensor). P is written in fp32,
// fp16 or bf16, same layout; a row that sees no key is written as zeros, never NaN.
//
// Shape: one CTA per row (a grid-stride loop over rows when there are more rows than CTAs). Thread t of a
// CTA handles keys t, t + threads, t + 2·threads, ..., so every warp-wide access is coalesced. Two
// variants, chosen per launch from seq_k (softmax_launch_shape):
//  - cached, seq_k ≤ 16384: the CTA holds the row in registers, softmax_items_per_thread = 16 keys per
//    thread, threads = seq_k / 16 rounded up to whole warps (32..1024). One read of the visible keys, a
//    block max, the exponentials, a block sum, one write.
//  - streamed, seq_k > 16384: 512 threads. Pass 1 reads the visible keys once and keeps an online (max,
//    sum of 2^(t − max)) per thread, rescaling the sum when the max grows (one ex2 per key); then a block
//    max, and a block sum of the sums rescaled to it. Pass 2 reads the keys again and writes P.
// Block reductions (block_reduce): a warp butterfly (shfl.sync.bfly), one partial per warp in shared
// memory, a barrier, then every warp reduces the partials with the butterfly again. A one-warp CTA needs
// neither shared memory nor a barrier.
// Exponentials: exp(scale·s − max) = 2^(t − max_t) with t = s·scale_log2, scale_log2 = scale·log2(e)
// folded on the host and max_t the row's largest t; one ex2.approx.f32 each (PTX ISA "ex2": ~2 ulp).
//
// Bytes per row: reads 4·visible (masked keys are never read), writes dtype_bytes·seq_k (zeros included);
// the streamed variant reads the visible keys a second time (8 bytes per key instead of 4; L2 serves part
// of it: 132 SMs × 3 CTAs × 4·seq_k bytes in flight is 51 MB at 32k keys, the L2's size, 101 MB at 64k).
// Registers (ptxas, sm_90a): cached 53 per thread (~1100 threads per SM), streamed 40 (3 CTAs per SM).
// Expected: memory-bound; each thread issues 16 (cached) or 8 (streamed) loads before it uses any, 48-64 KB
// in flight per SM, about twice Little's law's ~30 KB for 4.8 TB/s at ~0.8 µs latency, so ~85-90 % of an
// H200's 4.8 TB/s (H100: 3.35) for the cached variant from seq_k 512 to 16k, and the streamed one ~60-70 %
// of that in keys/s (its second read).
// Seed table (batch 8, heads 32, seq 8192, causal, fp16): 34 GB read + 34 GB written, ~16 ms at 4.2 TB/s.
// Rejected: a shared-memory row cache for long rows (64k keys are 256 KB, above the 227 KB of an SM) and
// 16-byte vector loads (they need seq_k % 4 == 0 for aligned rows; they save instructions, not bytes).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"

namespace faprobe::cuda::naive {

// Planted defects, for the tests only (softmax_launch.hpp); production instantiates none.
enum class SoftmaxDefect {
  none,
  missing_barrier,    // the barrier between writing and reading the warps' partials is left out
  causal_off_by_one,  // a causal row sees one key too many (j ≤ i + seq_k − seq_q + 1)
};

struct SoftmaxParams {
  std::int64_t rows = 0;   // batch·heads·seq_q
  std::int64_t seq_q = 1;  // rows per (batch, head) block: row r is query r % seq_q
  std::int64_t seq_k = 1;  // keys per row
  bool causal = false;
  float scale_log2 = 0;  // scale · log2(e): exp(scale·s) = 2^(s·scale_log2)
};

inline constexpr int softmax_items_per_thread = 16;  // registers per thread for the cached row
inline constexpr unsigned softmax_max_threads = 1024;
inline constexpr std::int64_t softmax_cached_max_keys = std::int64_t{softmax_items_per_thread} * softmax_max_threads;
inline constexpr unsigned softmax_streamed_threads = 512;  // 4 CTAs per SM overlap one row's reductions
inline constexpr int softmax_streamed_unroll = 8;          // loads each thread issues before using them
// Shared memory: 32 max partials, then 32 sum partials (one per warp of a 1024-thread CTA).
inline constexpr std::size_t softmax_shared_bytes = 2 * 32 * sizeof(float);

// The launch of one softmax: variant, CTA size and grid.
struct SoftmaxLaunchShape {
  bool cached = true;
  unsigned threads = 32;
  unsigned blocks = 1;
};
// rows > 0; at most max_blocks CTAs (the rest loop in the grid stride).
inline SoftmaxLaunchShape softmax_launch_shape(std::int64_t rows, std::int64_t seq_k, unsigned max_blocks) {
  SoftmaxLaunchShape shape;
  shape.cached = seq_k <= softmax_cached_max_keys;
  if (shape.cached) {
    const std::int64_t threads = (seq_k + softmax_items_per_thread - 1) / softmax_items_per_thread;
    const std::int64_t warps = (threads + isa::warp_size - 1) / isa::warp_size;
    shape.threads = static_cast<unsigned>(warps < 1 ? 1 : warps) * isa::warp_size;
  } else {
    shape.threads = softmax_streamed_threads;
  }
  shape.blocks = static_cast<unsigned>(rows < std::int64_t{max_blocks} ? rows : std::int64_t{max_blocks});
  return shape;
}

namespace detail {

// The keys row `row` sees, a prefix [0, visible): all seq_k, or under the bottom-right causal mask those
// with j ≤ i + seq_k − seq_q for query i = row % seq_q, clamped to [0, seq_k].
template <SoftmaxDefect Defect>
FAPROBE_DEVICE std::int64_t visible_keys(const SoftmaxParams& params, std::int64_t row) {
  if (!params.causal) return params.seq_k;
  std::int64_t visible = row % params.seq_q + params.seq_k - params.seq_q + 1;
  if constexpr (Defect == SoftmaxDefect::causal_off_by_one) visible += 1;
  return visible < 0 ? 0 : (visible > params.seq_k ? params.seq_k : visible);
}

struct MaxOp {
  FAPROBE_DEVICE float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  FAPROBE_DEVICE float operator()(float a, float b) const { return a + b; }
};

// Every lane gets op over its warp's 32 values (shfl.sync.bfly with lane masks 16, 8, 4, 2, 1).
template <class Op>
FAPROBE_DEVICE float warp_reduce(float value, Op op) {
  for (unsigned lane_mask = isa::warp_size / 2; lane_mask > 0; lane_mask /= 2)
    value = op(value, isa::shfl_xor_sync(isa::full_warp_mask, value, lane_mask));
  return value;
}

// Every thread gets op over the CTA's values (the CTA is whole warps). partials holds one value per warp.
// Reusing the same partials for the next row needs no barrier at the end: max and sum use separate
// arrays, so a thread writes max partials again only after passing the sum's barrier, which every thread
// reaches after reading the max partials (and the same for the sum partials and the next max barrier).
template <SoftmaxDefect Defect, class Op>
FAPROBE_DEVICE float block_reduce(float value, Op op, float identity, SharedSpan<float> partials) {
  value = warp_reduce(value, op);
  const unsigned warps = isa::block_threads() / isa::warp_size;
  if (warps == 1) return value;
  const unsigned lane = isa::lane_id();
  if (lane == 0) partials[isa::warp_id()] = value;
  if constexpr (Defect != SoftmaxDefect::missing_barrier) {
    isa::sync_threads();  // every warp's partial is in shared memory before any warp reads them
  }
  return warp_reduce(lane < warps ? partials[lane] : identity, op);
}

// Writes zeros over a row that sees no key (the whole CTA takes this branch, so no barrier is skipped).
template <class Out>
FAPROBE_DEVICE void write_zero_row(GlobalSpan<typename Out::Storage> probs, std::size_t row_start,
                                   std::int64_t seq_k) {
  for (std::int64_t key = isa::thread_idx_x(); key < seq_k; key += isa::block_dim_x())
    probs[row_start + std::size_t(key)] = Out::from_float(0.0f);
}

}  // namespace detail

// The cached variant's kernel body: a 1-D CTA of softmax_launch_shape(...).threads threads
// (seq_k ≤ threads · softmax_items_per_thread), softmax_shared_bytes of shared memory.
template <class Out, SoftmaxDefect Defect = SoftmaxDefect::none>
FAPROBE_DEVICE void softmax_rows_cached(const SoftmaxParams& params, GlobalSpan<const float> scores,
                                        GlobalSpan<typename Out::Storage> probs) {
  constexpr int items = softmax_items_per_thread;
  const SharedSpan<float> max_partials = isa::shared_array<float>(0, 32);
  const SharedSpan<float> sum_partials = isa::shared_array<float>(32 * sizeof(float), 32);
  const unsigned tid = isa::thread_idx_x();
  const unsigned threads = isa::block_dim_x();
  for (std::int64_t row = isa::block_idx_x(); row < params.rows; row += isa::grid_dim_x()) {
    const std::size_t row_start = std::size_t(row) * std::size_t(params.seq_k);
    const std::int64_t visible = detail::visible_keys<Defect>(params, row);
    if (visible == 0) {
      detail::write_zero_row<Out>(probs, row_start, params.seq_k);
      continue;
    }
    // t[k] = s·scale_log2 of key tid + k·threads, -inf past the visible keys (2^-inf = 0 below). Key
    // indices are 32-bit here (seq_k ≤ 16384), which keeps the row's addresses within 64 registers.
    const auto visible_keys = static_cast<unsigned>(visible);
    const auto seq_k = static_cast<unsigned>(params.seq_k);
    float t[items];
    float row_max = -INFINITY;
    for (int k = 0; k < items; ++k) {
      const unsigned key = tid + unsigned(k) * threads;
      t[k] = key < visible_keys ? scores[row_start + key] * params.scale_log2 : -INFINITY;
      row_max = fmaxf(row_max, t[k]);
    }
    row_max = detail::block_reduce<Defect>(row_max, detail::MaxOp{}, -INFINITY, max_partials);
    float row_sum = 0.0f;
    for (int k = 0; k < items; ++k) {
      t[k] = isa::ex2_approx(t[k] - row_max);
      row_sum += t[k];
    }
    row_sum = detail::block_reduce<Defect>(row_sum, detail::SumOp{}, 0.0f, sum_partials);
    const float inv_sum = 1.0f / row_sum;  // row_sum ≥ 1: the maximum's own term is 2^0
    for (int k = 0; k < items; ++k) {
      const unsigned key = tid + unsigned(k) * threads;
      if (key < seq_k) probs[row_start + key] = Out::from_float(t[k] * inv_sum);
    }
  }
}

// The streamed variant's kernel body: a 1-D CTA of softmax_streamed_threads threads (any whole number of
// warps works), softmax_shared_bytes of shared memory; any seq_k.
template <class Out, SoftmaxDefect Defect = SoftmaxDefect::none>
FAPROBE_DEVICE void softmax_rows_streamed(const SoftmaxParams& params, GlobalSpan<const float> scores,
                                          GlobalSpan<typename Out::Storage> probs) {
  constexpr int unroll = softmax_streamed_unroll;
  const SharedSpan<float> max_partials = isa::shared_array<float>(0, 32);
  const SharedSpan<float> sum_partials = isa::shared_array<float>(32 * sizeof(float), 32);
  const std::int64_t tid = isa::thread_idx_x();
  const std::int64_t threads = isa::block_dim_x();
  for (std::int64_t row = isa::block_idx_x(); row < params.rows; row += isa::grid_dim_x()) {
    const std::size_t row_start = std::size_t(row) * std::size_t(params.seq_k);
    const std::int64_t visible = detail::visible_keys<Defect>(params, row);
    if (visible == 0) {
      detail::write_zero_row<Out>(probs, row_start, params.seq_k);
      continue;
    }
    // Pass 1: the thread's online max and sum of 2^(t − max) over its visible keys. Its first key of
    // each step is visible (the loop condition), so the max is finite from there on and later -inf
    // entries add 2^-inf = 0.
    float thread_max = -INFINITY;
    float thread_sum = 0.0f;
    for (std::int64_t first = tid; first < visible; first += threads * unroll) {
      float t[unroll];
      for (int u = 0; u < unroll; ++u) {
        const std::int64_t key = first + u * threads;
        t[u] = key < visible ? scores[row_start + std::size_t(key)] * params.scale_log2 : -INFINITY;
      }
      for (int u = 0; u < unroll; ++u) {
        if (t[u] > thread_max) {  // rescale the sum to the new max (0 · 2^-inf = 0 at the first key)
          thread_sum = thread_sum * isa::ex2_approx(thread_max - t[u]) + 1.0f;
          thread_max = t[u];
        } else {
          thread_sum += isa::ex2_approx(t[u] - thread_max);
        }
      }
    }
    const float row_max = detail::block_reduce<Defect>(thread_max, detail::MaxOp{}, -INFINITY, max_partials);
    // row_max is finite (visible > 0); a thread that saw no key adds 0 · 2^-inf = 0.
    const float row_sum = detail::block_reduce<Defect>(thread_sum * isa::ex2_approx(thread_max - row_max),
                                                       detail::SumOp{}, 0.0f, sum_partials);
    const float inv_sum = 1.0f / row_sum;
    // Pass 2: read the keys again, write P (zeros past the visible keys, without reading them).
    for (std::int64_t first = tid; first < params.seq_k; first += threads * unroll) {
      float t[unroll];
      for (int u = 0; u < unroll; ++u) {
        const std::int64_t key = first + u * threads;
        t[u] = key < visible ? scores[row_start + std::size_t(key)] * params.scale_log2 : -INFINITY;
      }
      for (int u = 0; u < unroll; ++u) {
        const std::int64_t key = first + u * threads;
        if (key < params.seq_k)
          probs[row_start + std::size_t(key)] = Out::from_float(isa::ex2_approx(t[u] - row_max) * inv_sum);
      }
    }
  }
}

}  // namespace faprobe::cuda::naive
