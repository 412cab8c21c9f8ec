// Output formats, each a thin printer over records: JSONL (one record per line, appended and flushed as
// each case finishes), the --json document (records wrapped with the run's metadata), CSV (one flat row
// per record, units in the headers), Markdown, and the terminal table; and the JSONL read back for
// --resume. `-` as a path means stdout. How files are checked, replaced and locked: output_files.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/output_files.hpp"
#include "harness/record.hpp"

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

// A JSONL file of records as --resume reads it back, from the file's bytes alone (no file system, so that it
// can be fuzzed): every line a record whose case passes Case::validate(), blank lines skipped. A last line
// cut short by a crash, a kill or a full disk (begun with '{', no newline, not JSON) is torn: it is dropped,
// and the file is to be cut to good_bytes. Any other bad line is a UsageError "PATH:LINE: why". Throws nothing else, on any
// input.
struct ResumeFile {
  std::vector<Record> records;
  std::uint64_t good_bytes = 0;  // the bytes to keep: all of them, or up to the torn last line
  bool missing_newline = false;  // the kept bytes end in a record without its '\n': append one before more
  int torn_line = 0;             // the torn line's number (1-based), 0 if none
  std::string warning;           // "PATH:LINE: dropped ..." when a torn line was dropped, else ""
};
ResumeFile parse_resume_jsonl(std::string_view bytes, const std::string& path);

// The deepest nesting of arrays and objects in a JSON text, strings skipped: a scan that cannot overflow the
// stack, done before parsing what faprobe reads back (copying and printing nlohmann values recurse once per
// level).
int json_nesting_depth(std::string_view text);
inline constexpr int kMaxRecordDepth = 64;
// A parser's message cut to 200 characters (it quotes what it read), for one-line errors.
std::string shortened_error(std::string text);  // a record nests 3 levels, its details a few more

// The largest JSONL read back (about a million records).
inline constexpr std::uint64_t kMaxJsonlBytes = std::uint64_t(1) << 30;
// The longest line of a result file read back: a record is one line, and the largest one faprobe writes
// (10,000 kept samples, its details) is about 250 kB; a --json document is written indented, a value a
// line. A longer line is refused before it is parsed, so that no line costs more than a few MB to read.
inline constexpr std::size_t kMaxRecordLineBytes = std::size_t(1) << 20;

// The first line of `bytes` longer than kMaxRecordLineBytes, as a UsageError "PATH:LINE: ..." (its last
// line too, newline or not); returns when there is none.
void check_line_lengths(std::string_view bytes, const std::string& path);

// The records of a JSONL file, strictly: a torn last line is a UsageError too.
std::vector<Record> read_jsonl(const std::string& path);

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

std::string format_seconds(double seconds);  // "12.3 ms"

}  // namespace faprobe
