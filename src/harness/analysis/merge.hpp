// faprobe merge: the --out files of the shards of one plan (--shard I/N, harness/plan/shard.hpp) made into one
// result, which `report`, `compare` and scripts/plot.py then read as a single run.
//
// What is checked, from the records alone: every record is a shard's, and all of them are of one plan (one
// fingerprint, one shard count); parts of two plans are a UsageError naming a file of each. A shard with no
// record is missing; one with fewer records than its pairs (records since shard.pairs was kept) is
// incomplete, and one with more (without the plan: a record of another run appended to its file) is a
// UsageError. Given the plan too (the sweep's own --config and axes, re-expanded by the caller and accepted
// only when its fingerprint is the parts'), every missing pair is named with its shard.
//
// The same pair twice (a shard run twice, or appended to without --resume) is a UsageError naming both
// places, unless duplicates are allowed: then the better-measured record is kept, and each choice is
// reported with its reason. A measured record (ok or mismatch) beats a skipped, unsupported or failed one;
// a mismatch is kept over an ok one (a passing rerun never hides a failed check); between two measured ones
// the one with more samples, then the one with the smaller relative spread (stddev over median); then the
// first given.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "harness/analysis/record_files.hpp"
#include "harness/plan/shard.hpp"

namespace faprobe {

struct MergeDuplicate {
  std::string label;  // "cpu.tiled b1 h8 s4096 d64 fp32 causal"
  std::string kept, dropped;  // "a.jsonl record 3"
  std::string reason;         // "40 samples over 12"
};

struct MissingPair {
  std::string key;
  std::string label;  // "cpu.tiled b1 h8 s4096 d64 fp32 causal"
  int shard = 0;  // 1-based
};

struct MergeResult {
  std::string fingerprint;
  int shard_count = 0;
  std::vector<Record> records;  // each pair once: in the plan's order when the plan is known, else by shard
  std::vector<int> missing_shards;             // 1-based, shards with no record (and pairs, where known)
  std::vector<std::string> incomplete_shards;  // "shard 2: 14 of its 15 pairs"
  std::vector<MissingPair> missing_pairs;      // with the plan only
  std::vector<MergeDuplicate> duplicates;      // the choices made (only when allowed)
  bool plan_checked = false;                   // the plan's pairs were compared one by one

  bool complete() const { return missing_shards.empty() && incomplete_shards.empty() && missing_pairs.empty(); }
};

struct MergeOptions {
  bool allow_duplicates = false;
  // The plan's pairs in run order, when the caller has the plan (its fingerprint must be the parts').
  std::optional<std::vector<PlanPair>> plan;
};

// Throws UsageError for a record that is not a shard's, for parts of different plans, for a plan whose
// fingerprint is not the parts', and for duplicates unless allowed.
MergeResult merge_shards(std::vector<ResultFile> files, const MergeOptions& options);

// The shards of each plan among `records` (those with a shard tag), checked as merge checks them without the
// plan, for `report` to gate a split sweep: "plan X: missing shard (no records): 2/3", "plan X: shard 3: 14
// of its 15 pairs", "plan X: shard 1 holds 16 records, more than its 15 pairs (...)"; empty when every
// shard is whole. A pair run on two devices counts once.
std::vector<std::string> shard_gaps(const std::vector<Record>& records);

// "2/3, 5/3", at most 20 of them named, then "and N more".
std::string describe_missing_shards(const std::vector<int>& shards, int count);

// Which of two records of one pair is better measured: true when `candidate` should replace `kept`, with the
// reason in `reason` either way.
bool better_measured(const Record& candidate, const Record& kept, std::string& reason);

}  // namespace faprobe
