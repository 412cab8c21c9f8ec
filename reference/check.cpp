#include "reference/check.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "model/json_number.hpp"

namespace faprobe {

double tolerance_floor(DType dtype) {
  switch (dtype) {
    case DType::fp32: return 1e-6;
    case DType::fp16: return 1e-4;
    case DType::bf16: return 1e-3;
    case DType::fp8_e4m3: return 1e-2;
  }
  return 1e-6;
}

void to_json(nlohmann::json& out, const VerifyResult& result) {
  out = nlohmann::json{{"max_abs_diff", result.max_abs_diff}, {"max_rel_diff", result.max_rel_diff},
                       {"tolerance", result.tolerance},       {"rows_checked", result.rows_checked},
                       {"heads_checked", result.heads_checked}, {"passed", result.passed}};
  if (!result.note.empty()) out["note"] = result.note;
}

void from_json(const nlohmann::json& in, VerifyResult& result) {
  result.max_abs_diff = in.at("max_abs_diff").get<double>();
  result.max_rel_diff = in.at("max_rel_diff").get<double>();
  result.tolerance = in.at("tolerance").get<double>();
  result.rows_checked = json_int64(in.at("rows_checked"), "verify.rows_checked");
  result.heads_checked = json_int64(in.at("heads_checked"), "verify.heads_checked");
  result.passed = in.at("passed").get<bool>();
  result.note = in.value("note", std::string());
}

namespace {
// max that keeps a NaN: std::max(x, NaN) is x, which would let a NaN difference vanish from a maximum.
void keep_max(double& maximum, double value) {
  if (std::isnan(value) || value > maximum) maximum = value;
}
}  // namespace

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
  if (c.causal()) {
    const std::int64_t first_seeing = std::max<std::int64_t>(0, c.seq_q - c.seq_k);  // first row with a key
    for (std::int64_t delta = -2; delta <= 2; ++delta) add(first_seeing + delta);
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

VerifyResult check_output(const Case& c, const InputSource& inputs, const HostTensor& output,
                          const CheckLimits& limits) {
  const CheckPlan plan = plan_check(c, limits);
  VerifyResult result;
  double plain_error = 0.0;
  std::string worst_at, non_finite_at, non_finite_reference_at;

  // Heads that share a KV head share one HeadReference (loading K and V dominates the cost).
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int64_t>> by_kv_head;
  for (const auto& [b, h] : plan.heads) by_kv_head[{b, c.kv_head_of(h)}].push_back(h);

  for (const auto& [batch_kv, query_heads] : by_kv_head) {
    const std::int64_t b = batch_kv.first;
    const HeadReference reference(c, inputs, b, batch_kv.second);
    for (std::int64_t h : query_heads) {
      // Rows are independent: check them in parallel, then reduce the maxima in order.
      const std::size_t n_rows = plan.rows.size();
      std::vector<double> abs_diff(n_rows), rel_diff(n_rows), plain(n_rows);
      // The first non-finite element of each row: in the output (col), or in the reference (col), which
      // only inputs holding NaN or Inf (files given to verify) can produce. -1: none.
      std::vector<std::int64_t> bad_output_col(n_rows, -1), bad_reference_col(n_rows, -1);
#pragma omp parallel for schedule(dynamic)
      for (std::size_t i = 0; i < n_rows; ++i) {
        const std::int64_t row = plan.rows[i];
        const Eigen::VectorXd expected = reference.output_row(inputs, h, row);
        const Eigen::VectorXd plain_row = reference.plain_row(inputs, h, row);
        const std::int64_t base = output.offset(b, row, h);
        for (std::int64_t col = 0; col < c.head_dim; ++col) {
          const double got = double(output.get(base + col));
          if (!std::isfinite(got) && bad_output_col[i] < 0) bad_output_col[i] = col;
          const bool reference_finite = std::isfinite(expected(col)) && std::isfinite(plain_row(col));
          if (!reference_finite && bad_reference_col[i] < 0) bad_reference_col[i] = col;
          const double diff = std::abs(got - expected(col));
          keep_max(abs_diff[i], diff);
          keep_max(rel_diff[i], diff / std::max(std::abs(expected(col)), 1e-3));
          keep_max(plain[i], std::abs(plain_row(col) - expected(col)));
        }
      }
      for (std::size_t i = 0; i < n_rows; ++i) {
        const std::string where = fmt::format("batch {} head {} row {}", b, h, plan.rows[i]);
        if (bad_output_col[i] >= 0 && non_finite_at.empty()) {
          non_finite_at = fmt::format("non-finite output at {} col {}", where, bad_output_col[i]);
        }
        if (bad_reference_col[i] >= 0 && non_finite_reference_at.empty()) {
          non_finite_reference_at = fmt::format("non-finite reference at {} col {} (an input holds NaN or Inf)",
                                                where, bad_reference_col[i]);
        }
        if (!(abs_diff[i] <= result.max_abs_diff)) worst_at = where;
        keep_max(result.max_abs_diff, abs_diff[i]);
        keep_max(result.max_rel_diff, rel_diff[i]);
        keep_max(plain_error, plain[i]);
      }
    }
  }
  result.rows_checked = std::int64_t(plan.rows.size() * plan.heads.size());
  result.heads_checked = std::int64_t(plan.heads.size());
  result.tolerance = 2.0 * plain_error + tolerance_floor(c.dtype);
  // NaN compares false, so `max_abs_diff <= tolerance` also fails when a NaN reached either of them.
  result.passed = non_finite_at.empty() && non_finite_reference_at.empty() && result.max_abs_diff <= result.tolerance;
  if (!non_finite_reference_at.empty()) {
    result.note = non_finite_reference_at;
  } else if (!non_finite_at.empty()) {
    result.note = non_finite_at;
  } else if (!result.passed) {
    result.note = fmt::format("max_abs_diff {:.3g} > tolerance {:.3g} at {}", result.max_abs_diff,
                              result.tolerance, worst_at);
  }
  return result;
}

}  // namespace faprobe
