// cuda.fa2: FlashAttention-2's forward pass (Dao 2023, Algorithm 1 with its parallelization and work
// partitioning), written once on the instruction layer: compiled by nvcc for sm_80 / sm_90a (one generated
// .cu per instantiation, fa2/CMakeLists.txt) and by the host compiler under the emulator (fa2_emulated.cpp).
//
// The idea: the loop order of FA-1 turned inside out. One CTA per (query block, head, batch) — parallel
// over the sequence as well as over batch and heads — holds its block_q query rows' output O, row max m and
// row sum l in registers and walks the key blocks once:
//   S = Q_i·K_jᵀ·scale·log2(e),  m_new = max(m, rowmax(S)),  P = exp2(S − m_new),
//   l ← e^{m−m_new}·l + rowsum(P),  O ← e^{m−m_new}·O + P·V_j
// and divides by l once, at the end (FA-2's "fewer non-matmul FLOPs": no per-step normalization). Nothing
// but Q, K, V, O and the LSE touches HBM: O is written once, never read.
//
// Tiling: 4 warps (128 threads), each owning 16 or 32 consecutive query rows (one or two m16n8k16 row
// tiles, per head_dim in Traits; FA-2's split of the query rows over warps, so the warps never exchange
// partial results). Per key block a warp computes S = Q·Kᵀ with mma.sync m16n8k16 (Q and K fragments by
// ldmatrix, each K fragment serving both row tiles), the online softmax in registers
// (cuda/common/online_softmax.cuh, shared with cuda.fa1), and O += P·V with P converted in registers to
// the A fragment and V read by ldmatrix.trans (cuda/common/warp_tiles.cuh). Shared memory holds one Q
// tile, one K tile and one V tile of padded rows (16 bytes per row: conflict-free ldmatrix), and the copies
// overlap the math as in flash-attention's forward kernel: V_j is fetched by cp.async while S = Q·K_jᵀ is
// computed, K_{j-1} while the softmax and P·V_j are (the key blocks are walked from the last to the first). At the end each warp stages its O rows, in the
// output dtype, in its own (no longer needed) rows of the Q tile and writes them with 16-byte stores.
//
// Masks and edges: causal is bottom-right (row i sees keys j ≤ i + seq_k − seq_q). A CTA stops at the
// last key block its last row sees. The key blocks are walked from the last to the first, as flash-attention
// does, so that the blocks that need a mask (the ragged last one, those crossing the CTA's diagonal) come
// first, in a loop of their own that also lets a warp skip a block whose keys all lie right of its rows'
// diagonal; the rest run in a mask-free steady-state loop (no index arithmetic, no -inf test in the softmax:
// online_softmax.cuh's budget).
// Rows that see no key (the first seq_q − seq_k rows when seq_q > seq_k) end with l = 0 and are written
// as zeros with LSE −inf. Loads past seq_q / seq_k are not issued; those shared rows are zeroed (a key past
// seq_k gets score −inf and, with its V row zero, weight exactly 0). GQA/MQA: query head h reads KV head
// h / (heads / kv_heads).
//
// Costs per (batch, head): FLOPs 4·seq_q·seq_k·d (about halved under causal); HBM bytes 2·seq_q·d·2 (Q read,
// O written) + n_q·2·seq_k·d·2 (K and V read once per query block, n_q = ceil(seq_q / block_q), mostly
// from L2: the CTAs of one head run side by side) + 4·seq_q (LSE). At the seed table's shape
// (b8 h32 s8192 d128) that is ~1.1 GB of Q and O against FA-1's ~174 GB of O round trips: FA-2 is bound
// by the tensor cores, not by HBM.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/attention_params.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/warp_tiles.cuh"

