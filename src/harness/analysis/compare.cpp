#include "harness/analysis/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/range.hpp"
#include "harness/records/statistics.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

constexpr int kBootstrapResamples = 1000;
constexpr std::size_t kBlocks = 10;  // the test's and the interval's units: medians of 10 runs of samples
constexpr double kCheckGrowth = 2.0;       // a tolerance or max_abs_diff that more than doubled
constexpr double kDiffFloor = 0.01;        // of the tolerance: a max_abs_diff below it is never a finding

std::string three_digits(double value) { return fmt::format("{:.3g}", value); }

bool has_samples(const Record& record) { return record.time && !record.time->samples_s.empty(); }

// The processes a record's time comes from: time_s.runs, or the record itself as one process.
std::vector<ProcessRun> processes_of(const Record& record) {
  if (!record.time) return {};
  const TimeStats& time = *record.time;
  if (!time.runs.empty()) return time.runs;
  return {ProcessRun{1, time.median, time.q1, time.q3, time.samples, time.contended.has_value()}};
}

std::vector<double> medians_of(const std::vector<ProcessRun>& runs) {
  std::vector<double> medians;
  for (const ProcessRun& run : runs) medians.push_back(run.median);
  return medians;
}

// The verdict once the ratio, the significance and the noise are known.
Verdict judge(double ratio, bool significant, double noise, const CompareSettings& settings) {
  if (std::abs(ratio - 1) <= settings.threshold_percent / 100) return Verdict::same;
  if (!significant || std::abs(ratio - 1) <= noise) return Verdict::noise;
  return ratio > 1 ? Verdict::slower : Verdict::faster;
}

// One process a side: the samples of each, cut into blocks (the top of compare.hpp).
void compare_samples(const Record& base, const Record& next, const CompareSettings& settings, TimeComparison& time) {
  const bool beyond = std::abs(time.ratio - 1) > settings.threshold_percent / 100;
  if (!has_samples(base) || !has_samples(next)) {
    time.verdict = beyond ? Verdict::untested : Verdict::same;
    return;
  }
  const std::vector<double>& a = base.time->samples_s;
  const std::vector<double>& b = next.time->samples_s;
  time.base_samples = a.size();
  time.new_samples = b.size();
  const std::vector<double> base_blocks = block_medians(a, kBlocks), new_blocks = block_medians(b, kBlocks);
  time.p = mann_whitney_u(new_blocks, base_blocks).p;
  if (median(base_blocks) > 0) {
    const RatioInterval interval = median_ratio_interval(base_blocks, new_blocks, 1 - settings.alpha, kBootstrapResamples);
    time.low = interval.low;
    time.high = interval.high;
  }
  time.noise = std::max(relative_iqr(a), relative_iqr(b));
  time.verdict = judge(time.ratio, *time.p < settings.alpha, *time.noise, settings);
}

