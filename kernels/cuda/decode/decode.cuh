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
// blocks w, w + 4, ...): each warp runs FA-2's step on its own tiles — S = Q·Kᵀ with mma.sync m16n8k16, the
// online softmax in registers, O += P·V — synchronizing only within the warp. At the end the 4 warps'
// (O, lse) are merged through shared memory by the same merge the combine kernel uses.
//
// The copy pipeline: a warp's tiles K_j, V_j, K_j+1, V_j+1, ... (8 KiB each: block_k keys × d × 2 bytes) go
// round a ring of three slots in shared memory. Before reading a tile the warp waits with
// cp.async.wait_group 1 (the next tile stays in flight), then issues the tile after that into the slot it
// read last, so two tiles are in flight while one is read: V_j and K_j+1 during S = Q·K_jᵀ, K_j+1 and V_j+1
// during P·V_j. Before the ring a warp waited for each tile right after issuing it (wait_group 0): one tile
// in flight, none at the wait.
//
// K/V layouts: a contiguous cache ((batch, seq_k, kv_heads, d), or variable lengths packed at
// seq_starts[b]) is read row after row; a paged one is gathered (key k is pool row
// (block_table[b][k >> log2_page] << log2_page) | (k & page_mask): page sizes are powers of two, so shifts
// and masks, no division). The CTA loads its keys' slice of the block table into shared memory (up to 511
// pages a round; more pages take more rounds, each draining the ring once), and per key block each lane looks
// up one row (lane l: row l, and l + 32 at d 64) in it, which the lanes copying that row take with one
// shuffle per 16-byte chunk. Two kernels per instantiation (decode_ and decode_paged_), chosen at launch.
// Rows past an entry's end are never read (their shared rows are zeroed and their scores −inf).
//
// Napkin math (d 128, bf16; H200: 132 SMs, ~4.8 TB/s of HBM3e). Shared memory per CTA: Q 4.25 KiB, table
// 2 KiB, 4 warps × 3 slots × 8.5 KiB (rows padded by 16 bytes) = 102 KiB; 106.25 KiB, two CTAs per SM.
// Bytes in flight per SM: 8 warps × 2 tiles × 8 KiB = 128 KiB (64 KiB at a wait), against the ~36 KB that
// Little's law asks for 4.8 TB/s at ~1 µs of loaded latency (4.8 MB over 132 SMs); before the ring, 8 warps ×
// 8 KiB at most, each warp exposing a full latency per tile. Per key block a paged warp adds one
// shared-memory lookup per lane and one shuffle per 16-byte chunk (16 per tile and lane) to the contiguous
// walk; the table is 4 bytes per page, against 8 KiB of K and V per page of 16 keys.
//
// Costs per (batch entry, KV head): FLOPs 4 · group · seq_k · d (the tensor cores do 16/group times that:
// the padded rows); bytes 2 · seq_k · d · 2 of K and V read once, which is all that matters: decode is bound
// by HBM bandwidth (~1 FLOP per byte). Split-K adds splits · group · (d + 1) · 4 bytes of fp32 partials,
// written once and read once by the combine kernel: 129 KiB at b1 h32 d128 with 8 splits, against 537 MB
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
// d/8 · 4 fp32 (32, 64, 128), S block_k/8 · 4 (32, 16, 8). Shared memory: the Q tile, the block-table slice
// (table_entries pool pages, 2 KiB), and each warp's ring of kv_slots tiles: 110, 106 and 107 KiB for d 64,
// 128, 256, two CTAs per SM on an H100 or H200 (228 KiB, less 1 KiB per CTA) and one on an A100 (164 KiB).
// Untuned: chosen without a GPU; block_k, the warp count and the ring's depth are the first things to sweep
// on one (a fourth slot would cost the second CTA per SM).
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
  // A warp's tiles in shared memory: K_j, V_j, K_j+1, V_j+1, ... go round a ring of three, so that the two
  // tiles after the one being read are in flight while it is read.
  static constexpr int kv_slots = 3;
  static constexpr int tiles_in_flight = kv_slots - 1;
  // Pool pages of the block table held in shared memory at a time (paged caches): a CTA walks its keys in
  // rounds of at most table_entries − 1 pages' worth of keys (attend_body), one slice load per round; a
  // round that starts inside a page spans one page more.
  static constexpr int table_entries = 512;
  static constexpr std::size_t q_tile_bytes = std::size_t{group_rows} * row_stride * 2;
  static constexpr std::size_t kv_tile_bytes = std::size_t{block_k} * row_stride * 2;
  // Shared memory: the Q tile, the table slice, then each warp's ring; after the key loop the rings are
  // reused for the warps' partial outputs (fp32, group_rows × d each) and LSEs.
  static constexpr std::size_t q_offset = 0;
  static constexpr std::size_t table_offset = q_tile_bytes;
  static constexpr std::size_t warp_tiles_offset = table_offset + std::size_t{table_entries} * 4;
  static constexpr std::size_t slot_offset(unsigned warp, int slot) {
    return warp_tiles_offset + (std::size_t{warp} * kv_slots + static_cast<unsigned>(slot)) * kv_tile_bytes;
  }
  static constexpr std::size_t partial_o_offset = warp_tiles_offset;
  static constexpr std::size_t partial_lse_offset = partial_o_offset + std::size_t{warps} * group_rows * HeadDim * 4;
  static constexpr std::size_t shared_bytes = warp_tiles_offset + std::size_t{warps} * kv_slots * kv_tile_bytes;

  static_assert(partial_lse_offset + std::size_t{warps} * group_rows * 4 <= shared_bytes,
                "the warps' partial outputs fit where their tiles were");
  static_assert(block_k % 16 == 0 && block_k <= 64, "key blocks in whole k-steps of P·V; a tile's rows in two lanes' registers at most");
  static_assert(warp_tiles_offset % 16 == 0, "cp.async and ldmatrix rows are 16-byte aligned");
  static_assert(shared_bytes <= 163 * 1024, "sm_80 allows 163 KiB of shared memory per block (opt-in)");
  static_assert(2 * (shared_bytes + 1024) <= 228 * 1024, "two CTAs per SM on sm_90 (228 KiB, 1 KiB reserved per CTA)");
};

