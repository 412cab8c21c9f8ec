// --devices all|0,2,3: one sweep (or verify) over several GPUs of one node. Each GPU gets a worker process,
// this program re-executed with CUDA_VISIBLE_DEVICES set to that GPU alone and `--shard K/D` (the K-th of
// D parts of the plan, harness/plan/shard.hpp; with --shard I/N as well, part (I-1)·D+K of N·D, so that every node
// of a cluster splits its shard over its own GPUs and one merge takes all of them). The partition is by
// predicted time, so the GPUs finish close together; it is static, so a worker's part is the same on every
// resumption.
//
// Each worker streams its records to its own JSONL in OUT.workers/ (shard-K-of-D.jsonl, its output in
// shard-K-of-D.log); this process follows those files and appends every new record to --out the moment it
// appears, with one table and one progress line for all workers. Nothing measured is lost: a crash of this
// process leaves the workers' files, and `--resume` runs each worker with --resume on its own file (its
// finished pairs are not run again) and appends only the records --out does not hold yet. When every worker
// has finished, their files are removed (their records are in --out); a worker that failed keeps its log.
// Ctrl-C is passed on to the workers, which stop between pairs.
#pragma once
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "harness/plan/shard.hpp"
#include "harness/run/runner.hpp"

namespace faprobe {

// "all" (every one of `available` devices) or a list of device numbers, each below `available`, none twice.
// Throws UsageError naming --devices and the allowed values; with no device at all, one saying so with
// `no_device_reason`.
std::vector<int> parse_devices(std::string_view text, int available, const std::string& no_device_reason);

// The shard of the worker at `position` (0-based) of `count` workers, within the node's own shard (none: 1/1).
Shard worker_shard(Shard node, int position, int count);

struct DeviceWorker {
  int device = 0;                 // CUDA_VISIBLE_DEVICES for it
  Shard shard;                    // the part of the plan it runs
  std::vector<std::string> argv;  // its command line, argv[0] the executable; run_on_devices adds the rest
};

// Runs the workers (adding `--shard K/D --out FILE --resume` to each argv) and collects their records as the
// header describes. `options` is the run's own: its --out (required, a regular file), --json/--csv/--md and
// --resume. Throws UsageError before any worker starts for a missing --out or a worker file left by an
// earlier run without --resume.
RunSummary run_on_devices(const Plan& plan, const RunOptions& options, std::vector<DeviceWorker> workers,
                          std::ostream& table_out);

}  // namespace faprobe
