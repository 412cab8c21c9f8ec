// Fuzz targets: the result files that compare, report and merge read back (harness/analysis/record_files.hpp:
// parse_result_file, JSONL records or a --json document, told apart by content), and merge over them
// (harness/analysis/merge.hpp). Whatever the bytes, a file is records or a UsageError; what is kept is whole: every
// record a valid case with a line of its own, a document's metadata without its records. Merge of such files
// is a result or a UsageError, and what it says adds up: no more records out than in, every one a shard's of
// one plan, the gaps within the shard count; report's shard gaps are named lines.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_targets.hpp"
#include "harness/analysis/merge.hpp"
#include "harness/analysis/record_files.hpp"
#include "model/errors.hpp"

namespace faprobe::fuzz {
namespace {

// The checks every file kept must pass.
void check_file(const ResultFile& file) {
  if (file.records.empty() && !file.document) throw std::logic_error("a JSONL file kept with no records");
  if (file.metadata.contains("records")) throw std::logic_error("a document's metadata still holds its records");
  for (const Record& record : file.records) {
    record.c.validate();
    const std::string line = nlohmann::json(record).dump();
    if (line.find('\n') != std::string::npos) throw std::logic_error("a record that writes more than one line");
    if (record.shard && (record.shard->count < 1 || record.shard->count > kMaxShards || record.shard->index < 1 ||
                         record.shard->index > record.shard->count)) {
      throw std::logic_error("a shard tag outside 1 <= index <= count <= kMaxShards");
    }
  }
}

}  // namespace

int result_file(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_file(parse_result_file(text, "fuzz.jsonl", "FILE"));
  } catch (const UsageError&) {
  }
  return 0;
}

// The input is the parts, separated by form feeds ('\f', which no faprobe file holds outside a string);
// a first byte '+' allows duplicates.
int merge_parts(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  MergeOptions options;
  if (!bytes.empty() && bytes.front() == '+') {
    options.allow_duplicates = true;
    bytes.remove_prefix(1);
  }
  std::vector<ResultFile> files;
  std::size_t records_in = 0;
  try {
    for (std::size_t begin = 0; begin <= bytes.size() && files.size() < 8;) {
      const std::size_t end = std::min(bytes.find('\f', begin), bytes.size());
      files.push_back(parse_result_file(std::string(bytes.substr(begin, end - begin)),
                                        "part-" + std::to_string(files.size() + 1) + ".jsonl", "PART"));
      check_file(files.back());
      records_in += files.back().records.size();
      begin = end + 1;
    }
    std::vector<Record> all;
    for (const ResultFile& file : files) all.insert(all.end(), file.records.begin(), file.records.end());
    for (const std::string& gap : shard_gaps(all)) {
      if (gap.empty() || gap.find('\n') != std::string::npos) throw std::logic_error("a shard gap that is not a line");
    }
    const MergeResult merged = merge_shards(std::move(files), options);
    if (merged.records.size() > records_in) throw std::logic_error("merge made records");
    if (merged.shard_count < 1 || merged.shard_count > kMaxShards) throw std::logic_error("a shard count out of range");
    if (merged.missing_shards.size() + merged.incomplete_shards.size() > std::size_t(merged.shard_count)) {
      throw std::logic_error("more gaps than shards");
    }
    for (const Record& record : merged.records) {
      if (!record.shard || record.shard->plan_fingerprint != merged.fingerprint) {
        throw std::logic_error("a merged record that is not a shard's of the plan");
      }
    }
    if (!options.allow_duplicates && !merged.duplicates.empty()) throw std::logic_error("duplicates kept unasked");
    if (!describe_missing_shards(merged.missing_shards, merged.shard_count).empty() && merged.missing_shards.empty()) {
      throw std::logic_error("missing shards named where none is");
    }
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace faprobe::fuzz
