// The sweep runner: every (case × implementation) of a plan, in order. For each: supports(), predicted
// memory and time against the limits (skipped with the numbers), prepare, one run into outputs poisoned with
// NaN checked against the float64 reference (its output, and its LSE where it produces one), then timed
// samples (a pair's steps: pair_run.hpp; in a child process with --isolate: isolation.hpp); a record streams
// to the JSONL file and the table as it finishes.
//
// With MeasureSettings::interleave (--interleave) a timed run measures the implementations of each case
// together, sampling them in rounds, in this process (interleave.hpp); their records are written as the case
// ends.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/io/output_files.hpp"
#include "harness/plan/axes.hpp"
#include "harness/plan/registry.hpp"
#include "harness/plan/run_options.hpp"
#include "harness/plan/shard.hpp"
#include "harness/records/record.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {

// A run's output files (output_files.hpp), checked and opened before anything is measured: --out open for
// appending and locked for the run; with --resume its records read back (every case validated), a torn last
// line cut off with a warning on stderr, and a missing last newline added, so that new records start on a
// line of their own. Throws UsageError (bad paths, a locked --out, a bad record) or OutputError.
struct RunFiles {
  OutputTargets targets;
  std::unique_ptr<JsonlWriter> jsonl;  // null without --out
  std::vector<Record> resumed;         // what --out held, with --resume
};
std::shared_ptr<RunFiles> open_run_files(const RunOptions& options);

struct RunSummary;

// The --json, --csv and --md documents of a run, rewritten from summary.records: update() at most once a
// second (regular files only; a failure leaves the previous version and is tried again), finish() once at
// the end (a failure goes into summary.output_error and summary.unwritten).
class DocumentRewriter {
 public:
  DocumentRewriter(const RunFiles& files, const RunOptions& options, RunSummary& summary);
  void update() { rewrite(false); }
  void finish() { rewrite(true); }

 private:
  void rewrite(bool final);
  const RunFiles& files_;
  const RunOptions& options_;
  RunSummary& summary_;
  std::chrono::steady_clock::time_point last_;
};

struct RunSummary {
  std::vector<Record> records;  // including those resumed from out_jsonl
  // Counts over all of `records`, resumed ones included; `ran` counts the new ones.
  int ran = 0, resumed = 0, failed_checks = 0, failed_runs = 0, skipped = 0, unsupported = 0;
  bool interrupted = false;
  std::string output_error;          // why documents could not be written at the end ("" = none): exit status 1
  std::vector<std::string> unwritten;  // their flags ("--json")
  std::vector<std::string> incomplete;  // --devices: workers that stopped before their part was done, and why
  void count(const Record& record);  // adds one record's status to the counts
  // docs/DESIGN.md: 0, 1 (a check or a case failed, or a document was not written), 130 (interrupted)
  int exit_status() const;
};

// A run's summary to begin with: the records --out held (--resume), each key once (in `done`), counted.
RunSummary resumed_summary(const std::vector<Record>& resumed, std::set<std::string>& done);

// The record's gbytes_per_s over the copy bandwidth of the device it ran on: the GPU's for implementations
// that run there, the host's otherwise; nullopt when it was not timed (verify, emulated) or that bandwidth
// is unknown (0). run_plan sets each record's bandwidth_fraction with it.
std::optional<double> bandwidth_fraction(const Implementation& impl, const Record& record,
                                         const MachineRates& rates);

// What a run will do before it runs: --dry-run prints it, run_plan follows it (so the two cannot disagree),
// and the progress line's ETA sums it. One entry per pair, in the order run_plan takes them.
struct PlannedPair {
  // screen()'s record (its impl, device, case and predictions); status and reason when it will not run.
  Record screened;
  bool runs = false;        // it will be run (measured, or checked by verify)
  bool one_sample = false;  // one_sample_pair(): measured once
  bool over_total = false;  // skipped because it would take the predicted total over --max-total
  // Its predicted seconds in all: the first run, warm-ups and samples (predicted_pair_seconds); 0 when it
  // will not run.
  double predicted_pair_s = 0;
};

// The plan's pairs (this shard's, with --shard), those in `done` (resumed) left out, each screened as
// run_pair screens it, in run_plan's order. --max-total is spent in that order: a pair whose predicted
// seconds would take the total so far over it is skipped, naming --max-total, and later, shorter pairs may
// still fit.
std::vector<PlannedPair> plan_run(const Plan& plan, const RunOptions& options,
                                  const std::set<std::string>& done = {});

// --strict: throws UsageError naming the first (implementation, case) of the plan that is unsupported.
void require_supported(const Plan& plan);

// Every pair of the plan not already resumed; records stream to --out and the table. A failed write to --out
// throws OutputError (what was written before it stays on disk, for --resume).
RunSummary run_plan(const Plan& plan, const RunOptions& options, std::ostream& table);

}  // namespace faprobe
