#include "harness/records/columns.hpp"

#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/range.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

std::string number(double value) { return fmt::format("{:.6g}", value); }
std::string optional_number(const std::optional<double>& value) { return value ? number(*value) : ""; }
std::string flag(bool value) { return value ? "true" : "false"; }

// A TimeStats field in the CSV: "" for a record without time.
template <double TimeStats::*field>
std::string time_field(const Record& r) {
  return r.time ? number((*r.time).*field) : std::string();
}

// A VerifyResult field in the CSV: "" for a record that was not checked.
template <auto field>
std::string verify_field(const Record& r) {
  if (!r.verify) return "";
  const auto& value = (*r.verify).*field;
  using T = std::decay_t<decltype(value)>;
  if constexpr (std::is_same_v<T, bool>) {
    return flag(value);
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(value);
  } else {
    return number(value);
  }
}

std::string bandwidth_percent(const Record& r) {
  if (!r.bandwidth_fraction) return "-";
  return fmt::format("{:.1f}{}", *r.bandwidth_fraction * 100, above_copy_bandwidth(r) ? "*" : "");
}

std::string check_cell(const Record& r) {
  if (r.status == Status::skipped || r.status == Status::unsupported || r.status == Status::failed) return r.reason;
  if (!r.verify) return "-";
  return r.verify->passed ? fmt::format("pass {:.1e}", r.verify->max_abs_diff)
                          : fmt::format("FAIL: {}", r.verify->note);
}

