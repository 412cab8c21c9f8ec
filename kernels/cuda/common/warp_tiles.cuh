// The tile steps every flash-style tensor-core kernel (cuda.fa1, cuda.fa2) builds on, written once on the
// instruction layer: copying a (rows × head_dim) tile of Q, K or V into padded shared rows with cp.async,
// and one warp's share of attention on 16 query rows: S = Q·Kᵀ, the mask, P as mma A fragments, and P·V. Fragment layouts are the PTX ISA's "Matrix Fragments for mma.m16n8k16 with floating point
// type": with groupID = lane / 4 and quad_lane = lane % 4, accumulator elements 0, 1 are row groupID,
// columns 2·quad_lane, +1 of an 8-wide tile, and elements 2, 3 the same columns of row groupID + 8.
//
// Tile traits T give head_dim, threads (of the CTA) and row_stride (halves per shared row: head_dim + 8,
// 16 bytes of padding, so the 8 rows one ldmatrix matrix reads start in 8 different 16-byte bank groups and
// the reads are conflict-free).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/common/online_softmax.cuh"

namespace faprobe::cuda::tiles {

// Copies Rows rows of head_dim halves into a shared tile of Rows padded rows, 16 bytes per cp.async, each
// of Threads threads (a CTA, or one warp copying its own tile) a fixed share; thread is its index among them.
// Row r (< valid_rows) starts at element row_base(r) of source; rows at or past valid_rows are zero-filled
// in shared memory instead (never read from global memory). row_base lets a paged cache's rows, which are
// not equally spaced, be gathered the same way as a contiguous tensor's; every thread calls it for every one
// of its chunks, outside any branch, so that it may shuffle (the decode kernel's paged rows come that way).
template <int Rows, class T, int Threads, class RowBase>
FAPROBE_DEVICE void load_rows(std::size_t shared_offset, GlobalSpan<const std::uint16_t> source, RowBase row_base,
                              int valid_rows, unsigned thread) {
  constexpr int chunks_per_row = T::head_dim / 8;
  static_assert(Rows * chunks_per_row % Threads == 0, "every thread copies the same number of chunks");
  constexpr int chunks_per_thread = Rows * chunks_per_row / Threads;
  FAPROBE_UNROLL
  for (int i = 0; i < chunks_per_thread; ++i) {
    const int chunk = i * Threads + static_cast<int>(thread);
    const int row = chunk / chunks_per_row;
    const int col = chunk % chunks_per_row * 8;
    const std::size_t destination = shared_offset + (std::size_t{static_cast<unsigned>(row)} * T::row_stride + col) * 2;
    const std::size_t base = row_base(row);
    if (row < valid_rows) {
      isa::cp_async_16(destination, source, base + static_cast<unsigned>(col));
    } else {
      isa::shared_array<isa::Words4>(destination, 1)[0] = isa::Words4{};
    }
  }
}

// Rows [first_row, first_row + Rows) of a (seq, heads, d) tensor slice starting at element base, copied by
// the whole CTA (T::threads); rows at or past valid_rows are zero-filled, unless Checked is false (every row
// of the tile exists: a steady-state tile). Each thread copies one 16-byte column chunk of every
// (threads / chunks per row)-th row, walking one global index and one shared offset by a fixed step, so that
// it holds two running addresses rather than one per chunk.
template <int Rows, class T, bool Checked = true>
FAPROBE_DEVICE void load_tile(std::size_t shared_offset, GlobalSpan<const std::uint16_t> source, std::size_t base,
                              std::size_t seq_stride, int first_row, int valid_rows, unsigned thread) {
  constexpr int chunks_per_row = T::head_dim / 8;
  static_assert(T::threads % chunks_per_row == 0, "every thread copies chunks of one column");
  constexpr int rows_per_pass = T::threads / chunks_per_row;
  static_assert(Rows % rows_per_pass == 0, "every thread copies the same number of chunks");
  const int row0 = static_cast<int>(thread) / chunks_per_row;
  const int column = static_cast<int>(thread) % chunks_per_row * 8;
  std::size_t index = base + std::size_t{static_cast<unsigned>(first_row + row0)} * seq_stride + static_cast<unsigned>(column);
  const std::size_t index_step = rows_per_pass * seq_stride;
  std::size_t destination = shared_offset + (std::size_t{static_cast<unsigned>(row0)} * T::row_stride + static_cast<unsigned>(column)) * 2;
  constexpr std::size_t destination_step = std::size_t{rows_per_pass} * T::row_stride * 2;
  FAPROBE_UNROLL
  for (int i = 0; i < Rows / rows_per_pass; ++i) {
    if (!Checked || first_row + row0 + i * rows_per_pass < valid_rows) {
      isa::cp_async_16(destination, source, index);
    } else {
      isa::shared_array<isa::Words4>(destination, 1)[0] = isa::Words4{};
    }
    index += index_step;
    destination += destination_step;
  }
}

// A warp's query rows are MTiles m16 row tiles, one below the other (16·MTiles rows); every K and V
// fragment a warp reads from shared memory serves all of them, so MTiles = 2 halves the shared-memory
// traffic per mma.sync of MTiles = 1, at twice the accumulator registers.

// scores[m] += Q·Kᵀ for one warp: the 16·MTiles query rows starting at byte q_rows (shared) against the
// KeyTiles·8 keys starting at byte k_rows. ldmatrix.x4 of Q: matrices (rows 0-7 | 8-15) × (cols 0-7 |
// 8-15) are a0..a3, lane l addressing row l % 16, column 8·(l / 16). ldmatrix.x4 of K (rows are keys, so
// the non-transposed 8x8 matrix is B = Kᵀ in the .col layout): matrices (keys 0-7, dims 0-7), (keys 0-7,
// dims 8-15), (keys 8-15, dims 0-7), (keys 8-15, dims 8-15) are b0, b1 of two adjacent n-tiles.
template <class Element, class T, int MTiles, int KeyTiles>
FAPROBE_DEVICE void warp_scores(float (&scores)[MTiles][KeyTiles][4], std::size_t q_rows, std::size_t k_rows,
                                unsigned lane) {
  static_assert(KeyTiles % 2 == 0, "K is read two 8-key tiles per ldmatrix.x4");
  const std::size_t q_lane_row = q_rows + std::size_t{lane % 16} * T::row_stride * 2 + (lane / 16) * 8 * 2;
  const std::size_t k_lane_row =
      k_rows + std::size_t{(lane / 16) * 8 + lane % 8} * T::row_stride * 2 + ((lane / 8) % 2) * 8 * 2;
  FAPROBE_UNROLL
  for (int k_step = 0; k_step < T::head_dim / 16; ++k_step) {
    std::uint32_t q_frag[MTiles][4];
    FAPROBE_UNROLL
    for (int m = 0; m < MTiles; ++m)
      isa::ldmatrix(q_frag[m], q_lane_row + std::size_t{static_cast<unsigned>(m)} * 16 * T::row_stride * 2 + k_step * 16 * 2);
    FAPROBE_UNROLL
    for (int t = 0; t < KeyTiles; t += 2) {
      std::uint32_t k_frag[4];
      isa::ldmatrix(k_frag, k_lane_row + std::size_t{static_cast<unsigned>(t)} * 8 * T::row_stride * 2 + k_step * 16 * 2);
      const std::uint32_t b_even[2] = {k_frag[0], k_frag[1]};
      const std::uint32_t b_odd[2] = {k_frag[2], k_frag[3]};
      FAPROBE_UNROLL
      for (int m = 0; m < MTiles; ++m) {
        Element::mma(scores[m][t], q_frag[m], b_even, scores[m][t]);
        Element::mma(scores[m][t + 1], q_frag[m], b_odd, scores[m][t + 1]);
      }
    }
  }
}

// Sets to -inf every raw score of a key at or past seq_k or, under causal, right of its row's diagonal (row
// i sees keys j ≤ i + diagonal, diagonal = seq_k − seq_q: bottom-right). key0 is the first key of the tile;
// the lane's rows are warp_row0 + 16m + lane/4 (elements 0, 1 of m-tile m) and 8 more (elements 2, 3).
// Branch-free: per score one compare against the row's key limit and one select. Only the blocks a kernel
// peels off its steady-state loop (the ragged last key block, the blocks crossing the causal diagonal) come
// here; the scale is applied in the softmax's exponent (online_softmax.cuh).
template <int MTiles, int KeyTiles>
FAPROBE_DEVICE void apply_mask(float (&scores)[MTiles][KeyTiles][4], int key0, int warp_row0, int seq_k, bool causal,
                               int diagonal, unsigned lane) {
  const int column0 = key0 + static_cast<int>(lane % 4) * 2;
  FAPROBE_UNROLL
  for (int m = 0; m < MTiles; ++m) {
    int limit[2];  // keys column0 + c with c < limit[h] are visible to the row of elements 2h, 2h + 1
    FAPROBE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int row_end = causal ? warp_row0 + 16 * m + 8 * h + static_cast<int>(lane / 4) + diagonal + 1 : seq_k;
      limit[h] = (row_end < seq_k ? row_end : seq_k) - column0;
    }
    FAPROBE_UNROLL
    for (int t = 0; t < KeyTiles; ++t) {
      FAPROBE_UNROLL
      for (int e = 0; e < 4; ++e) {
        if (t * 8 + e % 2 >= limit[e / 2]) scores[m][t][e] = OnlineSoftmax::minus_infinity;
      }
    }
  }
}