// Several processes on a side: their medians are the units (the top of compare.hpp).
void compare_processes(std::vector<ProcessRun> base_runs, std::vector<ProcessRun> new_runs,
                       const CompareSettings& settings, TimeComparison& time) {
  // Which test is the design's (one NEW process against a history, or not), before busy processes are left out.
  time.test = settings.paired                                  ? TimeTest::signed_rank
              : new_runs.size() == 1 && base_runs.size() >= 2 ? TimeTest::history
                                                              : TimeTest::rank_sum;
  const auto quiet = [](const ProcessRun& run) { return run.contended; };
  const std::size_t all = base_runs.size() + new_runs.size();
  base_runs.erase(std::remove_if(base_runs.begin(), base_runs.end(), quiet), base_runs.end());
  new_runs.erase(std::remove_if(new_runs.begin(), new_runs.end(), quiet), new_runs.end());
  time.contended_processes = all - base_runs.size() - new_runs.size();
  if (base_runs.empty() || new_runs.empty()) {
    time.verdict = Verdict::contended;
    return;
  }
  std::vector<double> base_medians = medians_of(base_runs), new_medians = medians_of(new_runs);
  time.base_median = median(base_medians);
  time.new_median = median(new_medians);
  time.ratio = time.new_median / time.base_median;
  if (base_medians.size() >= 2 && new_medians.size() >= 2) {
    const RatioInterval interval =
        median_ratio_interval(base_medians, new_medians, 1 - settings.alpha, kBootstrapResamples);
    time.low = interval.low;
    time.high = interval.high;
  }
  bool significant = false;
  // The noise a change must exceed is the spread of the estimate, not of one process: the processes' relative
  // interquartile range over the square root of how many there are (with n rounds a change smaller than one
  // process's spread can be real, and the test says whether it is; it still keeps a change inside the spread
  // of a history, or of a few processes, from counting).
  auto spread = [](const std::vector<double>& values) { return relative_iqr(values) / std::sqrt(double(values.size())); };
  double noise = std::max(spread(base_medians), spread(new_medians));
  if (time.test == TimeTest::signed_rank) {
    // The rounds both sides have (and were quiet in): log-ratios of the two processes of each round.
    std::map<int, double> base_by_round;
    for (const ProcessRun& run : base_runs) base_by_round[run.round] = run.median;
    std::vector<double> log_new, log_base, ratios;
    for (const ProcessRun& run : new_runs) {
      const auto it = base_by_round.find(run.round);
      if (it == base_by_round.end()) continue;
      log_new.push_back(std::log(run.median));
      log_base.push_back(std::log(it->second));
      ratios.push_back(run.median / it->second);
    }
    if (!ratios.empty()) {
      time.ratio = median(ratios);
      if (ratios.size() >= 2) {
        // The interval of the rounds' median ratio: the bootstrap over rounds (against a BASE of ones, whose
        // resampled median is 1).
        const RatioInterval interval = median_ratio_interval(std::vector<double>(ratios.size(), 1.0), ratios,
                                                             1 - settings.alpha, kBootstrapResamples);
        time.low = interval.low;
        time.high = interval.high;
      }
      time.p = wilcoxon_signed_rank(log_new, log_base).p;
      significant = *time.p < settings.alpha;
      noise = spread(ratios);
    }
  } else if (time.test == TimeTest::history) {
    // One NEW process against BASE's history: no test across NEW's processes is possible; it counts when it
    // lies outside every BASE process (and beyond the threshold and the noise, as always).
    time.p = mann_whitney_u(new_medians, base_medians).p;
    const auto [low, high] = std::minmax_element(base_medians.begin(), base_medians.end());
    significant = new_medians[0] > *high || new_medians[0] < *low;
  } else {
    time.p = mann_whitney_u(new_medians, base_medians).p;
    significant = *time.p < settings.alpha;
  }
  time.noise = noise;
  time.verdict = judge(time.ratio, significant, noise, settings);
}

TimeComparison compare_times(const Record& base, const Record& next, const CompareSettings& settings) {
  TimeComparison time;
  time.base_median = base.time->median;
  time.new_median = next.time->median;
  time.ratio = time.new_median / time.base_median;
  const std::vector<ProcessRun> base_runs = processes_of(base), new_runs = processes_of(next);
  time.base_processes = base_runs.size();
  time.new_processes = new_runs.size();
  time.base_samples = std::size_t(base.time->samples);
  time.new_samples = std::size_t(next.time->samples);
  if (base_runs.size() == 1 && new_runs.size() == 1) {
    if (base.time->contended || next.time->contended) {
      // Samples of a busy machine (the scheduler's tick, a preempted thread) are shown, never judged.
      time.contended_processes = std::size_t(base.time->contended.has_value()) + next.time->contended.has_value();
      time.verdict = Verdict::contended;
      return time;
    }
    compare_samples(base, next, settings, time);
  } else {
    compare_processes(base_runs, new_runs, settings, time);
  }
  return time;
}

bool timed(const Record& record) { return record.time && record.time->median > 0; }

// A status change that makes NEW worse: away from ok, to unsupported (a silent fallback), to mismatch or failed.
bool status_regressed(Status before, Status after) {
  if (before == after) return false;
  return before == Status::ok || after == Status::unsupported || after == Status::mismatch || after == Status::failed;
}

