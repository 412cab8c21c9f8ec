// How many CTAs share one decode row's keys (cuda.decode-splitk; FlashDecoding's split count). The rule, after
// flash-attention's num_splits_heuristic (csrc/flash_attn/flash_api.cpp) but filling the GPU rather than
// settling near it:
//   - the unsplit grid has `ctas` CTAs and the GPU `slots` = SMs × resident CTAs per SM. With s splits the
//     grid fills fill(s) = w / ceil(w) of the slots it occupies, w = ctas · s / slots its waves;
//   - s may be any count up to most_splits: at most kMaxHeuristicSplits, at most the longest entry's key
//     blocks, and few enough that each split keeps min_split_keys keys (two key blocks per warp), so that a
//     CTA does real work. A count that leaves a split empty (its keys in whole blocks all taken by the others:
//     (s − 1) · ceil(blocks / s) ≥ blocks) adds a CTA that does nothing and is skipped;
//   - the smallest such s with fill(s) ≥ kTargetFill (95 %) wins: fewer splits mean fewer partials and a
//     cheaper combine for the same occupancy. When no s reaches it (short keys), the best fill does, the
//     smallest s on ties. An unsplit grid that already fills 95 % stays unsplit.
// At batch 1, 32 KV heads on 132 SMs: 8 splits at two CTAs per SM (256 of 264 slots, 97 %), 12 at three
// (384 of 396); the earlier rule (the smallest s within 85 % of the best) took 7 (224 of 264, 85 %).
#pragma once
#include <cstdint>

namespace faprobe::cuda::decode {

// Query heads per CTA: the rows of one m16 tile (decode.cuh). A GQA group larger than this takes
// ceil(group / 16) CTAs per KV head, along the attention grid's y.
inline constexpr int group_rows = 16;
constexpr int head_chunks(int group) { return (group + group_rows - 1) / group_rows; }

struct SplitInputs {
  std::int64_t ctas = 1;          // CTAs of the unsplit grid: batch · kv_heads · head_chunks(group)
  int sms = 1;                    // the GPU's SMs
  int ctas_per_sm = 1;            // resident attention CTAs per SM (occupancy)
  std::int64_t longest_keys = 1;  // keys of the longest batch entry
  int block_k = 32;               // keys per key block (the kernel splits in whole blocks)
  int min_split_keys = 256;       // keys one split must keep at least
};

inline constexpr int kMaxHeuristicSplits = 128;  // flash-attention's cap as well
inline constexpr double kTargetFill = 0.95;

// The most splits the rule may choose for these inputs (at least 1).
int most_splits(const SplitInputs& inputs);
// fill(splits): the fraction of the slots of its waves that a grid of ctas · splits CTAs occupies.
double slot_fill(const SplitInputs& inputs, int splits);
// Whether every one of `splits` splits of the longest entry's key blocks gets some.
bool splits_all_work(const SplitInputs& inputs, int splits);

int choose_splits(const SplitInputs& inputs);

}  // namespace faprobe::cuda::decode
