// --shard I/N (harness/shard.hpp): the partition of a plan into N parts is disjoint, complete, balanced within
// one pair's cost of the mean and the same every time; the fingerprint names the plan; shard tags survive
// the record's JSON, and bad ones are refused.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/axes.hpp"
#include "harness/record.hpp"
#include "harness/shard.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

Plan default_sweep_plan() {
  SettingsSource source;
  source.load_config_file(FAPROBE_SOURCE_DIR "/configs/cpu-default.json");
  return make_plan(source);
}

std::string usage_error(const std::string& text) {
  try {
    (void)parse_shard(text);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
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
  record.shard = ShardTag{2, 3, "0123456789abcdef"};
  const nlohmann::json sharded = record;
  const Record back = sharded.get<Record>();
  ASSERT_TRUE(back.shard.has_value());
  EXPECT_EQ(back.shard->index, 2);
  EXPECT_EQ(back.shard->count, 3);
  EXPECT_EQ(back.shard->plan_fingerprint, "0123456789abcdef");
  nlohmann::json bad = sharded;
  bad["shard"]["index"] = 4;
  EXPECT_THROW((void)bad.get<Record>(), std::invalid_argument);
  bad["shard"] = {{"index", 1}, {"count", 3}};  // no fingerprint
  EXPECT_ANY_THROW((void)bad.get<Record>());
}

}  // namespace
}  // namespace faprobe
