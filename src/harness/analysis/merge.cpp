#include "harness/analysis/merge.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "model/errors.hpp"

namespace faprobe {
namespace {

// 0: measured (ok or mismatch), 1: not run by choice (skipped, unsupported), 2: failed.
int run_rank(Status status) {
  switch (status) {
    case Status::ok:
    case Status::mismatch: return 0;
    case Status::skipped:
    case Status::unsupported: return 1;
    case Status::failed: return 2;
  }
  return 2;
}

double relative_spread(const Record& record) {
  if (!record.time || record.time->median <= 0) return 0;
  return record.time->stddev / record.time->median;
}

std::int64_t samples(const Record& record) { return record.time ? record.time->samples : 0; }

std::string describe_shard(const ShardTag& shard) {
  return fmt::format("plan {}, {} shard{}", shard.plan_fingerprint, shard.count, shard.count == 1 ? "" : "s");
}

// Records and pairs per shard (1-based; index 0 unused) of one plan split `count` ways (count <= kMaxShards,
// held there when the tags were read).
struct ShardCounts {
  explicit ShardCounts(int count)
      : records(static_cast<std::size_t>(count) + 1, 0), pairs(static_cast<std::size_t>(count) + 1, 0) {}
  std::vector<std::int64_t> records, pairs;  // pairs: 0 where no record says
};

// The shards with no record (without the plan every one is missing; with it only those given pairs) and
// those with fewer records than pairs.
void find_gaps(const ShardCounts& counts, bool plan_checked, std::vector<int>& missing,
               std::vector<std::string>& incomplete) {
  for (std::size_t shard = 1; shard < counts.records.size(); ++shard) {
    if (counts.records[shard] == 0) {
      if (!plan_checked || counts.pairs[shard] > 0) missing.push_back(static_cast<int>(shard));
    } else if (counts.pairs[shard] > 0 && counts.records[shard] < counts.pairs[shard]) {
      incomplete.push_back(fmt::format("shard {}: {} of its {} pairs", shard, counts.records[shard], counts.pairs[shard]));
    }
  }
}

// "shard 1 holds 16 records, more than its 15 pairs", or "" when no shard does.
std::string overfull_shard(const ShardCounts& counts) {
  for (std::size_t shard = 1; shard < counts.records.size(); ++shard) {
    if (counts.pairs[shard] > 0 && counts.records[shard] > counts.pairs[shard]) {
      return fmt::format("shard {} holds {} records, more than its {} pairs", shard, counts.records[shard],
                         counts.pairs[shard]);
    }
  }
  return "";
}

}  // namespace

std::string describe_missing_shards(const std::vector<int>& shards, int count) {
  constexpr std::size_t kNamed = 20;  // a count of up to kMaxShards never makes a line of them all
  std::string text;
  for (std::size_t i = 0; i < shards.size() && i < kNamed; ++i) {
    text += fmt::format("{}{}/{}", i == 0 ? "" : ", ", shards[i], count);
  }
  if (shards.size() > kNamed) text += fmt::format(" and {} more", shards.size() - kNamed);
  return text;
}

std::vector<std::string> shard_gaps(const std::vector<Record>& records) {
  struct PlanShards {
    ShardCounts counts;
    std::set<std::string> keys;  // a pair counts once, whatever devices it ran on
  };
  std::map<std::pair<std::string, int>, PlanShards> plans;  // (fingerprint, count) → its shards
  for (const Record& record : records) {
    if (!record.shard) continue;
    const ShardTag& shard = *record.shard;
    auto found = plans.find({shard.plan_fingerprint, shard.count});
    if (found == plans.end()) found = plans.emplace(std::make_pair(shard.plan_fingerprint, shard.count), PlanShards{ShardCounts(shard.count), {}}).first;
    PlanShards& plan = found->second;
    const auto index = static_cast<std::size_t>(shard.index);
    if (plan.keys.insert(std::to_string(shard.index) + " " + record.key()).second) ++plan.counts.records[index];
    if (shard.pairs > 0) plan.counts.pairs[index] = shard.pairs;
  }
  std::vector<std::string> gaps;
  for (const auto& [id, plan] : plans) {
    const auto& [fingerprint, count] = id;
    std::vector<int> missing;
    std::vector<std::string> incomplete;
    find_gaps(plan.counts, /*plan_checked=*/false, missing, incomplete);
    if (!missing.empty()) {
      gaps.push_back(fmt::format("plan {}: missing shard{} (no records): {}", fingerprint, missing.size() == 1 ? "" : "s",
                                 describe_missing_shards(missing, count)));
    }
    for (const std::string& line : incomplete) gaps.push_back(fmt::format("plan {}: {}", fingerprint, line));
    const std::string overfull = overfull_shard(plan.counts);
    if (!overfull.empty()) gaps.push_back(fmt::format("plan {}: {} (a record of another run?)", fingerprint, overfull));
  }
  return gaps;
}

bool better_measured(const Record& candidate, const Record& kept, std::string& reason) {
  const auto status_pair = [](const Record& a, const Record& b) {
    return fmt::format("{} over {}", to_string(a.status), to_string(b.status));
  };
  if (candidate.status != kept.status) {
    const bool mismatch_against_ok = (candidate.status == Status::mismatch && kept.status == Status::ok) ||
                                     (candidate.status == Status::ok && kept.status == Status::mismatch);
    if (mismatch_against_ok) {
      const bool replace = candidate.status == Status::mismatch;
      reason = status_pair(replace ? candidate : kept, replace ? kept : candidate) +
               ": a passing rerun never hides a failed check";
      return replace;
    }
    if (run_rank(candidate.status) != run_rank(kept.status)) {
      const bool replace = run_rank(candidate.status) < run_rank(kept.status);
      reason = status_pair(replace ? candidate : kept, replace ? kept : candidate);
      return replace;
    }
  }
  if (samples(candidate) != samples(kept)) {
    const bool replace = samples(candidate) > samples(kept);
    reason = fmt::format("{} samples over {}", replace ? samples(candidate) : samples(kept),
                         replace ? samples(kept) : samples(candidate));
    return replace;
  }
  const double a = relative_spread(candidate), b = relative_spread(kept);
  if (a != b) {
    const bool replace = a < b;
    reason = fmt::format("relative spread {:.2f} % over {:.2f} %", 100 * (replace ? a : b), 100 * (replace ? b : a));
    return replace;
  }
  reason = "equally measured: the first given";
  return false;
}

MergeResult merge_shards(std::vector<ResultFile> files, const MergeOptions& options) {
  MergeResult result;
  // One plan: the first record's shard tag is the reference; every other must agree.
  std::optional<ShardTag> reference;
  std::string reference_source;
  struct Entry {
    Record record;
    std::string source;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::size_t> by_key;  // pair key → index in entries
  for (ResultFile& file : files) {
    for (std::size_t i = 0; i < file.records.size(); ++i) {
      Record& record = file.records[i];
      const std::string source = fmt::format("{} record {}", file.path, i + 1);
      if (!record.shard) {
        throw UsageError(fmt::format("{} ({} {}) is not from a sharded run: merge takes the --out files of "
                                     "`--shard I/N` runs (to read unsharded results together, use `faprobe report`)",
                                     source, record.impl, record.c.label()));
      }
      if (!reference) {
        reference = record.shard;
        reference_source = source;
        result.fingerprint = reference->plan_fingerprint;
        result.shard_count = reference->count;
      } else if (record.shard->plan_fingerprint != reference->plan_fingerprint ||
                 record.shard->count != reference->count) {
        throw UsageError(fmt::format("parts of different plans: {} is of {}, {} of {} (merge the shards of one "
                                     "plan at a time)",
                                     reference_source, describe_shard(*reference), source,
                                     describe_shard(*record.shard)));
      }
      const std::string key = record.key();
      const auto found = by_key.find(key);
      if (found == by_key.end()) {
        by_key.emplace(key, entries.size());
        entries.push_back({std::move(record), source});
        continue;
      }
      Entry& earlier = entries[found->second];
      if (!options.allow_duplicates) {
        throw UsageError(fmt::format("{} {} appears twice: {} and {} (a shard run twice? keep one, or give "
                                     "--allow-duplicates to keep the better-measured record)",
                                     record.impl, record.c.label(), earlier.source, source));
      }
      std::string reason;
      const bool replace = better_measured(record, earlier.record, reason);
      result.duplicates.push_back({record.impl + " " + record.c.label(), replace ? source : earlier.source,
                                   replace ? earlier.source : source, reason});
      if (replace) earlier = Entry{std::move(record), source};
    }
  }
  if (entries.empty()) throw UsageError("the parts hold no records");

  // Per shard: how many records, and how many pairs it has (where the records say).
  ShardCounts counts(result.shard_count);
  for (const Entry& entry : entries) {
    const ShardTag& shard = *entry.record.shard;
    ++counts.records[static_cast<std::size_t>(shard.index)];
    if (shard.pairs > 0) counts.pairs[static_cast<std::size_t>(shard.index)] = shard.pairs;
  }

  if (options.plan) {
    const std::vector<PlanPair>& pairs = *options.plan;
    const std::string fingerprint = plan_fingerprint(pairs);
    if (fingerprint != result.fingerprint) {
      throw UsageError(fmt::format("the plan given (plan {}) is not the plan of these parts (plan {}): give merge "
                                   "the sweep's own --config, axes and --impl",
                                   fingerprint, result.fingerprint));
    }
    const std::vector<int> part = assign_shards(pairs, result.shard_count);
    std::vector<std::int64_t> planned(static_cast<std::size_t>(result.shard_count) + 1, 0);
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const int shard = part[i] + 1;
      ++planned[static_cast<std::size_t>(shard)];
      const auto found = by_key.find(pairs[i].key());
      if (found == by_key.end()) {
        result.missing_pairs.push_back({pairs[i].key(), pairs[i].impl + " " + pairs[i].c.label(), shard});
        continue;
      }
      result.records.push_back(std::move(entries[found->second].record));
      by_key.erase(found);
    }
    if (!by_key.empty()) {  // the fingerprints agree, so only an edited file gets here
      const auto& [key, index] = *by_key.begin();
      const Record& stray = entries[index].record;
      throw UsageError(fmt::format("{} ({} {}) is not a pair of plan {}", entries[index].source, stray.impl,
                                   stray.c.label(), fingerprint));
    }
    counts.pairs = planned;
    result.plan_checked = true;
  } else {
    // Without the plan a shard's own count of pairs is all there is: more records than that is a pair the
    // shard never had (a record of another run appended to its file), refused as the plan would refuse it.
    const std::string overfull = overfull_shard(counts);
    if (!overfull.empty()) {
      throw UsageError(fmt::format("{} of plan {} (a record of another run? merge takes each shard's own --out)",
                                   overfull, result.fingerprint));
    }
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.record.shard->index < b.record.shard->index; });
    for (Entry& entry : entries) result.records.push_back(std::move(entry.record));
  }

  find_gaps(counts, result.plan_checked, result.missing_shards, result.incomplete_shards);
  return result;
}

}  // namespace faprobe
