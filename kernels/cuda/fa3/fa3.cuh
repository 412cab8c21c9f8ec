// cuda.fa3: FlashAttention-3's forward pass for Hopper (Shah et al. 2024), written once on the instruction
// layer: compiled by nvcc for sm_90a only (fa3_<dtype>_hdim<d>.cu) and by the host compiler under the
// emulator (fa3_emulated.cpp). The algorithm is FA-2's (one pass over the keys with the online softmax,
// normalized once); what changes is how the GPU is kept busy, read as roles:
//
// - A CTA is three warpgroups (384 threads). Warpgroup 0 is the producer: after giving most of its
//   registers away (setmaxnreg.dec to 24), one elected thread loads the tile's Q once and then K_j and V_j
//   by TMA (cp.async.bulk.tensor) into a ring of Stages shared-memory stages, each guarded by a "full"
//   mbarrier (completed by the copy's transaction bytes) and an "empty" one (completed when every consumer
//   thread has finished reading the stage). The producer never computes.
// - Warpgroups 1 and 2 are consumers (setmaxnreg.inc to 240): consumer c owns query rows 64c..64c+63 of the
//   CTA's 128-row tile. Per key block it issues S = Q·K_jᵀ as asynchronous wgmma with both operands in
//   shared memory, runs the online softmax on S in registers (cuda/common/online_softmax.cuh, shared with
//   FA-1, FA-2 and FlashDecoding), and issues O += P·V_j as wgmma with P from registers (the accumulator of
//   S is, element for element, the A fragment of P·V; no trip through shared memory) and V_j N-major.
// - Intra-warpgroup overlap (FA-3's Algorithm 2): S_j = Q·K_jᵀ and O += P_{j+1}·V_{j+1} are issued back to
//   back (the key blocks run from the last to the first), and the softmax of S_j runs while P_{j+1}·V_{j+1} is
//   still in the tensor cores; O is rescaled only after that wgmma has been waited for. ptxas would hoist
//   that wait above the softmax (it has no dependence on it): isa::wgmma_wait_after pins it after the row
//   sums, and tests/test_static_checks.cpp counts the exponentials that stay between the two waits.
// - Pingpong between the consumers: two named barriers (NamedBarrier, an enum class) make the consumers
//   take turns issuing their GEMMs, so that one's softmax (exp2, the multi-function unit) overlaps the
//   other's GEMMs (the tensor cores).
// - A persistent grid (one CTA per SM, at most the tile count) walks the (query block, head, batch) tiles
//   with a stride of the grid size, in an order that hands out the longest causal tiles (the last query
//   blocks, which see the most keys) first, so the short tiles fill the tail of the schedule.
//
// Shared memory tiles are TMA's 128-byte-swizzled boxes of 64 columns (128 bytes of 16-bit elements) by
// the tile's rows: a head_dim of d is d/64 such column blocks, which the wgmma descriptors address as
// canonical K-major (Q, K) and N-major (V) layouts with 128-byte swizzle (isa_wgmma.hpp). Every tile is
// 1024-byte aligned so that the swizzle pattern starts with it.
//
// Masks and edges are FA-2's: bottom-right causal (row i sees keys j ≤ i + seq_k − seq_q), rows that see
// no key written as zeros with LSE −inf; a CTA stops at the last key block its last row sees (causal block
// skipping). The blocks that need a mask (the ragged last one, those crossing a consumer's diagonal) are the
// first ones walked and run in a loop of their own; the rest run in a mask-free steady-state loop (the
// softmax without its -inf test: online_softmax.cuh). TMA fills the parts of a box past seq_q or seq_k with
// zeros, so no load needs a bound. GQA/MQA: query head h reads KV head h / (heads / kv_heads).
//
// Costs per (batch, head): FLOPs 4·seq_q·seq_k·d (about half under causal); HBM bytes: Q read and O written
// once (2·seq_q·d·2), K and V read once per 128-row query block (mostly from L2), the LSE (4·seq_q).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/attention_params.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/isa_tma.hpp"
#include "cuda/common/isa_wgmma.hpp"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/warp_tiles.cuh"