// The threads of the combine kernel: one CTA per (query head, batch entry), each thread some columns.
inline constexpr int combine_threads = 128;

// The planted defects of the tests (tests/test_emu_decode.cpp, and the losses of speed compiled by
// tests/static_checks_planted_speed.cu for test_static_checks); production code instantiates none.
enum class Defect {
  none,
  no_rescale,          // O is not multiplied by e^{m − m_new} when the row max grows
  ignore_block_table,  // a paged cache read as if its pages were in order (page = key / page_size)
  longest_length,      // every batch entry reads seq_k keys (the longest), past its own end
  unweighted_combine,  // partial outputs averaged without the exp(lse_split − lse) weights
  // Right results, lost speed (caught by the static checks of the SASS, not by the checker):
  drain_every_tile,    // cp.async.wait_group 0 before each tile: one tile in flight, as before the ring
  divided_page,        // the page of a key by division and remainder by the runtime page size
  global_table,        // the block table read from global memory for every 16-byte chunk
};

// AttentionParams (q, k, v, o, lse, shapes, scale_log2; causal is moot with one query row, which sees every
// key) with K and V as storage rows, plus the layout and split-K's partials.
struct Params : AttentionParams {
  GlobalSpan<const std::int32_t> seq_starts;   // batch + 1: entry b's keys are logical rows [s[b], s[b + 1])
  GlobalSpan<const std::int32_t> block_table;  // (batch, pages_per_seq) pool pages; size 0: contiguous
  GlobalSpan<float> partial_o;                 // (splits, batch, heads, d) fp32; size 0 when splits = 1
  GlobalSpan<float> partial_lse;               // (splits, batch, heads)
  int page_size = 0, pages_per_seq = 0;
  int log2_page_size = 0;  // page_size = 1 << log2_page_size (a power of two: shifts and masks, no division)
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

// The storage rows of one key block (block_k keys), from which each lane's 16-byte chunks are copied. A
// contiguous cache's rows follow each other from first_row. A paged one's are gathered: lane l holds the
// storage row of the block's row l (and l + 32 when block_k is 64), looked up once per key block in the CTA's
// slice of the block table (one shared-memory load per lane, a broadcast: the block's keys lie in at most
// block_k / page_size pages), and the lanes that copy a row take it from that lane with one shuffle.
template <int BlockK>
struct BlockRows {
  static constexpr int per_lane = (BlockK + 31) / 32;
  unsigned first_row = 0;             // contiguous
  unsigned paged_row[per_lane] = {};  // paged: rows lane and lane + 32 of the block
};

// The attention kernel body, run by each of Traits::threads threads of a CTA; grid (splits, kv_heads ·
// head_chunks, batch), Traits::shared_bytes of dynamic shared memory; kPaged: K and V through p.block_table.
// With p.splits = 1 it writes O (and the LSE); otherwise the CTA's normalized partial output and LSE for the
// combine kernel.
template <class Element, int HeadDim, bool kPaged, Defect kDefect = Defect::none>
FAPROBE_DEVICE void attend_body(const Params& p) {
  using T = Traits<HeadDim>;
  using Rows = BlockRows<T::block_k>;
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

  const std::size_t kv_row_elements = std::size_t{static_cast<unsigned>(p.kv_heads)} * HeadDim;
  const std::size_t kv_head_offset = std::size_t{static_cast<unsigned>(kv_head)} * HeadDim;
  // Paged: key k of the entry is row (table[k >> log2_page] << log2_page) | (k & page_mask) of the pool.
  const int log2_page = p.log2_page_size;
  const int page_mask = (1 << log2_page) - 1;
  const unsigned table_row = static_cast<unsigned>(b) * static_cast<unsigned>(p.pages_per_seq);  // entry b's pages
  const SharedSpan<std::int32_t> table = isa::shared_array<std::int32_t>(T::table_offset, T::table_entries);
  int round_end = key_end;   // the keys of the current round end here (see the round loop below)
  int slice_first_page = 0;  // the entry's page that table[0] holds in this round

  // The storage rows of the key block starting at key key0 (of the entry), for every lane (BlockRows).
  auto block_rows = [&](int key0) {
    Rows block;
    if constexpr (!kPaged) {
      block.first_row = static_cast<unsigned>(entry_start + key0);
    } else if constexpr (kDefect != Defect::global_table) {
      FAPROBE_UNROLL
      for (int half = 0; half < Rows::per_lane; ++half) {
        const int row = half * isa::warp_size + static_cast<int>(lane);
        const int key = key0 + row;
        if (row >= T::block_k || key >= round_end) continue;  // a row that is not copied
        if constexpr (kDefect == Defect::divided_page) {
          const int page = table[static_cast<unsigned>(key / p.page_size - slice_first_page)];
          block.paged_row[half] = static_cast<unsigned>(page * p.page_size + key % p.page_size);
        } else {
          const int page = table[static_cast<unsigned>((key >> log2_page) - slice_first_page)];
          block.paged_row[half] = static_cast<unsigned>(page << log2_page) | static_cast<unsigned>(key & page_mask);
        }
      }
    }
    return block;
  };
  // Copies the key block at key0 (its storage rows in `block`) of K or V into the warp's tile at
  // shared_offset, one cp.async per 16-byte chunk; rows past the round's end are zeroed instead.
  auto load_block = [&](std::size_t shared_offset, GlobalSpan<const std::uint16_t> source, const Rows& block, int key0) {
    const int valid_rows = round_end - key0;
    auto row_base = [&](int row) {
      unsigned storage_row;
      if constexpr (!kPaged) {
        storage_row = block.first_row + static_cast<unsigned>(row);
      } else if constexpr (kDefect == Defect::global_table) {
        const int key = key0 + row;
        storage_row = row < valid_rows
                          ? static_cast<unsigned>(p.block_table[table_row + static_cast<unsigned>(key >> log2_page)] << log2_page) |
                                static_cast<unsigned>(key & page_mask)
                          : 0u;
      } else {
        const int half = row / isa::warp_size;  // a constant once the copy's loop is unrolled
        storage_row = isa::shfl_sync(isa::full_warp_mask, block.paged_row[half], static_cast<unsigned>(row % isa::warp_size));
      }
      return std::size_t{storage_row} * kv_row_elements + kv_head_offset;
    };
    tiles::load_rows<T::block_k, T, isa::warp_size>(shared_offset, source, row_base, valid_rows, lane);
  };
  // The wait for the oldest of the warp's tiles in flight: the ring keeps one more in flight while it is read.
  auto wait_oldest_tile = [] {
    if constexpr (kDefect == Defect::drain_every_tile) {
      isa::cp_async_wait_group<0>();
    } else {
      isa::cp_async_wait_group<T::tiles_in_flight - 1>();
    }
  };

  // Q: the CTA's query heads as the rows of one m16 tile (rows past `rows` zero).
  const std::size_t q_base = (std::size_t{static_cast<unsigned>(b)} * static_cast<unsigned>(p.heads) + static_cast<unsigned>(head0)) * HeadDim;
  tiles::load_tile<T::group_rows, T>(T::q_offset, p.q, q_base, HeadDim, 0, rows, thread);
  isa::cp_async_commit_group();

  float acc[1][dim_tiles][4] = {};  // this lane's share of the warp's unnormalized O
  OnlineSoftmax softmax;
  softmax.reset(p.scale_log2);
  // A contiguous CTA walks its keys in one round. A paged one walks them in rounds of at most
  // table_entries − 1 pages, loading the round's slice of the block table into shared memory first: one
  // round per CTA unless its keys span more pages (more than 7936 keys at page 16). A round is a whole number
  // of warps · block_k keys, so that each warp reads the same key blocks in the same order as over a
  // contiguous cache, and paged results are bit for bit the contiguous ones.
  constexpr int round_multiple = T::warps * T::block_k;
  const int round_keys = kPaged ? ((T::table_entries - 1) << log2_page) & ~(round_multiple - 1) : key_end - key_begin;
  for (int round_begin = key_begin; round_begin < key_end; round_begin = round_end) {
    round_end = key_end - round_begin > round_keys ? round_begin + round_keys : key_end;
    if constexpr (kPaged) {
      isa::sync_threads();  // every warp is done with the previous round's slice
      slice_first_page = round_begin >> log2_page;
      const int pages = ((round_end - 1) >> log2_page) - slice_first_page + 1;
      for (int i = static_cast<int>(thread); i < pages; i += T::threads) {
        const unsigned page = static_cast<unsigned>(slice_first_page + i);
        table[static_cast<unsigned>(i)] = kDefect == Defect::ignore_block_table
                                              ? static_cast<std::int32_t>(table_row + page)  // the pool's pages in order
                                              : p.block_table[table_row + page];
      }
    }
    isa::cp_async_wait_group<0>();  // Q's copies (in the first round) have landed
    isa::sync_threads();            // the Q tile and the table slice, written by every thread, are complete

    // The warp's key blocks of the round, warp, warp + 4, ...: K_j, V_j, K_j+1, V_j+1, ... go round the ring
    // of three tiles (slot_k, slot_v, slot_free); each step waits for its tile with the next one still in
    // flight, then issues the one after it into the slot read by the step before.
    // A warp issues its copies whether or not a next block exists (then every row is past the round's end and
    // zeroed in a slot nobody reads): no branch around the copies, so that ptxas sees the warp converged at
    // their shuffles and guards none of them (BRA.DIV).
    const int round_blocks = (round_end - round_begin + T::block_k - 1) / T::block_k;
    std::size_t slot_k = T::slot_offset(warp, 0), slot_v = T::slot_offset(warp, 1), slot_free = T::slot_offset(warp, 2);
    int block = static_cast<int>(warp);
    const int first_key0 = block < round_blocks ? round_begin + block * T::block_k : round_end;
    Rows next_rows = block_rows(first_key0);
    load_block(slot_k, p.k, next_rows, first_key0);
    isa::cp_async_commit_group();
    load_block(slot_v, p.v, next_rows, first_key0);
    isa::cp_async_commit_group();
    for (; block < round_blocks; block += T::warps) {
      const int key0 = round_begin + block * T::block_k;
      const int next_key0 = block + T::warps < round_blocks ? key0 + T::warps * T::block_k : round_end;
      wait_oldest_tile();  // this lane's copies of K_j have landed (V_j may still be in flight)
      isa::sync_warp();    // every lane's have; every lane is done reading V_j-1, whose slot is refilled now
      next_rows = block_rows(next_key0);
      load_block(slot_free, p.k, next_rows, next_key0);
      isa::cp_async_commit_group();

      float scores[1][key_tiles][4] = {};
      tiles::warp_scores<Element, T>(scores, T::q_offset, slot_k, lane);
      if (key0 + T::block_k > round_end) tiles::apply_mask(scores, key0, 0, round_end, false, 0, lane);  // only the keys' end

      wait_oldest_tile();  // this lane's copies of V_j have landed (K_j+1 may still be in flight)
      isa::sync_warp();    // every lane's have; every lane is done reading K_j, whose slot is refilled now
      load_block(slot_k, p.v, next_rows, next_key0);
      isa::cp_async_commit_group();

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
      tiles::warp_pv<Element, T>(acc, p_frag, slot_v, 0, lane);

      const std::size_t read_v = slot_v;  // K_j+1 is in the free slot, V_j+1 where K_j was
      slot_v = slot_k;
      slot_k = slot_free;
      slot_free = read_v;
    }
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
