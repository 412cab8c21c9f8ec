// cuda.fa3: FlashAttention-3's forward pass for Hopper (Shah et al. 2024), written once on the instruction
// layer: compiled by nvcc for sm_90a only (one generated .cu per instantiation, fa3/CMakeLists.txt) and by the
// host compiler under the emulator (fa3_emulated.cpp). The algorithm is FA-2's (one pass over the keys with the
// online softmax, normalized once); what changes is how the GPU is kept busy, read as roles:
//
// - A CTA is 1 + C warpgroups (C = block_q / 64 consumers: 2 or 3). Warpgroup 0 is the producer: after giving
//   most of its registers away (setmaxnreg.dec), one elected thread loads the tile's Q once and then K_j and V_j
//   by TMA (cp.async.bulk.tensor) into a ring of Stages shared-memory stages, each guarded by a "full" mbarrier
//   (completed by the copy's transaction bytes) and an "empty" one (completed when every consumer thread has
//   finished reading the stage). The producer never computes.
// - Warpgroups 1..C are consumers (setmaxnreg.inc): consumer c owns query rows 64c..64c+63 of the CTA's tile.
//   Per key block it issues S = Q·K_jᵀ as asynchronous wgmma with both operands in shared memory, runs the
//   online softmax on S in registers (cuda/common/online_softmax.cuh, shared with FA-1, FA-2 and FlashDecoding),
//   and issues O += P·V_j as wgmma with P from registers (the accumulator of S is, element for element, the A
//   fragment of P·V; no trip through shared memory) and V_j N-major.
// - Intra-warpgroup overlap (FA-3's Algorithm 2): S_j = Q·K_jᵀ and O += P_{j+1}·V_{j+1} are issued back to
//   back (the key blocks run from the last to the first), and the softmax of S_j runs while P_{j+1}·V_{j+1} is
//   still in the tensor cores; O is rescaled only after that wgmma has been waited for. ptxas would hoist
//   that wait above the softmax (it has no dependence on it): isa::wgmma_wait_after pins it after the row
//   sums, and tests/test_static_checks.cpp counts the exponentials that stay between the two waits.
// - Pingpong between the consumers: named barriers (NamedBarrier) make the consumers take turns issuing their
//   GEMMs, round robin, so that one's softmax (exp2, the multi-function unit) overlaps another's GEMMs (the
//   tensor cores).
// - Epilogue: each consumer writes its 64 rows of O, normalized and in the output dtype, into shared memory with
//   stmatrix (128-byte swizzled, as TMA reads it) and one thread stores them with TMA (cp.async.bulk.tensor,
//   one instruction per 64-column block; rows past seq_q are not written). For 16-bit inputs the staging area
//   is the tile's Q, which no wgmma reads any more (O has Q's shape and element size), and the consumer
//   releases Q to the producer only once the store has read it; e4m3's bf16 O is twice Q's size and has its own.
// - A persistent grid (one CTA per SM, at most the tile count) walks the (query block, head, batch) tiles with a
//   stride of the grid size. The tiles are ordered in L2 sections (FA-3's tile scheduler): the (batch, head)
//   pairs are cut into sections whose K and V fit in 32 MiB of L2 (about two thirds of an H100's or H200's
//   50 MB), and within a section the query blocks run from the last to the first (under causal the longest
//   tiles first, so the short ones fill the tail), the section's pairs fastest: each wave reads the K and V of
//   a few heads, from L2.
//
// Variants: the tile (block_q × block_k) is a template argument; fa3/CMakeLists.txt lists the instantiations
// built, each reachable by name (cuda.fa3@128x176), and which one plain cuda.fa3 runs for each (dtype,
// head_dim, mask). flash-attention's choices among them: 128×176 for 16-bit d 128 without a mask (128×128
// causal), 192×128 (three consumers) at d 64, 128×80 at d 256 (hopper/tile_size.h).
//
// Shared memory tiles are TMA's swizzled boxes of one column block (128 bytes of a row: 64 16-bit or 128 e4m3
// elements) by the tile's rows: a head_dim of d is d·size/128 such column blocks, which the wgmma descriptors
// address as canonical K-major (Q, K) and N-major (V) layouts with 128-byte swizzle (isa_wgmma.hpp). Every
// tile is 1024-byte aligned so that the swizzle pattern starts with it.
//
// Masks and edges are FA-2's: bottom-right causal (row i sees keys j ≤ i + seq_k − seq_q), rows that see
// no key written as zeros with LSE −inf; a CTA stops at the last key block its last row sees (causal block
// skipping). The blocks that need a mask (the ragged last one, those crossing a consumer's diagonal) are the
// first ones walked and run in a loop of their own; the rest run in a mask-free steady-state loop (the
// softmax without its -inf test: online_softmax.cuh). TMA fills the parts of a box past seq_q or seq_k with
// zeros, so no load needs a bound. GQA/MQA: query head h reads KV head h / (heads / kv_heads).
//
// Costs per (batch, head): FLOPs 4·seq_q·seq_k·d (about half under causal); HBM bytes: Q read and O written
// once (2·seq_q·d·2), K and V read once per query block (from L2 but for the first), the LSE (4·seq_q). At
// bf16 d 128, seq 8k, one 128×176 tile's loop step is 2·128·176·128·2 = 11.5 MFLOP on 22 KiB of K and 22 KiB
// of V: ~520 FLOP per byte from shared memory, far above what starves the tensor cores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/common/attention_params.hpp"
#include "cuda/common/emu/device.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/isa_tma.hpp"
#include "cuda/common/isa_wgmma.hpp"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/warp_tiles.cuh"