std::vector<CheckChange> compare_checks(const Record& base, const Record& next) {
  std::vector<CheckChange> changes;
  if (base.status != next.status) {
    changes.push_back({fmt::format("status {} → {}{}", to_string(base.status), to_string(next.status),
                                   next.reason.empty() ? "" : ": " + next.reason),
                       status_regressed(base.status, next.status)});
  }
  // NEW ran the pair but did not time it (a verify run of BASE's pairs, a case no longer timed): the gate
  // cannot judge its time, which is a regression as a lost check is.
  if (timed(base) && !timed(next) && next.status == Status::ok) changes.push_back({"timed → not timed", true});
  const auto& before = base.verify;
  const auto& after = next.verify;
  if (before && !after && next.status == Status::ok) changes.push_back({"verified → not checked", true});
  if (before && after) {
    if (after->tolerance > kCheckGrowth * before->tolerance) {
      changes.push_back({fmt::format("tolerance {} → {} ({:.1f}×)", three_digits(before->tolerance), three_digits(after->tolerance),
                                     after->tolerance / before->tolerance),
                         true});
    }
    auto grew = [&](const char* what, double was, double is, double tolerance) {
      if (!(is > kCheckGrowth * was && is > kDiffFloor * tolerance)) return;
      const std::string growth = was > 0 ? fmt::format("{:.1f}×", is / was) : "from 0";
      changes.push_back({fmt::format("{} {} → {} ({})", what, three_digits(was), three_digits(is), growth), true});
    };
    grew("max_abs_diff", before->max_abs_diff, after->max_abs_diff, after->tolerance);
    if (before->lse_checked && !after->lse_checked) changes.push_back({"LSE checked → not checked", true});
    if (before->lse_checked && after->lse_checked) {
      if (after->lse_tolerance > kCheckGrowth * before->lse_tolerance) {
        changes.push_back({fmt::format("LSE tolerance {} → {} ({:.1f}×)", three_digits(before->lse_tolerance),
                                       three_digits(after->lse_tolerance), after->lse_tolerance / before->lse_tolerance),
                           true});
      }
      grew("LSE max_abs_diff", before->lse_max_abs_diff, after->lse_max_abs_diff, after->lse_tolerance);
    }
  }
  return changes;
}

ComparedPair make_pair(SourcedRecord base, SourcedRecord next, const CompareSettings& settings, bool checks) {
  ComparedPair pair{std::move(base), std::move(next), std::nullopt, {}};
  if (timed(pair.base.record) && timed(pair.next.record)) {
    pair.time = compare_times(pair.base.record, pair.next.record, settings);
  }
  if (checks) pair.changes = compare_checks(pair.base.record, pair.next.record);
  return pair;
}

std::string implementations(const RecordSet& set) {
  std::set<std::string> names;
  for (const SourcedRecord& record : set.records) names.insert(record.record.impl);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::faster: return "faster";
    case Verdict::slower: return "slower";
    case Verdict::same: return "same";
    case Verdict::noise: return "noise";
    case Verdict::untested: return "untested";
    case Verdict::contended: return "contended";
  }
  return "?";
}

std::string_view to_string(TimeTest test) {
  switch (test) {
    case TimeTest::samples: return "samples";
    case TimeTest::signed_rank: return "signed-rank";
    case TimeTest::rank_sum: return "rank-sum";
    case TimeTest::history: return "history";
  }
  return "?";
}

bool ComparedPair::regression() const {
  if (time && time->verdict == Verdict::slower) return true;
  return std::any_of(changes.begin(), changes.end(), [](const CheckChange& change) { return change.regression; });
}

int Comparison::count(Verdict verdict) const {
  return int(std::count_if(pairs.begin(), pairs.end(),
                           [&](const ComparedPair& pair) { return pair.time && pair.time->verdict == verdict; }));
}

int Comparison::not_timed() const {
  return int(std::count_if(pairs.begin(), pairs.end(), [](const ComparedPair& pair) { return !pair.time; }));
}

