// --shard I/N: the I-th (1-based) of N disjoint parts of a plan, so that one sweep or verify can run on many
// GPUs or nodes and be merged back. The partition is a function of the plan alone, identical on every
// machine: each (implementation, case) pair costs its ideal time at fixed reference rates (FLOPs at
// kShardGemmFlops per second plus the minimum bytes at kShardCopyBytes per second: the time every
// implementation's own prediction starts from; those predictions also depend on the CPU or GPU they are
// made on, which would give two machines two partitions), and the pairs go, costliest first (ties by pair
// key), to the part with the least cost so far (ties to the lowest index): longest-processing-time first.
// Each part then ends within one pair's cost of the mean, the union of all N parts is the plan, and no pair
// is in two. The plan's fingerprint (16 hex digits, FNV-1a 64 over its pair keys in run order) goes into
// every record of a shard, so that parts of different plans are never merged as one.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "harness/plan/axes.hpp"

namespace faprobe {

inline constexpr double kShardGemmFlops = 1e12;  // reference rates of the partition's cost model
inline constexpr double kShardCopyBytes = 1e12;

struct Shard {
  int index = 0;  // 1-based
  int count = 0;  // 0: not sharded
  explicit operator bool() const { return count > 0; }
};

// "I/N" with 1 <= I <= N <= kMaxShards (100000); throws UsageError naming `flag` and the allowed form.
Shard parse_shard(std::string_view text, std::string_view flag = "--shard");

// --shard slurm: the shard from Slurm's environment, read through `variable` (std::getenv's role; nullptr when
// unset). An array job's task (sbatch --array=A-B[:S]) is shard (ID - MIN) / STEP + 1 of
// SLURM_ARRAY_TASK_COUNT; else a task of `srun -n N` is shard SLURM_PROCID + 1 of SLURM_NTASKS. Throws
// UsageError naming `flag` when neither is set, when the array is not an evenly stepped range, when its first
// task (SLURM_ARRAY_TASK_MIN) is unset and it has more than one task (a task that cannot be placed), or when
// there are more than kMaxShards tasks.
Shard slurm_shard(const std::function<const char*(const char*)>& variable, std::string_view flag = "--shard");

// "I/N" or "slurm" (slurm_shard over the process's environment).
Shard parse_shard_setting(std::string_view text, std::string_view flag = "--shard");

struct PlanPair {
  std::string impl;
  Case c;
  std::string key() const;  // record_key(impl, c)
};

// Every (implementation, case) pair of the plan once, in the order run_plan runs them.
std::vector<PlanPair> plan_pairs(const Plan& plan);
std::string plan_fingerprint(const std::vector<PlanPair>& pairs);
double shard_cost(const Case& c);  // seconds at the reference rates

// The part (0-based) of each pair, for `count` parts.
std::vector<int> assign_shards(const std::vector<PlanPair>& pairs, int count);

// What a shard runs: its pair keys, with the plan's fingerprint and the costs that show the balance.
struct ShardSelection {
  Shard shard;
  std::string fingerprint;
  std::set<std::string> keys;       // the pairs of this shard
  std::size_t plan_pairs = 0;       // pairs in the whole plan
  double cost = 0, plan_cost = 0;   // this shard's and the whole plan's, seconds at the reference rates
};
ShardSelection select_shard(const Plan& plan, Shard shard);

}  // namespace faprobe