// P as mma A fragments, rounded to the element type: the accumulators of n-tiles 2j and 2j+1 are exactly
// the A fragment of k-step j (a0, a1 from tile 2j's rows groupID and groupID + 8, a2, a3 from tile 2j+1).
template <class Element, int KeyTiles>
FAPROBE_DEVICE void probabilities_as_a(const float (&probabilities)[KeyTiles][4], std::uint32_t (&p_frag)[KeyTiles / 2][4]) {
  FAPROBE_UNROLL
  for (int j = 0; j < KeyTiles / 2; ++j) {
    p_frag[j][0] = Element::pack2(probabilities[2 * j][0], probabilities[2 * j][1]);
    p_frag[j][1] = Element::pack2(probabilities[2 * j][2], probabilities[2 * j][3]);
    p_frag[j][2] = Element::pack2(probabilities[2 * j + 1][0], probabilities[2 * j + 1][1]);
    p_frag[j][3] = Element::pack2(probabilities[2 * j + 1][2], probabilities[2 * j + 1][3]);
  }
}

// acc[m][t] += P[m]·V for output columns column0 + 8t .. +7, t < DimTiles, over KeySteps·16 keys of the V
// tile starting at byte v_rows. ldmatrix.x4.trans of V (rows are keys): matrices (keys 0-7, dims 0-7),
// (keys 8-15, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 8-15) are b0, b1 of two adjacent 8-column
// n-tiles; lane l addresses key 8·((l / 8) % 2) + l % 8, column 8·(l / 16).
template <class Element, class T, int MTiles, int KeySteps, int DimTiles>
FAPROBE_DEVICE void warp_pv(float (&acc)[MTiles][DimTiles][4], const std::uint32_t (&p_frag)[MTiles][KeySteps][4],
                            std::size_t v_rows, int column0, unsigned lane) {
  static_assert(DimTiles % 2 == 0, "V is read two 8-column tiles per ldmatrix.x4.trans");
  const std::size_t v_lane_row = v_rows + std::size_t{((lane / 8) % 2) * 8 + lane % 8} * T::row_stride * 2 +
                                 (lane / 16) * 8 * 2 + std::size_t{static_cast<unsigned>(column0)} * 2;
  FAPROBE_UNROLL
  for (int j = 0; j < KeySteps; ++j) {
    FAPROBE_UNROLL
    for (int t = 0; t < DimTiles; t += 2) {
      std::uint32_t v_frag[4];
      isa::ldmatrix<true>(v_frag, v_lane_row + std::size_t{static_cast<unsigned>(j)} * 16 * T::row_stride * 2 +
                                      std::size_t{static_cast<unsigned>(t)} * 8 * 2);
      const std::uint32_t b_even[2] = {v_frag[0], v_frag[1]};
      const std::uint32_t b_odd[2] = {v_frag[2], v_frag[3]};
      FAPROBE_UNROLL
      for (int m = 0; m < MTiles; ++m) {
        Element::mma(acc[m][t], p_frag[m][j], b_even, acc[m][t]);
        Element::mma(acc[m][t + 1], p_frag[m][j], b_odd, acc[m][t + 1]);
      }
    }
  }
}

}  // namespace faprobe::cuda::tiles
