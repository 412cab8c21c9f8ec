#include "reference/check.hpp"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "model/json_number.hpp"
#include "reference/explain.hpp"

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

double lse_tolerance_floor(DType dtype) { return dtype == DType::fp8_e4m3 ? 2.5e-4 : 1e-5; }

namespace {

// A difference as the record reads it back: a number, or null, which is how a NaN or an infinite difference
// was written (nlohmann writes non-finite numbers as null). NaN then: "not a number we can compare".
double json_difference(const nlohmann::json& value, const char* name) {
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value.is_number()) {
    throw std::invalid_argument(fmt::format("{}: not a number ({})", name, json_value_text(value)));
  }
  return value.get<double>();
}

// max that keeps a NaN: std::max(x, NaN) is x, which would let a NaN difference vanish from a maximum.
void keep_max(double& maximum, double value) {
  if (std::isnan(value) || value > maximum) maximum = value;
}

// "NaN" or "inf" / "-inf": which non-finite value a note is about.
std::string non_finite_name(double value) {
  if (std::isnan(value)) return "NaN";
  return value > 0 ? "inf" : "-inf";
}

}  // namespace

void to_json(nlohmann::json& out, const VerifyResult& result) {
  out = nlohmann::json{{"max_abs_diff", result.max_abs_diff}, {"max_rel_diff", result.max_rel_diff},
                       {"tolerance", result.tolerance},       {"rows_checked", result.rows_checked},
                       {"heads_checked", result.heads_checked}, {"passed", result.passed},
                       {"lse_checked", result.lse_checked}};
  if (result.lse_checked) {
    out["lse_max_abs_diff"] = result.lse_max_abs_diff;
    out["lse_tolerance"] = result.lse_tolerance;
  }
  if (!result.note.empty()) out["note"] = result.note;
  if (!result.diagnosis.empty()) out["diagnosis"] = result.diagnosis;
  if (result.exact_inputs_checked) {
    out["exact_inputs_o_rms"] = result.exact_inputs_o_rms;
    out["exact_inputs_o_max_abs"] = result.exact_inputs_o_max_abs;
  }
}

void from_json(const nlohmann::json& in, VerifyResult& result) {
  auto member = [&](const char* key) -> const nlohmann::json& { return json_member(in, key, std::string("verify.") + key); };
  result.max_abs_diff = json_difference(member("max_abs_diff"), "verify.max_abs_diff");
  result.max_rel_diff = json_difference(member("max_rel_diff"), "verify.max_rel_diff");
  result.tolerance = json_difference(member("tolerance"), "verify.tolerance");
  result.rows_checked = json_int64(member("rows_checked"), "verify.rows_checked");
  result.heads_checked = json_int64(member("heads_checked"), "verify.heads_checked");
  result.passed = json_bool(member("passed"), "verify.passed");
  // Absent in records written before the LSE was checked: not checked.
  result.lse_checked = in.contains("lse_checked") && json_bool(in.at("lse_checked"), "verify.lse_checked");
  result.lse_max_abs_diff = result.lse_tolerance = 0;
  if (result.lse_checked) {
    result.lse_max_abs_diff = json_difference(member("lse_max_abs_diff"), "verify.lse_max_abs_diff");
    result.lse_tolerance = json_difference(member("lse_tolerance"), "verify.lse_tolerance");
  }
  result.note = in.contains("note") ? json_string(in.at("note"), "verify.note") : std::string();
  result.diagnosis.clear();  // optional: only failed checks since the explainer have one
  if (in.contains("diagnosis") && in["diagnosis"].is_array()) {
    result.diagnosis = json_strings(in["diagnosis"], "verify.diagnosis");
  }
  // Optional: fp8 records written since the exact-inputs error was measured.
  result.exact_inputs_checked = in.contains("exact_inputs_o_rms");
  result.exact_inputs_o_rms = result.exact_inputs_o_max_abs = 0;
  if (result.exact_inputs_checked) {
    result.exact_inputs_o_rms = json_difference(member("exact_inputs_o_rms"), "verify.exact_inputs_o_rms");
    result.exact_inputs_o_max_abs = json_difference(member("exact_inputs_o_max_abs"), "verify.exact_inputs_o_max_abs");
  }
}

namespace {

// What one checked row of the LSE holds against the reference's.
enum class LseRow {
  ok,               // finite and finite, or −inf where the row sees no key
  non_finite,       // NaN, or ±inf where the row sees keys
  keyless_not_inf,  // anything but −inf where the row sees no key
};

}  // namespace

