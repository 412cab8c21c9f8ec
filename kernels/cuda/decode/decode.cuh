// cuda.decode and cuda.decode-splitk: decode attention (one query row per sequence) on the instruction
// layer, compiled by nvcc for sm_80 / sm_90a (decode_<dtype>_hdim<d>.cu) and by the host compiler under the
// emulator (decode_emulated.cpp). One kernel body serves both; they differ in how many CTAs share a row's keys.
//
// The idea (the seed's "FlashDecoding" section, Dao et al.'s Flash-Decoding): in decode a (batch, head) has
// one query row, so a prefill-style grid (one CTA per query block) has only batch · kv_heads CTAs — 32 on a
// 132-SM GPU at batch 1 — each walking every key. Split-K cuts each entry's keys into `splits` ranges, one
// CTA each, every CTA keeping its own running max and sum; a second kernel merges the partial outputs with
// the online softmax's rescaling, weighting each by exp(lse_split − lse). With splits = 1 the first kernel
// writes O directly: that is cuda.decode, the query-only parallelization the seed calls poor at long context.
//
// Tiling: a CTA is (key split, KV head and a chunk of at most 16 of its query heads, batch entry). The
// group's query heads are the 16 rows of one m16 tile (GQA packed into M, as flash-attention's decode path
// does with seqlen_q · ngroups; unused rows are zeros and never written), so every K and V byte is read once
// per group, not once per query head. The 4 warps split the CTA's keys (blocks of block_k keys, warp w taking
// blocks w, w + 4, ...): each warp owns a K and a V tile in shared memory and runs FA-2's step on them —
// S = Q·Kᵀ with mma.sync m16n8k16, the online softmax in registers, O += P·V — with its own copies in
// flight (V_j fetched during S = Q·K_jᵀ, K_{j+4} during P·V_j), synchronizing only within the warp. At the
// end the 4 warps' (O, lse) are merged through shared memory by the same merge the combine kernel uses.
//
// K/V layouts: rows are gathered through row addresses, so one body reads a contiguous cache ((batch,
// seq_k, kv_heads, d), or variable lengths packed at seq_starts[b]) and a paged one (row = block_table[b]
// [key / page_size] · page_size + key % page_size): a page lookup per copied row, cached in L1. Rows past an
// entry's end are never read (their shared rows are zeroed and their scores −inf).
//
// Costs per (batch entry, KV head): FLOPs 4 · group · seq_k · d (the tensor cores do 16/group times that:
// the padded rows); bytes 2 · seq_k · d · 2 of K and V read once, which is all that matters: decode is bound
// by HBM bandwidth (~1 FLOP per byte). Split-K adds splits · group · (d + 1) · 4 bytes of fp32 partials,
// written once and read once by the combine kernel: 256 KiB at b1 h32 d128 with 16 splits, against 537 MB
// of K and V at seq 32k.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/common/attention_params.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/spans.hpp"
#include "cuda/common/warp_tiles.cuh"
#include "cuda/decode/splits.hpp"

namespace faprobe::cuda::decode {

// Tile sizes per head_dim. block_k is chosen so that a warp's K (and V) tile is 8 KiB whatever head_dim:
// the bytes one warp has in flight per copy (d 64: 64 keys, 128: 32, 256: 16). Registers per lane: O is
// d/8 · 4 fp32 (32, 64, 128), S block_k/8 · 4 (32, 16, 8). Shared memory is the Q tile plus 4 × (K + V):
// 38, 72 and 74 KiB for d 64, 128, 256 — two or three CTAs per SM on an H200 (228 KiB).
// Untuned: chosen without a GPU; block_k and the warp count are the first things to sweep on one.
template <int HeadDim>
struct Traits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "cuda.decode is instantiated for d 64, 128, 256");
  static constexpr int head_dim = HeadDim;
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  static constexpr int min_ctas_per_sm = 1;
  static constexpr int group_rows = decode::group_rows;
  static constexpr int block_q = group_rows;  // the query rows of a CTA, as the prefill kernels call them
  static constexpr int block_k = 8192 / (HeadDim * 2);
  static constexpr int row_stride = HeadDim + 8;  // halves per shared row: +16 bytes (warp_tiles.cuh)
  static constexpr std::size_t q_tile_bytes = std::size_t{group_rows} * row_stride * 2;
  static constexpr std::size_t kv_tile_bytes = std::size_t{block_k} * row_stride * 2;
  // Shared memory: the Q tile, then each warp's K and V tiles; after the key loop the warps' tiles are
  // reused for their partial outputs (fp32, group_rows × d each) and LSEs.
  static constexpr std::size_t q_offset = 0;
  static constexpr std::size_t warp_tiles_offset = q_tile_bytes;
  static constexpr std::size_t k_offset(unsigned warp) { return warp_tiles_offset + warp * 2 * kv_tile_bytes; }
  static constexpr std::size_t v_offset(unsigned warp) { return k_offset(warp) + kv_tile_bytes; }
  static constexpr std::size_t partial_o_offset = warp_tiles_offset;
  static constexpr std::size_t partial_lse_offset = partial_o_offset + std::size_t{warps} * group_rows * HeadDim * 4;
  static constexpr std::size_t shared_bytes = warp_tiles_offset + std::size_t{warps} * 2 * kv_tile_bytes;

  static_assert(partial_lse_offset + std::size_t{warps} * group_rows * 4 <= shared_bytes,
                "the warps' partial outputs fit where their tiles were");
  static_assert(block_k % 16 == 0, "key blocks in whole k-steps of P·V");
  static_assert(shared_bytes <= 163 * 1024, "sm_80 allows 163 KiB of shared memory per block (opt-in)");
};

