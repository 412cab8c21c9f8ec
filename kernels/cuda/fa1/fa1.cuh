// cuda.fa1: FlashAttention-1 (Dao et al. 2022, Algorithm 1) with the paper's parallelization, written once
// on the instruction layer: compiled by nvcc for sm_80 / sm_90a (fa1_<dtype>_hdim<d>.cu) and by the host
// compiler under the emulator (fa1_emulated.cpp).
//
// The idea: one CTA per (batch, head) walks the keys in blocks of block_k (OUTER loop, K_j and V_j loaded
// to shared memory once) and, for each, every query block of block_q = 64 rows (INNER loop). The running
// output O, row max m and row sum l of every query row live in an fp32 global-memory workspace between key
// blocks, and every step reads, updates and writes them, normalizing each time:
//   S = Q_i·K_jᵀ·scale,  m_new = max(m, rowmax(S)),  P = exp(S − m_new),  l_new = e^{m−m_new}·l + rowsum(P),
//   O ← diag(l_new)⁻¹ (diag(l)·e^{m−m_new}·O + P·V_j)
// which is the paper's line 12 with e^{m̃−m_new} folded into P (P̃ = exp(S − m̃), so e^{m̃−m_new}·P̃ = P).
// On the last key block a query row sees, O is written in the output dtype (and the LSE when asked).
//
// Tiling: 4 warps (128 threads), each owning 16 rows of the query block (one m16n8k16 row tile). Per
// (key block, query block) a warp computes S = Q·Kᵀ with mma.sync m16n8k16 (Q and K fragments by ldmatrix
// from shared memory), the online softmax (cuda/common/online_softmax.cuh), then P·V with P converted in
// registers to the A fragment and V read by ldmatrix.trans, 64 output columns at a time, each element
// combined with the workspace's O. K, V and Q tiles arrive by cp.async; the next query block's Q tile is
// prefetched into the other of two buffers while the current one is computed. Shared rows are padded by
// 8 halves (16 bytes), so the 8 rows one ldmatrix matrix reads start in 8 different 16-byte bank groups:
// conflict-free. Tile sizes per head_dim are in Traits with their reasons.
//
// Masks and edges: causal is bottom-right (row i sees keys j ≤ i + seq_k − seq_q). A warp skips a key
// block whose keys all lie right of its rows' diagonal (the CTA skips query blocks before the first row
// that sees the block's first key); index masking runs only on blocks that cross the diagonal or the end
// of the keys. Rows that see no key (the first seq_q − seq_k rows when seq_q > seq_k) are written as zeros
// by a prologue (the loop reaches them only inside a warp that also holds a row that sees a key, and then
// writes the same zeros). Loads past seq_q / seq_k are not issued; those shared rows are zeroed
// (a key past seq_k gets score -inf and, with its V row zero, weight exactly 0). GQA/MQA: query head h
// reads KV head h / (heads / kv_heads).
//
// Costs per (batch, head), with n_k = ceil(seq_k / block_k) key blocks: FLOPs 4·seq_q·seq_k·d (halved
// under causal); HBM bytes ≈ 2·seq_k·d·2 (K, V once) + n_k·seq_q·(2·d (Q) + 8·d + 16 (O, m, l read and
// written)). At the seed table's shape (b8 h32 s8192 d128, block_k 128) that is ~174 GB of HBM traffic,
// ~36 ms at the H200's 4.8 TB/s before the causal halving: FA-1 is bound by the O round trips through
// HBM, which FA-2's loop order removes. The grid is batch·heads CTAs, so the GPU is full only when that is
// several times the SM count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/attention_params.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/warp_tiles.cuh"

// A loop kept rolled on the GPU (its body indexes register arrays with inner, unrolled indices only).
#if defined(__CUDACC__)
#define FAPROBE_NO_UNROLL _Pragma("unroll 1")
#else
#define FAPROBE_NO_UNROLL
#endif