namespace faprobe::cuda::fa3 {

// One tile of the kernel: block_q query rows (64 per consumer warpgroup) by block_k keys per step. Per consumer
// thread the registers hold O (d/2 fp32), S (block_k/2 fp32) and P (block_k/4 packed registers for 16-bit,
// block_k/8 for e4m3), within the consumers' setmaxnreg budget (240 with two consumers, 160 with three):
//   16-bit d 64, 192×128: O 32 + S 64 + P 32.   d 128, 128×176: O 64 + S 88 + P 44.   d 256, 128×80: O 128 +
//   S 40 + P 20.   e4m3 d 128, 128×128: O 64 + S 64 + P 16.
// Shared memory: Q (block_q·d·size), two stages of K and of V (block_k·d·size each), e4m3's O staging
// (block_q·d·2), the mbarriers: at most 227 KiB (sm_90). 16-bit d 128 at 128×176: 32 + 2·44 + 2·44 = 208 KiB.
// Two stages for K and for V: 16-bit d 256 leaves no room for three. A tile row is 128 bytes (64 16-bit or 128
// e4m3 columns, 128-byte swizzle), or all of d when that is shorter (e4m3 d 64: 64-byte rows, 64-byte
// swizzle). e4m3's V arrives transposed (V^T, keys contiguous: its wgmma takes K-major operands only): one box
// of d rows by block_k = 128 keys (a 128-byte swizzled row holds at most 128 keys).
template <int HeadDim, int ElementBytes, int BlockQ, int BlockK>
struct Traits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "cuda.fa3 is instantiated for d 64, 128, 256");
  static_assert(ElementBytes == 2 || ElementBytes == 1, "16-bit (fp16, bf16) or e4m3 elements");
  static_assert(BlockQ == 128 || BlockQ == 192, "two or three consumer warpgroups of 64 rows");
  static constexpr int head_dim = HeadDim;
  static constexpr bool fp8 = ElementBytes == 1;
  static constexpr int rows_per_consumer = 64;  // wgmma's M
  static constexpr int consumers = BlockQ / rows_per_consumer;
  static constexpr int warpgroups = 1 + consumers;  // the producer and the consumers
  static constexpr int threads = warpgroups * 128;
  static constexpr int consumer_threads = consumers * 128;
  static constexpr int min_ctas_per_sm = 1;
  static constexpr int block_q = BlockQ;
  static constexpr int block_k = BlockK;
  static constexpr int wgmma_k = fp8 ? 32 : 16;  // K of one wgmma: 32 bytes either way
  static_assert(block_k % 16 == 0 && block_k <= 256 && block_k % wgmma_k == 0,
                "block_k is wgmma's N for S (a multiple of 8 up to 256) and whole k-steps of P·V");
  static_assert(!fp8 || block_k == 128, "e4m3's V^T box holds 128 keys per 128-byte row");
  static constexpr int stages = 2;
  // The register budget of the warp specialization: every thread enters with registers_at_entry (what ptxas
  // allots under __launch_bounds__(threads, min_ctas_per_sm): 168 for 384 threads, 128 for 512), then the
  // producer gives registers away and the consumers take them. The sum must be exact: less would leave
  // registers idle, more makes setmaxnreg.inc wait for registers no warpgroup frees. test_static_checks
  // checks that each compiled kernel enters with exactly registers_at_entry. (FA-3: 24/240 with two
  // consumers, 32/160 with three.)
  static constexpr unsigned registers_at_entry = isa::registers_at_entry(threads, min_ctas_per_sm);
  static constexpr unsigned producer_registers = consumers == 2 ? 24 : 32;
  static constexpr unsigned consumer_registers = consumers == 2 ? 240 : 160;
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
  // O staging for the TMA store: column blocks of 64 16-bit columns (128-byte swizzled rows) by block_q rows,
  // Q's own layout for 16-bit inputs, whose tile it reuses; e4m3's bf16 O has a region of its own.
  static constexpr bool o_aliases_q = !fp8;
  static constexpr int o_column_blocks = HeadDim / 64;
  static constexpr std::size_t o_block_bytes = std::size_t{block_q} * 128;
  static constexpr std::size_t o_tile_bytes = o_block_bytes * o_column_blocks;
  // Shared memory: Q, the K stages, the V stages, e4m3's O staging, then the mbarriers (8 bytes each).
  static constexpr std::size_t q_offset = 0;
  static constexpr std::size_t k_offset = q_offset + q_tile_bytes;
  static constexpr std::size_t v_offset = k_offset + stages * k_tile_bytes;
  static constexpr std::size_t o_offset = o_aliases_q ? q_offset : v_offset + stages * v_tile_bytes;
  static constexpr std::size_t barrier_offset = v_offset + stages * v_tile_bytes + (o_aliases_q ? 0 : o_tile_bytes);
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

  static_assert(q_block_bytes % 1024 == 0 && k_block_bytes % 1024 == 0 && v_block_bytes % 1024 == 0 &&
                    o_block_bytes % 1024 == 0 && o_offset % 1024 == 0,
                "tiles keep the 1024-byte swizzle alignment");
  static_assert(o_aliases_q ? o_tile_bytes == q_tile_bytes : true, "16-bit O takes exactly Q's place");
  static_assert(shared_bytes <= emu::emulated_device.max_shared_bytes_per_block,
                "sm_90 allows 227 KiB of shared memory per block (opt-in)");
};
// The Traits of an element tag and a tile.
template <class Element, int HeadDim, int BlockQ, int BlockK>
using TraitsOf = Traits<HeadDim, std::is_same_v<Element, isa::E4M3> ? 1 : 2, BlockQ, BlockK>;

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
  // first_turn + c: consumer c may issue its GEMMs (consumer c − 1, round robin, arrives there when it has
  // issued its own): the pingpong.
  first_turn = 1,
  // first_epilogue + c: consumer c's 128 threads, around its TMA store of O.
  first_epilogue = 4,
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
  no_store_fence,         // no fence.proxy.async between O's stmatrix and its TMA store: the store may miss it
  // Lost speed, which only the static checks of the compiled code show (tests/static_checks_planted.cu):
  slow_softmax,      // the softmax on ex2.approx without .ftz and a compare-and-select max (SlowSoftmaxMath)
  mask_every_block,  // the steady-state loop masks too, behind a run-time test, as before the masked blocks were peeled
  unpinned_wait,     // no wgmma_wait_after: ptxas hoists the P·V wait above the softmax (no overlap left)
};

