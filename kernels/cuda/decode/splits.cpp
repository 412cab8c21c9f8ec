#include "cuda/decode/splits.hpp"

#include <algorithm>
#include <cmath>

namespace faprobe::cuda::decode {
namespace {

std::int64_t key_blocks(const SplitInputs& in) {
  const std::int64_t block_k = std::max(1, in.block_k);
  return std::max<std::int64_t>(1, (in.longest_keys + block_k - 1) / block_k);
}

}  // namespace

int most_splits(const SplitInputs& in) {
  const std::int64_t by_keys = in.longest_keys / std::max(1, in.min_split_keys);
  return int(std::clamp<std::int64_t>(std::min(by_keys, key_blocks(in)), 1, kMaxHeuristicSplits));
}

double slot_fill(const SplitInputs& in, int splits) {
  const double slots = double(std::max(1, in.sms)) * double(std::max(1, in.ctas_per_sm));
  const double waves = double(std::max<std::int64_t>(1, in.ctas)) * splits / slots;
  return waves / std::ceil(waves);
}

bool splits_all_work(const SplitInputs& in, int splits) {
  const std::int64_t blocks = key_blocks(in);
  const std::int64_t per_split = (blocks + splits - 1) / splits;
  return (splits - 1) * per_split < blocks;
}

int choose_splits(const SplitInputs& in) {
  const int most = most_splits(in);
  int best = 1;
  for (int splits = 1; splits <= most; ++splits) {
    if (!splits_all_work(in, splits)) continue;
    const double fill = slot_fill(in, splits);
    if (fill >= kTargetFill) return splits;
    if (fill > slot_fill(in, best)) best = splits;
  }
  return best;
}

}  // namespace faprobe::cuda::decode
