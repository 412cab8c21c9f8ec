// faprobe compare's core (harness/analysis/compare.hpp) and the result files it reads (harness/analysis/record_files.hpp):
// verdicts from raw samples, matching with partial overlap and across devices, every kind of status and
// correctness change, --baseline-impl, and the printers; duplicates and both file formats.
#include <cmath>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "harness/analysis/compare.hpp"
#include "harness/records/statistics.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

// Samples around `median` seconds with a relative spread of ±spread, in a fixed order.
std::vector<double> samples(double median, double spread, int count, int phase = 0) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(median * (1 + spread * (((i + phase) * 37) % 21 - 10) / 10.0));
  return out;
}

Record timed(const std::string& impl, std::int64_t seq, std::vector<double> raw) {
  Record record;
  record.impl = impl;
  record.device = "cpu";
  record.c.seq_q = record.c.seq_k = seq;
  std::vector<double> sorted = raw;
  std::sort(sorted.begin(), sorted.end());
  record.time = TimeStats{sorted[sorted.size() / 2], sorted[sorted.size() / 2], sorted.front(), sorted.back(),
                          sorted.front(), sorted.back(), 0, std::int64_t(raw.size()), raw};
  record.verify = VerifyResult{};
  record.verify->max_abs_diff = 1e-7;
  record.verify->max_rel_diff = 1e-6;
  record.verify->tolerance = 1e-5;
  record.verify->rows_checked = 64;
  record.verify->heads_checked = 4;
  record.verify->passed = true;
  return record;
}

RecordSet set_of(std::vector<Record> records, const std::string& file = "run.jsonl") {
  RecordSet set;
  set.files.push_back(ResultFile{file, false, nlohmann::json::object(), {}, ""});
  for (std::size_t i = 0; i < records.size(); ++i)
    set.records.push_back({std::move(records[i]), file + " record " + std::to_string(i + 1), ""});
  return set;
}

const ComparedPair& only_pair(const Comparison& comparison) {
  EXPECT_EQ(comparison.pairs.size(), 1u);
  return comparison.pairs.front();
}

TEST(Compare, TheSameRunIsTheSame) {
  const Record base = timed("cpu.tiled", 1024, samples(1e-3, 0.02, 50));
  const Comparison c = compare_runs(set_of({base}), set_of({timed("cpu.tiled", 1024, samples(1e-3, 0.02, 50, 3))}), {});
  const ComparedPair& pair = only_pair(c);
  ASSERT_TRUE(pair.time);
  EXPECT_EQ(pair.time->verdict, Verdict::same);
  EXPECT_NEAR(pair.time->ratio, 1.0, 1e-12);
  ASSERT_TRUE(pair.time->p && pair.time->low && pair.time->high);
  EXPECT_GT(*pair.time->p, 0.5);  // the same values in another order
  EXPECT_LE(*pair.time->low, 1.0);
  EXPECT_GE(*pair.time->high, 1.0);
  EXPECT_EQ(c.exit_status(), kExitOk);
}

TEST(Compare, ASignificantChangeBeyondTheThresholdIsAVerdict) {
  const Record base = timed("cpu.tiled", 1024, samples(1e-3, 0.02, 50));
  const Comparison slower = compare_runs(set_of({base}), set_of({timed("cpu.tiled", 1024, samples(1.2e-3, 0.02, 50))}), {});
  EXPECT_EQ(only_pair(slower).time->verdict, Verdict::slower);
  EXPECT_LT(*only_pair(slower).time->p, 1e-3);  // 10 blocks a side, all apart
  EXPECT_GT(*only_pair(slower).time->low, 1.1);
  EXPECT_TRUE(only_pair(slower).regression());
  EXPECT_EQ(slower.exit_status(), kExitFailed);
  const Comparison faster = compare_runs(set_of({base}), set_of({timed("cpu.tiled", 1024, samples(0.8e-3, 0.02, 50))}), {});
  EXPECT_EQ(only_pair(faster).time->verdict, Verdict::faster);
  EXPECT_EQ(faster.exit_status(), kExitOk);  // faster is not a regression
}

