// Process-level repetitions (harness/run/repeat.hpp), `faprobe ab`'s order and plan check (harness/analysis/ab.hpp), and
// compare's statistics over processes (harness/analysis/compare.hpp): paired by round, unpaired, a history of BASE
// runs, the one-process warning and contended records. The p-values are scipy's (1.17.1):
//   scipy.stats.wilcoxon(x, y)                   (exact: no ties, n <= 50)
//   scipy.stats.mannwhitneyu(x, y, method="exact")
#include <cmath>

#include <gtest/gtest.h>

#include "harness/analysis/ab.hpp"
#include "harness/analysis/compare.hpp"
#include "harness/run/measure.hpp"
#include "harness/run/repeat.hpp"

namespace faprobe {
namespace {

Record process_record(const std::string& impl, std::vector<double> samples, Status status = Status::ok) {
  Record record;
  record.impl = impl;
  record.device = "cpu";
  record.c.seq_q = record.c.seq_k = 256;
  record.status = status;
  record.time = summarize(std::move(samples));
  return record;
}

// A pooled record whose processes have these medians (rounds 1..n), as `ab` writes them.
Record with_processes(const std::vector<double>& medians, std::vector<bool> contended = {}) {
  std::vector<std::pair<int, Record>> rounds;
  for (std::size_t i = 0; i < medians.size(); ++i) {
    Record one = process_record("cpu.tiled", {medians[i] * 0.99, medians[i], medians[i] * 1.01});
    if (i < contended.size() && contended[i]) one.time->contended = Contention{{"planted"}};
    rounds.emplace_back(int(i) + 1, one);
  }
  return pool_processes(rounds, int(medians.size()));
}

RecordSet set_of(const Record& record, const std::string& file) {
  RecordSet set;
  set.files.push_back(ResultFile{file, false, nlohmann::json::object(), {}, ""});
  set.records.push_back({record, file + " record 1", ""});
  return set;
}

const TimeComparison& time_of(const Comparison& comparison) {
  EXPECT_EQ(comparison.pairs.size(), 1u);
  EXPECT_TRUE(comparison.pairs.front().time);
  return *comparison.pairs.front().time;
}

TEST(Repeat, PoolingKeepsEveryProcessAndTheSamplesOfAll) {
  const Record pooled = pool_processes({{1, process_record("cpu.tiled", {1.0e-3, 1.1e-3, 1.2e-3})},
                                        {2, process_record("cpu.tiled", {2.0e-3, 2.1e-3})},
                                        {3, process_record("cpu.tiled", {3.0e-3})}},
                                       3);
  ASSERT_TRUE(pooled.time);
  EXPECT_EQ(pooled.time->samples, 6);
  EXPECT_EQ(pooled.time->samples_s.size(), 6u);
  EXPECT_NEAR(pooled.time->median, 1.6e-3, 1e-12);  // of all six samples: (1.2 + 2.0) / 2 ms
  ASSERT_EQ(pooled.time->runs.size(), 3u);
  EXPECT_EQ(pooled.time->runs[1].round, 2);
  EXPECT_NEAR(pooled.time->runs[0].median, 1.1e-3, 1e-12);
  EXPECT_NEAR(pooled.time->runs[1].median, 2.05e-3, 1e-12);
  EXPECT_EQ(pooled.time->runs[2].samples, 1);
  // The JSON round trip keeps the processes.
  const Record back = nlohmann::json(pooled).get<Record>();
  ASSERT_EQ(back.time->runs.size(), 3u);
  EXPECT_EQ(back.time->runs[2].round, 3);
  EXPECT_DOUBLE_EQ(back.time->runs[1].median, pooled.time->runs[1].median);
}

TEST(Repeat, AWorseStatusInAnyRoundIsThePooledStatus) {
  Record bad = process_record("cpu.tiled", {1e-3}, Status::mismatch);
  bad.reason = "max_abs_diff 3e-2 > tolerance";
  const Record pooled =
      pool_processes({{1, process_record("cpu.tiled", {1e-3})}, {2, bad}, {3, process_record("cpu.tiled", {1e-3})}}, 3);
  EXPECT_EQ(pooled.status, Status::mismatch);
  EXPECT_EQ(pooled.reason, "round 2 of 3: max_abs_diff 3e-2 > tolerance");
}

TEST(Repeat, ContentionOfARoundIsKeptWithItsRound) {
  const Record pooled = with_processes({1e-3, 1e-3, 1e-3}, {false, true, false});
  ASSERT_TRUE(pooled.time->contended);
  ASSERT_EQ(pooled.time->contended->evidence.size(), 1u);
  EXPECT_EQ(pooled.time->contended->evidence[0], "round 2: planted");
  EXPECT_FALSE(pooled.time->runs[0].contended);
  EXPECT_TRUE(pooled.time->runs[1].contended);
}

TEST(Repeat, RoundsArePooledPairByPairInTheOrderTheyFirstAppear) {
  const std::vector<std::vector<Record>> rounds = {
      {process_record("cpu.naive", {1e-3}), process_record("cpu.tiled", {2e-3})},
      {process_record("cpu.tiled", {2.2e-3}), process_record("cpu.naive", {1.2e-3})}};
  const std::vector<Record> pooled = pool_rounds(rounds);
  ASSERT_EQ(pooled.size(), 2u);
  EXPECT_EQ(pooled[0].impl, "cpu.naive");
  ASSERT_EQ(pooled[1].time->runs.size(), 2u);
  EXPECT_DOUBLE_EQ(pooled[1].time->runs[1].median, 2.2e-3);
}

TEST(Repeat, AHistoryOfPooledRunsNumbersItsProcessesInOrder) {
  const Record history = pool_processes({{1, with_processes({1e-3, 1e-3})}, {2, with_processes({1e-3, 1e-3, 1e-3})}}, 2);
  ASSERT_EQ(history.time->runs.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(history.time->runs[std::size_t(i)].round, i + 1);
}

TEST(Ab, RoundsAlternateWhichSideGoesFirst) {
  const std::vector<std::pair<int, int>> order = abba_order(3);
  const std::vector<std::pair<int, int>> expected = {{1, 0}, {1, 1}, {2, 1}, {2, 0}, {3, 0}, {3, 1}};
  EXPECT_EQ(order, expected);  // A B B A A B
}

TEST(Ab, PlansThatDifferAreNamed) {
  const std::string plan = "cpu.naive b1 h4 s256 d64 fp32\ncpu.tiled b1 h4 s256 d64 fp32\nmeasure: warmup 0\n2 pairs\n";
  EXPECT_EQ(plan_difference(plan, plan), "");
  const std::string more = "cpu.naive b1 h4 s256 d64 fp32\ncpu.tiled b1 h4 s256 d64 fp32\ncpu.tiled b1 h4 s512 d64 "
                           "fp32\nmeasure: warmup 0\n3 pairs\n";
  EXPECT_EQ(plan_difference(plan, more), "BASE has 2 pairs, NEW 3; only NEW: cpu.tiled b1 h4 s512 d64 fp32");
  const std::string settings = "cpu.naive b1 h4 s256 d64 fp32\ncpu.tiled b1 h4 s256 d64 fp32\nmeasure: warmup 1\n2 pairs\n";
  EXPECT_EQ(plan_difference(plan, settings), "measure: BASE warmup 0, NEW warmup 1");
}

TEST(CompareProcesses, PairedRoundsUseTheSignedRankTest) {
  std::vector<double> base, slower;
  for (int round = 0; round < 10; ++round) {
    base.push_back(1e-3 * (1 + 0.01 * round));
    slower.push_back(1e-3 * (1 + 0.01 * round) * (1.15 + 0.002 * round));  // no two ratios alike: no ties
  }
  CompareSettings settings;
  settings.paired = true;
  const Comparison c = compare_runs(set_of(with_processes(base), "base.jsonl"), set_of(with_processes(slower), "new.jsonl"),
                                    settings);
  const TimeComparison& t = time_of(c);
  EXPECT_EQ(t.test, TimeTest::signed_rank);
  EXPECT_EQ(t.base_processes, 10u);
  ASSERT_TRUE(t.p);
  EXPECT_NEAR(*t.p, 0.001953125, 1e-9);  // wilcoxon: all 10 rounds slower, 2 / 2^10
  EXPECT_NEAR(t.ratio, 1.159, 1e-9);     // the median of the rounds' ratios, (1.158 + 1.160) / 2
  EXPECT_EQ(t.verdict, Verdict::slower);
  EXPECT_EQ(c.exit_status(), 1);
  // Eight rounds can reach alpha 0.01 (2 / 2^8 = 0.0078); with one slow BASE round among them the test fails
  // (the largest rank against the change: T = 8, p = 50 / 256), and the verdict is noise, not a regression.
  std::vector<double> eight_base(base.begin(), base.begin() + 8), eight_new(slower.begin(), slower.begin() + 8);
  eight_base[3] *= 1.5;
  const Comparison outlier = compare_runs(set_of(with_processes(eight_base), "b"), set_of(with_processes(eight_new), "n"),
                                          settings);
  EXPECT_NEAR(*time_of(outlier).p, 0.1953125, 1e-9);
  EXPECT_EQ(time_of(outlier).verdict, Verdict::noise);
}

TEST(CompareProcesses, UnpairedProcessesUseTheRankSumTest) {
  const Comparison c = compare_runs(set_of(with_processes({1.00e-3, 1.01e-3, 1.02e-3, 1.03e-3, 1.04e-3}), "base.jsonl"),
                                    set_of(with_processes({1.20e-3, 1.21e-3, 1.22e-3, 1.23e-3, 1.24e-3}), "new.jsonl"), {});
  const TimeComparison& t = time_of(c);
  EXPECT_EQ(t.test, TimeTest::rank_sum);
  EXPECT_NEAR(*t.p, 0.007936507936507936, 1e-12);  // mannwhitneyu, exact: 2 / C(10, 5)
  EXPECT_NEAR(t.ratio, 1.22 / 1.02, 1e-9);
  EXPECT_EQ(t.verdict, Verdict::slower);
  // Three processes a side cannot reach alpha 0.01 (the smallest p is 0.1): noise, whatever the ratio.
  const Comparison few = compare_runs(set_of(with_processes({1e-3, 1.01e-3, 1.02e-3}), "b"),
                                      set_of(with_processes({2e-3, 2.01e-3, 2.02e-3}), "n"), {});
  EXPECT_NEAR(*time_of(few).p, 0.1, 1e-12);
  EXPECT_EQ(time_of(few).verdict, Verdict::noise);
}

TEST(CompareProcesses, TheNoiseBetweenProcessesMustBeExceeded) {
  // A ratio of 1.2 of the medians, but the processes of each side spread by far more.
  const Comparison c = compare_runs(
      set_of(with_processes({0.5e-3, 0.7e-3, 1.0e-3, 1.4e-3, 1.9e-3, 0.6e-3, 0.8e-3, 1.1e-3}), "base.jsonl"),
      set_of(with_processes({0.6e-3, 0.84e-3, 1.2e-3, 1.68e-3, 2.28e-3, 0.72e-3, 0.96e-3, 1.32e-3}), "new.jsonl"), {});
  // The noise is the spread of the estimate: the larger relative IQR of the two sides' processes (NEW's:
  // (1.41 - 0.81) / 1.08) over the square root of their number.
  EXPECT_NEAR(*time_of(c).noise, (1.41 - 0.81) / 1.08 / std::sqrt(8.0), 1e-9);
  EXPECT_EQ(time_of(c).verdict, Verdict::noise);
}

TEST(CompareProcesses, OneNewProcessIsJudgedAgainstTheHistoryOfBase) {
  const Record history = with_processes({1.00e-3, 1.02e-3, 0.99e-3, 1.01e-3, 1.03e-3});
  Record beyond = with_processes({1.10e-3});
  Record inside = with_processes({1.025e-3});
  const Comparison slower = compare_runs(set_of(history, "h"), set_of(beyond, "n"), {});
  EXPECT_EQ(time_of(slower).test, TimeTest::history);
  EXPECT_EQ(time_of(slower).verdict, Verdict::slower);
  CompareSettings loose;
  loose.threshold_percent = 1;
  const Comparison within = compare_runs(set_of(history, "h"), set_of(inside, "n"), loose);
  EXPECT_EQ(time_of(within).verdict, Verdict::noise);  // beyond 1 %, but inside BASE's range
}

TEST(CompareProcesses, BusyProcessesAreLeftOutAndABusyPairIsNeverAVerdict) {
  CompareSettings settings;
  settings.paired = true;
  std::vector<double> base(10, 1e-3), next(10, 1.3e-3);
  for (int i = 0; i < 10; ++i) base[std::size_t(i)] *= 1 + 0.001 * i;
  const Comparison c = compare_runs(set_of(with_processes(base, {true, false, false}), "b"),
                                    set_of(with_processes(next), "n"), settings);
  EXPECT_EQ(time_of(c).contended_processes, 1u);
  EXPECT_NEAR(*time_of(c).p, 0.00390625, 1e-9);  // 9 rounds left, all slower: 2 / 2^9
  std::vector<bool> all(10, true);
  const Comparison busy = compare_runs(set_of(with_processes(base, all), "b"), set_of(with_processes(next), "n"), settings);
  EXPECT_EQ(time_of(busy).verdict, Verdict::contended);
  EXPECT_EQ(busy.exit_status(), 0);
  // One process a side, one of them contended: shown, not judged, even at twice the time.
  Record one = process_record("cpu.tiled", std::vector<double>(20, 2e-3));
  one.time->contended = Contention{{"samples quantised to the scheduler's tick"}};
  const Comparison single = compare_runs(set_of(process_record("cpu.tiled", std::vector<double>(20, 1e-3)), "b"),
                                         set_of(one, "n"), {});
  EXPECT_EQ(time_of(single).verdict, Verdict::contended);
  EXPECT_EQ(single.exit_status(), 0);
}

TEST(CompareProcesses, OneProcessASideSaysItsVerdictsCanBeFalseAlarms) {
  const Comparison c = compare_runs(set_of(process_record("cpu.tiled", {1e-3, 1.01e-3, 0.99e-3}), "b"),
                                    set_of(process_record("cpu.tiled", {1e-3, 1.02e-3, 0.98e-3}), "n"), {});
  EXPECT_EQ(time_of(c).test, TimeTest::samples);
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes[0].find("process-to-process variation is not measured"), std::string::npos);
  EXPECT_NE(compare_table(c).find("can be false alarms"), std::string::npos);
  const Comparison several = compare_runs(set_of(with_processes({1e-3, 1e-3, 1e-3}), "b"),
                                          set_of(with_processes({1e-3, 1e-3, 1e-3}), "n"), {});
  EXPECT_TRUE(several.notes.empty());
}

}  // namespace
}  // namespace faprobe