namespace faprobe::cuda::fa1 {

// Tile sizes per head_dim. block_q = 64: 4 warps × one 16-row mma tile. block_k is
// as large as the shared-memory budget and the score registers allow:
//   d = 64:  block_k 128: 54 KiB of shared memory; the score tile is 64 fp32 registers per lane (256
//            would be 128 and leave too few for the P and P·V fragments without spilling).
//   d = 128: block_k 128: 102 KiB: 1 CTA per SM on sm_80 (164 KiB per SM), 2 on sm_90 (228 KiB). Halving
//            block_k would double the O/m/l round trips through HBM, FA-1's dominant cost.
//   d = 256: block_k 64: 132 KiB; block_k 128 would need 198 KiB, over sm_80's 163 KiB per block opt-in
//            limit (sm_90 allows 227 KiB, but one tiling serves both).
// dim_chunk: P·V is computed 64 output columns at a time (32 fp32 accumulators per lane), each chunk combined
// with the workspace's O at once, so registers do not grow with head_dim.
template <int HeadDim>
struct Traits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "cuda.fa1 is instantiated for d 64, 128, 256");
  static constexpr int head_dim = HeadDim;
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  // __launch_bounds__'s minimum CTAs per SM: 1 lets ptxas use the registers it needs (191 to 228). With
  // only the thread count it aimed d = 64 at 3 CTAs per SM (168 registers) and spilled 16 bytes.
  static constexpr int min_ctas_per_sm = 1;
  static constexpr int rows_per_warp = 16;  // the m16n8k16 row tile
  static constexpr int block_q = warps * rows_per_warp;
  static constexpr int block_k = HeadDim <= 128 ? 128 : 64;
  static constexpr int dim_chunk = 64;
  static constexpr int row_stride = HeadDim + 8;  // halves per shared row: +16 bytes, see the file header
  static constexpr std::size_t q_tile_bytes = std::size_t{block_q} * row_stride * 2;
  static constexpr std::size_t kv_tile_bytes = std::size_t{block_k} * row_stride * 2;
  // Shared memory: Q buffers 0 and 1, then K, then V.
  static constexpr std::size_t q_offset(int buffer) { return q_tile_bytes * static_cast<std::size_t>(buffer); }
  static constexpr std::size_t k_offset = 2 * q_tile_bytes;
  static constexpr std::size_t v_offset = k_offset + kv_tile_bytes;
  static constexpr std::size_t shared_bytes = v_offset + kv_tile_bytes;

  static_assert(HeadDim % dim_chunk == 0 && HeadDim % 16 == 0, "head_dim in whole k-steps and P·V chunks");
  static_assert(block_k % 16 == 0, "key blocks in whole k-steps of P·V (and pairs of 8-key score tiles)");
  static_assert(block_q * HeadDim / 8 % threads == 0 && block_k * HeadDim / 8 % threads == 0,
                "every thread copies the same number of 16-byte chunks of a tile");
  static_assert(row_stride * 2 % 16 == 0, "ldmatrix and cp.async need 16-byte aligned shared rows");
  static_assert(shared_bytes <= 163 * 1024, "sm_80 allows 163 KiB of shared memory per block (opt-in)");
};

// The planted defects of the tests (tests/test_emu_fa1.cpp); production code instantiates none.
enum class Defect {
  none,
  no_rescale,       // O is not multiplied by e^{m − m_new} when the row max grows
  missing_barrier,  // no barrier between the tile loads and the warps that read them
};

// The kernel's arguments: the common ones (built and checked on the host by make_attention_params) and the
// fp32 workspace that carries O, m and l between key blocks (fa1_emulated.cpp's make_params).
struct Params : AttentionParams {
  GlobalSpan<float> o_acc;    // workspace (batch, heads, seq_q, d): the running, normalized O
  GlobalSpan<float> row_max;  // workspace (batch, heads, seq_q): m, the largest raw (unscaled) score
  GlobalSpan<float> row_sum;  // workspace (batch, heads, seq_q): l
};

