#include "harness/writers.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "harness/input_file.hpp"
#include "harness/range.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

// Records may carry text faprobe did not produce (an isolated child's last stderr line); bytes that are not
// UTF-8 are written as U+FFFD rather than making dump() throw halfway through a run.
std::string dump(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}


std::string number(double value) { return fmt::format("{:.6g}", value); }
std::string optional_number(const std::optional<double>& value) { return value ? number(*value) : ""; }

// Half the interquartile range over the median, the "±" the tables show beside a median; none for a record
// without time or with one sample (whose quartiles are the median: no spread was seen, not a spread of 0).
std::optional<double> half_iqr_fraction(const Record& r) {
  if (!r.time || r.time->samples < 2 || !(r.time->median > 0)) return std::nullopt;
  return (r.time->q3 - r.time->q1) / 2 / r.time->median;
}

std::string csv_escape(const std::string& text) {
  const std::string field = valid_utf8(text);
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char ch : field) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

}  // namespace

std::string shortened_error(std::string text) {
  constexpr std::size_t kMaxErrorText = 200;  // of a parser's message, which quotes what it read
  if (text.size() > kMaxErrorText) text = text.substr(0, kMaxErrorText) + "...";
  return text;
}

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}

JsonlWriter::JsonlWriter(const std::string& path)
    : file_(std::make_unique<AppendFile>(check_output("--out", path, OutputUse::log))) {}

JsonlWriter::JsonlWriter(std::unique_ptr<AppendFile> file, std::optional<std::size_t> records_on_disk)
    : file_(std::move(file)), records_on_disk_(records_on_disk) {}

JsonlWriter::~JsonlWriter() = default;

std::string jsonl_line(const Record& record) { return dump(nlohmann::json(record)) + "\n"; }

std::string jsonl_document(const std::vector<Record>& records) {
  std::string text;
  for (const Record& record : records) text += jsonl_line(record);
  return text;
}

void JsonlWriter::write(const Record& record) {
  if (const std::error_code error = file_->append(jsonl_line(record))) {
    const OutputTarget& target = file_->target();
    std::string on_disk;  // what --resume will find: the complete lines before this one
    if (target.kind == OutputKind::regular_file && records_on_disk_) {
      const std::size_t n = *records_on_disk_;
      on_disk = fmt::format("; the {} record{} before it {} on disk; run again with --resume to continue", n,
                            n == 1 ? "" : "s", n == 1 ? "is" : "are");
    }
    throw OutputError(fmt::format("{}: write failed: {}{}", target.name(), error.message(), on_disk));
  }
  if (records_on_disk_) ++*records_on_disk_;
}

void check_line_lengths(std::string_view bytes, const std::string& path) {
  int line_number = 0;
  for (std::size_t begin = 0; begin < bytes.size();) {
    ++line_number;
    const std::size_t newline = std::min(bytes.find('\n', begin), bytes.size());
    if (newline - begin > kMaxRecordLineBytes) {
      static_assert(kMaxRecordLineBytes == 1 << 20, "the message says 1 MiB");
      throw UsageError(fmt::format("{}:{}: a line of {} bytes, more than the 1 MiB a line of a result file may hold "
                                   "(a record is one line of at most a few hundred kB: not a faprobe result file?)",
                                   path, line_number, newline - begin));
    }
    begin = newline + 1;
  }
}