namespace faprobe::cuda::fa3 {

// Tile sizes per head_dim and element size. Per consumer thread the registers hold O (d/2 fp32), S
// (block_k/2 fp32) and P (block_k/4 packed registers for 16-bit, block_k/8 for e4m3), within setmaxnreg's 240:
//   16-bit d = 64:  block_k 128: O 32 + S 64 + P 32.   Shared memory 16 + 2·2·16 KiB = 80 KiB.
//   16-bit d = 128: block_k 128: O 64 + S 64 + P 32.   Shared memory 32 + 2·2·32 KiB = 160 KiB.
//   16-bit d = 256: block_k 64:  O 128 + S 32 + P 16.  Shared memory 64 + 2·2·32 KiB = 192 KiB.
//   e4m3, every d:  block_k 128: O d/2 + S 64 + P 16.  Shared memory (128 + 4·128)·d bytes: 40, 80, 160 KiB.
// Two stages for K and for V (the issue's minimum; the shared memory of 16-bit d 256 leaves no room for
// three). A tile row is 128 bytes (64 16-bit or 128 e4m3 columns, 128-byte swizzle), or all of d when that is
// shorter (e4m3 d 64: 64-byte rows, 64-byte swizzle); d is then d·size/row_bytes such column blocks. e4m3's V
// arrives transposed (V^T, keys contiguous: its wgmma takes K-major operands only): one block of d rows by
// block_k = 128 keys.
template <int HeadDim, int ElementBytes = 2>
struct Traits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "cuda.fa3 is instantiated for d 64, 128, 256");
  static_assert(ElementBytes == 2 || ElementBytes == 1, "16-bit (fp16, bf16) or e4m3 elements");
  static constexpr int head_dim = HeadDim;
  static constexpr bool fp8 = ElementBytes == 1;
  static constexpr int warpgroups = 3;  // producer, consumer 0, consumer 1
  static constexpr int threads = warpgroups * 128;
  static constexpr int consumer_threads = 2 * 128;
  static constexpr int min_ctas_per_sm = 1;
  static constexpr int rows_per_consumer = 64;  // wgmma's M
  static constexpr int block_q = 2 * rows_per_consumer;
  static constexpr int block_k = HeadDim == 256 && !fp8 ? 64 : 128;
  static constexpr int wgmma_k = fp8 ? 32 : 16;  // K of one wgmma: 32 bytes either way
  static constexpr int stages = 2;
  // The register budget of the warp specialization: every thread enters with registers_at_entry (what ptxas
  // allots under __launch_bounds__(threads, min_ctas_per_sm): 65536 / 384 rounded down to 8, 168), then the
  // producer gives registers away and the consumers take them. The sum must be exact: less would leave
  // registers idle, more makes setmaxnreg.inc wait for registers no warpgroup frees. test_static_checks
  // checks that each compiled kernel enters with exactly registers_at_entry.
  static constexpr unsigned registers_at_entry = isa::registers_at_entry(threads, min_ctas_per_sm);
  static constexpr unsigned producer_registers = 24;
  static constexpr unsigned consumer_registers = 240;
  static_assert(128 * producer_registers + consumer_threads * consumer_registers == threads * registers_at_entry,
                "the producer's and the consumers' registers are exactly the registers the CTA enters with");

  // Q and K tiles: column blocks of row_bytes-byte swizzled rows.
  static constexpr std::size_t row_bytes = HeadDim * ElementBytes < 128 ? HeadDim * ElementBytes : 128;
  static constexpr int column_elements = static_cast<int>(row_bytes) / ElementBytes;
  static constexpr int column_blocks = HeadDim / column_elements;
  static constexpr isa::WgmmaSwizzle qk_swizzle = row_bytes == 128 ? isa::WgmmaSwizzle::bytes128 : isa::WgmmaSwizzle::bytes64;
  static constexpr isa::TmaSwizzle qk_tma_swizzle = row_bytes == 128 ? isa::TmaSwizzle::bytes128 : isa::TmaSwizzle::bytes64;
  static constexpr std::uint32_t row_group_bytes = 8 * static_cast<std::uint32_t>(row_bytes);  // SBO: 8 rows
  static constexpr std::size_t q_block_bytes = std::size_t{block_q} * row_bytes;  // one column block
  static constexpr std::size_t k_block_bytes = std::size_t{block_k} * row_bytes;
  static constexpr std::size_t q_tile_bytes = q_block_bytes * column_blocks;
  static constexpr std::size_t k_tile_bytes = k_block_bytes * column_blocks;
  // V tiles: 16-bit as K (key rows, N-major for P·V); e4m3 V^T: head_dim rows of block_k = 128 key bytes.
  static constexpr std::size_t v_block_bytes = fp8 ? std::size_t{HeadDim} * block_k : k_block_bytes;
  static constexpr std::size_t v_tile_bytes = fp8 ? v_block_bytes : k_tile_bytes;
  // Shared memory: Q, the K stages, the V stages, then the mbarriers (8 bytes each).
  static constexpr std::size_t q_offset = 0;
  static constexpr std::size_t k_offset = q_offset + q_tile_bytes;
  static constexpr std::size_t v_offset = k_offset + stages * k_tile_bytes;
  static constexpr std::size_t barrier_offset = v_offset + stages * v_tile_bytes;
  static constexpr std::size_t q_full = barrier_offset;
  static constexpr std::size_t q_empty = q_full + 8;
  static constexpr std::size_t k_full = q_empty + 8;               // + 8·stage
  static constexpr std::size_t k_empty = k_full + 8 * stages;
  static constexpr std::size_t v_full = k_empty + 8 * stages;
  static constexpr std::size_t v_empty = v_full + 8 * stages;
  static constexpr std::size_t shared_bytes = v_empty + 8 * stages;
  static constexpr std::uint32_t q_bytes = static_cast<std::uint32_t>(q_tile_bytes);
  static constexpr std::uint32_t k_bytes = static_cast<std::uint32_t>(k_tile_bytes);
  static constexpr std::uint32_t v_bytes = static_cast<std::uint32_t>(v_tile_bytes);

  static constexpr unsigned query_blocks(int seq_q) { return static_cast<unsigned>((seq_q + block_q - 1) / block_q); }

  static_assert(q_block_bytes % 1024 == 0 && k_block_bytes % 1024 == 0 && v_block_bytes % 1024 == 0,
                "tiles keep the 1024-byte swizzle alignment");
  static_assert(shared_bytes <= 227 * 1024, "sm_90 allows 227 KiB of shared memory per block (opt-in)");
};
// The Traits of an element tag.
template <class Element, int HeadDim>
using TraitsOf = Traits<HeadDim, std::is_same_v<Element, isa::E4M3> ? 1 : 2>;