namespace detail {

// Everything a warp's step needs about its CTA.
struct CtaView {
  std::size_t q_base, kv_base;        // element (b, 0, h or kv_head, 0) of Q/O and of K/V
  std::size_t q_seq_stride;           // heads·d: elements between consecutive rows of Q and O
  std::size_t state_base;             // row (b, h, 0) of the workspace's m, l, LSE; times d for O
  int diagonal;                       // seq_k − seq_q: row i sees keys j ≤ i + diagonal under causal
  int key_blocks;
};

// One warp's work on one (key block, query block): the 16 query rows q_row0.. of the tile in Q buffer
// q_offset against keys key0.. of the K and V tiles.
template <class Element, int HeadDim, Defect kDefect>
FAPROBE_DEVICE void warp_step(const Params& p, const CtaView& cta, int key_block, int q_row0, std::size_t q_offset,
                              unsigned warp, unsigned lane) {
  using T = Traits<HeadDim>;
  constexpr int key_tiles = T::block_k / 8;  // n-tiles of S = Q·Kᵀ
  const int key0 = key_block * T::block_k;
  if (q_row0 >= p.seq_q) return;  // the query block's tail: no rows for this warp
  const int last_row = q_row0 + T::rows_per_warp - 1 < p.seq_q ? q_row0 + T::rows_per_warp - 1 : p.seq_q - 1;
  if (p.causal && key0 > last_row + cta.diagonal) return;  // every key of the block is right of every row's diagonal
  int last_key_block = cta.key_blocks - 1;  // the last key block any row of this warp sees
  if (p.causal && (last_row + cta.diagonal) / T::block_k < last_key_block)
    last_key_block = (last_row + cta.diagonal) / T::block_k;
  const bool first = key_block == 0;  // every row that sees a key sees key block 0 first
  const bool last = key_block == last_key_block;
  const bool needs_mask =
      key0 + T::block_k > p.seq_k || (p.causal && key0 + T::block_k - 1 > q_row0 + cta.diagonal);

  const unsigned group = lane / 4;       // groupID of the mma fragments: rows group and group + 8
  const unsigned quad_lane = lane % 4;   // threadID_in_group: columns 2·quad_lane, +1 of each 8-wide tile
  const int tile_rows[1][2] = {{q_row0 + static_cast<int>(group), q_row0 + static_cast<int>(group) + 8}};  // one m-tile
  const int(&rows)[2] = tile_rows[0];

  // --- S = Q·Kᵀ (block_k/8 accumulators of 16x8), in log2 units, masked by index only where the block
  // crosses the diagonal or the keys' end. ---
  float tile_scores[1][key_tiles][4] = {};
  float(&scores)[key_tiles][4] = tile_scores[0];
  tiles::warp_scores<Element, T>(tile_scores, q_offset + std::size_t{warp} * T::rows_per_warp * T::row_stride * 2,
                                 T::k_offset, lane);
  if (needs_mask) tiles::apply_mask(tile_scores, key0, q_row0, p.seq_k, p.causal, cta.diagonal, lane);

  // --- Online softmax against the row state from the workspace (fresh on the first key block). The
  // softmax keeps each lane's share of the row sum: the carried sum is lane 0's share of its quad. ---
  OnlineSoftmax softmax;
  softmax.reset(p.scale_log2);
  float old_sum[2] = {0.0f, 0.0f};
  if (!first) {
    FAPROBE_UNROLL
    for (int r = 0; r < 2; ++r) {
      if (rows[r] < p.seq_q) {
        softmax.row_max[r] = p.row_max[cta.state_base + static_cast<unsigned>(rows[r])];
        old_sum[r] = p.row_sum[cta.state_base + static_cast<unsigned>(rows[r])];
        softmax.row_sum[r] = quad_lane == 0 ? old_sum[r] : 0.0f;
      }
    }
  }
  float alpha[2];
  softmax.absorb</*IsFirst=*/false, /*CheckInf=*/true>(scores, alpha);  // alpha = 0 where nothing was seen yet
  softmax.finalize();  // FA-1 needs the whole row sum after every block
  // O ← old_factor·O + new_factor·(P·V), i.e. diag(l_new)⁻¹ (diag(l)·e^{m−m_new}·O + P·V). Divisions, so that
  // a row the block adds nothing to keeps O exactly (l / l = 1).
  float old_factor[2], new_factor[2];
  FAPROBE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float rescale = kDefect == Defect::no_rescale ? 1.0f : alpha[r];
    old_factor[r] = softmax.row_sum[r] > 0.0f ? rescale * old_sum[r] / softmax.row_sum[r] : 0.0f;
    new_factor[r] = softmax.inverse_sum(r);
  }
  if (quad_lane == 0) {  // the four lanes of a quad hold the same row state; one writes it
    FAPROBE_UNROLL
    for (int r = 0; r < 2; ++r) {
      if (rows[r] >= p.seq_q) continue;
      const std::size_t state = cta.state_base + static_cast<unsigned>(rows[r]);
      if (!last) {
        p.row_max[state] = softmax.row_max[r];
        p.row_sum[state] = softmax.row_sum[r];
      } else if (p.lse.size() != 0) {
        p.lse[state] = softmax.log_sum_exp(r);
      }
    }
  }

