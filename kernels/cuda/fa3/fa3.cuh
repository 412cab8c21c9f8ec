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
// - Intra-warpgroup overlap (FA-3's Algorithm 2): S_{j+1} = Q·K_{j+1}ᵀ and O += P_j·V_j are issued back to
//   back, and the softmax of S_{j+1} runs while P_j·V_j is still in the tensor cores; O is rescaled only
//   after that wgmma has been waited for.
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
// skipping), and masks by index only on blocks that cross the diagonal or the end of the keys. TMA fills
// the parts of a box past seq_q or seq_k with zeros, so no load needs a bound. GQA/MQA: query head h reads
// KV head h / (heads / kv_heads).
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

// Tile sizes per head_dim. Per consumer thread the registers hold O (d/2 fp32), S (block_k/2 fp32) and P
// (block_k/4 packed registers), within setmaxnreg's 240:
//   d = 64:  block_k 128: O 32 + S 64 + P 32.   Shared memory 16 + 2·2·16 KiB = 80 KiB.
//   d = 128: block_k 128: O 64 + S 64 + P 32.   Shared memory 32 + 2·2·32 KiB = 160 KiB.
//   d = 256: block_k 64:  O 128 + S 32 + P 16.  Shared memory 64 + 2·2·32 KiB = 192 KiB.
// Two stages for K and for V (the issue's minimum; the shared memory of d 256 leaves no room for three).
template <int HeadDim>
struct Traits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "cuda.fa3 is instantiated for d 64, 128, 256");
  static constexpr int head_dim = HeadDim;
  static constexpr int warpgroups = 3;  // producer, consumer 0, consumer 1
  static constexpr int threads = warpgroups * 128;
  static constexpr int consumer_threads = 2 * 128;
  static constexpr int min_ctas_per_sm = 1;
  static constexpr int rows_per_consumer = 64;  // wgmma's M
  static constexpr int block_q = 2 * rows_per_consumer;
  static constexpr int block_k = HeadDim == 256 ? 64 : 128;
  static constexpr int stages = 2;
  static constexpr unsigned producer_registers = 24;
  static constexpr unsigned consumer_registers = 240;
  static_assert(128 * (producer_registers + 2 * consumer_registers) <= 65536, "the register file holds 64 Ki registers");

  static constexpr int column_blocks = HeadDim / 64;  // 128-byte swizzled column blocks of a tile
  static constexpr std::size_t swizzle_row_bytes = 128;
  static constexpr std::size_t q_block_bytes = std::size_t{block_q} * swizzle_row_bytes;   // one column block
  static constexpr std::size_t kv_block_bytes = std::size_t{block_k} * swizzle_row_bytes;
  static constexpr std::size_t q_tile_bytes = q_block_bytes * column_blocks;
  static constexpr std::size_t kv_tile_bytes = kv_block_bytes * column_blocks;
  // Shared memory: Q, the K stages, the V stages, then the mbarriers (8 bytes each).
  static constexpr std::size_t q_offset = 0;
  static constexpr std::size_t k_offset = q_offset + q_tile_bytes;
  static constexpr std::size_t v_offset = k_offset + stages * kv_tile_bytes;
  static constexpr std::size_t barrier_offset = v_offset + stages * kv_tile_bytes;
  static constexpr std::size_t q_full = barrier_offset;
  static constexpr std::size_t q_empty = q_full + 8;
  static constexpr std::size_t k_full = q_empty + 8;               // + 8·stage
  static constexpr std::size_t k_empty = k_full + 8 * stages;
  static constexpr std::size_t v_full = k_empty + 8 * stages;
  static constexpr std::size_t v_empty = v_full + 8 * stages;
  static constexpr std::size_t shared_bytes = v_empty + 8 * stages;
  static constexpr std::uint32_t q_bytes = static_cast<std::uint32_t>(q_tile_bytes);
  static constexpr std::uint32_t kv_bytes = static_cast<std::uint32_t>(kv_tile_bytes);

  static constexpr unsigned query_blocks(int seq_q) { return static_cast<unsigned>((seq_q + block_q - 1) / block_q); }

  static_assert(q_block_bytes % 1024 == 0 && kv_block_bytes % 1024 == 0, "tiles keep the 1024-byte swizzle alignment");
  static_assert(shared_bytes <= 227 * 1024, "sm_90 allows 227 KiB of shared memory per block (opt-in)");
};

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
};

