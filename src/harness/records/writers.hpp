// Output formats, each a thin printer over records: JSONL (one record per line, appended and flushed as
// each case finishes), the --json document (records wrapped with the run's metadata), and the flat ones
// over the column table of columns.hpp: CSV (one row per record, units in the headers), Markdown and the
// terminal table. `-` as a path means stdout. How files are checked, replaced and locked: output_files.hpp;
// the JSONL read back: jsonl_reader.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/io/output_files.hpp"
#include "harness/records/record.hpp"

namespace faprobe {

// The --out stream: one record per line, each line handed to the OS in one write as its case finishes.
class JsonlWriter {
 public:
  // Checks `path` as --out would be (output_files.hpp), opens it for appending and locks it; throws UsageError.
  explicit JsonlWriter(const std::string& path);
  // Appends to an open --out file that already holds `records_on_disk` records (resumed), if that is known.
  explicit JsonlWriter(std::unique_ptr<AppendFile> file, std::optional<std::size_t> records_on_disk = std::nullopt);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  // One line; a failed write (a full disk, EFBIG, EIO) throws OutputError naming the file, the error and how
  // many records are on disk before it.
  void write(const Record& record);

 private:
  std::unique_ptr<AppendFile> file_;
  std::optional<std::size_t> records_on_disk_;
};

// One record as a line of the --out JSONL, newline included; a whole JSONL of records (faprobe merge).
std::string jsonl_line(const Record& record);
std::string jsonl_document(const std::vector<Record>& records);

// The documents' text. `metadata` holds schema, version, command, time, host, devices...; records go under
// "records".
std::string json_document(const nlohmann::json& metadata, const std::vector<Record>& records);
std::string csv_document(const std::vector<Record>& records);
std::string markdown_document(const std::vector<Record>& records);

// The same, written to a path checked as --json, --csv, --md would be (write_document in output_files.hpp).
void write_json(const std::string& path, const nlohmann::json& metadata, const std::vector<Record>& records);
void write_csv(const std::string& path, const std::vector<Record>& records);
void write_markdown(const std::string& path, const std::vector<Record>& records);

// The CSV's header and one record's fields: the columns of columns.hpp that have a CSV name, in order.
std::vector<std::string> csv_header();
std::vector<std::string> csv_row(const Record& record);

// The terminal table: a header once, then one line per record as it finishes, the median with its spread
// ("±", half the interquartile range over the median) and sample count ("n"); a contended record's median
// reads "busy 7.998 ms", and the first one is followed by kBusyLegend and its evidence; the first bandwidth
// percentage above 100 ("469.4*") by kCacheLegend.
class TableWriter {
 public:
  explicit TableWriter(std::ostream& out) : out_(out) {}
  void write(const Record& record);

 private:
  std::ostream& out_;
  bool header_written_ = false;
  bool busy_explained_ = false;
  bool cache_explained_ = false;
  bool one_sample_explained_ = false;
};

// What "busy" before a median means, in the table and under the Markdown document.
inline constexpr const char* kBusyLegend =
    "busy: the machine was busy while the samples were taken (time_s.contended has the evidence): the time is "
    "partly the scheduler's, not the kernel's; rerun when the machine is quiet";

// What "*" after a bandwidth percentage means, under its row in the table and under the Markdown document.
inline constexpr const char* kCacheLegend =
    "*: above 100 % of the copy bandwidth: the working set fits in cache, so its bytes came faster than the "
    "DRAM copy rate the percentage is of (that ceiling is for data that does not fit)";

// What an n of 1 means (a record of one timed sample, its spread "-"), under the table and the Markdown document.
inline constexpr const char* kOneSampleLegend =
    "n = 1: one timed sample (time_s.one_sample; --min-samples 1 past --max-time, or a budget spent by the first): "
    "no spread, so no sign of how far it may be off";

}  // namespace faprobe