// e4m3's P·V: within each 32-key group, V^T's column (and P's k index) p holds key
// 16·(p / 16) + 2·((p % 16) / 4) + (p % 2) + 8·((p % 4) / 2), so that the e4m3 A fragment of P (4 consecutive k
// per register) is made of the thread's own S accumulators, with no shuffle (isa_wgmma.hpp's layouts).
FAPROBE_DEVICE constexpr int fp8_key_of_column(int column) {
  const int within = column % 32;
  return column - within + 16 * (within / 16) + 2 * ((within % 16) / 4) + within % 2 + 8 * ((within % 4) / 2);
}

// The CTA's named barriers (bar.sync / bar.arrive ids; PTX has 16 per CTA). 0 is __syncthreads.
enum class NamedBarrier : unsigned {
  whole_cta = 0,
  consumer0_turn = 1,  // consumer 0 may issue its GEMMs (consumer 1 arrives here when it has issued its own)
  consumer1_turn = 2,  // and the other way round
};

// The planted defects of the tests (tests/test_emu_fa3.cpp); production code instantiates none.
enum class Defect {
  none,
  swizzle_mismatch,   // K's wgmma descriptor says 64-byte swizzle while TMA writes K with 128-byte swizzle
  no_rescale,         // O is not multiplied by e^{m − m_new} when the row max grows
  causal_off_by_one,  // the causal mask lets each row see one key past its diagonal
  missing_expect_tx,  // the producer announces one K tile's bytes too few: the full barrier completes early
  never_released,     // the consumers never release a K stage: the producer's wait can never complete
  no_v_scale,         // e4m3: O is not multiplied by V's per-tensor scale
  // Asynchronous hazards, which only the emulator's checks (or a GPU, by chance) show:
  no_full_wait,           // from the second key block on, the consumers do not wait for K's "full" mbarrier
  scores_read_in_flight,  // wgmma.wait_group<2> where <1> is needed: the softmax reads S_j while in flight
  no_wgmma_fence,         // no wgmma.fence before the steady state's GEMMs
};

// The kernel's arguments: FA-2's, plus the tensor maps of Q, K and V (boxes of one column block by block_q or
// block_k rows of one head; dims (d, seq, heads, batch); e4m3's V^T: (seq_k padded, d, kv_heads, batch), boxes
// of block_k keys by d rows) and the persistent schedule. On the GPU the whole
// struct is a __grid_constant__ parameter, so the maps' addresses are what cp.async.bulk.tensor takes.
struct Params {
  isa::TensorMap q_map;
  isa::TensorMap k_map;
  isa::TensorMap v_map;
  AttentionParams attention;  // for e4m3, q/k/v are unused (the maps hold them) and scale_log2 includes Q's and K's scales
  GlobalSpan<std::uint32_t> output_pairs;  // O as pairs of 16-bit elements: the epilogue's 4-byte stores
  float output_scale = 1.0f;  // e4m3: V's scale, applied to O at the end; 1 otherwise
  int tiles = 0;              // query blocks · heads · batch
};
// The maps are 128-byte aligned members (isa::TensorMap, as CUtensorMap), so the struct is too, in host
// memory and in the kernel's parameter space; kernel parameters are limited to 4 KiB (CUDA C++ Programming
// Guide, "Function Parameters"; 32 KiB from CUDA 12.1 on Volta and newer, but 4 KiB everywhere).
static_assert(alignof(Params) == alignof(isa::TensorMap) && sizeof(Params) <= 4096,
              "Params is aligned as its tensor maps and fits the kernel parameter space");

