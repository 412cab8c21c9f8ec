#include "harness/records/jsonl_reader.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "harness/io/input_file.hpp"
#include "model/errors.hpp"

namespace faprobe {

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

}  // namespace faprobe
