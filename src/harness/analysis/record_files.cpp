#include "harness/analysis/record_files.hpp"

#include <map>

#include <fmt/format.h>

#include "harness/io/input_file.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/run/repeat.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

// The records of a document, converted one by one as the parser completes each of them.
struct DocumentRecords {
  std::vector<Record> records;
  std::size_t count = 0;  // elements of "records" seen
  std::string error;      // the first that is not a record: "record 3: not a faprobe record: ..."
};

// The text as a --json document, or null when it is not one (then it is read as JSONL). A document is one
// JSON object holding "records"; a JSONL of one record is one JSON object too, but without "records". Each
// element of "records" becomes a Record in `out` as soon as it is parsed, and its value is dropped: the tree
// never holds more than one record, so a document costs its text, its records and its metadata in memory
// (a tree of a whole file costs ten times its size), and a JSONL tried as a document costs its first line.
// One object with neither "records" nor "impl" is no result file: a UsageError "<prefix>: ..." saying what
// it is.
nlohmann::json as_document(const std::string& text, const std::string& prefix, DocumentRecords& out) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return nullptr;
  if (json_nesting_depth(text) > kMaxRecordDepth + 2) return nullptr;  // + the document and its list; JSONL then says why
  using Event = nlohmann::json::parse_event_t;
  std::string top_key;  // the document's key being read
  const auto one_record = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth == 1 && event == Event::key) top_key = parsed.get<std::string>();
    if (depth != 2 || top_key != "records" || (event != Event::object_end && event != Event::array_end &&
                                               event != Event::value)) {
      return true;
    }
    ++out.count;
    if (out.error.empty()) {
      try {
        Record record = parsed.get<Record>();
        record.c.validate();
        out.records.push_back(std::move(record));
      } catch (const std::exception& error) {
        out.error = fmt::format("record {}: not a faprobe record: {}", out.count, shortened_error(error.what()));
      }
    }
    return false;  // converted (or refused): not kept in the tree
  };
  nlohmann::json value = nlohmann::json::parse(text, one_record, /*allow_exceptions=*/false);
  if (!value.is_discarded() && value.is_object() && value.contains("records")) return value;
  out = DocumentRecords{};
  if (value.is_discarded() || !value.is_object()) return nullptr;
  if (value.contains("kind") && value["kind"] == "compare") {
    throw UsageError(fmt::format("{}: a comparison (the --json of faprobe compare), not the results of a run: give "
                                 "the --out JSONL or the --json document of sweep, verify or run",
                                 prefix));
  }
  if (!value.contains("impl")) {
    throw UsageError(fmt::format("{}: one JSON object with neither \"records\" (a --json result document) nor "
                                 "\"impl\" (a record of a --out JSONL): not a faprobe result file",
                                 prefix));
  }
  return nullptr;
}

}  // namespace

ResultFile read_result_file(const std::string& path, std::string_view what) {
  return parse_result_file(read_text_file(path, what, kMaxJsonlBytes), path, what);
}

ResultFile parse_result_file(const std::string& text, const std::string& path, std::string_view what) {
  ResultFile file;
  file.path = path;
  const std::string prefix = fmt::format("{} {}", what, path);
  try {
    check_line_lengths(text, path);  // before anything is parsed: no line costs more than a few MB
  } catch (const UsageError& error) {
    throw UsageError(fmt::format("{} {}", what, error.what()));
  }
  DocumentRecords parsed;
  nlohmann::json document = as_document(text, prefix, parsed);
  if (document.is_null()) {
    // parse_resume_jsonl names the line ("PATH:LINE: why"); the flag goes in front.
    try {
      ResumeFile jsonl = parse_resume_jsonl(text, path);
      file.records = std::move(jsonl.records);
      file.warning = jsonl.warning;
    } catch (const UsageError& error) {
      throw UsageError(fmt::format("{} {}", what, error.what()));
    }
    if (file.records.empty()) throw UsageError(fmt::format("{}: holds no records", prefix));
    return file;
  }
  file.document = true;
  const nlohmann::json schema_value = document.value("schema", nlohmann::json(""));
  const std::string schema = schema_value.is_string() ? schema_value.get<std::string>() : schema_value.dump();
  if (schema != kSchema) {
    throw UsageError(fmt::format("{}: schema '{}', not {} (not a faprobe result file?)", prefix, schema, kSchema));
  }
  if (!document["records"].is_array()) throw UsageError(fmt::format("{}: \"records\" is not a list", prefix));
  if (!parsed.error.empty()) throw UsageError(fmt::format("{}: {}", prefix, parsed.error));
  file.records = std::move(parsed.records);
  document.erase("records");
  file.metadata = std::move(document);
  return file;
}

bool same_device(const SourcedRecord& a, const SourcedRecord& b) {
  if (a.record.device != b.record.device) return false;
  return a.host.empty() || b.host.empty() || a.host == b.host;
}

std::string device_label(const SourcedRecord& record) {
  if (record.host.empty()) return record.record.device;
  return fmt::format("{} ({})", record.record.device, record.host);
}

RecordSet read_record_set(const std::vector<std::string>& paths, std::string_view what, bool history) {
  RecordSet set;
  std::multimap<std::string, std::size_t> by_key;  // record key → index in set.records
  std::map<std::size_t, std::vector<std::pair<int, Record>>> repeated;  // index in set.records → later runs' records
  for (std::size_t file_index = 0; file_index < paths.size(); ++file_index) {
    const std::string& path = paths[file_index];
    const std::size_t first_of_file = set.records.size();
    ResultFile file = read_result_file(path, what);
    if (!file.warning.empty()) fmt::print(stderr, "faprobe: warning: {}\n", file.warning);
    std::string host;
    if (file.metadata.contains("host") && file.metadata["host"].is_object()) {
      host = file.metadata["host"].value("cpu_model", std::string());
    }
    for (std::size_t i = 0; i < file.records.size(); ++i) {
      SourcedRecord sourced{std::move(file.records[i]), fmt::format("{} record {}", path, i + 1), ""};
      if (sourced.record.device == "cpu") sourced.host = host;
      const std::string key = sourced.record.key();
      const auto [begin, end] = by_key.equal_range(key);
      bool pooled = false;
      for (auto it = begin; it != end && !pooled; ++it) {
        const SourcedRecord& earlier = set.records[it->second];
        if (!same_device(earlier, sourced)) continue;
        if (!history || it->second >= first_of_file) {
          throw UsageError(fmt::format("{} on {} appears twice: {} and {} (give each (implementation, case) once)",
                                       key, device_label(sourced), earlier.source, sourced.source));
        }
        repeated[it->second].emplace_back(int(file_index) + 1, std::move(sourced.record));
        pooled = true;
      }
      if (pooled) continue;
      by_key.emplace(key, set.records.size());
      set.records.push_back(std::move(sourced));
    }
    file.records.clear();
    set.files.push_back(std::move(file));
  }
  for (auto& [index, later] : repeated) {
    SourcedRecord& first = set.records[index];
    later.insert(later.begin(), {1, first.record});
    first.record = pool_processes(later, int(paths.size()));
    first.source += fmt::format(" and {} more run{}", later.size() - 1, later.size() == 2 ? "" : "s");
  }
  return set;
}

}  // namespace faprobe