// The kernel's arguments: FA-2's, plus the tensor maps of Q, K and V (boxes of 64 columns by block_q or
// block_k rows of one head; dims (d, seq, heads, batch)) and the persistent schedule. On the GPU the whole
// struct is a __grid_constant__ parameter, so the maps' addresses are what cp.async.bulk.tensor takes.
struct Params {
  isa::TensorMap q_map;
  isa::TensorMap k_map;
  isa::TensorMap v_map;
  AttentionParams attention;
  int tiles = 0;  // query blocks · heads · batch
};

// An H200's SMs: the persistent grid's size under emulation (the device "emulated sm_90a" stands for).
inline constexpr int kEmulatedSms = 132;

// CTAs of the persistent grid: one per SM, at most one per tile.
inline unsigned persistent_ctas(const Params& params, int sms) {
  return static_cast<unsigned>(params.tiles < sms ? params.tiles : sms);
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
      const int coords[4] = {64 * c, t.query_block * T::block_q, t.head, t.batch};
      isa::tma_load<4>(T::q_offset + std::size_t{static_cast<unsigned>(c)} * T::q_block_bytes, params.q_map, T::q_full, coords);
    }
    const int kv_head = t.head / group;
    const int blocks = key_blocks<T>(p, t.query_block);
    for (int j = 0; j < blocks; ++j, ++load) {
      const auto stage = static_cast<unsigned>(load % T::stages);
      const auto empty_parity = static_cast<unsigned>(((load / T::stages) & 1) ^ 1);
      const std::size_t k_tile = T::k_offset + stage * T::kv_tile_bytes;
      const std::size_t v_tile = T::v_offset + stage * T::kv_tile_bytes;
      isa::mbarrier_wait_parity(T::k_empty + 8 * stage, empty_parity);
      const std::uint32_t k_expected = kDefect == Defect::missing_expect_tx && j == 0 ? T::kv_bytes / 2 : T::kv_bytes;
      isa::mbarrier_arrive(T::k_full + 8 * stage, k_expected);
      for (int c = 0; c < T::column_blocks; ++c) {
        const int coords[4] = {64 * c, j * T::block_k, kv_head, t.batch};
        isa::tma_load<4>(k_tile + std::size_t{static_cast<unsigned>(c)} * T::kv_block_bytes, params.k_map, T::k_full + 8 * stage, coords);
      }
      isa::mbarrier_wait_parity(T::v_empty + 8 * stage, empty_parity);
      isa::mbarrier_arrive(T::v_full + 8 * stage, T::kv_bytes);
      for (int c = 0; c < T::column_blocks; ++c) {
        const int coords[4] = {64 * c, j * T::block_k, kv_head, t.batch};
        isa::tma_load<4>(v_tile + std::size_t{static_cast<unsigned>(c)} * T::kv_block_bytes, params.v_map, T::v_full + 8 * stage, coords);
      }
    }
    ++tile_count;
  }
}

// S = Q·K_jᵀ for consumer `consumer`'s 64 rows: head_dim / 16 wgmma k-steps, both operands K-major in
// 128-byte swizzled column blocks (step kk reads 32 bytes at (kk % 4)·32 of column block kk / 4).
template <class Element, class T, Defect kDefect, int KeyTiles>
FAPROBE_DEVICE void issue_scores(float (&scores)[1][KeyTiles][4], unsigned consumer, std::size_t k_tile) {
  constexpr auto k_swizzle = kDefect == Defect::swizzle_mismatch ? isa::WgmmaSwizzle::bytes64 : isa::WgmmaSwizzle::bytes128;
  float (&accumulator)[T::block_k / 2] = *reinterpret_cast<float (*)[T::block_k / 2]>(&scores[0][0][0]);
  isa::wgmma_fence_operand(accumulator);
  FAPROBE_UNROLL
  for (int kk = 0; kk < T::head_dim / 16; ++kk) {
    const std::size_t column_block = static_cast<unsigned>(kk / 4), within = static_cast<unsigned>(kk % 4) * 32;
    const std::uint64_t q_desc = isa::wgmma_descriptor(
        T::q_offset + column_block * T::q_block_bytes + consumer * T::rows_per_consumer * T::swizzle_row_bytes + within,
        16, 1024, isa::WgmmaSwizzle::bytes128);
    const std::uint64_t k_desc = isa::wgmma_descriptor(k_tile + column_block * T::kv_block_bytes + within, 16, 1024, k_swizzle);
    isa::wgmma_ss<T::block_k, Element>(accumulator, q_desc, k_desc, kk > 0);
  }
  isa::wgmma_commit_group();
  isa::wgmma_fence_operand(accumulator);
}

