// --shard I/N (harness/plan/shard.hpp): the partition of a plan into N parts is disjoint, complete, balanced within
// one pair's cost of the mean and the same every time; the fingerprint names the plan; shard tags survive
// the record's JSON, and bad ones are refused. Merging shards (harness/analysis/merge.hpp): one plan only, missing
// shards and pairs named, duplicates refused or resolved to the better-measured record.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/analysis/merge.hpp"
#include "harness/plan/axes.hpp"
#include "harness/plan/shard.hpp"
#include "harness/records/record.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

Plan default_sweep_plan() {
  SettingsSource source;
  source.load_config_file(FAPROBE_SOURCE_DIR "/configs/cpu-default.json");
  return make_plan(source);
}

// The UsageError `call` throws, "" when it throws none.
template <typename Call>
std::string usage_error_of(Call call) {
  try {
    call();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

std::string usage_error(const std::string& text) {
  return usage_error_of([&] { (void)parse_shard(text); });
}

TEST(Shard, ParsesIOfNAndRefusesAnythingElseNamingTheFlag) {
  const Shard shard = parse_shard("2/8");
  EXPECT_EQ(shard.index, 2);
  EXPECT_EQ(shard.count, 8);
  EXPECT_TRUE(bool(shard));
  EXPECT_FALSE(bool(Shard{}));
  for (const std::string bad : {"", "3", "0/2", "3/2", "1/0", "-1/2", "1/2/3", "a/b", "1 /2", "1/100001", "2/x"}) {
    EXPECT_NE(usage_error(bad).rfind("--shard: ", 0), std::string::npos) << "'" << bad << "' gave: " << usage_error(bad);
  }
  EXPECT_EQ(usage_error("3/2"), "--shard: shard 3 of 2 does not exist (allowed: 1 <= I <= N)");
}

TEST(Shard, PartsAreDisjointCompleteBalancedAndTheSameEveryTime) {
  const Plan plan = default_sweep_plan();
  const std::vector<PlanPair> pairs = plan_pairs(plan);
  ASSERT_EQ(pairs.size(), plan.size());  // one part, no pair twice: every pair of the plan
  double largest = 0, total = 0;
  for (const PlanPair& pair : pairs) {
    largest = std::max(largest, shard_cost(pair.c));
    total += shard_cost(pair.c);
  }
  for (int count = 1; count <= 9; ++count) {
    SCOPED_TRACE(count);
    const std::vector<int> part = assign_shards(pairs, count);
    EXPECT_EQ(part, assign_shards(pairs, count));  // deterministic
    std::vector<double> load(std::size_t(count), 0.0);
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      ASSERT_GE(part[i], 0);
      ASSERT_LT(part[i], count);
      load[std::size_t(part[i])] += shard_cost(pairs[i].c);
    }
    const double mean = total / count;
    for (int p = 0; p < count; ++p) EXPECT_LE(load[std::size_t(p)], mean + largest + 1e-12) << "part " << p + 1;
    // Through select_shard, as the CLI sees it: the parts' keys are disjoint and their union is the plan.
    std::set<std::string> all;
    std::size_t sum = 0;
    for (int index = 1; index <= count; ++index) {
      const ShardSelection selection = select_shard(plan, {index, count});
      EXPECT_EQ(selection.plan_pairs, pairs.size());
      sum += selection.keys.size();
      all.insert(selection.keys.begin(), selection.keys.end());
    }
    EXPECT_EQ(sum, pairs.size());       // no pair in two parts
    EXPECT_EQ(all.size(), pairs.size());  // and none left out
  }
}

TEST(Shard, TheFingerprintNamesThePlan) {
  const Plan plan = default_sweep_plan();
  const std::string fingerprint = plan_fingerprint(plan_pairs(plan));
  EXPECT_EQ(fingerprint.size(), 16u);
  EXPECT_EQ(fingerprint, plan_fingerprint(plan_pairs(default_sweep_plan())));
  SettingsSource other;
  other.load_config_file(FAPROBE_SOURCE_DIR "/configs/cpu-default.json");
  other.set("seq", "256..8192", "--seq");  // one length fewer
  EXPECT_NE(fingerprint, plan_fingerprint(plan_pairs(make_plan(other))));
  EXPECT_EQ(select_shard(plan, {2, 3}).fingerprint, fingerprint);
}

TEST(Shard, RecordsKeepTheirShardThroughJsonAndABadOneIsRefused) {
  Record record;
  record.impl = "cpu.tiled";
  record.device = "cpu";
  record.status = Status::skipped;
  const nlohmann::json unsharded = record;
  EXPECT_FALSE(unsharded.contains("shard"));
  EXPECT_FALSE(unsharded.get<Record>().shard.has_value());
  record.shard = ShardTag{2, 3, "0123456789abcdef", 7, "node-4", "3"};
  const nlohmann::json sharded = record;
  const Record back = sharded.get<Record>();
  ASSERT_TRUE(back.shard.has_value());
  EXPECT_EQ(back.shard->index, 2);
  EXPECT_EQ(back.shard->count, 3);
  EXPECT_EQ(back.shard->plan_fingerprint, "0123456789abcdef");
  EXPECT_EQ(back.shard->pairs, 7);
  EXPECT_EQ(back.shard->host, "node-4");
  EXPECT_EQ(back.shard->cuda_visible_devices, "3");
  nlohmann::json first_form = sharded;  // records of the first sharded runs: no pairs, host or devices
  for (const char* key : {"pairs", "host", "cuda_visible_devices"}) first_form["shard"].erase(key);
  EXPECT_EQ(first_form.get<Record>().shard->pairs, 0);
  nlohmann::json bad = sharded;
  bad["shard"]["pairs"] = -1;
  EXPECT_THROW((void)bad.get<Record>(), std::invalid_argument);
  bad = sharded;
  bad["shard"]["index"] = 4;
  EXPECT_THROW((void)bad.get<Record>(), std::invalid_argument);
  bad["shard"] = {{"index", 1}, {"count", 3}};  // no fingerprint
  EXPECT_ANY_THROW((void)bad.get<Record>());
}

// A count read from a file is input: held to --shard's limit before anything is sized by it, and never
// narrowed to a negative int (10^12) or a huge one (2^31 - 1, which once made merge allocate per shard).
TEST(Shard, AShardCountOrIndexFromAFileIsBoundedAsShardIs) {
  Record record;
  record.impl = "cpu.tiled";
  record.device = "cpu";
  record.status = Status::skipped;
  record.shard = ShardTag{1, kMaxShards, "0123456789abcdef", 1, "", ""};
  const nlohmann::json at_limit = record;
  EXPECT_EQ(at_limit.get<Record>().shard->count, kMaxShards);
  for (const std::int64_t count : {std::int64_t(kMaxShards) + 1, std::int64_t(2147483647), std::int64_t(1000000000000)}) {
    nlohmann::json bad = at_limit;
    bad["shard"]["count"] = count;
    try {
      (void)bad.get<Record>();
      ADD_FAILURE() << "count " << count << " was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("shard.count " + std::to_string(count)), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("<= 100000"), std::string::npos) << error.what();
    }
  }
  nlohmann::json bad = at_limit;
  bad["shard"]["index"] = std::int64_t(1) << 32 | 1;  // 1 once narrowed to int
  EXPECT_THROW((void)bad.get<Record>(), std::invalid_argument);
}

Shard slurm(const std::map<std::string, std::string>& environment) {
  return slurm_shard([&](const char* name) -> const char* {
    const auto found = environment.find(name);
    return found == environment.end() ? nullptr : found->second.c_str();
  });
}

std::string slurm_error(const std::map<std::string, std::string>& environment) {
  return usage_error_of([&] { (void)slurm(environment); });
}

TEST(Shard, SlurmArrayTasksAndSrunTasksAreShards) {
  // sbatch --array=1-3: task 2 of 3; --array=0-2 and --array=10-14:2 count from their first task.
  Shard shard = slurm({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "1"}});
  EXPECT_EQ(shard.index, 2);
  EXPECT_EQ(shard.count, 3);
  shard = slurm({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"}});
  EXPECT_EQ(shard.index, 1);
  shard = slurm({{"SLURM_ARRAY_TASK_ID", "14"},
                 {"SLURM_ARRAY_TASK_COUNT", "3"},
                 {"SLURM_ARRAY_TASK_MIN", "10"},
                 {"SLURM_ARRAY_TASK_STEP", "2"},
                 {"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "1"}});  // the array wins over the batch step's own task
  EXPECT_EQ(shard.index, 3);
  EXPECT_EQ(shard.count, 3);
  // srun -n 4: task 3 (0-based) is shard 4 of 4.
  shard = slurm({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(shard.index, 4);
  EXPECT_EQ(shard.count, 4);

  EXPECT_NE(slurm_error({}).find("--shard slurm: not in a Slurm array job or srun step"), std::string::npos);
  EXPECT_NE(slurm_error({{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "1"}})
                .find("sbatch --array=1-3"),
            std::string::npos);  // a list like --array=1,2,5 is not a range
  // More tasks than shards: the advice names the limit, not a range that would be refused too.
  const std::string too_many =
      slurm_error({{"SLURM_ARRAY_TASK_ID", "7"}, {"SLURM_ARRAY_TASK_COUNT", "200000"}, {"SLURM_ARRAY_TASK_MIN", "1"}});
  EXPECT_NE(too_many.find("SLURM_ARRAY_TASK_COUNT=200000"), std::string::npos) << too_many;
  EXPECT_NE(too_many.find("at most 100000"), std::string::npos) << too_many;
  EXPECT_EQ(too_many.find("--array=1-200000"), std::string::npos) << too_many;
  EXPECT_NE(slurm_error({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "200000"}}).find("at most 100000"), std::string::npos);
  // Without the array's first task a task cannot be placed: refused, never shard 1 for every task.
  const std::string unplaced = slurm_error({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "3"}});
  EXPECT_NE(unplaced.find("array task 3 of 3 cannot be placed: SLURM_ARRAY_TASK_MIN"), std::string::npos) << unplaced;
  shard = slurm({{"SLURM_ARRAY_TASK_ID", "9"}, {"SLURM_ARRAY_TASK_COUNT", "1"}});  // one task: it is the array
  EXPECT_EQ(shard.index, 1);
  EXPECT_EQ(shard.count, 1);
  EXPECT_NE(slurm_error({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "4"}}).find("SLURM_PROCID='x' is not a whole number"),
            std::string::npos);
  EXPECT_NE(slurm_error({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}).find("not below SLURM_NTASKS"),
            std::string::npos);
}

// The records a run of each shard of `plan` in `count` parts would write, one file per shard, each pair ok
// with `samples` samples.
std::vector<ResultFile> shard_files(const Plan& plan, int count, std::int64_t samples = 10) {
  const std::vector<PlanPair> pairs = plan_pairs(plan);
  const std::vector<int> part = assign_shards(pairs, count);
  const std::string fingerprint = plan_fingerprint(pairs);
  std::vector<ResultFile> files(static_cast<std::size_t>(count));
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(count), 0);
  for (const int p : part) ++sizes[static_cast<std::size_t>(p)];
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    ResultFile& file = files[static_cast<std::size_t>(part[i])];
    file.path = "part-" + std::to_string(part[i] + 1) + ".jsonl";
    Record record;
    record.impl = pairs[i].impl;
    record.device = "cpu";
    record.c = pairs[i].c;
    record.time = TimeStats{};
    record.time->samples = samples;
    record.time->median = 1e-3;
    record.time->stddev = 1e-5;
    record.shard = ShardTag{part[i] + 1, count, fingerprint, sizes[static_cast<std::size_t>(part[i])], "node", ""};
    file.records.push_back(record);
  }
  return files;
}

std::string merge_error(std::vector<ResultFile> files, const MergeOptions& options = {}) {
  return usage_error_of([&] { (void)merge_shards(std::move(files), options); });
}

TEST(Merge, AllShardsOfAPlanMergeToExactlyThePlanInItsOrder) {
  const Plan plan = default_sweep_plan();
  const std::vector<PlanPair> pairs = plan_pairs(plan);
  std::vector<ResultFile> files = shard_files(plan, 3);
  std::reverse(files.begin(), files.end());  // the order the parts are given in does not matter
  MergeOptions options;
  options.plan = pairs;
  const MergeResult merged = merge_shards(files, options);
  EXPECT_TRUE(merged.complete());
  EXPECT_TRUE(merged.plan_checked);
  EXPECT_EQ(merged.fingerprint, plan_fingerprint(pairs));
  EXPECT_EQ(merged.shard_count, 3);
  ASSERT_EQ(merged.records.size(), pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) EXPECT_EQ(merged.records[i].key(), pairs[i].key());
  // Without the plan: the same records, complete by the shards' own counts.
  const MergeResult unchecked = merge_shards(files, {});
  EXPECT_TRUE(unchecked.complete());
  EXPECT_FALSE(unchecked.plan_checked);
  EXPECT_EQ(unchecked.records.size(), pairs.size());
}

TEST(Merge, AMissingShardAndMissingPairsAreNamed) {
  const Plan plan = default_sweep_plan();
  std::vector<ResultFile> files = shard_files(plan, 3);
  files.erase(files.begin() + 1);           // shard 2 never ran
  const Record lost = files[1].records.back();
  files[1].records.pop_back();              // shard 3 was cut short
  const MergeResult unchecked = merge_shards(files, {});
  EXPECT_FALSE(unchecked.complete());
  EXPECT_EQ(unchecked.missing_shards, std::vector<int>{2});
  ASSERT_EQ(unchecked.incomplete_shards.size(), 1u);
  EXPECT_NE(unchecked.incomplete_shards[0].find("shard 3:"), std::string::npos);

  MergeOptions options;
  options.plan = plan_pairs(plan);
  const MergeResult checked = merge_shards(files, options);
  EXPECT_FALSE(checked.complete());
  EXPECT_EQ(checked.missing_shards, std::vector<int>{2});
  std::size_t in_shard_2 = 0;
  bool lost_named = false;
  for (const MissingPair& pair : checked.missing_pairs) {
    in_shard_2 += pair.shard == 2;
    lost_named = lost_named || (pair.key == lost.key() && pair.shard == 3);
  }
  EXPECT_EQ(in_shard_2, shard_files(plan, 3)[1].records.size());
  EXPECT_TRUE(lost_named);
  EXPECT_EQ(checked.missing_pairs.size(), in_shard_2 + 1);
}

TEST(Merge, PartsOfDifferentPlansAnUnshardedRecordAndAWrongPlanAreRefused) {
  const Plan plan = default_sweep_plan();
  std::vector<ResultFile> files = shard_files(plan, 3);
  std::vector<ResultFile> four = shard_files(plan, 4);
  files.push_back(four[3]);
  const std::string mixed = merge_error(files);
  EXPECT_NE(mixed.find("parts of different plans"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("part-4.jsonl"), std::string::npos) << mixed;

  files = shard_files(plan, 3);
  files[0].records[0].shard.reset();
  EXPECT_NE(merge_error(files).find("is not from a sharded run"), std::string::npos);

  SettingsSource other;
  other.set("seq", "512", "--seq");
  MergeOptions options;
  options.plan = plan_pairs(make_plan(other));
  EXPECT_NE(merge_error(shard_files(plan, 3), options).find("is not the plan of these parts"), std::string::npos);
}

TEST(Merge, ADuplicateIsRefusedUnlessAllowedThenTheBetterMeasuredIsKept) {
  const Plan plan = default_sweep_plan();
  std::vector<ResultFile> files = shard_files(plan, 2);
  ResultFile rerun = shard_files(plan, 2, /*samples=*/40)[0];
  rerun.path = "rerun.jsonl";
  files.push_back(rerun);
  const std::string refused = merge_error(files);
  EXPECT_NE(refused.find("appears twice"), std::string::npos) << refused;
  EXPECT_NE(refused.find("rerun.jsonl"), std::string::npos) << refused;

  MergeOptions options;
  options.allow_duplicates = true;
  const MergeResult merged = merge_shards(files, options);
  EXPECT_TRUE(merged.complete());
  ASSERT_EQ(merged.duplicates.size(), rerun.records.size());
  EXPECT_NE(merged.duplicates[0].kept.find("rerun.jsonl"), std::string::npos);
  EXPECT_EQ(merged.duplicates[0].reason, "40 samples over 10");
  for (const Record& record : merged.records)
    if (record.shard->index == 1) {
      EXPECT_EQ(record.time->samples, 40);
    }
}

// Without the plan a shard's own count of pairs is the check: one more record than that (a pair of another
// run appended to its file) is refused, naming the shard, not merged as if it were the plan's.
TEST(Merge, AShardHoldingMoreRecordsThanItsPairsIsRefusedWithoutThePlan) {
  const Plan plan = default_sweep_plan();
  std::vector<ResultFile> files = shard_files(plan, 3);
  Record foreign = files[0].records.front();
  foreign.c.seq_q = foreign.c.seq_k = 96;  // not a pair of this plan
  files[0].records.push_back(foreign);
  const std::string refused = merge_error(files);
  EXPECT_NE(refused.find("shard 1 holds " + std::to_string(files[0].records.size()) + " records, more than its " +
                         std::to_string(files[0].records.size() - 1) + " pairs"),
            std::string::npos)
      << refused;
  MergeOptions options;  // with the plan, the pair itself is named
  options.plan = plan_pairs(plan);
  EXPECT_NE(merge_error(files, options).find("is not a pair of plan"), std::string::npos);
}

// report's gate over shards (shard_gaps): whole shards say nothing; a missing shard, a short one and an
// over-full one are named with their plan; a count of 100000 with one record present names 20 and counts the
// rest, in one short line.
TEST(Merge, ShardGapsNameMissingShortAndOverfullShardsOfEachPlan) {
  const Plan plan = default_sweep_plan();
  const auto all_records = [](const std::vector<ResultFile>& files) {
    std::vector<Record> records;
    for (const ResultFile& file : files) records.insert(records.end(), file.records.begin(), file.records.end());
    return records;
  };
  std::vector<ResultFile> files = shard_files(plan, 3);
  EXPECT_TRUE(shard_gaps(all_records(files)).empty());
  std::vector<Record> twice = all_records(files);  // the same pairs on a second device count once
  for (Record record : all_records(files)) {
    record.device = "NVIDIA H200";
    twice.push_back(record);
  }
  EXPECT_TRUE(shard_gaps(twice).empty());
  files.erase(files.begin() + 1);
  files[1].records.pop_back();
  const std::vector<std::string> gaps = shard_gaps(all_records(files));
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_NE(gaps[0].find("missing shard (no records): 2/3"), std::string::npos) << gaps[0];
  EXPECT_NE(gaps[1].find("shard 3: "), std::string::npos) << gaps[1];
  std::vector<Record> one = {files[0].records.front()};
  one[0].shard->count = kMaxShards;
  one[0].shard->pairs = 1;
  const std::vector<std::string> wide = shard_gaps(one);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_NE(wide[0].find("2/100000, 3/100000"), std::string::npos) << wide[0];
  EXPECT_NE(wide[0].find(" and 99979 more"), std::string::npos) << wide[0];
  EXPECT_LT(wide[0].size(), 400u);
}

TEST(Merge, BetterMeasuredPrefersMeasuredThenAMismatchThenSamplesThenSpread) {
  Record ok, other;
  ok.status = Status::ok;
  ok.time = TimeStats{};
  ok.time->samples = 10;
  ok.time->median = 1.0;
  ok.time->stddev = 0.02;
  std::string reason;
  other.status = Status::failed;
  EXPECT_FALSE(better_measured(other, ok, reason));
  EXPECT_EQ(reason, "ok over failed");
  EXPECT_TRUE(better_measured(ok, other, reason));
  other = ok;
  other.status = Status::mismatch;
  EXPECT_TRUE(better_measured(other, ok, reason));  // never hidden by a passing rerun
  EXPECT_FALSE(better_measured(ok, other, reason));
  EXPECT_NE(reason.find("never hides a failed check"), std::string::npos);
  other = ok;
  other.time->stddev = 0.01;
  EXPECT_TRUE(better_measured(other, ok, reason));
  EXPECT_EQ(reason, "relative spread 1.00 % over 2.00 %");
  EXPECT_FALSE(better_measured(ok, ok, reason));
  EXPECT_EQ(reason, "equally measured: the first given");
}

}  // namespace
}  // namespace faprobe
