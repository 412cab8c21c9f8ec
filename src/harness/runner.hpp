// The sweep runner: every (case × implementation) of a plan, in order. For each: supports(), predicted
// memory and time against the limits (skipped with the numbers), prepare, one run into outputs poisoned with
// NaN checked against the float64 reference (its output, and its LSE where it produces one), then timed
// samples; a record streams to the JSONL file and the table as it finishes.
//
// Faults: an implementation that throws (a CUDA error, an allocation failure) gives a `failed` record with
// the error's text and the sweep goes on. A crash, a hang or a poisoned CUDA context cannot be caught that
// way, so a pair can run isolated (--isolate): in a child process, this same program re-executed as
// `faprobe run --isolated-child JOB` (JOB: the implementation, the case and the measure settings as JSON),
// which runs run_one and writes the record as one line on its stdout. The child has its own process group
// and dies with the parent (PR_SET_PDEATHSIG). The parent screens the pair first (supports(), predictions;
// the device's own memory limit is left to the child, so that the parent never allocates on the GPU), then
// waits at most the isolate timeout: past it the child's process group is killed and the record is
// `failed` "timed out after N s (isolated)"; a child killed by a signal or exiting without a record is
// `failed` "child exited with signal 11 (SIGSEGV)" or "... with status N", plus its last stderr line.
// On Ctrl-C the parent forwards SIGINT to the child (SIGKILL 2 s later) and records nothing for the pair.
// Isolation is on for implementations whose isolate_by_default() is true (cuda.*) unless RunOptions says.
//
// With MeasureSettings::interleave (--interleave) a timed run measures the implementations of each case
// together, sampling them in rounds, in this process (interleave.hpp); their records are written as the case
// ends.
#pragma once
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/axes.hpp"
#include "harness/output_files.hpp"
#include "harness/record.hpp"
#include "harness/registry.hpp"
#include "harness/shard.hpp"
#include "harness/writers.hpp"

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
  // and written into the --json header (harness/provenance.hpp); null: not watched.
  std::shared_ptr<gpu::NvmlMonitor> nvml;
  MachineRates rates;          // for time predictions and each record's bandwidth_fraction
  int rate_threads = 0;         // the threads the host's rates were measured with (calibrate.hpp); 0: not measured
  std::uint64_t mem_limit = 0;  // bytes per case; 0: the implementation's default_memory_limit()
  // Isolation (see the top of this file).
  std::optional<bool> isolate;  // --isolate / --no-isolate; nullopt: each implementation's isolate_by_default()
  double isolate_timeout_s = 0;  // per child, from fork to record; 0: default_isolate_timeout(measure)
  std::string child_executable;  // this program ("/proc/self/exe", set by the CLI); "": never isolate
  // --shard I/N: only this part's pairs run, and their records carry the shard and the plan's fingerprint.
  std::optional<ShardSelection> shard;
  // --max-total (config "max_total"): seconds for the run's predicted total; a pair that would take it over
  // is skipped (plan_run). 0: no budget.
  double max_total_s = 0;
};

// The default --isolate-timeout: max(60 s, 4 × --max-time). A child spends up to --max-time sampling, plus
// the first run, the check against the reference, and starting CUDA; four times the budget with a minute's
// floor covers those without letting a hung kernel hold a sweep for long.
double default_isolate_timeout(const MeasureSettings& measure);

// Whether run_plan runs this implementation's cases in a child process.
bool runs_isolated(const Implementation& impl, const RunOptions& options);

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

// Runs one (implementation, case) in this process; never throws for a failing implementation (it becomes a
// record).
//
// Test hook: the environment variable FAPROBE_TEST_FAULT=KIND[@SEQ_K] plants a fault in every case (or only
// those with that seq_k) just before the implementation prepares it: `throw` throws, `crash` dies by
// SIGSEGV, `hang` sleeps forever. tests/test_cli.cpp uses it to check the fault handling and --isolate
// without a faulty implementation; nothing else sets it.
Record run_one(const Implementation& impl, const Case& c, const MeasureSettings& measure,
               const RunOptions& options);

// The steps of run_one that the interleaved runner (interleave.hpp) takes too.
//
// supports(), then the predicted memory and time against the limits. Returns true when the case may run;
// otherwise `record` (its impl, device and case filled in either way) says why not (unsupported, skipped).
// With `device_limit` false the implementation's default memory limit (the device's free memory, when
// --mem-limit is not given) is not consulted: the parent of an isolated pair leaves it to the child, since
// asking a GPU would initialize CUDA here.
bool screen(const Implementation& impl, const Case& c, const MeasureSettings& measure, const RunOptions& options,
            bool device_limit, Record& record);
// A screened pair whose single run is predicted to exceed --max-time and that runs all the same, because
// --min-samples 1 says one sample is enough (timed runs only; screen() skips it in verify): it gets its
// checked first run and exactly one timed sample, no further warm-up.
bool one_sample_pair(const Record& screened, const MeasureSettings& measure);
// The settings that sample a pair after its checked first run of `first_run_s` seconds: the warm-up runs
// left, the budget left, or the one sample of a one_sample_pair.
MeasureSettings sampling_settings(const Record& screened, const MeasureSettings& measure, double first_run_s);
// FAPROBE_TEST_FAULT (above), for this case: throws, crashes or hangs, or returns.
void apply_test_fault(const Case& c);
// The first run of a prepared case, returning its seconds; with measure.verify its outputs are poisoned (NaN)
// before it and checked against the float64 reference after it, on the inputs impl consumed
// (Implementation::qk_transform): record.verify, and a mismatch's status and reason. An fp8_e4m3 record also
// gets the error against the unquantized inputs (add_exact_inputs_error).
double first_run_checked(const Implementation& impl, const Case& c, PreparedCase& prepared,
                         const MeasureSettings& measure, Record& record);
// An exception (std::exception) an implementation threw: record.status failed, the reason its text (or
// "out of host memory (predicted N)" for std::bad_alloc).
void record_failure(Record& record, const std::exception_ptr& error);

// run_one, in a child process when runs_isolated(impl, options); the parent's side of --isolate.
Record run_pair(const Implementation& impl, const Case& c, const MeasureSettings& measure,
                const RunOptions& options);

// The child's side of --isolate: runs the pair that `job` (JSON, written by run_pair) describes with
// run_one and writes its record to `out` as one line, "faprobe-record <JSON>". Returns the exit status (2
// for a job that does not parse).
int run_isolated_child(const std::string& job, std::ostream& out);

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

// The seconds a pair whose single run takes `per_run_s` spends running: its checked first run, then (when
// `timed`) the warm-ups and samples that MeasureSettings asks for, assuming --max-noise is met at
// --min-samples and --min-time (a noisy pair samples on, up to --max-time). One run for verify; the first
// run and one sample for a pair over --max-time (one_sample_pair). Not counted: preparing the inputs and the
// check against the reference.
double predicted_pair_seconds(double per_run_s, const MeasureSettings& measure, bool timed);

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
