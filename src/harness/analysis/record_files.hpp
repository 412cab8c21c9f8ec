// Result files read back, for `faprobe compare` and `faprobe report`: a --out JSONL (one record per line) or
// a --json document (records under "records", the run's metadata beside them), told apart by their content,
// so that either can be given wherever a result file is asked for. Every record's case is validated as
// --resume validates it; a JSONL whose last line was torn by a crash keeps the records before it, with a
// warning (the run that tore it can still be compared and reported).
//
// Several files make one set of records, each (implementation, device, case) once: the same one twice, in
// one file (two runs appended to one --out without --resume) or in two, is a UsageError naming both places,
// never silently one of them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/records/record.hpp"

namespace faprobe {

struct ResultFile {
  std::string path;
  bool document = false;                          // a --json document (else JSONL)
  nlohmann::json metadata = nlohmann::json::object();  // a document's fields besides "records"; {} for JSONL
  std::vector<Record> records;
  std::string warning;                            // a torn last line dropped, else ""
};

// Reads one result file; `what` names where the path came from ("--base", "FILE") in every error, a
// UsageError "<what> <path>: why" (missing, not a result file, another schema, a bad record).
ResultFile read_result_file(const std::string& path, std::string_view what);
// The same over a file's text (read_result_file reads at most kMaxJsonlBytes, then calls this): no line may
// be longer than kMaxRecordLineBytes, and a document is never held whole as a tree (its records are
// converted one at a time), so that reading a file costs a small multiple of its size.
ResultFile parse_result_file(const std::string& text, const std::string& path, std::string_view what);

// A record and where it came from: "r.jsonl record 3" (1-based, in file order).
struct SourcedRecord {
  Record record;
  std::string source;
  std::string host;  // the CPU model of the run's host, where the file says it (documents), else ""
};

// Where a record ran, for matching runs: its device, and for records of the host (device "cpu") the host's
// CPU model where it is known. Two records ran on the same device when the devices are equal and, where both
// hosts are known, the hosts are too.
bool same_device(const SourcedRecord& a, const SourcedRecord& b);
std::string device_label(const SourcedRecord& record);  // "cpu (AMD EPYC 7B13)", "NVIDIA H200"

// The records of several files, in order; the same (implementation, case) on the same device twice is a
// UsageError naming both sources. Warnings (torn lines) are printed to stderr as "faprobe: warning: ...".
struct RecordSet {
  std::vector<ResultFile> files;  // their records moved into `records`
  std::vector<SourcedRecord> records;
};
// With `history`, the same pair on the same device in several files is not an error but a history of runs:
// its records are pooled into one (repeat.hpp's pool_processes: each file's record one process, or the
// processes it holds), for `compare --base a --base b ...`. Within one file it stays an error.
RecordSet read_record_set(const std::vector<std::string>& paths, std::string_view what, bool history = false);

}  // namespace faprobe