// An H200's SMs: the persistent grid's size under emulation (the device "emulated sm_90a" stands for).
inline constexpr int kEmulatedSms = 132;

// CTAs of the persistent grid: one per SM, at most one per tile.
inline unsigned persistent_ctas(const Params& params, int sms) {
  return static_cast<unsigned>(params.tiles < sms ? params.tiles : sms);
}

// dispatch_instantiation (common/instantiation.hpp) with e4m3 too: fn(Instantiation<isa::E4M3, d>{}).
template <class Fn>
bool dispatch_fa3_instantiation(ElementType element, int head_dim, Fn&& fn) {
  if (element != ElementType::e4m3) return dispatch_instantiation(element, head_dim, fn);
  switch (head_dim) {
    case 64: fn(Instantiation<isa::E4M3, 64>{}); return true;
    case 128: fn(Instantiation<isa::E4M3, 128>{}); return true;
    case 256: fn(Instantiation<isa::E4M3, 256>{}); return true;
    default: return false;
  }
}

namespace detail {

// The (query block, head, batch) of schedule position `tile`: query blocks from the last (the longest under
// causal) to the first, heads and batch entries fastest, so the CTAs of one wave share K and V in L2.
struct Tile {
  int query_block, head, batch;
};
template <class T>
FAPROBE_DEVICE Tile tile_at(const AttentionParams& p, int tile) {
  const int per_block = p.heads * p.batch;
  const int query_blocks = static_cast<int>(T::query_blocks(p.seq_q));
  const int within = tile % per_block;
  return {query_blocks - 1 - tile / per_block, within % p.heads, within / p.heads};
}

// Key blocks [0, key_blocks) are seen by some row of query block q_block (causal block skipping).
template <class T>
FAPROBE_DEVICE int key_blocks(const AttentionParams& p, int query_block) {
  int key_end = p.seq_k;
  if (p.causal) {
    const int last_row = (query_block + 1) * T::block_q < p.seq_q ? (query_block + 1) * T::block_q - 1 : p.seq_q - 1;
    const int visible = last_row + p.seq_k - p.seq_q + 1;
    if (visible < key_end) key_end = visible;
  }
  return key_end > 0 ? (key_end + T::block_k - 1) / T::block_k : 0;
}

FAPROBE_DEVICE void named_sync(NamedBarrier barrier, unsigned threads) { isa::bar_sync(static_cast<unsigned>(barrier), threads); }
FAPROBE_DEVICE void named_arrive(NamedBarrier barrier, unsigned threads) {
  isa::bar_arrive(static_cast<unsigned>(barrier), threads);
}

// The producer: one elected thread of warpgroup 0 walks the CTA's tiles and issues every TMA load.
template <class T, Defect kDefect>
FAPROBE_DEVICE void produce(const Params& params) {
  const AttentionParams& p = params.attention;
  const int group = p.heads / p.kv_heads;
  int load = 0;  // K/V loads issued so far: stage load % Stages, round load / Stages
  int tile_count = 0;
  for (int tile = static_cast<int>(isa::block_idx_x()); tile < params.tiles; tile += static_cast<int>(isa::grid_dim_x())) {
    const Tile t = tile_at<T>(p, tile);
    // Q: wait until both consumers are done with the previous tile's Q (the first wait passes at once).
    isa::mbarrier_wait_parity(T::q_empty, static_cast<unsigned>((tile_count & 1) ^ 1));
    isa::mbarrier_arrive(T::q_full, T::q_bytes);
    for (int c = 0; c < T::column_blocks; ++c) {
      const int coords[4] = {T::column_elements * c, t.query_block * T::block_q, t.head, t.batch};
      isa::tma_load<4>(T::q_offset + std::size_t{static_cast<unsigned>(c)} * T::q_block_bytes, params.q_map, T::q_full, coords);
    }
    const int kv_head = t.head / group;
    const int blocks = key_blocks<T>(p, t.query_block);
    // From the last key block to the first, the consumers' order (the masked blocks first).
    for (int j = blocks - 1; j >= 0; --j, ++load) {
      const auto stage = static_cast<unsigned>(load % T::stages);
      const auto empty_parity = static_cast<unsigned>(((load / T::stages) & 1) ^ 1);
      const std::size_t k_tile = T::k_offset + stage * T::k_tile_bytes;
      const std::size_t v_tile = T::v_offset + stage * T::v_tile_bytes;
      isa::mbarrier_wait_parity(T::k_empty + 8 * stage, empty_parity);
      const std::uint32_t k_expected = kDefect == Defect::missing_expect_tx && j == blocks - 1 ? T::k_bytes / 2 : T::k_bytes;
      isa::mbarrier_arrive(T::k_full + 8 * stage, k_expected);
      for (int c = 0; c < T::column_blocks; ++c) {
        const int coords[4] = {T::column_elements * c, j * T::block_k, kv_head, t.batch};
        isa::tma_load<4>(k_tile + std::size_t{static_cast<unsigned>(c)} * T::k_block_bytes, params.k_map, T::k_full + 8 * stage, coords);
      }
      isa::mbarrier_wait_parity(T::v_empty + 8 * stage, empty_parity);
      isa::mbarrier_arrive(T::v_full + 8 * stage, T::v_bytes);
      if constexpr (T::fp8) {  // V^T: one box of block_k keys by head_dim rows
        const int coords[4] = {j * T::block_k, 0, kv_head, t.batch};
        isa::tma_load<4>(v_tile, params.v_map, T::v_full + 8 * stage, coords);
      } else {
        for (int c = 0; c < T::column_blocks; ++c) {
          const int coords[4] = {T::column_elements * c, j * T::block_k, kv_head, t.batch};
          isa::tma_load<4>(v_tile + std::size_t{static_cast<unsigned>(c)} * T::k_block_bytes, params.v_map, T::v_full + 8 * stage, coords);
        }
      }
    }
    ++tile_count;
  }
}

// S = Q·K_jᵀ for consumer `consumer`'s 64 rows: head_dim / wgmma_k wgmma k-steps of 32 bytes, both operands
// K-major in swizzled column blocks (step kk reads 32 bytes at (32·kk) % row_bytes of column block
// 32·kk / row_bytes).
template <class Element, class T, Defect kDefect, int KeyTiles>
FAPROBE_DEVICE void issue_scores(float (&scores)[1][KeyTiles][4], unsigned consumer, std::size_t k_tile) {
  constexpr auto k_swizzle = kDefect == Defect::swizzle_mismatch ? isa::WgmmaSwizzle::bytes64 : T::qk_swizzle;
  float (&accumulator)[T::block_k / 2] = *reinterpret_cast<float (*)[T::block_k / 2]>(&scores[0][0][0]);
  isa::wgmma_fence_operand(accumulator);
  FAPROBE_UNROLL
  for (int kk = 0; kk < T::head_dim / T::wgmma_k; ++kk) {
    const std::size_t byte = std::size_t{static_cast<unsigned>(kk)} * 32;
    const std::size_t column_block = byte / T::row_bytes, within = byte % T::row_bytes;
    const std::uint64_t q_desc = isa::wgmma_descriptor(
        T::q_offset + column_block * T::q_block_bytes + consumer * T::rows_per_consumer * T::row_bytes + within, 16,
        T::row_group_bytes, T::qk_swizzle);
    const std::uint64_t k_desc =
        isa::wgmma_descriptor(k_tile + column_block * T::k_block_bytes + within, 16, T::row_group_bytes, k_swizzle);
    isa::wgmma_ss<T::block_k, Element>(accumulator, q_desc, k_desc, kk > 0);
  }
  isa::wgmma_commit_group();
  isa::wgmma_fence_operand(accumulator);
}

// O += P·V_j: block_k / wgmma_k wgmma k-steps with P's A fragments from registers. 16-bit: V N-major (key rows
// of 128 bytes per column block; 8-key groups 1024 bytes apart, column blocks k_block_bytes apart). e4m3: V^T
// K-major (head_dim rows of 128 key bytes, 8-row groups 1024 apart; step kk at byte 32·kk).
template <class Element, class T, int KeySteps, int DimTiles>
FAPROBE_DEVICE void issue_pv(float (&output)[DimTiles][4], const std::uint32_t (&p_frag)[KeySteps][4], std::size_t v_tile) {
  float (&accumulator)[T::head_dim / 2] = *reinterpret_cast<float (*)[T::head_dim / 2]>(&output[0][0]);
  isa::wgmma_fence_operand(accumulator);
  FAPROBE_UNROLL
  for (int kk = 0; kk < KeySteps; ++kk) {
    if constexpr (T::fp8) {
      const std::uint64_t v_desc = isa::wgmma_descriptor(v_tile + std::size_t{static_cast<unsigned>(kk)} * 32, 16, 1024,
                                                         isa::WgmmaSwizzle::bytes128);
      isa::wgmma_rs<T::head_dim, Element, false>(accumulator, p_frag[kk], v_desc, true);
    } else {
      const std::uint64_t v_desc = isa::wgmma_descriptor(v_tile + std::size_t{static_cast<unsigned>(kk)} * 16 * T::row_bytes,
                                                         static_cast<std::uint32_t>(T::k_block_bytes), 1024,
                                                         isa::WgmmaSwizzle::bytes128);
      isa::wgmma_rs<T::head_dim, Element, true>(accumulator, p_frag[kk], v_desc, true);
    }
  }
  isa::wgmma_commit_group();
  isa::wgmma_fence_operand(accumulator);
}

// P (the probabilities in S's accumulators) as the A fragments of P·V. 16-bit: accumulator tiles 2j and 2j+1
// are exactly k-step j's fragment (warp_tiles.cuh). e4m3: k-step j covers tiles 4j..4j+3; with V^T's columns
// in fp8_key_of_column's order, register r holds the thread's own elements of rows r % 2 of tiles
// 4j + 2(r / 2) and 4j + 2(r / 2) + 1.
template <class Element, int KeyTiles, int KeySteps>
FAPROBE_DEVICE void probabilities_as_a(const float (&probabilities)[KeyTiles][4], std::uint32_t (&p_frag)[KeySteps][4]) {
  if constexpr (std::is_same_v<Element, isa::E4M3>) {
    FAPROBE_UNROLL
    for (int j = 0; j < KeySteps; ++j) {
      FAPROBE_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int tile = 4 * j + 2 * (r / 2), row = 2 * (r % 2);
        p_frag[j][r] = isa::E4M3::pack4(probabilities[tile][row], probabilities[tile][row + 1],
                                        probabilities[tile + 1][row], probabilities[tile + 1][row + 1]);
      }
    }
  } else {
    tiles::probabilities_as_a<Element>(probabilities, p_frag);
  }
}

