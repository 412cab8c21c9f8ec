// A pair run in a child process (--isolate). Faults: an implementation that throws (a CUDA error, an allocation failure) gives a `failed` record with
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
#pragma once
#include <ostream>
#include <string>

#include "harness/plan/run_options.hpp"
#include "harness/records/record.hpp"
#include "harness/run/measure.hpp"
#include "model/case.hpp"
#include "model/implementation.hpp"

namespace faprobe {

// The default --isolate-timeout: max(60 s, 4 × --max-time). A child spends up to --max-time sampling, plus
// the first run, the check against the reference, and starting CUDA; four times the budget with a minute's
// floor covers those without letting a hung kernel hold a sweep for long.
double default_isolate_timeout(const MeasureSettings& measure);

// Whether run_plan runs this implementation's cases in a child process.
bool runs_isolated(const Implementation& impl, const RunOptions& options);

// run_one, in a child process when runs_isolated(impl, options); the parent's side of --isolate.
Record run_pair(const Implementation& impl, const Case& c, const MeasureSettings& measure,
                const RunOptions& options);

// The child's side of --isolate: runs the pair that `job` (JSON, written by run_pair) describes with
// run_one and writes its record to `out` as one line, "faprobe-record <JSON>". Returns the exit status (2
// for a job that does not parse).
int run_isolated_child(const std::string& job, std::ostream& out);

}  // namespace faprobe
