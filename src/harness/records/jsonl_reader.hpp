// The JSONL of records read back: --resume's reader (a torn last line dropped), the strict reader of
// report, compare and merge (record_files.hpp reads either a JSONL or a --json document with it), and the
// limits every result file read back is held to, checked before anything is parsed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/records/record.hpp"

namespace faprobe {

// A JSONL file of records as --resume reads it back, from the file's bytes alone (no file system, so that it
// can be fuzzed): every line a record whose case passes Case::validate(), blank lines skipped. A last line
// cut short by a crash, a kill or a full disk (begun with '{', no newline, not JSON) is torn: it is dropped,
// and the file is to be cut to good_bytes. Any other bad line is a UsageError "PATH:LINE: why". Throws
// nothing else, on any input.
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
inline constexpr int kMaxRecordDepth = 64;  // a record nests 3 levels, its details a few more
// A parser's message cut to 200 characters (it quotes what it read), for one-line errors.
std::string shortened_error(std::string text);

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

}  // namespace faprobe