namespace faprobe::cuda::fa2 {

// The tile (block_q × block_k) is a template argument; kernels/cuda/fa2/CMakeLists.txt lists the ones built and
// which one plain cuda.fa2 runs for each (dtype, head_dim, mask), each reachable by name (cuda.fa2@128x32). 4 warps
// split the query rows (FA-2's work partitioning); each warp owns m_tiles = block_q / 64 m16 row tiles (16·m_tiles
// rows). Every K and V fragment a warp reads from shared memory serves all its m-tiles: with 2 the shared-memory
// traffic per mma.sync is half that of 1 (ldmatrix bandwidth, not the tensor cores, bounds a 16-row warp on
// Hopper's mma.sync). Per lane a warp holds O (m_tiles · d/8 · 4 fp32), the score tile (m_tiles · block_k/8 · 4
// fp32) and P (m_tiles · block_k/16 · 4 packed registers), all within 255 registers with no spill (checked by
// ptxas -warn-spills in every build and by tests/test_static_checks.cpp). The defaults, with their reasons:
//   d = 64:  128×64: O 64 + S 64 + P 32 registers (218 used). 128×128, flash-attention's choice at d 64, needs
//            S 128 + P 64 and spills 68 bytes (nvcc 13.0, sm_90a).
//   d = 128: 128×32: O 128 + S 32 + P 16 (250 used). 128×64, flash-attention's choice, reaches 255 registers
//            with 68 bytes of spills and ~110 register moves per key block (nvcc 13.0, sm_80 and sm_90a): 957
//            instructions per 64 keys against 536 per 32 keys here, so the 11 % fewer instructions per key it
//            would save are spent on moves and local memory. 64×64 (one m-tile, O 64 + S 32 + P 16) is built
//            as a variant: half the registers, twice the shared-memory reads per mma.sync; a GPU decides.
//   d = 256: 64×32: O 128 + S 16 + P 8; two m-tiles would need 256 for O alone, and block_k 64 spills 268
//            bytes on sm_80.
// Shared memory is one Q, one K and one V tile: 36, 51 and 66 KiB for the defaults at d 64, 128 and 256.
template <int HeadDim, int BlockQ, int BlockK>
struct Traits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "cuda.fa2 is instantiated for d 64, 128, 256");
  static_assert(BlockQ == 64 || BlockQ == 128, "one or two m16 row tiles per warp of 4");
  static constexpr int head_dim = HeadDim;
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  // __launch_bounds__'s minimum CTAs per SM: 1 leaves ptxas every register it wants (at most 255, which
  // still fits two 128-thread CTAs per SM).
  static constexpr int min_ctas_per_sm = 1;
  static constexpr int m_tiles = BlockQ / 64;
  static constexpr int rows_per_warp = 16 * m_tiles;
  static constexpr int block_q = warps * rows_per_warp;
  static constexpr int block_k = BlockK;
  static constexpr int row_stride = HeadDim + 8;  // halves per shared row: +16 bytes (warp_tiles.cuh)
  static constexpr std::size_t q_tile_bytes = std::size_t{block_q} * row_stride * 2;
  static constexpr std::size_t kv_tile_bytes = std::size_t{block_k} * row_stride * 2;
  // Shared memory: the Q tile (the O staging area at the end), then K, then V.
  static constexpr std::size_t q_offset = 0;
  static constexpr std::size_t k_offset = q_tile_bytes;
  static constexpr std::size_t v_offset = k_offset + kv_tile_bytes;
  static constexpr std::size_t shared_bytes = v_offset + kv_tile_bytes;
  // The grid's x extent: one CTA per query block.
  static constexpr unsigned query_blocks(int seq_q) { return static_cast<unsigned>((seq_q + block_q - 1) / block_q); }

  static_assert(HeadDim % 16 == 0 && block_k % 16 == 0, "head_dim and key blocks in whole k-steps");
  static_assert(row_stride * 2 % 16 == 0, "ldmatrix, cp.async and the 16-byte O stores need aligned rows");
  static_assert(shared_bytes <= 163 * 1024, "sm_80 allows 163 KiB of shared memory per block (opt-in)");
};

// The planted defects of the tests (tests/test_emu_fa2.cpp); production code instantiates none.
enum class Defect {
  none,
  no_rescale,          // O is not multiplied by e^{m − m_new} when the row max grows
  causal_off_by_one,   // the causal mask lets each row see one key past its diagonal
  missing_barrier,     // no barrier between the K tile's copies and the warps that read it
  no_cp_async_wait,    // no cp.async.wait_group before the barrier: the tile is read before the copies land
  // Outputs left unwritten, which only the NaN poison of a checked run shows (kernel_implementation.hpp):
  writes_nothing,         // every CTA returns at once: neither O nor the LSE is written
  skip_last_query_block,  // the CTA of the last query block returns at once (a grid one CTA short)
  lse_log2,               // the LSE written in the kernel's log2 units, row_max + log2(row_sum), O right
  // Lost speed, which only the static checks of the compiled code show (tests/static_checks_planted.cu):
  mask_every_block,  // the steady-state loop masks too, behind a run-time test, as before the masked blocks were peeled
};

