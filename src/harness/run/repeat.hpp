// sweep --repeat N: every pair measured in N separate processes, in rounds over the whole plan.
//
// Why processes. On a shared machine the samples of one process agree within a few percent, but whole
// processes land in different modes (where their memory and threads fall, what the neighbours do; on the
// 2-core VMs CI runs on, about one process in ten runs 1.5× slow for its whole life). A statistic over one
// process's samples cannot tell such a mode from a change of the kernel; only repetition at the level that
// varies can (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", 2013). Rounds, not N processes
// per pair one after another, so that a mode that lasts a while falls on every pair of a round alike, and
// `faprobe ab` (ab.hpp) can pair the rounds of two sides.
//
// How. This program is re-executed once per round (round-K-of-N.jsonl and .log in OUT.rounds/) with the
// sweep's own command line minus its outputs, --resume and --repeat, plus `--repeat 1 --out ROUNDFILE
// --resume`: the round is an ordinary sweep, so --shard, --devices, --interleave and --isolate work inside
// it as they do without --repeat, and it resumes from its own file. When every round has finished, the
// records of each pair are pooled (pool_processes) into one record, written to --out, the table and the
// documents, and the round files are removed (their samples and per-process summaries are in the pooled
// records). Nothing measured is lost: a crash or Ctrl-C leaves the round files, and the same command with
// --resume runs each round again with --resume on its file (a finished round ends at once) before pooling;
// --out's pooled records are not pooled again.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "harness/plan/axes.hpp"
#include "harness/records/record.hpp"
#include "harness/run/runner.hpp"

namespace faprobe {

// One pooled record from one pair's records of several processes, (round, record) in round order:
// - status: the worst of the rounds (failed, mismatch, skipped, unsupported, then ok), with that round's
//   reason ("round 3 of 10: ...") and check; the rest (case, memory peak the largest, details, repro) from the
//   first round;
// - time: the statistics over every process's kept samples together (time_s.samples the sum of the rounds'),
//   time_s.runs each process's own median, quartiles and sample count, and time_s.contended the evidence of
//   the rounds that had it, each line prefixed with its round.
Record pool_processes(const std::vector<std::pair<int, Record>>& rounds, int round_count);

// Every pair of `rounds` (rounds[k]: the records of round k + 1) pooled, in the order the pairs first appear.
std::vector<Record> pool_rounds(const std::vector<std::vector<Record>>& rounds);

// round-K-of-N.jsonl in `directory`, and its log (.log).
std::string round_path(const std::string& directory, int round, int count);
std::string round_log_path(const std::string& directory, int round, int count);

// Seconds a round process spends measuring the host's rates (FAPROBE_CALIBRATION_SECONDS, unless set).
inline constexpr double kRoundCalibrationSeconds = 0.2;

// One process of a repetition: `argv` (argv[0] the program) with `environment` set (and
// FAPROBE_CALIBRATION_SECONDS=kRoundCalibrationSeconds where neither it nor this process sets it), run to its
// end with `--out OUT --resume` added and its output in `log_path`. `on_record` is called with the records streamed so
// far as they appear (for progress). Ctrl-C is passed on once (the process stops between pairs).
struct RoundProcess {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> environment;
  std::string out_path, log_path;
  std::string label;  // "round 3 of 10", "NEW round 3 of 10"
};
struct RoundOutcome {
  bool finished = false;     // exited 0 or 1: its part of the plan is in out_path
  bool interrupted = false;  // Ctrl-C was passed on
  std::string failure;       // otherwise: "round 3 of 10 exited with status 2; its output (PATH): ..."
};
RoundOutcome run_round_process(const RoundProcess& process, const std::function<void(std::size_t)>& on_record);

// The records of a round file, as --resume reads them (a torn last line dropped); none when it is missing.
std::vector<Record> read_round_file(const std::string& path);

// sweep --repeat N (the top of this file): `child_argv` is this program and the sweep's command line without
// its outputs, --resume and --repeat. Records go to `options`' outputs and `table_out` as run_plan's do.
// Throws UsageError before any round starts for an --out that is not a file, or round files of an earlier run
// without --resume.
RunSummary run_repeated(const Plan& plan, const RunOptions& options, const std::vector<std::string>& child_argv,
                        int repeat, std::ostream& table_out);

}  // namespace faprobe
