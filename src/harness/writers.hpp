// Output formats, each a thin printer over records: JSONL (one record per line, appended and flushed as
// each case finishes), the --json document (records wrapped with the run's metadata), CSV (one flat row
// per record, units in the headers), Markdown, and the terminal table. `-` as a path means stdout.
#pragma once
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/record.hpp"

namespace faprobe {

class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path);  // appends; throws UsageError if it cannot open
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  void write(const Record& record);  // one line, flushed to the OS before returning

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

// Reads a JSONL file of records; throws UsageError naming the file and line of a malformed record.
std::vector<Record> read_jsonl(const std::string& path);

// `metadata` holds schema, version, command, time, host, devices...; records go under "records".
void write_json(const std::string& path, const nlohmann::json& metadata, const std::vector<Record>& records);
void write_csv(const std::string& path, const std::vector<Record>& records);
void write_markdown(const std::string& path, const std::vector<Record>& records);

std::vector<std::string> csv_header();
std::vector<std::string> csv_row(const Record& record);

// The terminal table: a header once, then one line per record as it finishes.
class TableWriter {
 public:
  explicit TableWriter(std::ostream& out) : out_(out) {}
  void write(const Record& record);

 private:
  std::ostream& out_;
  bool header_written_ = false;
};

std::string format_seconds(double seconds);  // "12.3 ms"

}  // namespace faprobe
