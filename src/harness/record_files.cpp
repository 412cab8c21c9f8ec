#include "harness/record_files.hpp"

#include <map>

#include <fmt/format.h>

#include "harness/input_file.hpp"
#include "harness/writers.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

// The text as a --json document, or null when it is not one (then it is read as JSONL). A document is one
// JSON object holding "records"; a JSONL of one record is one JSON object too, but without "records", with
// "impl". One object with neither is no result file: a UsageError "<prefix>: ..." saying what it is.
nlohmann::json as_document(const std::string& text, const std::string& prefix) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return nullptr;
  if (json_nesting_depth(text) > kMaxRecordDepth + 2) return nullptr;  // + the document and its list; JSONL then says why
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return nullptr;
  if (value.contains("records")) return value;
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
  ResultFile file;
  file.path = path;
  const std::string prefix = fmt::format("{} {}", what, path);
  const std::string text = read_text_file(path, what, kMaxJsonlBytes);
  nlohmann::json document = as_document(text, prefix);
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
  std::size_t index = 0;
  for (const nlohmann::json& value : document["records"]) {
    ++index;
    Record record;
    try {
      record = value.get<Record>();
      record.c.validate();
    } catch (const std::exception& error) {
      throw UsageError(fmt::format("{}: record {}: not a faprobe record: {}", prefix, index, shortened_error(error.what())));
    }
    file.records.push_back(std::move(record));
  }
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

RecordSet read_record_set(const std::vector<std::string>& paths, std::string_view what) {
  RecordSet set;
  std::multimap<std::string, std::size_t> by_key;  // record key → index in set.records
  for (const std::string& path : paths) {
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
      for (auto it = begin; it != end; ++it) {
        const SourcedRecord& earlier = set.records[it->second];
        if (same_device(earlier, sourced)) {
          throw UsageError(fmt::format("{} on {} appears twice: {} and {} (give each (implementation, case) once)",
                                       key, device_label(sourced), earlier.source, sourced.source));
        }
      }
      by_key.emplace(key, set.records.size());
      set.records.push_back(std::move(sourced));
    }
    file.records.clear();
    set.files.push_back(std::move(file));
  }
  return set;
}

}  // namespace faprobe