  // --- P·V, dim_chunk columns at a time, each chunk combined with O at once. ---
  std::uint32_t p_frag[1][T::block_k / 16][4];
  tiles::probabilities_as_a<Element>(scores, p_frag[0]);
  FAPROBE_NO_UNROLL  // unrolled, ptxas overlaps the chunks and needs ~15 more registers (245 at d = 128)
  for (int chunk = 0; chunk < HeadDim / T::dim_chunk; ++chunk) {
    constexpr int dim_tiles = T::dim_chunk / 8;
    float acc[1][dim_tiles][4] = {};
    tiles::warp_pv<Element, T>(acc, p_frag, T::v_offset, chunk * T::dim_chunk, lane);
    FAPROBE_UNROLL
    for (int r = 0; r < 2; ++r) {
      if (rows[r] >= p.seq_q) continue;
      const std::size_t state_row = (cta.state_base + static_cast<unsigned>(rows[r])) * HeadDim;
      const std::size_t out_row = cta.q_base + static_cast<unsigned>(rows[r]) * cta.q_seq_stride;
      FAPROBE_UNROLL
      for (int t = 0; t < dim_tiles; ++t) {
        FAPROBE_UNROLL
        for (int c = 0; c < 2; ++c) {
          const std::size_t col = std::size_t{static_cast<unsigned>(chunk * T::dim_chunk + t * 8)} + quad_lane * 2 + c;
          float o = new_factor[r] * acc[0][t][2 * r + c];
          if (!first) o += old_factor[r] * p.o_acc[state_row + col];
          if (last) {
            p.o[out_row + col] = Element::from_float(o);
          } else {
            p.o_acc[state_row + col] = o;
          }
        }
      }
    }
  }
}

}  // namespace detail