TEST(Compare, ThresholdAndAlphaDecideTogether) {
  const Record base = timed("cpu.tiled", 1024, samples(1e-3, 0.005, 200));
  // 3 % slower with a ±0.5 % spread: significant, but within the 5 % threshold.
  const Comparison small = compare_runs(set_of({base}), set_of({timed("cpu.tiled", 1024, samples(1.03e-3, 0.005, 200))}), {});
  EXPECT_EQ(only_pair(small).time->verdict, Verdict::same);
  EXPECT_LT(*only_pair(small).time->p, 1e-3);
  CompareSettings strict;
  strict.threshold_percent = 2;
  EXPECT_EQ(only_pair(compare_runs(set_of({base}), set_of({timed("cpu.tiled", 1024, samples(1.03e-3, 0.005, 200))}), strict))
                .time->verdict,
            Verdict::slower);
  // 20 % slower on the medians, but three samples a side spread over ±60 %: noise.
  const Record noisy_base = timed("cpu.tiled", 1024, {1e-3, 0.4e-3, 1.6e-3});
  const Comparison noisy =
      compare_runs(set_of({noisy_base}), set_of({timed("cpu.tiled", 1024, {1.2e-3, 0.5e-3, 1.9e-3})}), {});
  EXPECT_EQ(only_pair(noisy).time->verdict, Verdict::noise);
  EXPECT_EQ(noisy.exit_status(), kExitOk);
}

TEST(Compare, AChangeWithinTheSamplesSpreadIsNoise) {
  // ±30 % around the median, 400 samples a side, NEW 10 % slower: the blocks see it, single samples spread wider.
  const Record base = timed("cpu.tiled", 1024, samples(1e-3, 0.3, 400));
  const Comparison c = compare_runs(set_of({base}), set_of({timed("cpu.tiled", 1024, samples(1.1e-3, 0.3, 400))}), {});
  EXPECT_LT(*only_pair(c).time->p, 0.01);
  EXPECT_GT(*only_pair(c).time->noise, 0.2);
  EXPECT_EQ(only_pair(c).time->verdict, Verdict::noise);
  // The same change over a ±2 % spread is a regression.
  const Record quiet = timed("cpu.tiled", 1024, samples(1e-3, 0.02, 400));
  EXPECT_EQ(only_pair(compare_runs(set_of({quiet}), set_of({timed("cpu.tiled", 1024, samples(1.1e-3, 0.02, 400))}), {}))
                .time->verdict,
            Verdict::slower);
}

TEST(Compare, DriftWithinARunIsNotEvidence) {
  // BASE drifts from 0.9 to 1.1 ms over its run, NEW from 0.95 to 1.15 ms: on 2,000 raw samples a side the U
  // test would call the 5 % shift certain (p ~ 1e-50); on block medians it is not.
  std::vector<double> base, next;
  for (int i = 0; i < 2000; ++i) {
    base.push_back(1e-3 * (0.9 + 0.2 * i / 2000.0));
    next.push_back(1e-3 * (0.95 + 0.2 * i / 2000.0));
  }
  EXPECT_LT(mann_whitney_u(next, base).p, 1e-20);
  const Comparison c = compare_runs(set_of({timed("cpu.tiled", 1024, base)}), set_of({timed("cpu.tiled", 1024, next)}), {});
  EXPECT_GT(*only_pair(c).time->p, 0.01);
  EXPECT_NE(only_pair(c).time->verdict, Verdict::slower);
}

TEST(Compare, RecordsWithoutRawSamplesAreShownNotJudged) {
  Record base = timed("cpu.tiled", 1024, samples(1e-3, 0.02, 20));
  Record next = timed("cpu.tiled", 1024, samples(2e-3, 0.02, 20));
  base.time->samples_s.clear();  // a record from before faprobe kept them
  const Comparison c = compare_runs(set_of({base}), set_of({next}), {});
  EXPECT_EQ(only_pair(c).time->verdict, Verdict::untested);
  EXPECT_FALSE(only_pair(c).time->p);
  EXPECT_NEAR(only_pair(c).time->ratio, 2.0, 0.05);
  EXPECT_EQ(c.exit_status(), kExitOk);
}