// The threads of the combine kernel: one CTA per (query head, batch entry), each thread some columns.
inline constexpr int combine_threads = 128;

// The planted defects of the tests (tests/test_emu_decode.cpp); production code instantiates none.
enum class Defect {
  none,
  no_rescale,          // O is not multiplied by e^{m − m_new} when the row max grows
  ignore_block_table,  // a paged cache read as if its pages were in order (page = key / page_size)
  longest_length,      // every batch entry reads seq_k keys (the longest), past its own end
  unweighted_combine,  // partial outputs averaged without the exp(lse_split − lse) weights
};

// AttentionParams (q, k, v, o, lse, shapes, scale_log2; causal is moot with one query row, which sees every
// key) with K and V as storage rows, plus the layout and split-K's partials.
struct Params : AttentionParams {
  GlobalSpan<const std::int32_t> seq_starts;   // batch + 1: entry b's keys are logical rows [s[b], s[b + 1])
  GlobalSpan<const std::int32_t> block_table;  // (batch, pages_per_seq) pool pages; size 0: contiguous
  GlobalSpan<float> partial_o;                 // (splits, batch, heads, d) fp32; size 0 when splits = 1
  GlobalSpan<float> partial_lse;               // (splits, batch, heads)
  int page_size = 0, pages_per_seq = 0;
  int splits = 1;
  int head_chunks = 1;  // ceil(group / 16): CTAs per KV head along grid y
};

// Merges `count` partial results of one output element, each an output normalized over its own keys and
// the natural-log LSE of those keys (−inf: saw no key): the result is Σ w_i o_i / Σ w_i with
// w_i = exp(lse_i − max lse), and lse = max lse + ln Σ w_i. Shared by the warps' merge at the end of the
// attention kernel and by the combine kernel across splits. With kUnweighted (a planted defect) w_i = 1.
template <bool kUnweighted = false, class LseAt, class OutputAt>
FAPROBE_DEVICE void merge_partials(int count, LseAt lse_at, OutputAt output_at, float& output, float& lse) {
  constexpr float log2e = 1.4426950408889634f;
  float max_lse = OnlineSoftmax::minus_infinity;
  for (int i = 0; i < count; ++i) max_lse = lse_at(i) > max_lse ? lse_at(i) : max_lse;
  output = 0.0f;
  lse = OnlineSoftmax::minus_infinity;
  if (max_lse == OnlineSoftmax::minus_infinity) return;  // no partial saw a key: zeros, never NaN
  float weight_sum = 0.0f, weighted = 0.0f;
  for (int i = 0; i < count; ++i) {
    const float weight = kUnweighted ? (lse_at(i) == OnlineSoftmax::minus_infinity ? 0.0f : 1.0f)
                                     : isa::ex2_approx((lse_at(i) - max_lse) * log2e);
    weight_sum += weight;
    weighted += weight * output_at(i);
  }
  output = weighted / weight_sum;
  lse = max_lse + std::log(weight_sum);
}

