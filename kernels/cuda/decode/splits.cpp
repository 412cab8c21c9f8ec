#include "cuda/decode/splits.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace faprobe::cuda::decode {

int choose_splits(const SplitInputs& in) {
  const double slots = double(std::max(1, in.sms)) * double(std::max(1, in.ctas_per_sm));
  if (double(in.ctas) >= 0.8 * slots) return 1;
  const std::int64_t blocks = (in.longest_keys + in.min_split_keys - 1) / in.min_split_keys;
  const int most = int(std::clamp<std::int64_t>(blocks, 1, kMaxHeuristicSplits));
  auto blocks_per_split = [&](int splits) { return (blocks + splits - 1) / splits; };
  auto eligible = [&](int splits) { return splits == 1 || blocks_per_split(splits) != blocks_per_split(splits - 1); };
  std::vector<double> efficiency(std::size_t(most) + 1, 0.0);
  double best = 0.0;
  for (int splits = 1; splits <= most; ++splits) {
    if (!eligible(splits)) continue;
    const double waves = double(in.ctas) * splits / slots;
    efficiency[std::size_t(splits)] = waves / std::ceil(waves);
    best = std::max(best, efficiency[std::size_t(splits)]);
  }
  for (int splits = 1; splits <= most; ++splits) {
    if (eligible(splits) && efficiency[std::size_t(splits)] >= 0.85 * best) return splits;
  }
  return 1;
}

}  // namespace faprobe::cuda::decode