// A pair is counted once, under a verdict or as not timed, and the counts add up to the pairs (before, a
// pair without a time on both sides was in none of them). BASE timed and NEW ok without a time (a verify
// run of the same pairs) is a change of its own and a regression, as "verified → not checked" is.
TEST(Compare, EveryPairIsCountedOnceAndALostTimeIsARegression) {
  const auto raw = samples(1e-3, 0.02, 20);
  Record untested = timed("cpu.tiled", 3, samples(2e-3, 0.02, 20)), lost = timed("cpu.tiled", 4, raw);
  Record skipped = timed("cpu.tiled", 5, raw), gained = timed("cpu.tiled", 6, raw);
  untested.time->samples_s.clear();
  lost.time.reset();  // NEW verified the pair without timing it
  skipped.time.reset();
  skipped.status = Status::skipped;
  gained.time.reset();  // BASE had no time, NEW has one
  const Comparison c = compare_runs(
      set_of({timed("cpu.tiled", 1, raw), timed("cpu.tiled", 2, raw), timed("cpu.tiled", 3, raw), timed("cpu.tiled", 4, raw),
              skipped, gained}),
      set_of({timed("cpu.tiled", 1, raw), timed("cpu.tiled", 2, samples(2e-3, 0.02, 20)), untested, lost, skipped,
              timed("cpu.tiled", 6, raw)}),
      {});
  ASSERT_EQ(c.pairs.size(), 6u);
  EXPECT_EQ(c.count(Verdict::same), 1);
  EXPECT_EQ(c.count(Verdict::slower), 1);
  EXPECT_EQ(c.count(Verdict::untested), 1);
  EXPECT_EQ(c.not_timed(), 3);
  const nlohmann::json summary = compare_json(c)["summary"];
  int counted = 0;
  for (const char* count : {"slower", "faster", "same", "noise", "untested", "not_timed"}) counted += summary[count].get<int>();
  EXPECT_EQ(counted, summary["pairs"].get<int>()) << summary;
  EXPECT_NE(compare_table(c).find("6 pairs: 1 slower, 0 faster, 1 same, 0 noise, 1 untested, 0 contended, 3 not timed"),
            std::string::npos) << compare_table(c);
  ASSERT_EQ(c.pairs[3].changes.size(), 1u);
  EXPECT_EQ(c.pairs[3].changes[0].what, "timed → not timed");
  EXPECT_TRUE(c.pairs[3].regression());
  EXPECT_FALSE(c.pairs[4].regression());  // skipped in both
  EXPECT_FALSE(c.pairs[5].regression());  // a time gained
  EXPECT_EQ(c.regressions(), 2);           // the slower pair and the lost time
}

TEST(Compare, PartialOverlapListsBothSides) {
  const auto raw = samples(1e-3, 0.02, 20);
  const Comparison c = compare_runs(set_of({timed("cpu.tiled", 512, raw), timed("cpu.tiled", 1024, raw),
                                            timed("cpu.naive", 512, raw)}),
                                    set_of({timed("cpu.tiled", 1024, raw), timed("cpu.tiled", 2048, raw),
                                            timed("cpu.naive", 512, raw)}),
                                    {});
  ASSERT_EQ(c.pairs.size(), 2u);
  ASSERT_EQ(c.only_base.size(), 1u);
  EXPECT_EQ(c.only_base[0].record.c.seq_k, 512);
  EXPECT_EQ(c.only_base[0].record.impl, "cpu.tiled");
  ASSERT_EQ(c.only_new.size(), 1u);
  EXPECT_EQ(c.only_new[0].record.c.seq_k, 2048);
  const std::string table = compare_table(c);
  EXPECT_NE(table.find("only in BASE (1)"), std::string::npos) << table;
  EXPECT_NE(table.find("only in NEW (1)"), std::string::npos) << table;
  EXPECT_EQ(c.exit_status(), kExitOk);  // a case the plans do not share is listed, not a regression
  EXPECT_THROW(compare_runs(set_of({timed("cpu.tiled", 512, raw)}), set_of({timed("cpu.tiled", 4096, raw)}), {}),
               UsageError);  // nothing in common
}

// One status or check change from BASE to NEW, and whether it is a regression.
struct Change {
  Status before, after;
  bool regression;
};