VerifyResult check_output(const Case& c, const InputSource& inputs, const HostTensor& output, const LseTensor* lse,
                          const CheckLimits& limits) {
  const CheckPlan plan = plan_check(c, limits);
  VerifyResult result;
  result.lse_checked = lse != nullptr;
  double plain_error = 0.0, lse_plain_error = 0.0;
  std::string worst_at, non_finite_at, non_finite_reference_at;
  std::string lse_worst_at, lse_bad_at;  // the worst finite LSE difference; the first LSE that is wrong in kind
  std::int64_t non_finite_rows = 0;

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
      // The first non-finite element of each row: in the output (col, and its value), or in the reference
      // (col), which only inputs holding NaN or Inf (files given to verify) can produce. -1: none.
      std::vector<std::int64_t> bad_output_col(n_rows, -1), bad_reference_col(n_rows, -1);
      std::vector<double> bad_output_value(n_rows);
      // The LSE of each row: |lse − reference| (finite rows), plain's error, what it holds and what kind of row.
      std::vector<double> lse_diff(n_rows), lse_plain(n_rows), lse_got(n_rows);
      std::vector<LseRow> lse_row(n_rows, LseRow::ok);
#pragma omp parallel for schedule(dynamic)
      for (std::size_t i = 0; i < n_rows; ++i) {
        const std::int64_t row = plan.rows[i];
        double expected_lse = 0, plain_lse = 0;
        const Eigen::VectorXd expected = reference.output_row(inputs, h, row, lse ? &expected_lse : nullptr);
        const Eigen::VectorXd plain_row = reference.plain_row(inputs, h, row, lse ? &plain_lse : nullptr);
        const std::int64_t base = output.offset(b, row, h);
        for (std::int64_t col = 0; col < c.head_dim; ++col) {
          const double got = double(output.get(base + col));
          if (!std::isfinite(got) && bad_output_col[i] < 0) {
            bad_output_col[i] = col;
            bad_output_value[i] = got;
          }
          const bool reference_finite = std::isfinite(expected(col)) && std::isfinite(plain_row(col));
          if (!reference_finite && bad_reference_col[i] < 0) bad_reference_col[i] = col;
          const double diff = std::abs(got - expected(col));
          keep_max(abs_diff[i], diff);
          keep_max(rel_diff[i], diff / std::max(std::abs(expected(col)), 1e-3));
          keep_max(plain[i], std::abs(plain_row(col) - expected(col)));
        }
        if (lse == nullptr) continue;
        const double got = double(lse->at(b, h, row));
        lse_got[i] = got;
        if (std::isnan(got)) {
          lse_row[i] = LseRow::non_finite;
        } else if (c.visible_keys(b, row) == 0) {  // the reference's and plain's LSE are −inf
          lse_row[i] = got == -std::numeric_limits<double>::infinity() ? LseRow::ok : LseRow::keyless_not_inf;
        } else if (!std::isfinite(got)) {
          lse_row[i] = LseRow::non_finite;
        } else {
          lse_diff[i] = std::abs(got - expected_lse);
          lse_plain[i] = std::abs(plain_lse - expected_lse);
        }
        if (lse_row[i] != LseRow::ok) lse_diff[i] = std::isnan(got) ? got : std::numeric_limits<double>::infinity();
      }
      for (std::size_t i = 0; i < n_rows; ++i) {
        const std::string where = fmt::format("batch {} head {} row {}", b, h, plan.rows[i]);
        if (bad_output_col[i] >= 0) {
          ++non_finite_rows;
          if (non_finite_at.empty()) {
            non_finite_at = fmt::format("non-finite output ({}) at {} col {}", non_finite_name(bad_output_value[i]),
                                        where, bad_output_col[i]);
          }
        }
        if (bad_reference_col[i] >= 0 && non_finite_reference_at.empty()) {
          non_finite_reference_at = fmt::format("non-finite reference at {} col {} (an input holds NaN or Inf)",
                                                where, bad_reference_col[i]);
        }
        if (!(abs_diff[i] <= result.max_abs_diff)) worst_at = where;
        keep_max(result.max_abs_diff, abs_diff[i]);
        keep_max(result.max_rel_diff, rel_diff[i]);
        keep_max(plain_error, plain[i]);
        if (lse == nullptr) continue;
        if (lse_row[i] == LseRow::non_finite && lse_bad_at.empty()) {
          lse_bad_at = fmt::format("non-finite LSE ({}) at {}", non_finite_name(lse_got[i]), where);
        } else if (lse_row[i] == LseRow::keyless_not_inf && lse_bad_at.empty()) {
          lse_bad_at = fmt::format("LSE {:.3g} at {}, which sees no key (must be -inf)", lse_got[i], where);
        }
        if (lse_row[i] == LseRow::ok && lse_diff[i] > result.lse_max_abs_diff) lse_worst_at = where;
        keep_max(result.lse_max_abs_diff, lse_diff[i]);
        keep_max(lse_plain_error, lse_plain[i]);
      }
    }
  }
  result.rows_checked = std::int64_t(plan.rows.size() * plan.heads.size());
  result.heads_checked = std::int64_t(plan.heads.size());
  result.tolerance = 2.0 * plain_error + tolerance_floor(c.dtype);
  // NaN compares false, so `max_abs_diff <= tolerance` also fails when a NaN reached either of them.
  const bool output_passed =
      non_finite_at.empty() && non_finite_reference_at.empty() && result.max_abs_diff <= result.tolerance;
  bool lse_passed = true;
  if (lse != nullptr) {
    result.lse_tolerance = 2.0 * lse_plain_error + lse_tolerance_floor(c.dtype);
    lse_passed = lse_bad_at.empty() && result.lse_max_abs_diff <= result.lse_tolerance;
  }
  result.passed = output_passed && lse_passed;
  // FAPROBE_EXPLAIN=0 leaves the explainer out (to measure what it costs).
  const char* explain = std::getenv("FAPROBE_EXPLAIN");
  if (!output_passed && non_finite_reference_at.empty() && !(explain != nullptr && std::string(explain) == "0")) {
    result.diagnosis = explain_mismatch(c, inputs, output, result.tolerance, limits);
  }
  // The output's failures first (a wrong output usually takes its LSE with it), then the LSE's.
  if (!non_finite_reference_at.empty()) {
    result.note = non_finite_reference_at;
  } else if (!non_finite_at.empty()) {
    result.note = fmt::format("{}, in {} of {} rows checked", non_finite_at, non_finite_rows, result.rows_checked);
  } else if (!output_passed) {
    result.note = fmt::format("max_abs_diff {:.3g} > tolerance {:.3g} at {}", result.max_abs_diff,
                              result.tolerance, worst_at);
  } else if (!lse_bad_at.empty()) {
    result.note = lse_bad_at;
  } else if (!lse_passed) {
    result.note = fmt::format("LSE off by {:.3g} at {} (tolerance {:.2g})", result.lse_max_abs_diff, lse_worst_at,
                              result.lse_tolerance);
  }
  return result;
}

