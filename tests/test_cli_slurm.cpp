// A real Slurm cluster: scripts/slurm-local starts Debian's slurmctld, slurmd and munged on this machine
// (loopback, everything under the test's directory), scripts/slurm-sweep submits a 3-task array sweep of CPU
// cases and its dependent merge job, and the merged result must be exactly the unsharded plan's pairs, in
// the plan's order, every one verified. The daemons are stopped by their pids whatever happens. Skipped, with
// the reason, only where the Slurm packages cannot be installed.
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "harness/plan/axes.hpp"
#include "harness/plan/shard.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {
namespace {

const std::string kScripts = FAPROBE_SOURCE_DIR "/scripts/";

class Slurm : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    const Result install = shell("'" + kScripts + "slurm-local' install");
    if (install.status == 3) GTEST_SKIP() << "Slurm cannot be installed here: " << install.err;
    ASSERT_EQ(install.status, 0) << install.err;
    // SLURM_LOCAL_OWNER: the cluster is stopped when this process ends, even killed by a timeout.
    const Result start = shell("SLURM_LOCAL_OWNER=" + std::to_string(getpid()) + " '" + kScripts +
                               "slurm-local' start '" + path("cluster").string() + "'");
    started_ = true;  // stop() also after a partial start: slurm-local stops whatever it recorded
    ASSERT_EQ(start.status, 0) << start.out << start.err;
    slurm_conf_ = path("cluster/slurm.conf").string();
  }
  void TearDown() override {
    if (started_) {
      const Result stop = shell("'" + kScripts + "slurm-local' stop '" + path("cluster").string() + "'");
      EXPECT_EQ(stop.status, 0) << stop.err;
    }
    Cli::TearDown();
  }
  // A command line run with this cluster's configuration.
  Result on_cluster(const std::string& command_line) const {
    return shell("SLURM_CONF='" + slurm_conf_ + "' timeout 120 " + command_line);
  }

  bool started_ = false;
  std::string slurm_conf_;
};

TEST_F(Slurm, AnArraySweepAndItsMergeJobGiveExactlyTheUnshardedPlanEveryPairVerified) {
  const std::string axes = "--impl cpu.naive,cpu.tiled,cpu.decode --seq 16,64,257 --mode prefill,decode --heads 2 "
                           "--kv-heads 1 --head-dim 16";
  const Result run = on_cluster("'" + kScripts + "slurm-sweep' --shards 3 --out-dir run --faprobe '" FAPROBE_BINARY
                                "' --wait -- sweep " + axes + " --min-samples 1 --min-time 0 --max-noise 100");
  const std::string merge_log = read_file(path("run/merge.log"));
  ASSERT_EQ(run.status, 0) << run.out << run.err << merge_log << read_file(path("run/shard-1.log"));
  EXPECT_NE(run.out.find("array job "), std::string::npos) << run.out;
  EXPECT_NE(merge_log.find("of plan "), std::string::npos) << merge_log;
  EXPECT_NE(merge_log.find("(3 shards) from 3 files, checked pair by pair against the plan"), std::string::npos)
      << merge_log;

  // The plan as one unsharded sweep would run it, expanded here.
  SettingsSource source;
  source.set("impl", "cpu.naive,cpu.tiled,cpu.decode", "--impl");
  source.set("seq", "16,64,257", "--seq");
  source.set("mode", "prefill,decode", "--mode");
  source.set("heads", "2", "--heads");
  source.set("kv_heads", "1", "--kv-heads");
  source.set("head_dim", "16", "--head-dim");
  std::vector<std::string> expected;
  for (const PlanPair& pair : plan_pairs(make_plan(source))) expected.push_back(pair.key());

  std::vector<std::string> merged;
  std::set<int> shards;
  std::set<std::string> hosts;
  for (const Record& record : read_jsonl(path("run/merged.jsonl").string())) {
    merged.push_back(record.key());
    ASSERT_TRUE(record.shard.has_value()) << record.key();
    EXPECT_EQ(record.shard->count, 3);
    shards.insert(record.shard->index);
    hosts.insert(record.shard->host);
    if (record.status == Status::unsupported) continue;  // cpu.decode's prefill cases, say
    EXPECT_EQ(record.status, Status::ok) << record.key() << ": " << record.reason;
    ASSERT_TRUE(record.verify.has_value()) << record.key();
    EXPECT_TRUE(record.verify->passed) << record.key();
  }
  EXPECT_EQ(merged, expected);  // each pair once, none missing, in the unsharded run's order
  EXPECT_EQ(shards, (std::set<int>{1, 2, 3}));
  EXPECT_EQ(hosts.size(), 1u);
  EXPECT_TRUE(fs::exists(path("run/merged.json")));
}

}  // namespace
}  // namespace faprobe