using Params = AttentionParams;

// The kernel body, run by each of Traits::threads threads of a CTA; grid (ceil(seq_q / block_q), heads,
// batch): CTA (x, y, z) computes query block x of head y of batch entry z. Traits::shared_bytes of dynamic
// shared memory.
template <class Element, int HeadDim, int BlockQ, int BlockK, Defect kDefect = Defect::none>
FAPROBE_DEVICE void forward_body(const Params& p) {
  using T = Traits<HeadDim, BlockQ, BlockK>;
  constexpr int key_tiles = T::block_k / 8;  // 8-key n-tiles of S = Q·Kᵀ
  constexpr int dim_tiles = HeadDim / 8;     // 8-column n-tiles of O
  constexpr int M = T::m_tiles;              // m16 row tiles per warp
  const unsigned thread = isa::thread_linear_idx();
  const unsigned warp = thread / isa::warp_size;
  const unsigned lane = thread % isa::warp_size;
  const int query_block = static_cast<int>(isa::block_idx_x());
  const unsigned h = isa::block_idx_y();
  const unsigned b = isa::block_idx_z();
  if constexpr (kDefect == Defect::writes_nothing) return;
  if constexpr (kDefect == Defect::skip_last_query_block) {
    if (query_block + 1 == static_cast<int>(T::query_blocks(p.seq_q))) return;  // the whole CTA: no barrier waits
  }
  const unsigned kv_head = h / static_cast<unsigned>(p.heads / p.kv_heads);

  const std::size_t q_seq_stride = std::size_t{static_cast<unsigned>(p.heads)} * HeadDim;
  const std::size_t kv_seq_stride = std::size_t{static_cast<unsigned>(p.kv_heads)} * HeadDim;
  const std::size_t q_base = (std::size_t{b} * static_cast<unsigned>(p.seq_q) * static_cast<unsigned>(p.heads) + h) * HeadDim;
  const std::size_t kv_base =
      (std::size_t{b} * static_cast<unsigned>(p.seq_k) * static_cast<unsigned>(p.kv_heads) + kv_head) * HeadDim;
  const std::size_t lse_base = (std::size_t{b} * static_cast<unsigned>(p.heads) + h) * static_cast<unsigned>(p.seq_q);

  const int q0 = query_block * T::block_q;
  const int warp_row0 = q0 + static_cast<int>(warp) * T::rows_per_warp;
  const int diagonal = p.seq_k - p.seq_q;  // row i sees keys j <= i + diagonal under causal
  const int mask_diagonal = kDefect == Defect::causal_off_by_one ? diagonal + 1 : diagonal;
  // Keys [0, key_end) are seen by some row of the CTA, [0, warp_key_end) by some row of this warp.
  const int cta_last_row = (q0 + T::block_q < p.seq_q ? q0 + T::block_q : p.seq_q) - 1;
  const int warp_last_row = warp_row0 + T::rows_per_warp - 1 < p.seq_q ? warp_row0 + T::rows_per_warp - 1 : p.seq_q - 1;
  int key_end = p.seq_k, warp_key_end = warp_row0 < p.seq_q ? p.seq_k : 0;
  if (p.causal) {
    if (cta_last_row + diagonal + 1 < key_end) key_end = cta_last_row + diagonal + 1;
    if (warp_last_row + diagonal + 1 < warp_key_end) warp_key_end = warp_last_row + diagonal + 1;
  }
  const int key_blocks = key_end > 0 ? (key_end + T::block_k - 1) / T::block_k : 0;
  // Key blocks [0, full_blocks) are seen whole by every row of the CTA (the rows past seq_q too: their Q is
  // zero): the steady-state loop runs them without a mask. The blocks from full_blocks on (the ragged last
  // one, those crossing the causal diagonal) are masked. The loops walk the key blocks from the last to the
  // first, as flash-attention's do, so the masked blocks come first and the mask-free loop follows.
  int full_blocks = p.seq_k / T::block_k;
  if (p.causal) {
    const int first_row_end = q0 + mask_diagonal + 1;  // keys [0, first_row_end) are seen by the CTA's first row
    const int fully_seen = first_row_end > 0 ? first_row_end / T::block_k : 0;
    if (fully_seen < full_blocks) full_blocks = fully_seen;
  }
  if (full_blocks > key_blocks) full_blocks = key_blocks;

  if (key_blocks > 0) {
    tiles::load_tile<T::block_q, T>(T::q_offset, p.q, q_base, q_seq_stride, q0, p.seq_q, thread);
    tiles::load_tile<T::block_k, T>(T::k_offset, p.k, kv_base, kv_seq_stride, (key_blocks - 1) * T::block_k, p.seq_k, thread);
    isa::cp_async_commit_group();
  }

  float acc[M][dim_tiles][4] = {};  // this lane's share of the warp's unnormalized O
  OnlineSoftmax softmax[M];
  FAPROBE_UNROLL
  for (int m = 0; m < M; ++m) softmax[m].reset(p.scale_log2);
  const std::size_t warp_q_rows = T::q_offset + std::size_t{warp} * T::rows_per_warp * T::row_stride * 2;
  // One key block: the copies of V_j and K_{j-1} overlapped with S = Q·K_jᵀ and P·V_j, as in flash-attention's
  // forward kernel. kMasked (a std::bool_constant) picks the masked body or the steady state's.
  const auto key_block_step = [&](int key_block, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int key0 = key_block * T::block_k;
    if constexpr (kDefect != Defect::no_cp_async_wait)
      isa::cp_async_wait_group<0>();  // this thread's copies of K_j (and of Q) have landed
    if constexpr (kDefect != Defect::missing_barrier) {
      // Every thread's copies have landed before any warp reads the tile (ldmatrix reads rows other
      // threads copied), and every warp is done with V_{j+1}, whose buffer the next copy overwrites.
      isa::sync_threads();
    }
    // A steady-state block lies below seq_k: its rows need no bound (only the last block can be ragged).
    tiles::load_tile<T::block_k, T, /*Checked=*/kMasked>(T::v_offset, p.v, kv_base, kv_seq_stride, key0, p.seq_k, thread);
    isa::cp_async_commit_group();

    // Under the mask, a warp whose rows see no key of the block skips its math (warp-uniform); in the
    // steady state every row sees every key.
    const bool active = !kMasked || key0 < warp_key_end;
    float scores[M][key_tiles][4] = {};
    if (active) {
      tiles::warp_scores<Element, T>(scores, warp_q_rows, T::k_offset, lane);
      if constexpr (kMasked) {
        tiles::apply_mask(scores, key0, warp_row0, p.seq_k, p.causal, mask_diagonal, lane);
      } else if constexpr (kDefect == Defect::mask_every_block) {
        if (p.causal || key0 + T::block_k > p.seq_k)
          tiles::apply_mask(scores, key0, warp_row0, p.seq_k, p.causal, mask_diagonal, lane);
      }
    }

    isa::cp_async_wait_group<0>();  // this thread's copies of V_j have landed
    isa::sync_threads();            // V_j complete for every warp; every warp is done reading K_j
    // K_{j-1} (every block before the last is whole). In the steady state, after its last block (j = 0), block
    // 0 (whole there) is copied again, which costs one tile per CTA and spares the loop a branch (a BSSY/BSYNC
    // pair); a masked block may be the only one, and partial, so there the copy is skipped.
    if (!kMasked || key_block > 0) {
      tiles::load_tile<T::block_k, T, /*Checked=*/false>(T::k_offset, p.k, kv_base, kv_seq_stride,
                                                         key_block > 0 ? key0 - T::block_k : 0, p.seq_k, thread);
      isa::cp_async_commit_group();
    }

    if (active) {
      std::uint32_t p_frag[M][T::block_k / 16][4];
      FAPROBE_UNROLL
      for (int m = 0; m < M; ++m) {
        float alpha[OnlineSoftmax::rows];
        // Masked blocks may hold rows that see no key yet (CheckInf); a warp's first active block may come
        // after blocks it skipped, so no block is taken as the row's first (alpha is 0 until a key is seen).
        softmax[m].template absorb</*IsFirst=*/false, /*CheckInf=*/kMasked || kDefect == Defect::mask_every_block>(
            scores[m], alpha);
        if constexpr (kDefect != Defect::no_rescale) {
          FAPROBE_UNROLL
          for (int t = 0; t < dim_tiles; ++t) {
            FAPROBE_UNROLL
            for (int e = 0; e < 4; ++e) acc[m][t][e] *= alpha[e / 2];
          }
        }
        tiles::probabilities_as_a<Element>(scores[m], p_frag[m]);
      }
      tiles::warp_pv<Element, T>(acc, p_frag, T::v_offset, 0, lane);
    }
  };
  int key_block = key_blocks - 1;
  for (; key_block >= full_blocks; --key_block) key_block_step(key_block, std::true_type{});
  for (; key_block >= 0; --key_block) key_block_step(key_block, std::false_type{});
  FAPROBE_UNROLL
  for (int m = 0; m < M; ++m) softmax[m].finalize();

  // --- Epilogue: O = acc / l in the output dtype, staged in the warp's own rows of the Q tile (which only
  // this warp read) so that the global stores are 16 bytes wide; the LSE from the row state. ---
  if (lane % 4 == 0 && p.lse.size() != 0) {  // the four lanes of a quad hold the same row state; one writes it
    FAPROBE_UNROLL
    for (int m = 0; m < M; ++m) {
      FAPROBE_UNROLL
      for (int r = 0; r < 2; ++r) {
        const float lse = softmax[m].log_sum_exp(r);  // natural log; −inf for a row that saw no key
        const int row = warp_row0 + 16 * m + 8 * r + static_cast<int>(lane / 4);
        if (row < p.seq_q) {
          p.lse[lse_base + static_cast<unsigned>(row)] =
              kDefect == Defect::lse_log2 ? lse / OnlineSoftmax::ln2 : lse;
        }
      }
    }
  }
  isa::cp_async_wait_group<0>();
  isa::sync_threads();  // no copy into the Q tile is in flight (a CTA whose rows see no key loaded nothing)
  FAPROBE_UNROLL
  for (int m = 0; m < M; ++m) {
    FAPROBE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float inverse_sum = softmax[m].inverse_sum(r);
      const std::size_t staged_row =
          warp_q_rows + std::size_t{16 * static_cast<unsigned>(m) + lane / 4 + 8 * static_cast<unsigned>(r)} * T::row_stride * 2;
      FAPROBE_UNROLL
      for (int t = 0; t < dim_tiles; ++t) {
        const std::size_t column = std::size_t{static_cast<unsigned>(t)} * 8 + (lane % 4) * 2;
        isa::shared_array<std::uint32_t>(staged_row + column * 2, 1)[0] =
            Element::pack2(acc[m][t][2 * r] * inverse_sum, acc[m][t][2 * r + 1] * inverse_sum);
      }
    }
  }
  isa::sync_threads();  // the staged rows are complete before lanes read each other's values
  constexpr int chunks_per_row = HeadDim / 8;
  FAPROBE_UNROLL
  for (int i = 0; i < T::rows_per_warp * chunks_per_row / 32; ++i) {
    const int chunk = i * 32 + static_cast<int>(lane);
    const int row = chunk / chunks_per_row;
    const int column = chunk % chunks_per_row * 8;
    if (warp_row0 + row >= p.seq_q) continue;
    const isa::Words4 words = isa::shared_array<isa::Words4>(
        warp_q_rows + (std::size_t{static_cast<unsigned>(row)} * T::row_stride + static_cast<unsigned>(column)) * 2, 1)[0];
    isa::store_16(p.o, q_base + std::size_t{static_cast<unsigned>(warp_row0 + row)} * q_seq_stride + static_cast<unsigned>(column),
                  words);
  }
}

}  // namespace faprobe::cuda::fa2