// The kernel body, run by each of Traits::threads threads of a CTA; grid = batch·heads CTAs, CTA
// b·heads + h computing head h of batch entry b; Traits::shared_bytes of dynamic shared memory.
template <class Element, int HeadDim, Defect kDefect = Defect::none>
FAPROBE_DEVICE void forward_body(const Params& p) {
  using T = Traits<HeadDim>;
  const unsigned thread = isa::thread_linear_idx();
  const unsigned warp = thread / isa::warp_size;
  const unsigned lane = thread % isa::warp_size;
  const unsigned batch_head = isa::block_idx_x();
  const unsigned b = batch_head / static_cast<unsigned>(p.heads);
  const unsigned h = batch_head % static_cast<unsigned>(p.heads);
  const unsigned kv_head = h / static_cast<unsigned>(p.heads / p.kv_heads);

  detail::CtaView cta;
  cta.q_seq_stride = std::size_t{static_cast<unsigned>(p.heads)} * HeadDim;
  const std::size_t kv_seq_stride = std::size_t{static_cast<unsigned>(p.kv_heads)} * HeadDim;
  cta.q_base = (std::size_t{b} * static_cast<unsigned>(p.seq_q) * static_cast<unsigned>(p.heads) + h) * HeadDim;
  cta.kv_base =
      (std::size_t{b} * static_cast<unsigned>(p.seq_k) * static_cast<unsigned>(p.kv_heads) + kv_head) * HeadDim;
  cta.state_base = std::size_t{batch_head} * static_cast<unsigned>(p.seq_q);
  cta.diagonal = p.seq_k - p.seq_q;
  cta.key_blocks = (p.seq_k + T::block_k - 1) / T::block_k;
  const int query_blocks = (p.seq_q + T::block_q - 1) / T::block_q;

  // Prologue: under causal with seq_q > seq_k the first seq_q − seq_k rows see no key. They are zeros (LSE
  // -inf) and the loop below never visits them, except inside a warp that also holds a row that sees a key,
  // where the loop writes the same zeros again.
  const int keyless_rows = p.causal && p.seq_q > p.seq_k ? p.seq_q - p.seq_k : 0;
  for (std::size_t i = thread; i < std::size_t{static_cast<unsigned>(keyless_rows)} * HeadDim; i += T::threads)
    p.o[cta.q_base + i / HeadDim * cta.q_seq_stride + i % HeadDim] = 0;
  if (p.lse.size() != 0) {
    for (int row = static_cast<int>(thread); row < keyless_rows; row += T::threads)
      p.lse[cta.state_base + static_cast<unsigned>(row)] = OnlineSoftmax::minus_infinity;
  }

  for (int key_block = 0; key_block < cta.key_blocks; ++key_block) {
    const int key0 = key_block * T::block_k;
    // The first query block with a row that sees key0 (row i sees it when i + diagonal >= key0). Since
    // key0 < seq_k, row seq_q − 1 always does, so every key block has at least one query block.
    const int first_query_block = p.causal && key0 - cta.diagonal > 0 ? (key0 - cta.diagonal) / T::block_q : 0;
    isa::sync_threads();  // every warp is done reading the previous K, V and Q tiles before they are overwritten
    tiles::load_tile<T::block_k, T>(T::k_offset, p.k, cta.kv_base, kv_seq_stride, key0, p.seq_k, thread);
    tiles::load_tile<T::block_k, T>(T::v_offset, p.v, cta.kv_base, kv_seq_stride, key0, p.seq_k, thread);
    tiles::load_tile<T::block_q, T>(T::q_offset(0), p.q, cta.q_base, cta.q_seq_stride,
                                     first_query_block * T::block_q, p.seq_q, thread);
    isa::cp_async_commit_group();
    for (int query_block = first_query_block; query_block < query_blocks; ++query_block) {
      const int buffer = (query_block - first_query_block) % 2;
      isa::cp_async_wait_group<0>();  // this thread's copies of the current Q tile (and K, V) have landed
      if constexpr (kDefect != Defect::missing_barrier) {
        // Every thread's copies have landed before any warp reads them (ldmatrix reads rows other threads
        // copied), and every warp is done with the previous Q tile, whose buffer the prefetch below reuses.
        isa::sync_threads();
      }
      if (query_block + 1 < query_blocks) {  // prefetch the next Q tile into the other buffer
        tiles::load_tile<T::block_q, T>(T::q_offset(1 - buffer), p.q, cta.q_base, cta.q_seq_stride,
                                         (query_block + 1) * T::block_q, p.seq_q, thread);
        isa::cp_async_commit_group();
      }
      detail::warp_step<Element, HeadDim, kDefect>(p, cta, key_block,
                                                   query_block * T::block_q + static_cast<int>(warp) * T::rows_per_warp,
                                                   T::q_offset(buffer), warp, lane);
    }
  }
}

}  // namespace faprobe::cuda::fa1
