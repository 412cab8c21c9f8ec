// One (implementation, case) pair run in this process, the steps shared by the sequential runner (run_one)
// and the interleaved one (interleave.hpp): screen (supports(), the predicted memory and time against the
// limits), prepare, one run into outputs poisoned with NaN and checked against the float64 reference, then
// the timed samples; record_measured() writes what the run measured into the record, for both.
#pragma once
#include <exception>
#include <optional>

#include "harness/plan/run_options.hpp"
#include "harness/records/record.hpp"
#include "harness/run/measure.hpp"
#include "model/case.hpp"
#include "model/implementation.hpp"
#include "model/memory.hpp"

namespace faprobe {

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

// The memory a prepared case used: the device's counters where it keeps them, else the host's since
// host_memory().reset_peaks().
MemoryCounters used_memory(const PreparedCase& prepared);
// What a run measured, into its record: the memory `counters`, the implementation's details() and the time
// (none when no sample was taken or the pair is not timed). Both runners fill a record here and only here:
// a new measured field is added in this function.
void record_measured(const PreparedCase& prepared, const MemoryCounters& counters, std::optional<TimeStats> time,
                     Record& record);

// The seconds a pair whose single run takes `per_run_s` spends running: its checked first run, then (when
// `timed`) the warm-ups and samples that MeasureSettings asks for, assuming --max-noise is met at
// --min-samples and --min-time (a noisy pair samples on, up to --max-time). One run for verify; the first
// run and one sample for a pair over --max-time (one_sample_pair). Not counted: preparing the inputs and the
// check against the reference.
double predicted_pair_seconds(double per_run_s, const MeasureSettings& measure, bool timed);

}  // namespace faprobe