ResumeFile parse_resume_jsonl(std::string_view bytes, const std::string& path) {
  check_line_lengths(bytes, path);  // before any line is parsed: a torn line is never that long either
  ResumeFile file;
  int line_number = 0;
  for (std::size_t begin = 0; begin < bytes.size();) {
    ++line_number;
    const std::size_t newline = bytes.find('\n', begin);
    const bool complete = newline != std::string_view::npos;  // it has its newline
    const std::size_t line_begin = begin;
    const std::string_view line = bytes.substr(begin, (complete ? newline : bytes.size()) - begin);
    begin = complete ? newline + 1 : bytes.size();
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", path, line_number);
    if (json_nesting_depth(line) > kMaxRecordDepth) {
      throw UsageError(fmt::format("{}: not a faprobe record: nested deeper than {} levels", where, kMaxRecordDepth));
    }
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& error) {
      // Each record is written as one line, '{' first and newline last, in one write: a line that starts as
      // a record does but has no newline and is not even JSON is a write that was cut short. Anything else
      // (a text file given as --out by mistake) is not ours to cut.
      if (!complete && line[line.find_first_not_of(" \t\r")] == '{') {
        file.good_bytes = line_begin;
        file.torn_line = line_number;
        file.warning = fmt::format("{}: dropped a torn last line ({} bytes of a write that did not finish)", where,
                                   line.size());
        return file;
      }
      throw UsageError(fmt::format("{}: not a faprobe record: {}", where, shortened_error(error.what())));
    }
    Record record;
    try {
      record = value.get<Record>();
    } catch (const std::exception& error) {
      throw UsageError(fmt::format("{}: not a faprobe record: {}", where, shortened_error(error.what())));
    }
    try {
      record.c.validate();  // a resumed case is input like any other
    } catch (const UsageError& error) {
      throw UsageError(fmt::format("{}: not a valid case: {}", where, error.what()));
    }
    file.records.push_back(std::move(record));
  }
  file.good_bytes = bytes.size();
  file.missing_newline = !bytes.empty() && bytes.back() != '\n';
  return file;
}

std::vector<Record> read_jsonl(const std::string& path) {
  const ResumeFile file = parse_resume_jsonl(read_text_file(path, "", kMaxJsonlBytes), path);
  if (file.torn_line != 0) throw UsageError(fmt::format("{}:{}: torn last line", path, file.torn_line));
  return file.records;
}

std::string json_document(const nlohmann::json& metadata, const std::vector<Record>& records) {
  nlohmann::json document = metadata;
  document["schema"] = kSchema;
  document["records"] = records;
  return dump(document, 2) + "\n";
}

void write_json(const std::string& path, const nlohmann::json& metadata, const std::vector<Record>& records) {
  write_document(check_output("--json", path, OutputUse::document), json_document(metadata, records));
}

std::vector<std::string> csv_header() {
  return {"impl",          "device",         "batch",           "heads",          "kv_heads",
          "seq_q",         "seq_k",          "head_dim",        "dtype",          "mask",
          "mode",          "seed",           "page_size",       "splits",         "seqlens",
          "inputs",
          "status",          "reason",         "time_median_s",
          "time_mean_s",   "time_min_s",     "time_max_s",      "time_q1_s",      "time_q3_s",
          "time_stddev_s", "samples",        "time_half_iqr_fraction",
          "contended",     "contention_evidence", "predicted_time_s", "flops",         "bytes",
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
          std::string(to_string(r.c.inputs)),
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
          optional_number(half_iqr_fraction(r)),
          t ? (t->contended ? "true" : "false") : std::string(),
          t && t->contended ? fmt::format("{}", fmt::join(t->contended->evidence, "; ")) : std::string(),
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
          dump(r.details)};
}

std::string csv_document(const std::vector<Record>& records) {
  std::string text;
  auto append_row = [&](const std::vector<std::string>& fields) {
    for (std::size_t i = 0; i < fields.size(); ++i) text += (i ? "," : "") + csv_escape(fields[i]);
    text += "\n";
  };
  append_row(csv_header());
  for (const Record& record : records) append_row(csv_row(record));
  return text;
}

