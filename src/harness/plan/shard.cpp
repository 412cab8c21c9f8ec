#include "harness/plan/shard.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <numeric>

#include <fmt/format.h>

#include "harness/records/record.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

int parse_part(std::string_view text, std::string_view whole, std::string_view flag) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 1 || value > kMaxShards) {
    throw UsageError(fmt::format("{}: '{}' is not a shard (allowed: I/N, whole numbers with 1 <= I <= N <= 100000, "
                                 "e.g. 2/8; or slurm)", flag, whole));
  }
  return value;
}

}  // namespace

Shard parse_shard(std::string_view text, std::string_view flag) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    throw UsageError(fmt::format("{}: '{}' is not a shard (allowed: I/N, whole numbers with 1 <= I <= N <= "
                                 "100000, e.g. 2/8; or slurm)", flag, text));
  }
  const int index = parse_part(text.substr(0, slash), text, flag);
  const int count = parse_part(text.substr(slash + 1), text, flag);
  if (index > count) {
    throw UsageError(fmt::format("{}: shard {} of {} does not exist (allowed: 1 <= I <= N)", flag, index, count));
  }
  return {index, count};
}

namespace {

// A whole number >= `least` from a Slurm variable, or nullopt when it is unset.
std::optional<long> slurm_number(const std::function<const char*(const char*)>& variable, const char* name, long least,
                                 std::string_view flag) {
  const char* text = variable(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  long value = 0;
  const std::string_view view(text);
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (error != std::errc() || end != view.data() + view.size() || value < least) {
    throw UsageError(fmt::format("{} slurm: {}='{}' is not a whole number >= {}", flag, name, view, least));
  }
  return value;
}

}  // namespace

Shard slurm_shard(const std::function<const char*(const char*)>& variable, std::string_view flag) {
  // More tasks than a plan has parts cannot be placed whatever their ids: say the limit, not a range to submit.
  const auto too_many = [&](const char* name, long tasks) {
    return UsageError(fmt::format("{} slurm: {}={} is more tasks than faprobe splits a plan into (allowed: at most {} "
                                  "shards; submit at most {} tasks, e.g. sbatch --array=1-{})",
                                  flag, name, tasks, kMaxShards, kMaxShards, kMaxShards));
  };
  const auto task = slurm_number(variable, "SLURM_ARRAY_TASK_ID", 0, flag);
  const auto tasks = slurm_number(variable, "SLURM_ARRAY_TASK_COUNT", 1, flag);
  if (task && tasks) {
    if (*tasks > kMaxShards) throw too_many("SLURM_ARRAY_TASK_COUNT", *tasks);
    const auto first_task = slurm_number(variable, "SLURM_ARRAY_TASK_MIN", 0, flag);
    if (!first_task && *tasks > 1) {  // the task's place in the array is unknown: never guess shard 1 for every task
      throw UsageError(fmt::format("{} slurm: array task {} of {} cannot be placed: SLURM_ARRAY_TASK_MIN (the "
                                   "array's first task) is unset (give --shard I/N instead)",
                                   flag, *task, *tasks));
    }
    const long first = first_task.value_or(*task);
    const long step = slurm_number(variable, "SLURM_ARRAY_TASK_STEP", 1, flag).value_or(1);
    const long offset = *task - first;
    if (offset < 0 || offset % step != 0 || offset / step >= *tasks) {
      throw UsageError(fmt::format("{} slurm: array task {} is not one of {} evenly stepped tasks from {} (submit the "
                                   "array as a range, e.g. sbatch --array=1-{})",
                                   flag, *task, *tasks, first, *tasks));
    }
    return {static_cast<int>(offset / step + 1), static_cast<int>(*tasks)};
  }
  const auto process = slurm_number(variable, "SLURM_PROCID", 0, flag);
  const auto processes = slurm_number(variable, "SLURM_NTASKS", 1, flag);
  if (process && processes) {
    if (*processes > kMaxShards) throw too_many("SLURM_NTASKS", *processes);
    if (*process >= *processes) {
      throw UsageError(fmt::format("{} slurm: SLURM_PROCID {} is not below SLURM_NTASKS {}", flag, *process, *processes));
    }
    return {static_cast<int>(*process + 1), static_cast<int>(*processes)};
  }
  throw UsageError(fmt::format("{} slurm: not in a Slurm array job or srun step (neither SLURM_ARRAY_TASK_ID with "
                               "SLURM_ARRAY_TASK_COUNT nor SLURM_PROCID with SLURM_NTASKS is set; allowed: I/N, slurm)",
                               flag));
}

Shard parse_shard_setting(std::string_view text, std::string_view flag) {
  if (text == "slurm") return slurm_shard([](const char* name) { return std::getenv(name); }, flag);
  return parse_shard(text, flag);
}

std::string PlanPair::key() const { return record_key(impl, c); }

std::vector<PlanPair> plan_pairs(const Plan& plan) {
  std::vector<PlanPair> pairs;
  std::set<std::string> seen;  // a pair two parts share runs once (runner.cpp)
  for (const PlanPart& part : plan.parts)
    for (const Case& c : part.cases)
      for (const std::string& impl : part.impls)
        if (seen.insert(record_key(impl, c)).second) pairs.push_back({impl, c});
  return pairs;
}

std::string plan_fingerprint(const std::vector<PlanPair>& pairs) {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a 64
  const auto add = [&hash](std::string_view bytes) {
    for (const char byte : bytes) {
      hash ^= static_cast<unsigned char>(byte);
      hash *= 1099511628211ull;
    }
  };
  for (const PlanPair& pair : pairs) {
    add(pair.key());
    add(std::string_view("\n", 1));
  }
  return fmt::format("{:016x}", hash);
}

double shard_cost(const Case& c) { return c.flops() / kShardGemmFlops + c.min_bytes() / kShardCopyBytes; }

namespace {

// Longest-processing-time first over costs[i] (ties by keys[i]): the part (0-based) of each pair.
std::vector<int> assign(const std::vector<double>& cost, const std::vector<std::string>& keys, int count) {
  std::vector<std::size_t> order(cost.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return cost[a] != cost[b] ? cost[a] > cost[b] : keys[a] < keys[b];
  });
  std::vector<double> load(static_cast<std::size_t>(count), 0.0);
  std::vector<int> part(cost.size(), 0);
  for (const std::size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equal loads
    part[i] = static_cast<int>(least - load.begin());
    *least += cost[i];
  }
  return part;
}

struct PairCosts {
  std::vector<double> cost;
  std::vector<std::string> keys;
};

PairCosts pair_costs(const std::vector<PlanPair>& pairs) {
  PairCosts costs;
  for (const PlanPair& pair : pairs) {
    costs.cost.push_back(shard_cost(pair.c));
    costs.keys.push_back(pair.key());
  }
  return costs;
}

}  // namespace

std::vector<int> assign_shards(const std::vector<PlanPair>& pairs, int count) {
  const PairCosts costs = pair_costs(pairs);
  return assign(costs.cost, costs.keys, count);
}

ShardSelection select_shard(const Plan& plan, Shard shard) {
  const std::vector<PlanPair> pairs = plan_pairs(plan);
  const PairCosts costs = pair_costs(pairs);
  const std::vector<int> part = assign(costs.cost, costs.keys, shard.count);
  ShardSelection selection;
  selection.shard = shard;
  selection.fingerprint = plan_fingerprint(pairs);
  selection.plan_pairs = pairs.size();
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    selection.plan_cost += costs.cost[i];
    if (part[i] == shard.index - 1) {
      selection.keys.insert(costs.keys[i]);
      selection.cost += costs.cost[i];
    }
  }
  return selection;
}

}  // namespace faprobe