// A consumer warpgroup: for each of the CTA's tiles, its 64 rows' pass over the key blocks.
template <class Element, class T, Defect kDefect>
FAPROBE_DEVICE void consume(const Params& params, unsigned consumer) {
  constexpr int key_tiles = T::block_k / 8;
  constexpr int key_steps = T::block_k / T::wgmma_k;
  using OutputElement = std::conditional_t<T::fp8, isa::BFloat16, Element>;  // e4m3 writes bf16
  constexpr int dim_tiles = T::head_dim / 8;
  const AttentionParams& p = params.attention;
  const unsigned thread = isa::thread_linear_idx() % 128;  // within the warpgroup
  const unsigned warp = thread / 32;
  const unsigned lane = thread % 32;
  const NamedBarrier my_turn = consumer == 0 ? NamedBarrier::consumer0_turn : NamedBarrier::consumer1_turn;
  const NamedBarrier other_turn = consumer == 0 ? NamedBarrier::consumer1_turn : NamedBarrier::consumer0_turn;
  const int diagonal = p.seq_k - p.seq_q;
  const int mask_diagonal = kDefect == Defect::causal_off_by_one ? diagonal + 1 : diagonal;
  const unsigned consumers = T::consumer_threads;
  const std::uint32_t never = p.seq_q < 0 ? 1u : 0u;  // 0: seq_q ≥ 0 always (make_attention_params checks it)
  if (consumer == 1) named_arrive(NamedBarrier::consumer0_turn, consumers);  // consumer 0 issues first

  int load = 0;
  int tile_count = 0;
  for (int tile = static_cast<int>(isa::block_idx_x()); tile < params.tiles; tile += static_cast<int>(isa::grid_dim_x())) {
    const Tile t = tile_at<T>(p, tile);
    const int row0 = t.query_block * T::block_q + static_cast<int>(consumer) * T::rows_per_consumer + static_cast<int>(warp) * 16;
    const int blocks = key_blocks<T>(p, t.query_block);

    // Key blocks [0, full_blocks) are seen whole by every row of this consumer (bounded by its first row, which
    // sees the fewest keys; rows past seq_q read zero Q): the steady-state loop runs them without a mask.
    // The blocks from full_blocks on (the ragged last one, those crossing the causal diagonal) are masked.
    // The blocks are walked from the last to the first, as flash-attention's FA-3 does, so that the masked
    // ones come first and the mask-free loop follows.
    int full_blocks = p.seq_k / T::block_k;
    if (p.causal) {
      const int first_row = t.query_block * T::block_q + static_cast<int>(consumer) * T::rows_per_consumer;
      const int first_row_end = first_row + mask_diagonal + 1;  // keys [0, first_row_end) are seen by every row
      const int fully_seen = first_row_end > 0 ? first_row_end / T::block_k : 0;
      if (fully_seen < full_blocks) full_blocks = fully_seen;
    }

    float output[dim_tiles][4] = {};
    float scores[1][key_tiles][4];
    std::uint32_t p_frag[key_steps][4];
    float alpha[OnlineSoftmax::rows];
    OnlineSoftmax softmax;
    softmax.reset(p.scale_log2);
    isa::mbarrier_wait_parity(T::q_full, static_cast<unsigned>(tile_count & 1));
    const auto stage_of = [](int load_index) { return static_cast<unsigned>(load_index % T::stages); };
    const auto parity_of = [](int load_index) { return static_cast<unsigned>((load_index / T::stages) & 1); };

    // The first block (the last key block): its S has no P·V to overlap with. Masked when it must be.
    if (blocks > 0) {
      const int j = blocks - 1;
      isa::mbarrier_wait_parity(T::k_full + 8 * stage_of(load), parity_of(load));
      named_sync(my_turn, consumers);  // this consumer's turn at the tensor cores
      isa::wgmma_fence();
      issue_scores<Element, T, kDefect>(scores, consumer, T::k_offset + stage_of(load) * T::k_tile_bytes);
      named_arrive(other_turn, consumers);
      isa::wgmma_wait_group<0>();
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::block_k / 2]>(&scores[0][0][0]));
      if constexpr (kDefect != Defect::never_released) isa::mbarrier_arrive(T::k_empty + 8 * stage_of(load));
      if (j >= full_blocks) tiles::apply_mask(scores, j * T::block_k, row0, p.seq_k, p.causal, mask_diagonal, lane);
      softmax.absorb</*IsFirst=*/true, /*CheckInf=*/true>(scores[0], alpha);  // O is still zero: no alpha
      probabilities_as_a<Element>(scores[0], p_frag);
      ++load;
    }
    // One block j of the steady state (FA-3's intra-warpgroup overlap): S_j = Q·K_jᵀ and O += P_{j+1}·V_{j+1}
    // issued back to back, the softmax of S_j while P_{j+1}·V_{j+1} is in the tensor cores, O rescaled once
    // that wgmma is waited for. kMasked (a std::bool_constant) picks the masked body or the mask-free one.
    const auto key_block_step = [&](int j, auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      const unsigned stage = stage_of(load), previous_stage = stage_of(load - 1);
      if constexpr (kDefect != Defect::no_full_wait) isa::mbarrier_wait_parity(T::k_full + 8 * stage, parity_of(load));
      named_sync(my_turn, consumers);  // this consumer's turn: S_j, then P_{j+1}·V_{j+1}
      if constexpr (kDefect != Defect::no_wgmma_fence) isa::wgmma_fence();
      issue_scores<Element, T, kDefect>(scores, consumer, T::k_offset + stage * T::k_tile_bytes);
      isa::mbarrier_wait_parity(T::v_full + 8 * previous_stage, parity_of(load - 1));
      issue_pv<Element, T>(output, p_frag, T::v_offset + previous_stage * T::v_tile_bytes);
      named_arrive(other_turn, consumers);
      if constexpr (kDefect == Defect::scores_read_in_flight) {
        isa::wgmma_wait_group<2>();
      } else {
        isa::wgmma_wait_group<1>();  // S_j is in; P_{j+1}·V_{j+1} may still run
      }
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::block_k / 2]>(&scores[0][0][0]));
      if constexpr (kDefect != Defect::never_released) isa::mbarrier_arrive(T::k_empty + 8 * stage);
      if constexpr (kMasked) tiles::apply_mask(scores, j * T::block_k, row0, p.seq_k, p.causal, mask_diagonal, lane);
      softmax.absorb</*IsFirst=*/false, /*CheckInf=*/kMasked>(scores[0], alpha);
      // ptxas hoists the wait below above the whole softmax unless something it keeps in order pins it here.
      isa::wgmma_wait_after(softmax.row_sum[0], softmax.row_sum[1], never);
      isa::wgmma_wait_group<0>();
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::head_dim / 2]>(&output[0][0]));
      // P_{j+1} was read by the wgmma until now: kept live to here, its registers take no softmax temporary,
      // which would make ptxas wait for the wgmma before the softmax (the overlap lost).
