#include "harness/records/writers.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "harness/records/columns.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

std::string csv_escape(const std::string& text) {
  const std::string field = valid_utf8(text);
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char ch : field) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

}  // namespace

JsonlWriter::JsonlWriter(const std::string& path)
    : file_(std::make_unique<AppendFile>(check_output("--out", path, OutputUse::log))) {}

JsonlWriter::JsonlWriter(std::unique_ptr<AppendFile> file, std::optional<std::size_t> records_on_disk)
    : file_(std::move(file)), records_on_disk_(records_on_disk) {}

JsonlWriter::~JsonlWriter() = default;

std::string jsonl_line(const Record& record) { return json_text(nlohmann::json(record)) + "\n"; }

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

std::string json_document(const nlohmann::json& metadata, const std::vector<Record>& records) {
  nlohmann::json document = metadata;
  document["schema"] = kSchema;
  document["records"] = records;
  return json_text(document, 2) + "\n";
}

void write_json(const std::string& path, const nlohmann::json& metadata, const std::vector<Record>& records) {
  write_document(check_output("--json", path, OutputUse::document), json_document(metadata, records));
}

std::vector<std::string> csv_header() {
  std::vector<std::string> names;
  for (const Column& column : record_columns()) {
    if (column.csv != nullptr) names.push_back(column.csv);
  }
  return names;
}

std::vector<std::string> csv_row(const Record& record) {
  std::vector<std::string> fields;
  for (const Column& column : record_columns()) {
    if (column.csv != nullptr) fields.push_back(column.csv_value(record));
  }
  return fields;
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

std::string markdown_document(const std::vector<Record>& records) {
  std::string header = "|", rule = "|";
  for (const Column& column : record_columns()) {
    if (column.markdown == nullptr) continue;
    header += fmt::format(" {} |", column.markdown);
    rule += column.width > 0 ? "---:|" : "---|";
  }
  std::string text = header + "\n" + rule + "\n";
  bool any_busy = false, any_above_copy = false, any_one_sample = false;
  for (const Record& record : records) {
    text += "|";
    for (const Column& column : record_columns()) {
      if (column.markdown == nullptr) continue;
      text += fmt::format(" {} |", column.markdown_value ? column.markdown_value(record)
                                                         : markdown_cell(column.table_value(record)));
    }
    text += "\n";
    any_busy = any_busy || (record.time && record.time->contended);
    any_above_copy = any_above_copy || above_copy_bandwidth(record);
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
  // One line of cells, each padded to its column's width (the last one not), one space apart and two before
  // the last.
  auto print_row = [&](auto cell) {
    std::string line;
    bool first = true;
    for (const Column& column : record_columns()) {
      if (column.terminal == nullptr) continue;
      const std::string text = cell(column);
      line += first ? "" : column.width == 0 ? "  " : " ";
      first = false;
      if (column.width < 0) {
        line += fmt::format("{:<{}}", text, -column.width);
      } else if (column.width > 0) {
        line += fmt::format("{:>{}}", text, column.width);
      } else {
        line += text;
      }
    }
    fmt::print(out_, "{}\n", line);
  };
  if (!header_written_) {
    print_row([](const Column& column) { return std::string(column.terminal); });
    header_written_ = true;
  }
  print_row([&](const Column& column) { return column.table_value(record); });
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
  if (above_copy_bandwidth(record) && !cache_explained_) {
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
