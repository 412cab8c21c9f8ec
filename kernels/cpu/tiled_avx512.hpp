// The AVX-512 steps of cpu.tiled (tiled_avx512.cpp): one panel of 32 query rows against one block of keys,
// in fp32 (AVX512F FMA) or in bf16 (AVX512_BF16 dot products, vdpbf16ps). tiled.cpp plans, schedules and
// packs; these functions are the inner loop. They are compiled for AVX-512 through function attributes, so a
// binary built for any x86-64 level contains them, and tiled.cpp calls them only where the CPU has the
// instructions (cpu_isa.hpp). Elsewhere (another architecture) the functions exist and throw.
//
// Every panel buffer is transposed: lanes are query rows. Element [x][r] of Qᵀ, Sᵀ and Oᵀ belongs to row r
// of the panel, so that the online softmax (row max, exp, row sum, rescale) is vertical arithmetic on
// 16-lane vectors with no horizontal reduction.
#pragma once
#include <cstdint>

namespace faprobe::cpu::avx512 {

constexpr std::int64_t kPanelRows = 32;  // query rows per panel: two 16-lane fp32 vectors

// One panel of query rows at one key block: S = Q·Kᵀ, the causal mask, the online softmax, O += P·V.
struct PanelBlock {
  // fp32: Qᵀ [head_dim][32] floats. bf16: [head_dim / 2][32] 32-bit pairs, each the two bf16 values
  // (2p, 2p + 1) of one query row; rows past the panel's last are zeros.
  const void* query_panel = nullptr;
  // Key rows of the block, fp32 or bf16 (the step's type): key j at keys + j · key_stride elements.
  const void* keys = nullptr;
  std::int64_t key_stride = 0;
  // fp32: value rows, value j at values + j · value_stride elements. bf16: pairs [ceil(cols / 2)][head_dim]
  // from pack_value_pairs (value_stride unused).
  const void* values = nullptr;
  std::int64_t value_stride = 0;
  std::int64_t cols = 0;      // keys of the block this panel attends to (1 or more)
  std::int64_t head_dim = 0;  // any for fp32; even for bf16
  // The causal mask, applied when `masked`: query row first_row + r sees key first_key + j iff
  // first_key + j < first_row + r + diagonal (diagonal = Case::diagonal + 1: seq_k − seq_q + 1 bottom-right, 1 top-left).
  bool masked = false;
  std::int64_t first_row = 0, first_key = 0, diagonal = 0;
  float scale_log2 = 0;  // softmax scale · log2(e): p = 2^((s − row_max) · scale_log2) on unscaled scores
  bool rescale = true;   // false only in the planted no_rescale variant
  // Workspace, 64-byte aligned: scores [cols][32] floats; for bf16 also probability pairs
  // [ceil(cols / 2)][32] 32-bit words.
  float* scores = nullptr;
  std::uint32_t* probability_pairs = nullptr;
  // The panel's running state: row_max and row_sum [32] each, and the accumulator Oᵀ [head_dim][32].
  float* row_max = nullptr;
  float* row_sum = nullptr;
  float* acc = nullptr;
};

void attend_block_fp32(const PanelBlock& block);
void attend_block_bf16(const PanelBlock& block);

// The step between the two products: the causal mask and the online softmax on Sᵀ in block.scores (row_max,
// row_sum, the accumulator rescaled), P in Sᵀ's place in fp32 (online_softmax), or rounded to bf16 into
// block.probability_pairs, [ceil(cols / 2)][32] words, word [p][r] = (P[2p][r], P[2p + 1][r]), the odd last
// key paired with 0 (online_softmax_pairs, AVX512_BF16; shared with the AMX path, tiled_amx.cpp).
void online_softmax(const PanelBlock& block);
void online_softmax_pairs(const PanelBlock& block);

// The value rows [0, cols) of a block, bf16 with `stride` elements between rows, interleaved by key pairs
// for vdpbf16ps: pairs[p][d] holds (value[2p][d], value[2p + 1][d]); an odd last key is paired with zero.
void pack_value_pairs(const std::uint16_t* values, std::int64_t stride, std::int64_t cols, std::int64_t head_dim,
                      std::uint32_t* pairs);

}  // namespace faprobe::cpu::avx512
