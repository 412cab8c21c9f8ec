// How many CTAs share one decode row's keys (cuda.decode-splitk; FlashDecoding's split count). The idea is
// flash-attention's num_splits_heuristic (csrc/flash_attn/flash_api.cpp), rewritten here:
//   - the unsplit grid has `ctas` CTAs and the GPU `slots` = SMs × resident CTAs per SM; a grid that already
//     fills 80 % of the slots is not split (splitting only adds the combine's traffic);
//   - otherwise every split count s up to the most useful is scored by its wave efficiency, (ctas · s / slots)
//     over that rounded up to whole waves, and the smallest s within 85 % of the best score wins: fewer splits
//     mean fewer partials and a cheaper combine for the same occupancy of the GPU;
//   - a split count that gives each split as many key blocks as one fewer split would is skipped, and each
//     split keeps at least min_split_keys keys (two key blocks per warp), so that a CTA does real work.
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
  int min_split_keys = 256;       // keys one split must keep at least
};

inline constexpr int kMaxHeuristicSplits = 128;  // flash-attention's cap as well

int choose_splits(const SplitInputs& inputs);

}  // namespace faprobe::cuda::decode
