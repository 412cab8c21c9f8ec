// Which rows of which heads a check covers, shared by the checker (reference/check.hpp) and the explainer
// (reference/explain.hpp), so that neither includes the other: every row of a small case; in a large one the
// first and last (batch, head) plus seeded picks, and in each the first and last row, the causal diagonal's
// edge (the first row that sees a key, and the rows around it), block boundaries, and evenly spaced rows.
// Napkin math: the float64 reference costs seq_k · head_dim multiply-adds per checked row, so a check of
// sampled_heads × sampled_rows rows at seq_k 65536, head_dim 128 is 4 · 64 · 8.4e6 = 2.1e9, about a second.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "model/case.hpp"

namespace faprobe {

struct CheckLimits {
  double full_check_macs = 1 << 27;  // check every row when batch·heads·seq_q·avg_k·head_dim is below
  std::int64_t sampled_heads = 4;    // otherwise this many (batch, head) pairs ...
  std::int64_t sampled_rows = 64;    // ... and this many query rows in each
};

struct CheckPlan {
  bool every_row = false;
  std::vector<std::pair<std::int64_t, std::int64_t>> heads;  // (batch entry, query head)
  std::vector<std::int64_t> rows;                            // query rows checked in each of them
};

CheckPlan plan_check(const Case& c, const CheckLimits& limits = {});

}  // namespace faprobe
