#include "reference/check_plan.hpp"

#include <algorithm>
#include <set>

#include "model/inputs.hpp"

namespace faprobe {

CheckPlan plan_check(const Case& c, const CheckLimits& limits) {
  CheckPlan plan;
  const double macs = double(c.batch) * double(c.heads) * double(c.seq_q) * c.avg_keys() * double(c.head_dim);
  if (macs <= limits.full_check_macs) {
    plan.every_row = true;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t h = 0; h < c.heads; ++h) plan.heads.emplace_back(b, h);
    for (std::int64_t row = 0; row < c.seq_q; ++row) plan.rows.push_back(row);
    return plan;
  }

  // Heads: the first and the last (batch, head), then picks drawn from the seed (deterministic).
  std::set<std::pair<std::int64_t, std::int64_t>> heads{{0, 0}, {c.batch - 1, c.heads - 1}};
  const std::int64_t pairs = c.batch * c.heads;
  const std::int64_t wanted_heads = std::min(limits.sampled_heads, pairs);
  for (std::uint64_t draw = 0; std::int64_t(heads.size()) < wanted_heads; ++draw) {
    const std::int64_t flat = std::int64_t(mix64(c.seed * 7919 + draw) % std::uint64_t(pairs));
    heads.emplace(flat / c.heads, flat % c.heads);
  }
  plan.heads.assign(heads.begin(), heads.end());

  // Rows: first, last, the causal diagonal's edge, block boundaries, then evenly spaced rows.
  std::set<std::int64_t> rows;
  auto add = [&](std::int64_t row) {
    if (row >= 0 && row < c.seq_q) rows.insert(row);
  };
  add(0);
  add(c.seq_q - 1);
  if (c.masked()) {  // around the first row that sees a key and the first that sees them all
    const std::int64_t first_seeing = std::max<std::int64_t>(0, -c.diagonal(0));
    const std::int64_t first_seeing_all = c.seq_k - 1 - c.diagonal(0);
    for (std::int64_t delta = -2; delta <= 2; ++delta) {
      add(first_seeing + delta);
      add(first_seeing_all + delta);
    }
  }
  for (std::int64_t boundary : {63, 64, 65, 127, 128, 129, 255, 256}) add(boundary);
  const std::int64_t wanted_rows = std::min(limits.sampled_rows, c.seq_q);
  const std::int64_t spaced = std::max<std::int64_t>(2, wanted_rows - std::int64_t(rows.size()));
  for (std::int64_t i = 0; i < spaced && std::int64_t(rows.size()) < wanted_rows; ++i) {
    add(i * (c.seq_q - 1) / (spaced - 1) - (i % 3));  // the - i%3 keeps rows off one residue class
  }
  for (std::uint64_t draw = 0; std::int64_t(rows.size()) < wanted_rows; ++draw) {  // collisions: seeded fill
    add(std::int64_t(mix64(c.seed * 104729 + draw) % std::uint64_t(c.seq_q)));
  }
  plan.rows.assign(rows.begin(), rows.end());
  return plan;
}

}  // namespace faprobe