// O += P·V_j: block_k / 16 wgmma k-steps with P's A fragments from registers and V N-major (key rows of
// 128 bytes per column block; 8-key groups 1024 bytes apart, column blocks kv_block_bytes apart).
template <class Element, class T, int KeySteps, int DimTiles>
FAPROBE_DEVICE void issue_pv(float (&output)[DimTiles][4], const std::uint32_t (&p_frag)[KeySteps][4], std::size_t v_tile) {
  float (&accumulator)[T::head_dim / 2] = *reinterpret_cast<float (*)[T::head_dim / 2]>(&output[0][0]);
  isa::wgmma_fence_operand(accumulator);
  FAPROBE_UNROLL
  for (int kk = 0; kk < KeySteps; ++kk) {
    const std::uint64_t v_desc = isa::wgmma_descriptor(v_tile + std::size_t{static_cast<unsigned>(kk)} * 16 * T::swizzle_row_bytes,
                                                       static_cast<std::uint32_t>(T::kv_block_bytes), 1024,
                                                       isa::WgmmaSwizzle::bytes128);
    isa::wgmma_rs<T::head_dim, Element, true>(accumulator, p_frag[kk], v_desc, true);
  }
  isa::wgmma_commit_group();
  isa::wgmma_fence_operand(accumulator);
}