TEST(Compare, EveryStatusChangeIsARowOfItsOwn) {
  const auto raw = samples(1e-3, 0.02, 20);
  for (const Change& change : {Change{Status::ok, Status::mismatch, true}, Change{Status::ok, Status::failed, true},
                               Change{Status::ok, Status::unsupported, true}, Change{Status::ok, Status::skipped, true},
                               Change{Status::skipped, Status::unsupported, true},
                               Change{Status::mismatch, Status::failed, true},
                               Change{Status::unsupported, Status::skipped, false},
                               Change{Status::mismatch, Status::ok, false}, Change{Status::failed, Status::ok, false}}) {
    Record base = timed("cpu.tiled", 1024, raw), next = timed("cpu.tiled", 1024, raw);
    base.status = change.before;
    next.status = change.after;
    next.reason = "why";
    const Comparison c = compare_runs(set_of({base}), set_of({next}), {});
    const std::string label = std::string(to_string(change.before)) + " → " + std::string(to_string(change.after));
    ASSERT_EQ(only_pair(c).changes.size(), 1u) << label;
    EXPECT_EQ(only_pair(c).changes[0].what, "status " + label + ": why");
    EXPECT_EQ(only_pair(c).changes[0].regression, change.regression) << label;
    EXPECT_EQ(c.exit_status(), change.regression ? kExitFailed : kExitOk) << label;
  }
}

TEST(Compare, CorrectnessChangesCount) {
  const auto raw = samples(1e-3, 0.02, 20);
  const Record base = timed("cpu.tiled", 1024, raw);
  auto changes_to = [&](const std::function<void(Record&)>& edit) {
    Record next = base;
    edit(next);
    return only_pair(compare_runs(set_of({base}), set_of({next}), {})).changes;
  };
  auto tolerance = changes_to([](Record& r) { r.verify->tolerance = 3e-5; });  // 1e-5 → 3e-5
  ASSERT_EQ(tolerance.size(), 1u);
  EXPECT_TRUE(tolerance[0].regression);
  EXPECT_NE(tolerance[0].what.find("tolerance 1e-05 → 3e-05"), std::string::npos) << tolerance[0].what;
  auto error = changes_to([](Record& r) { r.verify->max_abs_diff = 5e-7; });  // 5× and 5 % of the tolerance
  ASSERT_EQ(error.size(), 1u);
  EXPECT_TRUE(error[0].regression);
  EXPECT_NE(error[0].what.find("max_abs_diff 1e-07 → 5e-07 (5.0×)"), std::string::npos) << error[0].what;
  EXPECT_TRUE(changes_to([](Record& r) { r.verify->max_abs_diff = 1.9e-7; }).empty());  // less than twice
  Record exact = base;
  exact.verify->max_abs_diff = 0;
  Record tiny = base;
  tiny.verify->max_abs_diff = 5e-8;  // from 0, but below 1 % of the tolerance: not a finding
  EXPECT_TRUE(only_pair(compare_runs(set_of({exact}), set_of({tiny}), {})).changes.empty());
  Record with_lse = base;
  with_lse.verify->lse_checked = true;
  with_lse.verify->lse_max_abs_diff = 1e-7;
  with_lse.verify->lse_tolerance = 1e-5;
  auto lse_changes = [&](const std::function<void(VerifyResult&)>& edit) {
    Record next = with_lse;
    edit(*next.verify);
    return only_pair(compare_runs(set_of({with_lse}), set_of({next}), {})).changes;
  };
  const auto lost = lse_changes([](VerifyResult& v) { v.lse_checked = false; });
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].what, "LSE checked → not checked");
  EXPECT_TRUE(lost[0].regression);
  const auto lse_error = lse_changes([](VerifyResult& v) { v.lse_max_abs_diff = 4e-6; });
  ASSERT_EQ(lse_error.size(), 1u);
  EXPECT_NE(lse_error[0].what.find("LSE max_abs_diff 1e-07 → 4e-06"), std::string::npos) << lse_error[0].what;
  EXPECT_EQ(lse_changes([](VerifyResult& v) { v.lse_tolerance = 5e-5; }).size(), 1u);
  EXPECT_TRUE(lse_changes([](VerifyResult& v) { v.lse_max_abs_diff = 1.5e-7; }).empty());
  auto unchecked = changes_to([](Record& r) { r.verify.reset(); });  // --no-verify in NEW
  ASSERT_EQ(unchecked.size(), 1u);
  EXPECT_TRUE(unchecked[0].regression);
  EXPECT_EQ(unchecked[0].what, "verified → not checked");
}