void write_csv(const std::string& path, const std::vector<Record>& records) {
  write_document(check_output("--csv", path, OutputUse::document), csv_document(records));
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.3f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

namespace {
// The columns shared by the Markdown and terminal tables: spread is half the IQR over the median in percent
// ("±"), samples the sample count ("n"), bandwidth_percent the record's bandwidth_fraction in percent ("BW %"
// on the terminal), marked with kCacheLegend's "*" when above 100 (above_copy).
struct TableCells {
  std::string impl, case_label, status, median, spread, samples, gflops, bandwidth_percent, peak, check;
  bool above_copy = false;
};

TableCells table_cells(const Record& r) {
  TableCells cells{r.impl, r.c.label(), std::string(to_string(r.status)), "-", "-", "-", "-", "-", "-", "-"};
  if (r.time) {
    // One sample shows as n 1 with no spread ("-"), and kOneSampleLegend under the first.
    cells.median = (r.time->contended ? "busy " : "") + format_seconds(r.time->median);
    cells.samples = std::to_string(r.time->samples);
  }
  if (const auto spread = half_iqr_fraction(r)) cells.spread = fmt::format("{:.1f} %", *spread * 100);
  if (const auto gflops = r.gflops()) cells.gflops = fmt::format("{:.1f}", *gflops);
  if (r.bandwidth_fraction) {
    cells.above_copy = *r.bandwidth_fraction > 1;
    cells.bandwidth_percent = fmt::format("{:.1f}{}", *r.bandwidth_fraction * 100, cells.above_copy ? "*" : "");
  }
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

// A table cell's text: valid UTF-8, on one line, with its '|' (and the '\\' that could escape one) escaped.
std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (const char ch : valid_utf8(text)) {
    if (ch == '|' || ch == '\\') cell += '\\';
    cell += ch == '\n' || ch == '\r' ? ' ' : ch;
  }
  return cell;
}

// The bandwidth cell, its kCacheLegend mark escaped ("469.4\*"): a bare star may start emphasis.
std::string markdown_bandwidth(const TableCells& cells) {
  if (!cells.above_copy) return cells.bandwidth_percent;
  return cells.bandwidth_percent.substr(0, cells.bandwidth_percent.size() - 1) + "\\*";
}
}  // namespace

std::string markdown_document(const std::vector<Record>& records) {
  std::string text =
      "| implementation | case | status | median time | ± (half IQR) | samples | GFLOP/s | % of copy bandwidth "
      "| peak memory | check (max abs diff) |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---|\n";
  bool any_busy = false, any_above_copy = false, any_one_sample = false;
  for (const Record& record : records) {
    const TableCells c = table_cells(record);
    text += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(c.impl),
                        markdown_cell(c.case_label), c.status, c.median, c.spread, c.samples, c.gflops,
                        markdown_bandwidth(c), c.peak, markdown_cell(c.check));
    any_busy = any_busy || (record.time && record.time->contended);
    any_above_copy = any_above_copy || c.above_copy;
    any_one_sample = any_one_sample || (record.time && record.time->samples == 1);
  }
  if (any_busy) text += fmt::format("\n{}\n", kBusyLegend);
  if (any_one_sample) text += fmt::format("\n{}\n", kOneSampleLegend);
  if (any_above_copy) text += fmt::format("\n\\{}\n", kCacheLegend);  // "\*": a star, not emphasis
  return text;
}

void write_markdown(const std::string& path, const std::vector<Record>& records) {
  write_document(check_output("--md", path, OutputUse::document), markdown_document(records));
}

void TableWriter::write(const Record& record) {
  constexpr const char* kRow = "{:<18} {:<34} {:<11} {:>13} {:>7} {:>7} {:>9} {:>7} {:>10}  {}\n";
  if (!header_written_) {
    fmt::print(out_, kRow, "impl", "case", "status", "median", "±", "n", "GFLOP/s", "BW %", "peak mem", "check");
    header_written_ = true;
  }
  const TableCells c = table_cells(record);
  fmt::print(out_, kRow, c.impl, c.case_label, c.status, c.median, c.spread, c.samples, c.gflops,
             c.bandwidth_percent, c.peak, c.check);
  // A failed check's diagnosis (reference/explain.hpp), a line each under its row.
  if (record.verify && !record.verify->passed) {
    for (const std::string& line : record.verify->diagnosis) fmt::print(out_, "    why: {}\n", line);
  }
  // The first contended record says what "busy" means and why, once: a loaded machine marks most rows.
  if (record.time && record.time->contended && !busy_explained_) {
    fmt::print(out_, "    {}\n", kBusyLegend);
    for (const std::string& line : record.time->contended->evidence) fmt::print(out_, "    busy: {}\n", line);
    busy_explained_ = true;
  }
  if (c.above_copy && !cache_explained_) {
    fmt::print(out_, "    {}\n", kCacheLegend);
    cache_explained_ = true;
  }
  if (record.time && record.time->samples == 1 && !one_sample_explained_) {
    fmt::print(out_, "    {}\n", kOneSampleLegend);
    one_sample_explained_ = true;
  }
  out_.flush();
}

}  // namespace faprobe
