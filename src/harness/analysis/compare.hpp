// `faprobe compare`: two runs (or the implementations of one run) side by side, pair by pair, with a verdict
// that tells a real change from noise, and an exit status that gates CI on a regression. One result
// structure (Comparison); the terminal table, Markdown and JSON are thin printers over it.
//
// Pairs. Runs: a BASE record and a NEW record match when they have the same implementation and case key and
// ran on the same device (record_files.hpp's same_device; --ignore-device drops the device from the match).
// Within one run (--baseline-impl NAME): every other implementation's record against NAME's on the same case
// and device. Records without a partner are listed, never dropped.
//
// Time. Per pair with a timed record on both sides: ratio = median(NEW) / median(BASE) of the raw samples; the
// samples of each side cut into 10 consecutive blocks (statistics.hpp's block_medians: samples taken one after
// another are not independent, and a test on 10,000 of them calls any drift significant); the two-sided
// Mann–Whitney p-value on the block medians and the (1 − alpha) bootstrap interval of their ratio; and the
// measured noise, the larger relative interquartile range of the two sides' samples. The verdict:
//   slower / faster  the ratio is beyond 1 ± threshold, p < alpha AND the change is larger than the noise: a
//                    change large enough to matter, that the blocks show, and that single samples do not
//                    already spread over;
//   noise            beyond the threshold, but not significant or within the noise;
//   same             within the threshold;
//   untested         a side has no raw samples (records written before faprobe kept them): the ratio is shown,
//                    nothing is judged;
//   contended        a side's samples were taken on a busy machine (time_s.contended): shown, never judged.
// With one process a side (the above), a note says that process-to-process variation is not measured.
// Processes. When a side's record holds several processes (time_s.runs: sweep --repeat, faprobe ab, or a
// history of BASE files pooled by read_record_set), the units are the processes' medians, busy processes left
// out (none left on a side: contended). Paired (settings.paired, faprobe ab: round k of BASE and of NEW ran
// back to back): ratio = median over the rounds both sides have of NEW / BASE, p = the Wilcoxon signed-rank
// test on their logarithms, the interval the bootstrap of that median over rounds. Unpaired: ratio = median
// of NEW's process medians / BASE's, p = the Mann–Whitney U test on them. One NEW process against several
// BASE processes (a history): significant when it lies outside every BASE process. The noise is the spread of
// the estimate: the relative IQR of the rounds' ratios (paired) or the larger of the two sides' process
// medians' (unpaired), over the square root of their number. The verdict rule is the same as above.
// A pair without a time on both sides is counted as "not timed"; the verdicts and it add up to the pairs.
// Times are read as input (record.hpp): a median that is not a positive number of seconds, a negative,
// infinite or subnormal sample, never reaches a ratio.
// Checks (runs only; each is a row of its own and a regression whatever the times say):
//   status           any change away from ok; to unsupported (a silent fallback); to mismatch or failed;
//   not timed        BASE was timed, NEW ran the pair (ok) without a time (a verify run of the same pairs);
//   not checked      BASE was verified, NEW was not (--no-verify, or a check that no longer runs);
//   tolerance        NEW's tolerance is more than twice BASE's (the policy was loosened);
//   max_abs_diff     NEW's error is more than twice BASE's and above 1 % of the tolerance (below that, a
//                    change in the last bits of a near-exact result is not a finding);
//   LSE              likewise for the log-sum-exp's check: checked → not checked, its tolerance or its error
//                    more than doubled.
// A change towards ok is listed as an improvement. Exit status (runs): 1 when any pair is slower or any check
// regressed, else 0; --baseline-impl compares different implementations, which is a table, not a gate: 0.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/analysis/record_files.hpp"

namespace faprobe {

struct CompareSettings {
  double threshold_percent = 5.0;  // --threshold
  double alpha = 0.01;             // --alpha
  bool ignore_device = false;      // --ignore-device
  std::string baseline_impl;       // --baseline-impl ("" = compare runs)
  // The records come from `faprobe ab`: BASE's and NEW's processes of one round ran back to back, and the
  // test pairs them by round (--paired).
  bool paired = false;
};

enum class Verdict { faster, slower, same, noise, untested, contended };

// How a pair's time was judged: on the samples of one process per side; on the processes' medians, paired
// by round (signed-rank) or not (rank-sum); or one NEW process against a history of BASE's processes.
enum class TimeTest { samples, signed_rank, rank_sum, history };
std::string_view to_string(TimeTest test);
std::string_view to_string(Verdict verdict);

struct TimeComparison {
  double base_median = 0, new_median = 0;  // seconds, from the records
  std::size_t base_samples = 0, new_samples = 0;  // raw samples the test used
  double ratio = 0;                  // new_median / base_median
  std::optional<double> low, high;   // the ratio's (1 − alpha) interval, with raw samples on both sides
  std::optional<double> p;           // Mann–Whitney two-sided p-value on the block medians, likewise
  std::optional<double> noise;       // max of the two sides' (q3 − q1) / median, likewise
  Verdict verdict = Verdict::untested;
  TimeTest test = TimeTest::samples;
  std::size_t base_processes = 1, new_processes = 1;  // the processes each side's time comes from
  std::size_t contended_processes = 0;  // of both sides together, left out of the test
};

struct CheckChange {
  std::string what;  // "status ok → mismatch", "max_abs_diff 1.2e-07 → 3.1e-05 (258×)"
  bool regression = false;
};

struct ComparedPair {
  SourcedRecord base, next;  // next: NEW's record (in --baseline-impl, the other implementation's)
  std::optional<TimeComparison> time;
  std::vector<CheckChange> changes;
  bool regression() const;  // slower, or a check that regressed
};

struct Comparison {
  CompareSettings settings;
  std::vector<std::string> base_paths, new_paths;  // new_paths empty for --baseline-impl
  std::vector<ComparedPair> pairs;
  std::vector<SourcedRecord> only_base, only_new;  // --baseline-impl: only_new = cases without NAME's record
  std::vector<std::string> notes;                   // e.g. pairs matched only on other devices
  int count(Verdict verdict) const;
  int not_timed() const;    // pairs without a time on both sides: with the verdicts' counts, every pair once
  int regressions() const;  // pairs with regression()
  int check_changes() const;
  int exit_status() const;  // docs/DESIGN.md: 0 none, 1 a regression (runs only)
};

// BASE against NEW. Throws UsageError when nothing matches at all (naming what each side holds), or when
// --ignore-device leaves a record with two partners.
Comparison compare_runs(const RecordSet& base, const RecordSet& next, const CompareSettings& settings);

// Every implementation against settings.baseline_impl within one set. Throws UsageError when the set has no
// record of it, or nothing to compare it with.
Comparison compare_within(const RecordSet& records, const CompareSettings& settings);

// The printers.
std::string compare_table(const Comparison& comparison);     // the terminal
std::string compare_markdown(const Comparison& comparison);
nlohmann::json compare_json(const Comparison& comparison);   // schema faprobe/1, "kind": "compare"

}  // namespace faprobe