// The attention kernel body, run by each of Traits::threads threads of a CTA; grid (splits, kv_heads ·
// head_chunks, batch), Traits::shared_bytes of dynamic shared memory. With p.splits = 1 it writes O (and the
// LSE); otherwise the CTA's normalized partial output and LSE for the combine kernel.
template <class Element, int HeadDim, Defect kDefect = Defect::none>
FAPROBE_DEVICE void attend_body(const Params& p) {
  using T = Traits<HeadDim>;
  constexpr int key_tiles = T::block_k / 8;  // 8-key n-tiles of S = Q·Kᵀ
  constexpr int dim_tiles = HeadDim / 8;     // 8-column n-tiles of O
  const unsigned thread = isa::thread_linear_idx();
  const unsigned warp = thread / isa::warp_size;
  const unsigned lane = thread % isa::warp_size;
  const int split = static_cast<int>(isa::block_idx_x());
  const int kv_head = static_cast<int>(isa::block_idx_y()) / p.head_chunks;
  const int chunk = static_cast<int>(isa::block_idx_y()) % p.head_chunks;
  const int b = static_cast<int>(isa::block_idx_z());
  const int group = p.heads / p.kv_heads;
  const int head0 = kv_head * group + chunk * T::group_rows;  // the CTA's first query head
  const int rows = group - chunk * T::group_rows < T::group_rows ? group - chunk * T::group_rows : T::group_rows;

  // The entry's keys and this split's share of them, in whole key blocks.
  const int entry_start = p.seq_starts[static_cast<unsigned>(b)];
  const int entry_keys = kDefect == Defect::longest_length ? p.seq_k : p.seq_starts[static_cast<unsigned>(b) + 1] - entry_start;
  const int per_split = ((entry_keys + p.splits - 1) / p.splits + T::block_k - 1) / T::block_k * T::block_k;
  const int key_begin = split * per_split < entry_keys ? split * per_split : entry_keys;
  const int key_end = key_begin + per_split < entry_keys ? key_begin + per_split : entry_keys;
  const int key_blocks = (key_end - key_begin + T::block_k - 1) / T::block_k;

  const std::size_t kv_row_elements = std::size_t{static_cast<unsigned>(p.kv_heads)} * HeadDim;
  const std::size_t kv_head_offset = std::size_t{static_cast<unsigned>(kv_head)} * HeadDim;
  // Element offset of key `key` (of this entry) in K or V: contiguous, or through the block table.
  auto key_row_base = [&](int key) {
    std::size_t row;
    if (p.block_table.size() == 0) {
      row = static_cast<unsigned>(entry_start + key);
    } else {
      const int page_index = key / p.page_size;
      const int page = kDefect == Defect::ignore_block_table
                           ? b * p.pages_per_seq + page_index  // as if the pool held every entry's pages in order
                           : p.block_table[static_cast<unsigned>(b * p.pages_per_seq + page_index)];
      row = std::size_t{static_cast<unsigned>(page)} * static_cast<unsigned>(p.page_size) +
            static_cast<unsigned>(key % p.page_size);
    }
    return row * kv_row_elements + kv_head_offset;
  };
  // Copies key block `block` of the CTA's range into this warp's tile at shared_offset.
  auto load_key_block = [&](std::size_t shared_offset, GlobalSpan<const std::uint16_t> source, int block) {
    const int key0 = key_begin + block * T::block_k;
    tiles::load_rows<T::block_k, T, isa::warp_size>(
        shared_offset, source, [&](int row) { return key_row_base(key0 + row); }, key_end - key0, lane);
  };

  // Q: the CTA's query heads as the rows of one m16 tile (rows past `rows` zero).
  const std::size_t q_base = (std::size_t{static_cast<unsigned>(b)} * static_cast<unsigned>(p.heads) + static_cast<unsigned>(head0)) * HeadDim;
  tiles::load_tile<T::group_rows, T>(T::q_offset, p.q, q_base, HeadDim, 0, rows, thread);
  if (static_cast<int>(warp) < key_blocks) load_key_block(T::k_offset(warp), p.k, static_cast<int>(warp));
  isa::cp_async_commit_group();
  isa::cp_async_wait_group<0>();
  isa::sync_threads();  // the Q tile, copied by every thread, is complete before any warp reads it

  float acc[1][dim_tiles][4] = {};  // this lane's share of the warp's unnormalized O
  OnlineSoftmax softmax;
  softmax.reset(p.scale_log2);
  for (int block = static_cast<int>(warp); block < key_blocks; block += T::warps) {
    const int key0 = key_begin + block * T::block_k;
    isa::cp_async_wait_group<0>();  // this lane's copies of K_j have landed
    isa::sync_warp();  // every lane's have (ldmatrix reads rows other lanes copied); V_{j-4} is no longer read
    load_key_block(T::v_offset(warp), p.v, block);
    isa::cp_async_commit_group();

    float scores[1][key_tiles][4] = {};
    tiles::warp_scores<Element, T>(scores, T::q_offset, T::k_offset(warp), lane);
    if (key0 + T::block_k > key_end) tiles::apply_mask(scores, key0, 0, key_end, false, 0, lane);  // only the keys' end

    isa::cp_async_wait_group<0>();  // this lane's copies of V_j have landed
    isa::sync_warp();               // every lane's have; every lane is done reading K_j
    if (block + T::warps < key_blocks) {
      load_key_block(T::k_offset(warp), p.k, block + T::warps);
      isa::cp_async_commit_group();
    }

    float alpha[OnlineSoftmax::rows];
    softmax.absorb</*IsFirst=*/false, /*CheckInf=*/true>(scores[0], alpha);
    if constexpr (kDefect != Defect::no_rescale) {
      FAPROBE_UNROLL
      for (int t = 0; t < dim_tiles; ++t) {
        FAPROBE_UNROLL
        for (int e = 0; e < 4; ++e) acc[0][t][e] *= alpha[e / 2];
      }
    }
    std::uint32_t p_frag[1][T::block_k / 16][4];
    tiles::probabilities_as_a<Element>(scores[0], p_frag[0]);
    tiles::warp_pv<Element, T>(acc, p_frag, T::v_offset(warp), 0, lane);
  }

  // --- Each warp's normalized O and LSE into shared memory (over its own tiles, once every warp is done
  // with them), then the 4 warps merged per output element. ---
  isa::cp_async_wait_group<0>();
  isa::sync_threads();  // every warp is done with its tiles, which now take the partial outputs
  softmax.finalize();   // each lane's share of its rows' sums, made whole over the quad
  const SharedSpan<float> partial_o =
      isa::shared_array<float>(T::partial_o_offset, std::size_t{T::warps} * T::group_rows * HeadDim);
  const SharedSpan<float> partial_lse = isa::shared_array<float>(T::partial_lse_offset, std::size_t{T::warps} * T::group_rows);
  FAPROBE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const unsigned row = lane / 4 + 8 * static_cast<unsigned>(r);
    const float inverse_sum = softmax.inverse_sum(r);
    const std::size_t row_base = (std::size_t{warp} * T::group_rows + row) * HeadDim;
    FAPROBE_UNROLL
    for (int t = 0; t < dim_tiles; ++t) {
      const std::size_t column = std::size_t{static_cast<unsigned>(t)} * 8 + (lane % 4) * 2;
      partial_o[row_base + column] = acc[0][t][2 * r] * inverse_sum;
      partial_o[row_base + column + 1] = acc[0][t][2 * r + 1] * inverse_sum;
    }
    if (lane % 4 == 0) partial_lse[std::size_t{warp} * T::group_rows + row] = softmax.log_sum_exp(r);
  }
  isa::sync_threads();  // every warp's partial is complete before the merge reads them all

  const std::size_t out_row0 = (std::size_t{static_cast<unsigned>(b)} * static_cast<unsigned>(p.heads) + static_cast<unsigned>(head0));
  for (int element = static_cast<int>(thread); element < rows * HeadDim; element += T::threads) {
    const int row = element / HeadDim, column = element % HeadDim;
    float output, lse;
    merge_partials(
        T::warps, [&](int w) { return partial_lse[static_cast<unsigned>(w * T::group_rows + row)]; },
        [&](int w) { return partial_o[(static_cast<std::size_t>(w) * T::group_rows + static_cast<unsigned>(row)) * HeadDim + static_cast<unsigned>(column)]; },
        output, lse);
    const std::size_t out_row = out_row0 + static_cast<unsigned>(row);
    if (p.splits == 1) {
      p.o[out_row * HeadDim + static_cast<unsigned>(column)] = Element::from_float(output);
      if (column == 0 && p.lse.size() != 0) p.lse[out_row] = lse;
    } else {
      const std::size_t partial_row = std::size_t{static_cast<unsigned>(split)} * static_cast<unsigned>(p.batch) * static_cast<unsigned>(p.heads) + out_row;
      p.partial_o[partial_row * HeadDim + static_cast<unsigned>(column)] = output;
      if (column == 0) p.partial_lse[partial_row] = lse;
    }
  }
}

// The combine kernel body (split-K's second step), combine_threads threads per CTA; grid (heads, batch): CTA
// (h, b) merges the splits' partial outputs of query head h of entry b into O (and the LSE).
template <class Element, int HeadDim, Defect kDefect = Defect::none>
FAPROBE_DEVICE void combine_body(const Params& p) {
  const std::size_t out_row = std::size_t{isa::block_idx_y()} * static_cast<unsigned>(p.heads) + isa::block_idx_x();
  const std::size_t split_stride = std::size_t{static_cast<unsigned>(p.batch)} * static_cast<unsigned>(p.heads);
  for (unsigned column = isa::thread_linear_idx(); column < HeadDim; column += combine_threads) {
    float output, lse;
    merge_partials<kDefect == Defect::unweighted_combine>(
        p.splits, [&](int s) { return p.partial_lse[static_cast<unsigned>(s) * split_stride + out_row]; },
        [&](int s) { return p.partial_o[(static_cast<unsigned>(s) * split_stride + out_row) * HeadDim + column]; },
        output, lse);
    p.o[out_row * HeadDim + column] = Element::from_float(output);
    if (column == 0 && p.lse.size() != 0) p.lse[out_row] = lse;
  }
}

}  // namespace faprobe::cuda::decode
