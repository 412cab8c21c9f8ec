// What a run is asked to do besides its plan: its outputs, limits, rates, isolation and shard. The CLI
// fills it (from the flags and the config); the runner (runner.hpp), a pair's run (pair_run.hpp) and its
// isolated child (isolation.hpp) read it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/plan/shard.hpp"
#include "model/implementation.hpp"

namespace faprobe {

namespace gpu {
class NvmlMonitor;
}
struct RunFiles;

struct RunOptions {
  bool timing = true;          // false for `verify`: one run per case, checked, not timed
  bool strict = false;         // an unsupported (implementation, case) is an error, not a record
  bool show_unsupported = false;  // print unsupported records in the table (when impls were named)
  std::string out_jsonl;       // streamed records ("" = none, "-" = stdout)
  std::string json_path, csv_path, md_path;  // rewritten at most once a second and at the end ("" = none)
  bool resume = false;         // skip cases already in out_jsonl
  // This run's pair keys (PlanPair::key), for open_run_files: without --resume, an --out that holds a record of
  // one of them is refused (a second record of a pair); unset, any record in it is.
  std::optional<std::set<std::string>> planned_keys;
  // The files above, checked and opened by open_run_files before anything is measured; when null, run_plan
  // opens them itself.
  std::shared_ptr<RunFiles> files;
  nlohmann::json metadata;     // for the --json header
  // The GPUs' clocks and throttle reasons over the run (cuda/runtime/nvml.hpp), sampled after each GPU case
  // and written into the --json header (harness/run/provenance.hpp); null: not watched.
  std::shared_ptr<gpu::NvmlMonitor> nvml;
  MachineRates rates;          // for time predictions and each record's bandwidth_fraction
  int rate_threads = 0;         // the threads the host's rates were measured with (calibrate.hpp); 0: not measured
  std::uint64_t mem_limit = 0;  // bytes per case; 0: the implementation's default_memory_limit()
  // Isolation (isolation.hpp).
  std::optional<bool> isolate;  // --isolate / --no-isolate; nullopt: each implementation's isolate_by_default()
  double isolate_timeout_s = 0;  // per child, from fork to record; 0: default_isolate_timeout(measure)
  std::string child_executable;  // this program ("/proc/self/exe", set by make_run_options); "": never isolate
  // --shard I/N: only this part's pairs run, and their records carry the shard and the plan's fingerprint.
  std::optional<ShardSelection> shard;
  // --max-total (config "max_total"): seconds for the run's predicted total; a pair that would take it over
  // is skipped (plan_run). 0: no budget.
  double max_total_s = 0;
};

}  // namespace faprobe