// The slow softmax of Defect::slow_softmax: each MUFU.EX2 in a range check and two multiplies, each max an
// FSETP and an FSEL.
struct SlowSoftmaxMath {
  static FAPROBE_DEVICE float exp2(float x) { return isa::ex2_approx(x); }
  static FAPROBE_DEVICE float max(float a, float b) { return a > b ? a : b; }
};

// The kernel's arguments: FA-2's, plus the tensor maps of Q, K, V and O (boxes of one column block by block_q,
// block_k or 64 rows of one head; dims (d, seq, heads, batch); e4m3's V^T: (seq_k padded, d, kv_heads, batch),
// boxes of block_k keys by d rows) and the persistent schedule. On the GPU the whole struct is a
// __grid_constant__ parameter, so the maps' addresses are what cp.async.bulk.tensor takes.
struct Params {
  isa::TensorMap q_map;
  isa::TensorMap k_map;
  isa::TensorMap v_map;
  isa::TensorMap o_map;
  AttentionParams attention;  // for e4m3, q/k/v are unused (the maps hold them) and scale_log2 includes Q's and K's scales
  float output_scale = 1.0f;  // e4m3: V's scale, applied to O at the end; 1 otherwise
  int tiles = 0;              // query blocks · heads · batch
  int query_blocks = 0;       // ceil(seq_q / block_q)
  int section_pairs = 1;      // (batch, head) pairs per L2 section of the schedule
};
// The maps are 128-byte aligned members (isa::TensorMap, as CUtensorMap), so the struct is too, in host
// memory and in the kernel's parameter space; kernel parameters are limited to 4 KiB (CUDA C++ Programming
// Guide, "Function Parameters"; 32 KiB from CUDA 12.1 on Volta and newer, but 4 KiB everywhere).
static_assert(alignof(Params) == alignof(isa::TensorMap) && sizeof(Params) <= 4096,
              "Params is aligned as its tensor maps and fits the kernel parameter space");