void add_exact_inputs_error(const Case& c, const HostTensor& output, VerifyResult& result, const CheckLimits& limits) {
  const CheckPlan plan = plan_check(c, limits);
  const GeneratedInputs exact = GeneratedInputs::exact(c);
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int64_t>> by_kv_head;
  for (const auto& [b, h] : plan.heads) by_kv_head[{b, c.kv_head_of(h)}].push_back(h);
  double squares = 0, max_abs = 0;
  std::int64_t elements = 0;
  for (const auto& [batch_kv, query_heads] : by_kv_head) {
    const std::int64_t b = batch_kv.first;
    const HeadReference reference(c, exact, b, batch_kv.second);
    for (std::int64_t h : query_heads) {
      const std::size_t n_rows = plan.rows.size();
      std::vector<double> row_squares(n_rows), row_max(n_rows);
#pragma omp parallel for schedule(dynamic)
      for (std::size_t i = 0; i < n_rows; ++i) {
        const Eigen::VectorXd expected = reference.output_row(exact, h, plan.rows[i]);
        const std::int64_t base = output.offset(b, plan.rows[i], h);
        for (std::int64_t col = 0; col < c.head_dim; ++col) {
          const double diff = double(output.get(base + col)) - expected(col);
          row_squares[i] += diff * diff;
          keep_max(row_max[i], std::abs(diff));
        }
      }
      for (std::size_t i = 0; i < n_rows; ++i) {  // in order: the same sums whatever the threads did
        squares += row_squares[i];
        keep_max(max_abs, row_max[i]);
      }
      elements += std::int64_t(n_rows) * c.head_dim;
    }
  }
  result.exact_inputs_checked = true;
  result.exact_inputs_o_rms = elements > 0 ? std::sqrt(squares / double(elements)) : 0.0;
  result.exact_inputs_o_max_abs = max_abs;
}

}  // namespace faprobe