int Comparison::regressions() const {
  return int(std::count_if(pairs.begin(), pairs.end(), [](const ComparedPair& pair) { return pair.regression(); }));
}

int Comparison::check_changes() const {
  int n = 0;
  for (const ComparedPair& pair : pairs) n += int(pair.changes.size());
  return n;
}

int Comparison::exit_status() const {
  if (!settings.baseline_impl.empty()) return kExitOk;
  return regressions() > 0 ? kExitFailed : kExitOk;
}

Comparison compare_runs(const RecordSet& base, const RecordSet& next, const CompareSettings& settings) {
  Comparison comparison;
  comparison.settings = settings;
  for (const ResultFile& file : base.files) comparison.base_paths.push_back(file.path);
  for (const ResultFile& file : next.files) comparison.new_paths.push_back(file.path);
  std::multimap<std::string, std::size_t> new_by_key;
  for (std::size_t i = 0; i < next.records.size(); ++i) new_by_key.emplace(next.records[i].record.key(), i);
  std::vector<bool> matched(next.records.size(), false);
  int other_device = 0;
  for (const SourcedRecord& record : base.records) {
    std::vector<std::size_t> partners;
    bool elsewhere = false;
    const auto [begin, end] = new_by_key.equal_range(record.record.key());
    for (auto it = begin; it != end; ++it) {
      if (settings.ignore_device || same_device(record, next.records[it->second])) partners.push_back(it->second);
      else elsewhere = true;
    }
    if (partners.size() > 1) {
      throw UsageError(fmt::format("--ignore-device: {} matches {} records of NEW ({} and {}); compare one device at a time",
                                   record.record.key(), partners.size(), next.records[partners[0]].source,
                                   next.records[partners[1]].source));
    }
    if (partners.empty()) {
      other_device += elsewhere;
      comparison.only_base.push_back(record);
      continue;
    }
    if (matched[partners[0]]) {
      throw UsageError(fmt::format("--ignore-device: {} of NEW matches two records of BASE; compare one device at a time",
                                   next.records[partners[0]].source));
    }
    matched[partners[0]] = true;
    comparison.pairs.push_back(make_pair(record, next.records[partners[0]], settings, /*checks=*/true));
  }
  for (std::size_t i = 0; i < next.records.size(); ++i)
    if (!matched[i]) comparison.only_new.push_back(next.records[i]);
  const int one_process = int(std::count_if(comparison.pairs.begin(), comparison.pairs.end(), [](const ComparedPair& pair) {
    return pair.time && pair.time->test == TimeTest::samples;
  }));
  if (one_process > 0) {
    comparison.notes.push_back(fmt::format(
        "{} of {} pairs have one process a side: process-to-process variation is not measured, and on a shared "
        "machine their verdicts can be false alarms (whole processes run in slower modes); measure both sides with "
        "`faprobe ab`, or `sweep --repeat N`",
        one_process, comparison.pairs.size()));
  }
  if (other_device > 0) {
    comparison.notes.push_back(fmt::format("{} record{} of BASE match{} NEW only on another device (--ignore-device "
                                           "compares across devices)",
                                           other_device, other_device == 1 ? "" : "s", other_device == 1 ? "es" : ""));
  }
  if (comparison.pairs.empty()) {
    throw UsageError(fmt::format(
        "nothing to compare: none of NEW's {} records has the implementation, case{} of one of BASE's {} (BASE: {}; "
        "NEW: {}){}",
        next.records.size(), settings.ignore_device ? "" : " and device", base.records.size(), implementations(base),
        implementations(next), other_device > 0 ? "; they match on other devices: --ignore-device" : ""));
  }
  return comparison;
}