TEST(Compare, DevicesMustMatchUnlessIgnored) {
  const auto raw = samples(1e-3, 0.02, 20);
  Record h100 = timed("cuda.fa2", 1024, raw), h200 = timed("cuda.fa2", 1024, samples(0.7e-3, 0.02, 20));
  h100.device = "NVIDIA H100 80GB HBM3";
  h200.device = "NVIDIA H200";
  try {
    compare_runs(set_of({h100}), set_of({h200}), {});
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--ignore-device"), std::string::npos) << e.what();
  }
  CompareSettings across;
  across.ignore_device = true;
  const Comparison c = compare_runs(set_of({h100}), set_of({h200}), across);
  EXPECT_EQ(only_pair(c).time->verdict, Verdict::faster);
  // CPU records match by host where the files know it (documents): another CPU is another device.
  RecordSet base = set_of({timed("cpu.tiled", 1024, raw), timed("cpu.naive", 1024, raw)});
  RecordSet next = set_of({timed("cpu.tiled", 1024, raw), timed("cpu.naive", 1024, raw)});
  for (SourcedRecord& r : base.records) r.host = "CPU A";
  next.records[0].host = "CPU B";
  const Comparison hosts = compare_runs(base, next, {});
  EXPECT_EQ(hosts.pairs.size(), 1u);  // cpu.naive: NEW's host unknown, so it matches
  EXPECT_EQ(hosts.only_base.size(), 1u);
  ASSERT_EQ(hosts.notes.size(), 2u);  // one process a side, and the device
  EXPECT_NE(hosts.notes[1].find("--ignore-device"), std::string::npos);
}

TEST(Compare, BaselineImplComparesWithinOneRun) {
  const RecordSet run = set_of({timed("cpu.naive", 1024, samples(4e-3, 0.02, 30)),
                                timed("cpu.tiled", 1024, samples(1e-3, 0.02, 30)),
                                timed("cpu.decode", 1024, samples(4.02e-3, 0.02, 30)),
                                timed("cpu.tiled", 2048, samples(3e-3, 0.02, 30))});
  CompareSettings settings;
  settings.baseline_impl = "cpu.naive";
  const Comparison c = compare_within(run, settings);
  ASSERT_EQ(c.pairs.size(), 2u);
  EXPECT_EQ(c.pairs[0].next.record.impl, "cpu.tiled");
  EXPECT_EQ(c.pairs[0].base.record.impl, "cpu.naive");
  EXPECT_EQ(c.pairs[0].time->verdict, Verdict::faster);
  EXPECT_NEAR(1 / c.pairs[0].time->ratio, 4.0, 0.2);  // the speedup over cpu.naive
  EXPECT_EQ(c.pairs[1].time->verdict, Verdict::same);
  ASSERT_EQ(c.only_new.size(), 1u);  // cpu.tiled at 2048 has no cpu.naive record
  EXPECT_NE(compare_table(c).find("4.00×"), std::string::npos) << compare_table(c);
  EXPECT_EQ(c.exit_status(), kExitOk);  // a table, not a gate
  settings.baseline_impl = "cuda.fa2";
  EXPECT_THROW(compare_within(run, settings), UsageError);
}