#if defined(__CUDACC__)
#endif
      isa::mbarrier_arrive(T::v_empty + 8 * previous_stage);
      if constexpr (kDefect != Defect::no_rescale) {
        FAPROBE_UNROLL
        for (int d = 0; d < dim_tiles; ++d) {
          FAPROBE_UNROLL
          for (int e = 0; e < 4; ++e) output[d][e] *= alpha[e / 2];
        }
      }
      probabilities_as_a<Element>(scores[0], p_frag);
      ++load;
    };
    int j = blocks - 2;
    for (; j >= full_blocks; --j) key_block_step(j, std::true_type{});
    for (; j >= 0; --j) key_block_step(j, std::false_type{});
    if (blocks > 0) {  // the last block's P·V
      const unsigned stage = stage_of(load - 1);
      isa::mbarrier_wait_parity(T::v_full + 8 * stage, parity_of(load - 1));
      isa::wgmma_fence();
      issue_pv<Element, T>(output, p_frag, T::v_offset + stage * T::v_tile_bytes);
      isa::wgmma_wait_group<0>();
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::head_dim / 2]>(&output[0][0]));
      isa::mbarrier_arrive(T::v_empty + 8 * stage);
    }
    softmax.finalize();
    isa::mbarrier_arrive(T::q_empty);  // this thread is done with the tile's Q
    ++tile_count;

    // Epilogue: O = acc / l in the output dtype, written from registers (a 4-byte pair per thread, 16 bytes
    // per quad per row), and the LSE from the row state.
    const std::size_t q_seq_stride = std::size_t{static_cast<unsigned>(p.heads)} * T::head_dim;
    const std::size_t q_base =
        (std::size_t{static_cast<unsigned>(t.batch)} * static_cast<unsigned>(p.seq_q) * static_cast<unsigned>(p.heads) +
         static_cast<unsigned>(t.head)) * T::head_dim;
    FAPROBE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + static_cast<int>(lane / 4) + 8 * r;
      if (row >= p.seq_q) continue;
      const float inverse_sum = softmax.inverse_sum(r) * (kDefect == Defect::no_v_scale ? 1.0f : params.output_scale);
      const std::size_t row_base = q_base + std::size_t{static_cast<unsigned>(row)} * q_seq_stride + (lane % 4) * 2;
      FAPROBE_UNROLL
      for (int d = 0; d < dim_tiles; ++d) {
        params.output_pairs[(row_base + std::size_t{static_cast<unsigned>(d)} * 8) / 2] =
            OutputElement::pack2(output[d][2 * r] * inverse_sum, output[d][2 * r + 1] * inverse_sum);
      }
      if (lane % 4 == 0 && p.lse.size() != 0) {
        const std::size_t lse_base =
            (std::size_t{static_cast<unsigned>(t.batch)} * static_cast<unsigned>(p.heads) + static_cast<unsigned>(t.head)) *
            static_cast<unsigned>(p.seq_q);
        p.lse[lse_base + static_cast<unsigned>(row)] = softmax.log_sum_exp(r);
      }
    }
  }
  // Balance the pingpong: consumer 1 arrived at consumer0_turn once more than consumer 0 waited there (its
  // arrival before the first tile). Consumer 0 takes that last turn, so no arrival is left pending when the
  // CTA exits (the emulator requires named barriers to balance; it waits only for consumer 1 to have issued
  // its last GEMMs).
  if (consumer == 0) named_sync(NamedBarrier::consumer0_turn, consumers);
}

}  // namespace detail