Comparison compare_within(const RecordSet& records, const CompareSettings& settings) {
  Comparison comparison;
  comparison.settings = settings;
  for (const ResultFile& file : records.files) comparison.base_paths.push_back(file.path);
  const std::string& name = settings.baseline_impl;
  std::vector<const SourcedRecord*> baselines;
  for (const SourcedRecord& record : records.records)
    if (record.record.impl == name) baselines.push_back(&record);
  if (baselines.empty()) {
    throw UsageError(fmt::format("--baseline-impl {}: no record of {} (implementations there: {})", name, name,
                                 implementations(records)));
  }
  for (const SourcedRecord& record : records.records) {
    if (record.record.impl == name) continue;
    const SourcedRecord* baseline = nullptr;
    for (const SourcedRecord* candidate : baselines) {
      const bool device = settings.ignore_device || same_device(*candidate, record);
      if (device && candidate->record.c.key() == record.record.c.key()) {
        if (baseline != nullptr) {
          throw UsageError(fmt::format("--ignore-device: {} has two {} records to compare with ({} and {})",
                                       record.source, name, baseline->source, candidate->source));
        }
        baseline = candidate;
      }
    }
    if (baseline == nullptr) {
      comparison.only_new.push_back(record);
      continue;
    }
    comparison.pairs.push_back(make_pair(*baseline, record, settings, /*checks=*/false));
  }
  if (comparison.pairs.empty()) {
    throw UsageError(fmt::format("--baseline-impl {}: no other implementation ran one of its {} cases", name,
                                 baselines.size()));
  }
  return comparison;
}

// --- Printers ---

namespace {

std::string ratio_text(const TimeComparison& time) {
  if (!time.low) return fmt::format("{:.3f}", time.ratio);
  return fmt::format("{:.3f} [{:.3f}, {:.3f}]", time.ratio, *time.low, *time.high);
}

std::string p_text(const TimeComparison& time) { return time.p ? fmt::format("{:.1e}", *time.p) : "-"; }

// "10/10": the processes each side's time comes from.
std::string processes_text(const TimeComparison& time) {
  return fmt::format("{}/{}", time.base_processes, time.new_processes);
}

// In --baseline-impl, "faster" reads as the speedup over the baseline.
std::string speedup_text(const TimeComparison& time) { return fmt::format("{:.2f}×", 1 / time.ratio); }

std::string name_of(const ComparedPair& pair, bool within) {
  return within ? pair.next.record.impl : pair.base.record.impl;
}

std::string summary_line(const Comparison& c) {
  const bool within = !c.settings.baseline_impl.empty();
  std::string line = fmt::format("{} pairs: {} slower, {} faster, {} same, {} noise, {} untested, {} contended, {} not "
                                 "timed",
                                 c.pairs.size(), c.count(Verdict::slower), c.count(Verdict::faster),
                                 c.count(Verdict::same), c.count(Verdict::noise), c.count(Verdict::untested),
                                 c.count(Verdict::contended), c.not_timed());
  if (!within) line += fmt::format("; {} check changes", c.check_changes());
  if (!within) line += fmt::format("; {} only in BASE, {} only in NEW", c.only_base.size(), c.only_new.size());
  else line += fmt::format("; {} without a {} record", c.only_new.size(), c.settings.baseline_impl);
  if (!within) {
    line += c.regressions() > 0 ? fmt::format(" → {} regression{} (exit 1)", c.regressions(), c.regressions() == 1 ? "" : "s")
                                : " → no regression";
  }
  return line;
}

std::string settings_line(const Comparison& c) {
  const bool within = !c.settings.baseline_impl.empty();
  return fmt::format("threshold {:g} %, alpha {:g} (a change counts when it is beyond the threshold and the noise, "
                     "and p < alpha); ratio = median {} / median {} with its {:g} % interval; with several processes "
                     "a side, of the processes' medians{}",
                     c.settings.threshold_percent, c.settings.alpha, within ? "impl" : "NEW",
                     within ? c.settings.baseline_impl : "BASE", 100 * (1 - c.settings.alpha),
                     c.settings.paired ? " (paired by round: the median of the rounds' ratios)" : "");
}

}  // namespace