// The L2 share one section of the schedule may fill with K and V (flash-attention's tile scheduler uses 32 MiB).
inline constexpr std::int64_t kL2SectionBytes = std::int64_t{32} << 20;

// CTAs of the persistent grid: one per SM, at most one per tile.
inline unsigned persistent_ctas(const Params& params, int sms) {
  return static_cast<unsigned>(params.tiles < sms ? params.tiles : sms);
}

// (batch, head) pairs per L2 section: as many KV heads as fit in kL2SectionBytes (at least one), with all the
// query heads that read them (GQA), at most every pair.
inline int section_pairs(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, std::int64_t seq_k,
                         int head_dim, int element_bytes) {
  const std::int64_t kv_head_bytes = seq_k * 2 * head_dim * element_bytes;
  const std::int64_t kv_heads_fitting = kv_head_bytes > 0 && kv_head_bytes < kL2SectionBytes ? kL2SectionBytes / kv_head_bytes : 1;
  const std::int64_t pairs = kv_heads_fitting * (heads / kv_heads);
  return static_cast<int>(pairs < batch * heads ? pairs : batch * heads);
}

namespace detail {

// The (query block, head, batch) of schedule position `tile`: L2 sections of section_pairs (batch, head) pairs
// (the last one shorter), within a section the query blocks from the last to the first, the pairs fastest.
struct ScheduledTile {
  int query_block, head, batch;
};
FAPROBE_DEVICE ScheduledTile tile_at(const Params& params, int tile) {
  const AttentionParams& p = params.attention;
  const int section_tiles = params.section_pairs * params.query_blocks;
  const int section = tile / section_tiles;
  const int first_pair = section * params.section_pairs;
  const int pairs_left = p.batch * p.heads - first_pair;
  const int pairs = params.section_pairs < pairs_left ? params.section_pairs : pairs_left;
  const int within = tile - section * section_tiles;
  const int pair = first_pair + within % pairs;
  return {params.query_blocks - 1 - within / pairs, pair % p.heads, pair / p.heads};
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

FAPROBE_DEVICE unsigned barrier_id(NamedBarrier first, unsigned offset) { return static_cast<unsigned>(first) + offset; }

// The producer: one elected thread of warpgroup 0 walks the CTA's tiles and issues every TMA load.
template <class T, Defect kDefect>
FAPROBE_DEVICE void produce(const Params& params) {
  const AttentionParams& p = params.attention;
  const int group = p.heads / p.kv_heads;
  int load = 0;  // K/V loads issued so far: stage load % Stages, round load / Stages
  int tile_count = 0;
  for (int tile = static_cast<int>(isa::block_idx_x()); tile < params.tiles; tile += static_cast<int>(isa::grid_dim_x())) {
    const ScheduledTile t = tile_at(params, tile);
    // Q: wait until every consumer is done with the previous tile's Q (and, where O is staged in it, its store
    // has read it); the first wait passes at once.
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

// The epilogue's first half: this warp's 16 rows of O, times each row's factor (1/l, and e4m3's V scale), in
// the output dtype, into its consumer's rows of the staging tile (column blocks of 64 columns by block_q rows of
// 128 bytes, 128-byte swizzle: chunk c of row r at chunk c ^ (r % 8), what the O map's TMA store reads).
// stmatrix.x4 stores 16 rows by 16 columns per instruction: matrices (rows 0-7 | 8-15) × (columns of tile t |
// t + 1), lane 8i + r giving row r of matrix i, each register the accumulator pair the lane holds of it.
template <class OutputElement, class T, int DimTiles>
FAPROBE_DEVICE void stage_output(const float (&output)[DimTiles][4], const float (&row_factor)[2], unsigned consumer,
                                 unsigned warp, unsigned lane) {
  const unsigned matrix = lane / 8;
  const unsigned row = consumer * T::rows_per_consumer + warp * 16 + (matrix % 2) * 8 + lane % 8;
  FAPROBE_UNROLL
  for (int t = 0; t < DimTiles; t += 2) {
    const unsigned chunk = static_cast<unsigned>(t % 8) + matrix / 2;  // 16-byte chunk of the 128-byte row
    const std::size_t address = T::o_offset + std::size_t{static_cast<unsigned>(t / 8)} * T::o_block_bytes +
                                std::size_t{row} * 128 + ((chunk ^ (row % 8)) * 16);
    const std::uint32_t pairs[4] = {
        OutputElement::pack2(output[t][0] * row_factor[0], output[t][1] * row_factor[0]),
        OutputElement::pack2(output[t][2] * row_factor[1], output[t][3] * row_factor[1]),
        OutputElement::pack2(output[t + 1][0] * row_factor[0], output[t + 1][1] * row_factor[0]),
        OutputElement::pack2(output[t + 1][2] * row_factor[1], output[t + 1][3] * row_factor[1])};
    isa::stmatrix(address, pairs);
  }
}

// A consumer warpgroup: for each of the CTA's tiles, its 64 rows' pass over the key blocks, then its rows of O.
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
  const unsigned my_turn = barrier_id(NamedBarrier::first_turn, consumer);
  const unsigned next_turn = barrier_id(NamedBarrier::first_turn, (consumer + 1) % T::consumers);
  const unsigned my_epilogue = barrier_id(NamedBarrier::first_epilogue, consumer);
  const int diagonal = p.seq_k - p.seq_q;
  const int mask_diagonal = kDefect == Defect::causal_off_by_one ? diagonal + 1 : diagonal;
  constexpr unsigned turn_threads = 2 * 128;  // the consumer taking its turn and the one handing it over
  const std::uint32_t never = p.seq_q < 0 ? 1u : 0u;  // 0: seq_q ≥ 0 always (make_attention_params checks it)
  if (consumer == T::consumers - 1) isa::bar_arrive(barrier_id(NamedBarrier::first_turn, 0), turn_threads);  // 0 first

  int load = 0;
  int tile_count = 0;
  for (int tile = static_cast<int>(isa::block_idx_x()); tile < params.tiles; tile += static_cast<int>(isa::grid_dim_x())) {
    const ScheduledTile t = tile_at(params, tile);
    const int first_row = t.query_block * T::block_q + static_cast<int>(consumer) * T::rows_per_consumer;
    const int row0 = first_row + static_cast<int>(warp) * 16;
    const int blocks = key_blocks<T>(p, t.query_block);
    // Key blocks [0, full_blocks) are seen whole by every row of this consumer (bounded by its first row, which
    // sees the fewest keys; rows past seq_q read zero Q): the steady-state loop runs them without a mask.
    // The blocks from full_blocks on (the ragged last one, those crossing the causal diagonal) are masked.
    // The blocks are walked from the last to the first, as flash-attention's FA-3 does, so that the masked
    // ones come first and the mask-free loop follows.
    int full_blocks = p.seq_k / T::block_k;
    if (p.causal) {
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
      isa::bar_sync(my_turn, turn_threads);  // this consumer's turn at the tensor cores
      isa::wgmma_fence();
      issue_scores<Element, T, kDefect>(scores, consumer, T::k_offset + stage_of(load) * T::k_tile_bytes);
      isa::bar_arrive(next_turn, turn_threads);
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
      isa::bar_sync(my_turn, turn_threads);  // this consumer's turn: S_j, then P_{j+1}·V_{j+1}
      if constexpr (kDefect != Defect::no_wgmma_fence) isa::wgmma_fence();
      issue_scores<Element, T, kDefect>(scores, consumer, T::k_offset + stage * T::k_tile_bytes);
      isa::mbarrier_wait_parity(T::v_full + 8 * previous_stage, parity_of(load - 1));
      issue_pv<Element, T>(output, p_frag, T::v_offset + previous_stage * T::v_tile_bytes);
      isa::bar_arrive(next_turn, turn_threads);
      if constexpr (kDefect == Defect::scores_read_in_flight) {
        isa::wgmma_wait_group<2>();
      } else {
        isa::wgmma_wait_group<1>();  // S_j is in; P_{j+1}·V_{j+1} may still run
      }
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::block_k / 2]>(&scores[0][0][0]));
      if constexpr (kDefect != Defect::never_released) isa::mbarrier_arrive(T::k_empty + 8 * stage);
      if constexpr (kMasked) {
        tiles::apply_mask(scores, j * T::block_k, row0, p.seq_k, p.causal, mask_diagonal, lane);
      } else if constexpr (kDefect == Defect::mask_every_block) {
        if (p.causal || j * T::block_k + T::block_k > p.seq_k)
          tiles::apply_mask(scores, j * T::block_k, row0, p.seq_k, p.causal, mask_diagonal, lane);
      }
      using Math = std::conditional_t<kDefect == Defect::slow_softmax, SlowSoftmaxMath, SoftmaxMath>;
      softmax.absorb</*IsFirst=*/false, /*CheckInf=*/kMasked || kDefect == Defect::mask_every_block, Math>(scores[0], alpha);
      // ptxas hoists the wait below above the whole softmax unless something it keeps in order pins it here.
      if constexpr (kDefect != Defect::unpinned_wait) isa::wgmma_wait_after(softmax.row_sum[0], softmax.row_sum[1], never);
      isa::wgmma_wait_group<0>();
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::head_dim / 2]>(&output[0][0]));
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
    // Q is read by no wgmma of this consumer any more: released now, unless O is staged in it.
    if constexpr (!T::o_aliases_q) isa::mbarrier_arrive(T::q_empty);
    ++tile_count;
    softmax.finalize();

    // Epilogue: O = acc / l through shared memory and one TMA store per column block; the LSE from the row
    // state, one lane per row.
    float row_factor[2];
    FAPROBE_UNROLL
    for (int r = 0; r < 2; ++r)
      row_factor[r] = softmax.inverse_sum(r) * (kDefect == Defect::no_v_scale ? 1.0f : params.output_scale);
    // Every warp's wgmma has retired (they read the consumer's Q rows as one operand, which the staging
    // overwrites where O aliases Q; and the staging area of the previous tile is read, see below).
    isa::bar_sync(my_epilogue, 128);
    stage_output<OutputElement, T>(output, row_factor, consumer, warp, lane);
    if constexpr (kDefect != Defect::no_store_fence) isa::fence_proxy_async();  // stmatrix's writes, for TMA
    isa::bar_sync(my_epilogue, 128);  // every warp's rows are staged
    if (thread == 0) {
      FAPROBE_UNROLL
      for (int c = 0; c < T::o_column_blocks; ++c) {
        const int coords[4] = {64 * c, first_row, t.head, t.batch};
        isa::tma_store<4>(params.o_map, T::o_offset + std::size_t{static_cast<unsigned>(c)} * T::o_block_bytes +
                                            std::size_t{consumer} * T::rows_per_consumer * 128, coords);
      }
      isa::tma_store_commit_group();
      isa::tma_store_wait_group_read<0>();  // the staged rows are read: the area may be written again
    }
    if (lane % 4 == 0 && p.lse.size() != 0) {
      const std::size_t lse_base =
          (std::size_t{static_cast<unsigned>(t.batch)} * static_cast<unsigned>(p.heads) + static_cast<unsigned>(t.head)) *
          static_cast<unsigned>(p.seq_q);
      FAPROBE_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + static_cast<int>(lane / 4) + 8 * r;
        if (row < p.seq_q) p.lse[lse_base + static_cast<unsigned>(row)] = softmax.log_sum_exp(r);
      }
    }
    isa::bar_sync(my_epilogue, 128);  // no thread writes the staging area (or lets Q in) before the store read it
    if constexpr (T::o_aliases_q) isa::mbarrier_arrive(T::q_empty);
  }
  if (thread == 0) isa::tma_store_wait_group<0>();  // O is in global memory before the CTA exits
  // Balance the pingpong: the last consumer arrived at consumer 0's turn once more than consumer 0 waited
  // there (its arrival before the first tile). Consumer 0 takes that last turn, so no arrival is left pending
  // when the CTA exits (the emulator requires named barriers to balance).
  if (consumer == 0) isa::bar_sync(barrier_id(NamedBarrier::first_turn, 0), turn_threads);
}

}  // namespace detail

// The kernel body, run by each of Traits::threads threads of a persistent CTA; grid: at most one CTA per
// SM and at most Params::tiles CTAs. Traits::shared_bytes of dynamic shared memory.
template <class Element, int HeadDim, int BlockQ, int BlockK, Defect kDefect = Defect::none>
FAPROBE_DEVICE void forward_body(const Params& params) {
  using T = TraitsOf<Element, HeadDim, BlockQ, BlockK>;
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
      isa::prefetch_tensor_map(params.o_map);
      detail::produce<T, kDefect>(params);
    }
    return;
  }
  isa::setmaxnreg<T::consumer_registers, true>();
  detail::consume<Element, T, kDefect>(params, warpgroup - 1);
}

}  // namespace faprobe::cuda::fa3
