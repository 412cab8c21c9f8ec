#include "harness/writers.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "model/errors.hpp"
#include "harness/range.hpp"

namespace faprobe {
namespace {

// Writes `text` to `path` ("-" is stdout) in one go; a failure names the file.
void write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  // Write a sibling file and rename it, so a reader (or an interrupt) never sees half a document.
  const std::string partial = path + ".partial";
  {
    std::ofstream file(partial, std::ios::trunc);
    if (!file) throw UsageError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    file << text;
    if (!file.flush()) throw UsageError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    throw UsageError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
}

std::string number(double value) { return fmt::format("{:.6g}", value); }
std::string optional_number(const std::optional<double>& value) { return value ? number(*value) : ""; }

std::string csv_escape(const std::string& field) {
  if (field.find_first_of(",\"\n") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char ch : field) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

}  // namespace

JsonlWriter::JsonlWriter(const std::string& path) : path_(path) {
  file_ = path == "-" ? stdout : std::fopen(path.c_str(), "a");
  if (!file_) throw UsageError(fmt::format("--out {}: cannot open for appending: {}", path, std::strerror(errno)));
}

JsonlWriter::~JsonlWriter() {
  if (file_ && file_ != stdout) std::fclose(file_);
}

void JsonlWriter::write(const Record& record) {
  const std::string line = nlohmann::json(record).dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw std::runtime_error(fmt::format("--out {}: write failed: {}", path_, std::strerror(errno)));
  }
}

std::vector<Record> read_jsonl(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UsageError(fmt::format("{}: cannot open the file", path));
  std::vector<Record> records;
  std::string line;
  for (int line_number = 1; std::getline(file, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      records.push_back(nlohmann::json::parse(line).get<Record>());
    } catch (const std::exception& error) {
      // A line cut short by a kill is the last one; anything else is a corrupt file.
      if (file.peek() == EOF && line.back() != '}') break;
      throw UsageError(fmt::format("{}:{}: not a faprobe record: {}", path, line_number, error.what()));
    }
  }
  return records;
}

void write_json(const std::string& path, const nlohmann::json& metadata, const std::vector<Record>& records) {
  nlohmann::json document = metadata;
  document["schema"] = kSchema;
  document["records"] = records;
  write_text(path, document.dump(2) + "\n");
}

std::vector<std::string> csv_header() {
  return {"impl",          "device",         "batch",           "heads",          "kv_heads",
          "seq_q",         "seq_k",          "head_dim",        "dtype",          "mask",
          "mode",          "seed",           "page_size",       "splits",         "seqlens",
          "status",          "reason",         "time_median_s",
          "time_mean_s",   "time_min_s",     "time_max_s",      "time_q1_s",      "time_q3_s",
          "time_stddev_s", "samples",        "predicted_time_s", "flops",         "bytes",
          "gflops_per_s",  "tflops_per_s",   "gbytes_per_s",    "bandwidth_fraction", "peak_bytes",
          "workspace_bytes", "predicted_bytes", "max_abs_diff", "max_rel_diff", "tolerance",
          "rows_checked",  "heads_checked",  "passed",          "details_json"};
}

std::vector<std::string> csv_row(const Record& r) {
  const auto& t = r.time;
  auto time_field = [&](double TimeStats::*field) { return t ? number((*t).*field) : std::string(); };
  const auto gflops = r.gflops();
  const auto& v = r.verify;
  return {r.impl,
          r.device,
          std::to_string(r.c.batch),
          std::to_string(r.c.heads),
          std::to_string(r.c.kv_heads),
          std::to_string(r.c.seq_q),
          std::to_string(r.c.seq_k),
          std::to_string(r.c.head_dim),
          std::string(to_string(r.c.dtype)),
          std::string(to_string(r.c.mask)),
          std::string(to_string(r.c.mode)),
          std::to_string(r.c.seed),
          std::to_string(r.c.page_size),
          std::to_string(r.c.splits),
          fmt::format("{}", fmt::join(r.c.seqlens, " ")),  // space-separated: one CSV field; empty = equal lengths
          std::string(to_string(r.status)),
          r.reason,
          time_field(&TimeStats::median),
          time_field(&TimeStats::mean),
          time_field(&TimeStats::min),
          time_field(&TimeStats::max),
          time_field(&TimeStats::q1),
          time_field(&TimeStats::q3),
          time_field(&TimeStats::stddev),
          t ? std::to_string(t->samples) : std::string(),
          number(r.predicted_time_s),
          number(r.flops()),
          number(r.bytes()),
          optional_number(gflops),
          gflops ? number(*gflops * 1e-3) : std::string(),
          optional_number(r.gbytes_per_s()),
          optional_number(r.bandwidth_fraction),
          std::to_string(r.memory.peak_bytes),
          std::to_string(r.memory.workspace_bytes),
          std::to_string(r.memory.predicted_bytes),
          v ? number(v->max_abs_diff) : std::string(),
          v ? number(v->max_rel_diff) : std::string(),
          v ? number(v->tolerance) : std::string(),
          v ? std::to_string(v->rows_checked) : std::string(),
          v ? std::to_string(v->heads_checked) : std::string(),
          v ? (v->passed ? "true" : "false") : std::string(),
          r.details.dump()};
}

void write_csv(const std::string& path, const std::vector<Record>& records) {
  std::string text;
  auto append_row = [&](const std::vector<std::string>& fields) {
    for (std::size_t i = 0; i < fields.size(); ++i) text += (i ? "," : "") + csv_escape(fields[i]);
    text += "\n";
  };
  append_row(csv_header());
  for (const Record& record : records) append_row(csv_row(record));
  write_text(path, text);
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.3f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

namespace {
// The columns shared by the Markdown and terminal tables; bandwidth_percent is the record's
// bandwidth_fraction in percent ("BW %" on the terminal).
struct TableCells {
  std::string impl, case_label, status, median, gflops, bandwidth_percent, peak, check;
};

TableCells table_cells(const Record& r) {
  TableCells cells{r.impl, r.c.label(), std::string(to_string(r.status)), "-", "-", "-", "-", "-"};
  if (r.time) cells.median = format_seconds(r.time->median);
  if (const auto gflops = r.gflops()) cells.gflops = fmt::format("{:.1f}", *gflops);
  if (r.bandwidth_fraction) cells.bandwidth_percent = fmt::format("{:.1f}", *r.bandwidth_fraction * 100);
  if (r.memory.peak_bytes) cells.peak = format_bytes(double(r.memory.peak_bytes));
  if (r.verify) {
    cells.check = r.verify->passed ? fmt::format("pass {:.1e}", r.verify->max_abs_diff)
                                   : fmt::format("FAIL: {}", r.verify->note);
  }
  if (r.status == Status::skipped || r.status == Status::unsupported || r.status == Status::failed) {
    cells.check = r.reason;
  }
  return cells;
}
}  // namespace

void write_markdown(const std::string& path, const std::vector<Record>& records) {
  std::string text =
      "| implementation | case | status | median time | GFLOP/s | % of copy bandwidth | peak memory "
      "| check (max abs diff) |\n"
      "|---|---|---|---:|---:|---:|---:|---|\n";
  for (const Record& record : records) {
    const TableCells c = table_cells(record);
    text += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", c.impl, c.case_label, c.status, c.median,
                        c.gflops, c.bandwidth_percent, c.peak, c.check);
  }
  write_text(path, text);
}

void TableWriter::write(const Record& record) {
  constexpr const char* kRow = "{:<18} {:<34} {:<11} {:>11} {:>9} {:>6} {:>10}  {}\n";
  if (!header_written_) {
    fmt::print(out_, kRow, "impl", "case", "status", "median", "GFLOP/s", "BW %", "peak mem", "check");
    header_written_ = true;
  }
  const TableCells c = table_cells(record);
  fmt::print(out_, kRow, c.impl, c.case_label, c.status, c.median, c.gflops, c.bandwidth_percent, c.peak,
             c.check);
  out_.flush();
}

}  // namespace faprobe