std::string compare_table(const Comparison& c) {
  const bool within = !c.settings.baseline_impl.empty();
  std::string text;
  constexpr const char* kRow = "{:<20} {:<36} {:>11} {:>11} {:>27} {:>8} {:>7}  {}\n";
  text += fmt::format(kRow, "impl", "case", within ? c.settings.baseline_impl : "base", within ? "impl" : "new",
                      "ratio [interval]", "p", "procs", within ? "verdict (speedup)" : "verdict");
  for (const ComparedPair& pair : c.pairs) {
    if (!pair.time) continue;
    const TimeComparison& t = *pair.time;
    std::string verdict(to_string(t.verdict));
    if (within) verdict += " (" + speedup_text(t) + ")";
    else if (t.verdict == Verdict::slower) verdict += "  REGRESSION";
    if (t.contended_processes > 0 && t.verdict != Verdict::contended) {
      verdict += fmt::format(" ({} busy process{} left out)", t.contended_processes, t.contended_processes == 1 ? "" : "es");
    }
    text += fmt::format(kRow, name_of(pair, within), pair.base.record.c.label(), format_seconds(t.base_median),
                        format_seconds(t.new_median), ratio_text(t), p_text(t), processes_text(t), verdict);
  }
  const int changes = c.check_changes();
  if (changes > 0) {
    text += "\nstatus and correctness changes:\n";
    for (const ComparedPair& pair : c.pairs)
      for (const CheckChange& change : pair.changes)
        text += fmt::format("  {:<20} {:<36} {}{}\n", pair.base.record.impl, pair.base.record.c.label(), change.what,
                            change.regression ? "  REGRESSION" : "  (improvement)");
  }
  if (within) {
    for (const ComparedPair& pair : c.pairs)
      if (!pair.time)
        text += fmt::format("  {:<20} {:<36} not timed on both: {} {}, {} {}\n", pair.next.record.impl,
                            pair.base.record.c.label(), c.settings.baseline_impl, to_string(pair.base.record.status),
                            pair.next.record.impl, to_string(pair.next.record.status));
  }
  auto list = [&](const std::vector<SourcedRecord>& records, const std::string& title) {
    if (records.empty()) return;
    text += fmt::format("\n{} ({}):\n", title, records.size());
    for (const SourcedRecord& r : records)
      text += fmt::format("  {:<20} {:<36} {:<11} {}\n", r.record.impl, r.record.c.label(), to_string(r.record.status),
                          r.source);
  };
  list(c.only_base, "only in BASE");
  list(c.only_new, within ? "no " + c.settings.baseline_impl + " record to compare with" : "only in NEW");
  for (const std::string& note : c.notes) text += "\nnote: " + note + "\n";
  text += "\n" + settings_line(c) + "\n" + summary_line(c) + "\n";
  return text;
}

std::string compare_markdown(const Comparison& c) {
  const bool within = !c.settings.baseline_impl.empty();
  std::string text = within ? fmt::format("| implementation | case | {} | time | ratio [interval] | p | processes | "
                                          "verdict | speedup |\n|---|---|---:|---:|---:|---:|---:|---|---:|\n",
                                          c.settings.baseline_impl)
                            : std::string("| implementation | case | base | new | ratio [interval] | p | processes | "
                                          "verdict |\n|---|---|---:|---:|---:|---:|---:|---|\n");
  for (const ComparedPair& pair : c.pairs) {
    if (!pair.time) continue;
    const TimeComparison& t = *pair.time;
    std::string verdict(to_string(t.verdict));
    if (!within && t.verdict == Verdict::slower) verdict = "**slower**";
    text += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |{}\n", name_of(pair, within),
                        pair.base.record.c.label(), format_seconds(t.base_median), format_seconds(t.new_median),
                        ratio_text(t), p_text(t), processes_text(t), verdict, within ? " " + speedup_text(t) + " |" : "");
  }
  if (c.check_changes() > 0) {
    text += "\n| implementation | case | status or correctness change | regression |\n|---|---|---|---|\n";
    for (const ComparedPair& pair : c.pairs)
      for (const CheckChange& change : pair.changes)
        text += fmt::format("| {} | {} | {} | {} |\n", pair.base.record.impl, pair.base.record.c.label(), change.what,
                            change.regression ? "**yes**" : "no (improvement)");
  }
  auto list = [&](const std::vector<SourcedRecord>& records, const std::string& title) {
    if (records.empty()) return;
    text += fmt::format("\n{}:\n\n", title);
    for (const SourcedRecord& r : records)
      text += fmt::format("- {} {} ({}, {})\n", r.record.impl, r.record.c.label(), to_string(r.record.status), r.source);
  };
  list(c.only_base, "Only in BASE");
  list(c.only_new, within ? "No " + c.settings.baseline_impl + " record to compare with" : "Only in NEW");
  for (const std::string& note : c.notes) text += "\nNote: " + note + "\n";
  text += "\n" + settings_line(c) + ".\n\n" + summary_line(c) + "\n";
  return text;
}