TEST(Compare, PrintersCarryTheSameComparison) {
  const Record base = timed("cpu.tiled", 1024, samples(1e-3, 0.02, 50));
  Record next = timed("cpu.tiled", 1024, samples(1.2e-3, 0.02, 50));
  Record broken = timed("cpu.naive", 1024, samples(1e-3, 0.02, 50));
  Record broken_next = broken;
  broken_next.status = Status::mismatch;
  const Comparison c = compare_runs(set_of({base, broken}), set_of({next, broken_next}), {});
  const nlohmann::json json = compare_json(c);
  EXPECT_EQ(json["schema"], "faprobe/1");
  EXPECT_EQ(json["kind"], "compare");
  ASSERT_EQ(json["pairs"].size(), 2u);
  EXPECT_EQ(json["pairs"][0]["time"]["verdict"], "slower");
  EXPECT_EQ(json["pairs"][0]["regression"], true);
  EXPECT_EQ(json["pairs"][1]["changes"][0]["regression"], true);
  EXPECT_EQ(json["summary"]["regressions"], 2);
  EXPECT_EQ(json["summary"]["exit_status"], 1);
  const std::string md = compare_markdown(c);
  EXPECT_NE(md.find("| cpu.tiled |"), std::string::npos) << md;
  EXPECT_NE(md.find("**slower**"), std::string::npos) << md;
  EXPECT_NE(md.find("status ok → mismatch"), std::string::npos) << md;
  const std::string table = compare_table(c);
  EXPECT_NE(table.find("REGRESSION"), std::string::npos) << table;
  EXPECT_NE(table.find("2 regressions (exit 1)"), std::string::npos) << table;
}

class RecordFiles : public test_support::TempDirTest {};

TEST_F(RecordFiles, ReadsJsonlAndDocumentsAlike) {
  const std::vector<Record> records = {timed("cpu.tiled", 1024, samples(1e-3, 0.02, 10)),
                                       timed("cpu.naive", 1024, samples(2e-3, 0.02, 10))};
  {
    JsonlWriter writer(path("a.jsonl"));
    for (const Record& r : records) writer.write(r);
  }
  write_json(path("a.json"), {{"host", {{"cpu_model", "CPU A"}}}}, records);
  const ResultFile jsonl = read_result_file(path("a.jsonl"), "BASE");
  const ResultFile document = read_result_file(path("a.json"), "BASE");
  EXPECT_FALSE(jsonl.document);
  EXPECT_TRUE(document.document);
  ASSERT_EQ(jsonl.records.size(), 2u);
  ASSERT_EQ(document.records.size(), 2u);
  EXPECT_EQ(nlohmann::json(jsonl.records[1]), nlohmann::json(document.records[1]));
  EXPECT_EQ(document.metadata["host"]["cpu_model"], "CPU A");
  EXPECT_FALSE(document.metadata.contains("records"));
  const RecordSet set = read_record_set({path("a.json")}, "BASE");
  EXPECT_EQ(set.records[0].host, "CPU A");
  EXPECT_EQ(set.records[0].source, path("a.json") + " record 1");

  // Not result files: each a UsageError naming the flag and the file.
  std::ofstream(path("other.json")) << R"({"schema": "other/2", "records": []})";
  std::ofstream(path("empty.jsonl")) << "\n";
  std::ofstream(path("text.jsonl")) << "hello\n";
  for (const char* name : {"other.json", "empty.jsonl", "text.jsonl", "missing.jsonl"}) {
    try {
      read_result_file(path(name), "--base");
      ADD_FAILURE() << name;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--base " + path(name), 0), 0u) << e.what();
    }
  }
}

TEST_F(RecordFiles, TheSamePairTwiceNamesBothPlaces) {
  const Record record = timed("cpu.tiled", 1024, samples(1e-3, 0.02, 10));
  for (const char* name : {"a.jsonl", "b.jsonl"}) {
    JsonlWriter writer(path(name));
    writer.write(record);
  }
  try {
    read_record_set({path("a.jsonl"), path("b.jsonl")}, "FILE");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path("a.jsonl") + " record 1"), std::string::npos) << what;
    EXPECT_NE(what.find(path("b.jsonl") + " record 1"), std::string::npos) << what;
  }
  // Within one file too (two runs appended to one --out without --resume).
  {
    JsonlWriter writer(path("a.jsonl"));
    writer.write(record);
  }
  EXPECT_THROW(read_record_set({path("a.jsonl")}, "FILE"), UsageError);
  // The same pair on another device is another record.
  Record elsewhere = record;
  elsewhere.device = "NVIDIA H200";
  {
    JsonlWriter writer(path("c.jsonl"));
    writer.write(elsewhere);
  }
  EXPECT_EQ(read_record_set({path("b.jsonl"), path("c.jsonl")}, "FILE").records.size(), 2u);
}

}  // namespace
}  // namespace faprobe