// The table. Each entry: CSV name, unit, Markdown and terminal headers, terminal width, then the getters.
std::vector<Column> make_columns() {
  using R = const Record&;
  return {
      {"impl", "", "implementation", "impl", -18, [](R r) { return r.impl; }, [](R r) { return r.impl; }},
      {"device", "", nullptr, nullptr, 0, [](R r) { return r.device; }},
      {"batch", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.batch); }},
      {"heads", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.heads); }},
      {"kv_heads", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.kv_heads); }},
      {"seq_q", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.seq_q); }},
      {"seq_k", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.seq_k); }},
      {"head_dim", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.head_dim); }},
      {"dtype", "", nullptr, nullptr, 0, [](R r) { return std::string(to_string(r.c.dtype)); }},
      {"mask", "", nullptr, nullptr, 0, [](R r) { return std::string(to_string(r.c.mask)); }},
      {"mode", "", nullptr, nullptr, 0, [](R r) { return std::string(to_string(r.c.mode)); }},
      {"seed", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.seed); }},
      {"page_size", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.page_size); }},
      {"splits", "", nullptr, nullptr, 0, [](R r) { return std::to_string(r.c.splits); }},
      // Space-separated, so one CSV field; empty for equal lengths.
      {"seqlens", "", nullptr, nullptr, 0, [](R r) { return fmt::format("{}", fmt::join(r.c.seqlens, " ")); }},
      {"inputs", "", nullptr, nullptr, 0, [](R r) { return std::string(to_string(r.c.inputs)); }},
      {nullptr, "", "case", "case", -34, nullptr, [](R r) { return r.c.label(); }},
      {"status", "", "status", "status", -11, [](R r) { return std::string(to_string(r.status)); },
       [](R r) { return std::string(to_string(r.status)); }},
      {"reason", "", nullptr, nullptr, 0, [](R r) { return r.reason; }},
      // A contended record's median reads "busy 7.998 ms" (kBusyLegend).
      {"time_median_s", "s", "median time", "median", 13, time_field<&TimeStats::median>,
       [](R r) { return r.time ? (r.time->contended ? "busy " : "") + format_seconds(r.time->median) : "-"; }},
      {"time_mean_s", "s", nullptr, nullptr, 0, time_field<&TimeStats::mean>},
      {"time_min_s", "s", nullptr, nullptr, 0, time_field<&TimeStats::min>},
      {"time_max_s", "s", nullptr, nullptr, 0, time_field<&TimeStats::max>},
      {"time_q1_s", "s", nullptr, nullptr, 0, time_field<&TimeStats::q1>},
      {"time_q3_s", "s", nullptr, nullptr, 0, time_field<&TimeStats::q3>},
      {"time_stddev_s", "s", nullptr, nullptr, 0, time_field<&TimeStats::stddev>},
      {"time_half_iqr_fraction", "fraction", "± (half IQR)", "±", 7,
       [](R r) { return optional_number(half_iqr_fraction(r)); },
       [](R r) {
         const auto spread = half_iqr_fraction(r);
         return spread ? fmt::format("{:.1f} %", *spread * 100) : std::string("-");
       }},
      // One sample shows as n 1 with no spread ("-"), and kOneSampleLegend under the first.
      {"samples", "", "samples", "n", 7, [](R r) { return r.time ? std::to_string(r.time->samples) : ""; },
       [](R r) { return r.time ? std::to_string(r.time->samples) : "-"; }},
      {"contended", "", nullptr, nullptr, 0, [](R r) { return r.time ? flag(r.time->contended.has_value()) : ""; }},
      {"contention_evidence", "", nullptr, nullptr, 0,
       [](R r) {
         return r.time && r.time->contended ? fmt::format("{}", fmt::join(r.time->contended->evidence, "; "))
                                            : std::string();
       }},
      {"predicted_time_s", "s", nullptr, nullptr, 0, [](R r) { return number(r.predicted_time_s); }},
      {"flops", "FLOP", nullptr, nullptr, 0, [](R r) { return number(r.flops()); }},
      {"bytes", "bytes", nullptr, nullptr, 0, [](R r) { return number(r.bytes()); }},
      {"gflops_per_s", "FLOP/s", "GFLOP/s", "GFLOP/s", 9, [](R r) { return optional_number(r.gflops()); },
       [](R r) {
         const auto gflops = r.gflops();
         return gflops ? fmt::format("{:.1f}", *gflops) : std::string("-");
       }},
      {"tflops_per_s", "FLOP/s", nullptr, nullptr, 0,
       [](R r) {
         const auto gflops = r.gflops();
         return gflops ? number(*gflops * 1e-3) : std::string();
       }},
      {"gbytes_per_s", "B/s", nullptr, nullptr, 0, [](R r) { return optional_number(r.gbytes_per_s()); }},
      // In percent in the tables, marked "*" above 100 (kCacheLegend); a bare star may start emphasis in
      // Markdown, so it is escaped there.
      {"bandwidth_fraction", "fraction", "% of copy bandwidth", "BW %", 7,
       [](R r) { return optional_number(r.bandwidth_fraction); }, bandwidth_percent,
       [](R r) {
         std::string cell = bandwidth_percent(r);
         return above_copy_bandwidth(r) ? cell.substr(0, cell.size() - 1) + "\\*" : cell;
       }},
      {"peak_bytes", "bytes", "peak memory", "peak mem", 10, [](R r) { return std::to_string(r.memory.peak_bytes); },
       [](R r) { return r.memory.peak_bytes ? format_bytes(double(r.memory.peak_bytes)) : std::string("-"); }},
      {"workspace_bytes", "bytes", nullptr, nullptr, 0,
       [](R r) { return std::to_string(r.memory.workspace_bytes); }},
      {"predicted_bytes", "bytes", nullptr, nullptr, 0,
       [](R r) { return std::to_string(r.memory.predicted_bytes); }},
      {"max_abs_diff", "", nullptr, nullptr, 0, verify_field<&VerifyResult::max_abs_diff>},
      {"max_rel_diff", "", nullptr, nullptr, 0, verify_field<&VerifyResult::max_rel_diff>},
      {"tolerance", "", nullptr, nullptr, 0, verify_field<&VerifyResult::tolerance>},
      {"rows_checked", "", nullptr, nullptr, 0, verify_field<&VerifyResult::rows_checked>},
      {"heads_checked", "", nullptr, nullptr, 0, verify_field<&VerifyResult::heads_checked>},
      {"passed", "", nullptr, nullptr, 0, verify_field<&VerifyResult::passed>},
      // The check's verdict, or why the pair did not run.
      {nullptr, "", "check (max abs diff)", "check", 0, nullptr, check_cell},
      {"details_json", "", nullptr, nullptr, 0, [](R r) { return json_text(r.details); }},
  };
}

}  // namespace

const std::vector<Column>& record_columns() {
  static const std::vector<Column> columns = make_columns();
  return columns;
}

std::optional<double> half_iqr_fraction(const Record& r) {
  if (!r.time || r.time->samples < 2 || !(r.time->median > 0)) return std::nullopt;
  return (r.time->q3 - r.time->q1) / 2 / r.time->median;
}

bool above_copy_bandwidth(const Record& r) { return r.bandwidth_fraction && *r.bandwidth_fraction > 1; }

std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (const char ch : valid_utf8(text)) {
    if (ch == '|' || ch == '\\') cell += '\\';
    cell += ch == '\n' || ch == '\r' ? ' ' : ch;
  }
  return cell;
}

}  // namespace faprobe