nlohmann::json compare_json(const Comparison& c) {
  auto side = [](const SourcedRecord& r) {
    nlohmann::json out{{"impl", r.record.impl},     {"device", r.record.device},
                       {"status", to_string(r.record.status)}, {"source", r.source}};
    if (!r.host.empty()) out["host"] = r.host;
    return out;
  };
  auto optional = [](const std::optional<double>& value) { return value ? nlohmann::json(*value) : nlohmann::json(); };
  nlohmann::json pairs = nlohmann::json::array();
  for (const ComparedPair& pair : c.pairs) {
    nlohmann::json out{{"case", pair.base.record.c}, {"base", side(pair.base)}, {"new", side(pair.next)},
                       {"regression", pair.regression()}};
    if (pair.time) {
      const TimeComparison& t = *pair.time;
      out["time"] = {{"base_median_s", t.base_median}, {"new_median_s", t.new_median},
                     {"base_samples", t.base_samples}, {"new_samples", t.new_samples},
                     {"ratio", t.ratio},               {"ratio_low", optional(t.low)},
                     {"ratio_high", optional(t.high)}, {"p", optional(t.p)},
                     {"noise", optional(t.noise)},
                     {"verdict", to_string(t.verdict)},
                     {"test", to_string(t.test)},
                     {"base_processes", t.base_processes},
                     {"new_processes", t.new_processes},
                     {"contended_processes", t.contended_processes}};
    } else {
      out["time"] = nullptr;
    }
    out["changes"] = nlohmann::json::array();
    for (const CheckChange& change : pair.changes)
      out["changes"].push_back({{"what", change.what}, {"regression", change.regression}});
    pairs.push_back(std::move(out));
  }
  auto records = [&](const std::vector<SourcedRecord>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const SourcedRecord& r : list) {
      nlohmann::json one = side(r);
      one["case"] = r.record.c;
      out.push_back(std::move(one));
    }
    return out;
  };
  const bool within = !c.settings.baseline_impl.empty();
  nlohmann::json settings{{"threshold_percent", c.settings.threshold_percent},
                          {"alpha", c.settings.alpha},
                          {"ignore_device", c.settings.ignore_device},
                          {"paired", c.settings.paired},
                          {"baseline_impl", within ? nlohmann::json(c.settings.baseline_impl) : nlohmann::json()}};
  return {{"schema", kSchema},
          {"kind", "compare"},
          {"settings", settings},
          {"base", c.base_paths},
          {"new", c.new_paths},
          {"pairs", pairs},
          {"only_base", records(c.only_base)},
          {"only_new", records(c.only_new)},
          {"notes", c.notes},
          {"summary",
           {{"pairs", c.pairs.size()},
            {"slower", c.count(Verdict::slower)},
            {"faster", c.count(Verdict::faster)},
            {"same", c.count(Verdict::same)},
            {"noise", c.count(Verdict::noise)},
            {"untested", c.count(Verdict::untested)},
            {"contended", c.count(Verdict::contended)},
            {"not_timed", c.not_timed()},
            {"check_changes", c.check_changes()},
            {"regressions", c.regressions()},
            {"exit_status", c.exit_status()}}}};
}

}  // namespace faprobe