// A consumer warpgroup: for each of the CTA's tiles, its 64 rows' pass over the key blocks.
template <class Element, class T, Defect kDefect>
FAPROBE_DEVICE void consume(const Params& params, unsigned consumer) {
  constexpr int key_tiles = T::block_k / 8;
  constexpr int key_steps = T::block_k / 16;
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
  if (consumer == 1) named_arrive(NamedBarrier::consumer0_turn, consumers);  // consumer 0 issues first

  int load = 0;
  int tile_count = 0;
  for (int tile = static_cast<int>(isa::block_idx_x()); tile < params.tiles; tile += static_cast<int>(isa::grid_dim_x())) {
    const Tile t = tile_at<T>(p, tile);
    const int row0 = t.query_block * T::block_q + static_cast<int>(consumer) * T::rows_per_consumer + static_cast<int>(warp) * 16;
    const int rows[1][2] = {{row0 + static_cast<int>(lane / 4), row0 + static_cast<int>(lane / 4) + 8}};
    const int blocks = key_blocks<T>(p, t.query_block);

    float output[dim_tiles][4] = {};
    float scores[1][key_tiles][4];
    std::uint32_t p_frag[key_steps][4];
    OnlineSoftmax softmax;
    softmax.reset();
    isa::mbarrier_wait_parity(T::q_full, static_cast<unsigned>(tile_count & 1));

    // Scales and masks S_j, folds it into the row state and returns alpha for O.
    auto softmax_step = [&](int j, float (&alpha)[OnlineSoftmax::rows]) {
      const int key0 = j * T::block_k;
      const bool mask = key0 + T::block_k > p.seq_k || (p.causal && key0 + T::block_k - 1 > row0 + mask_diagonal);
      tiles::scale_and_mask(scores, p.scale_log2, mask, key0, rows, p.seq_k, p.causal, mask_diagonal, lane);
      softmax.absorb(scores[0], alpha);
    };

    // Block 0 alone (its S has no P·V to overlap with), then the steady state, then the last block's P·V:
    // peeled so that every wgmma wait in the loop is static, which ptxas needs to keep the overlap.
    const auto stage_of = [](int load_index) { return static_cast<unsigned>(load_index % T::stages); };
    const auto parity_of = [](int load_index) { return static_cast<unsigned>((load_index / T::stages) & 1); };
    if (blocks > 0) {
      isa::mbarrier_wait_parity(T::k_full + 8 * stage_of(load), parity_of(load));
      named_sync(my_turn, consumers);  // this consumer's turn at the tensor cores
      isa::wgmma_fence();
      issue_scores<Element, T, kDefect>(scores, consumer, T::k_offset + stage_of(load) * T::kv_tile_bytes);
      named_arrive(other_turn, consumers);
      isa::wgmma_wait_group<0>();
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::block_k / 2]>(&scores[0][0][0]));
      if constexpr (kDefect != Defect::never_released) isa::mbarrier_arrive(T::k_empty + 8 * stage_of(load));
      float alpha[OnlineSoftmax::rows];
      softmax_step(0, alpha);  // O is still zero: nothing to rescale
      tiles::probabilities_as_a<Element>(scores[0], p_frag);
      ++load;
    }
    for (int j = 1; j < blocks; ++j, ++load) {
      const unsigned stage = stage_of(load), previous_stage = stage_of(load - 1);
      isa::mbarrier_wait_parity(T::k_full + 8 * stage, parity_of(load));
      // This consumer's turn: S_j, then P_{j-1}·V_{j-1}, issued back to back.
      named_sync(my_turn, consumers);
      isa::wgmma_fence();
      issue_scores<Element, T, kDefect>(scores, consumer, T::k_offset + stage * T::kv_tile_bytes);
      isa::mbarrier_wait_parity(T::v_full + 8 * previous_stage, parity_of(load - 1));
      issue_pv<Element, T>(output, p_frag, T::v_offset + previous_stage * T::kv_tile_bytes);
      named_arrive(other_turn, consumers);
      // The softmax of S_j runs while P_{j-1}·V_{j-1} is still in flight.
      isa::wgmma_wait_group<1>();
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::block_k / 2]>(&scores[0][0][0]));
      if constexpr (kDefect != Defect::never_released) isa::mbarrier_arrive(T::k_empty + 8 * stage);
      float alpha[OnlineSoftmax::rows];
      softmax_step(j, alpha);
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
      tiles::probabilities_as_a<Element>(scores[0], p_frag);
    }
    if (blocks > 0) {  // the last block's P·V
      const unsigned stage = stage_of(load - 1);
      isa::mbarrier_wait_parity(T::v_full + 8 * stage, parity_of(load - 1));
      isa::wgmma_fence();
      issue_pv<Element, T>(output, p_frag, T::v_offset + stage * T::kv_tile_bytes);
      isa::wgmma_wait_group<0>();
      isa::wgmma_fence_operand(*reinterpret_cast<float (*)[T::head_dim / 2]>(&output[0][0]));
      isa::mbarrier_arrive(T::v_empty + 8 * stage);
    }
    isa::mbarrier_arrive(T::q_empty);  // this thread is done with the tile's Q
    ++tile_count;

    // Epilogue: O = acc / l in the output dtype, written from registers (16 bytes per quad per row), and
    // the LSE from the row state.
    const std::size_t q_seq_stride = std::size_t{static_cast<unsigned>(p.heads)} * T::head_dim;
    const std::size_t q_base =
        (std::size_t{static_cast<unsigned>(t.batch)} * static_cast<unsigned>(p.seq_q) * static_cast<unsigned>(p.heads) +
         static_cast<unsigned>(t.head)) * T::head_dim;
    FAPROBE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int row = rows[0][r];
      if (row >= p.seq_q) continue;
      const float inverse_sum = softmax.inverse_sum(r);
      const std::size_t row_base = q_base + std::size_t{static_cast<unsigned>(row)} * q_seq_stride + (lane % 4) * 2;
      FAPROBE_UNROLL
      for (int d = 0; d < dim_tiles; ++d) {
        const std::uint32_t pair = Element::pack2(output[d][2 * r] * inverse_sum, output[d][2 * r + 1] * inverse_sum);
        p.o[row_base + std::size_t{static_cast<unsigned>(d)} * 8] = static_cast<std::uint16_t>(pair & 0xffffu);
        p.o[row_base + std::size_t{static_cast<unsigned>(d)} * 8 + 1] = static_cast<std::uint16_t>(pair >> 16);
      }
      if (lane % 4 == 0 && p.lse.size() != 0) {
        const std::size_t lse_base =
            (std::size_t{static_cast<unsigned>(t.batch)} * static_cast<unsigned>(p.heads) + static_cast<unsigned>(t.head)) *
            static_cast<unsigned>(p.seq_q);
        p.lse[lse_base + static_cast<unsigned>(row)] = softmax.log_sum_exp(r);
      }
    }
  }
}

}  // namespace detail

// The kernel body, run by each of Traits::threads threads of a persistent CTA; grid: at most one CTA per
// SM and at most Params::tiles CTAs. Traits::shared_bytes of dynamic shared memory.
template <class Element, int HeadDim, Defect kDefect = Defect::none>
FAPROBE_DEVICE void forward_body(const Params& params) {
  using T = Traits<HeadDim>;
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