// The kernel body, run by each of Traits::threads threads of a persistent CTA; grid: at most one CTA per
// SM and at most Params::tiles CTAs. Traits::shared_bytes of dynamic shared memory.
template <class Element, int HeadDim, Defect kDefect = Defect::none>
FAPROBE_DEVICE void forward_body(const Params& params) {
  using T = TraitsOf<Element, HeadDim>;
  const unsigned thread = isa::thread_linear_idx();
  const unsigned warpgroup = thread / 128;
  if (thread == 0) {
    isa::mbarrier_init(T::q_full, 1);
    isa::mbarrier_init(T::q_empty, T::consumer_threads);
    for (unsigned s = 0; s < T::stages; ++s) {
      isa::mbarrier_init(T::k_full + 8 * s, 1);
      isa::mbarrier_init(T::k_empty + 8 * s, T::consumer_threads);
      isa::mbarrier_init(T::v_full + 8 * s, 1);
      isa::mbarrier_init(T::v_empty + 8 * s, T::consumer_threads);
    }
    isa::fence_mbarrier_init();
  }
  isa::sync_threads();  // the barriers are initialized before any role uses them
  if (warpgroup == 0) {
    isa::setmaxnreg<T::producer_registers, false>();
    if (thread / 32 == 0 && isa::elect_sync()) {
      isa::prefetch_tensor_map(params.q_map);
      isa::prefetch_tensor_map(params.k_map);
      isa::prefetch_tensor_map(params.v_map);
      detail::produce<T, kDefect>(params);
    }
    return;
  }
  isa::setmaxnreg<T::consumer_registers, true>();
  detail::consume<Element, T, kDefect>(params, warpgroup - 1);
}

}  // namespace faprobe::cuda::fa3
