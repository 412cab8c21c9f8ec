// --dry-run's plan (sweep and verify) against what the run then does, --min-samples 1 past --max-time (one
// sample, marked as such in every format), and --max-total. Tiny cases: a test never asserts a time, only
// which pairs run and why the others do not; each limit is set far from the predictions it is compared with,
// so that two processes' calibrations cannot land on both sides of it.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {
namespace {

// A dry run's table rows: "IMPL CASE" → the plan column ("measure", "skipped: ...", ...), in order.
struct PlanRows {
  std::vector<std::string> pairs;
  std::map<std::string, std::string> fate;
};

PlanRows plan_rows(const std::string& text) {
  PlanRows rows;
  std::istringstream lines(text);
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("impl  ", 0) == 0) {
      in_table = true;
      EXPECT_NE(line.find("per run"), std::string::npos) << line;
      continue;
    }
    if (line.rfind("measure: ", 0) == 0) in_table = false;
    if (!in_table) continue;
    // Fields end at two spaces: impl, case, per run, pair, memory, then the plan to the end of the line.
    std::vector<std::string> fields;
    std::size_t at = 0;
    while (fields.size() < 5) {
      at = line.find_first_not_of(' ', at);
      const std::size_t end = line.find("  ", at);
      fields.push_back(line.substr(at, end - at));
      at = end;
    }
    const std::string key = fields[0] + " " + fields[1];
    rows.pairs.push_back(key);
    rows.fate[key] = line.substr(line.find_first_not_of(' ', at));
  }
  return rows;
}

std::string first_word(const std::string& fate) { return fate.substr(0, fate.find_first_of(" :")); }

class CliPlan : public Cli {};

TEST_F(CliPlan, SweepDryRunShowsThePlanTheSweepThenRuns) {
  // cpu.naive at 512 needs 8 MB of scores and probabilities: over 2MB; cpu.decode has no prefill.
  const std::string args = "--impl cpu.naive,cpu.tiled,cpu.decode --seq 64,512 --heads 4 --head-dim 16 --warmup 0 "
                           "--min-samples 2 --min-time 0 --max-noise 100 --max-time 1 --mem-limit 2MB";
  const Result dry = faprobe("sweep --dry-run " + args);
  ASSERT_EQ(dry.status, 0) << dry.err;
  EXPECT_FALSE(fs::exists(path("faprobe-out"))) << "a dry run writes nothing";
  const PlanRows plan = plan_rows(dry.out);
  ASSERT_EQ(plan.pairs.size(), 6u) << dry.out;
  EXPECT_NE(dry.out.find("\nmeasure: warmup 0 min_samples 2"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("6 pairs: 3 to measure, 1 skipped, 2 unsupported; predicted "), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find(" in all"), std::string::npos) << dry.out;

  const Result run = faprobe("sweep " + args + " --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<Record> records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), plan.pairs.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& record = records[i];
    const std::string key = record.impl + " " + record.c.label();
    EXPECT_EQ(plan.pairs[i], key) << "the same pairs in the same order";
    const std::string& fate = plan.fate.at(plan.pairs[i]);
    if (record.status == Status::ok) {
      EXPECT_EQ(fate, "measure") << key;
    } else {
      // The reason the run recorded is the plan's, word for word (no prediction in these two).
      EXPECT_EQ(fate, fmt::format("{}: {}", to_string(record.status), record.reason)) << key;
    }
  }
  EXPECT_EQ(first_word(plan.fate.at("cpu.naive b1 h4 s512 d16 fp32")), "skipped") << dry.out;
  EXPECT_EQ(first_word(plan.fate.at("cpu.decode b1 h4 s64 d16 fp32")), "unsupported") << dry.out;
}

TEST_F(CliPlan, VerifyDryRunShowsThePlanAndRunsNothing) {
  const std::string args = "--impl cpu.naive,cpu.decode --seq 64 --heads 2 --head-dim 16";
  const Result dry = faprobe("verify --dry-run " + args);
  ASSERT_EQ(dry.status, 0) << dry.err;
  const PlanRows plan = plan_rows(dry.out);
  ASSERT_EQ(plan.pairs.size(), 2u) << dry.out;
  EXPECT_EQ(plan.fate.at("cpu.naive b1 h2 s64 d16 fp32"), "check") << dry.out;
  EXPECT_EQ(first_word(plan.fate.at("cpu.decode b1 h2 s64 d16 fp32")), "unsupported") << dry.out;
  EXPECT_NE(dry.out.find("2 pairs: 1 to check, 0 skipped, 1 unsupported"), std::string::npos) << dry.out;
  EXPECT_EQ(dry.err.find("records"), std::string::npos) << "nothing ran: " << dry.err;

  // verify samples nothing: past its --max-time a pair is skipped, --min-samples 1 or not.
  const Result over = faprobe("verify --dry-run --impl cpu.naive --seq 1024 --heads 4 --head-dim 64 --max-time 0.001 "
                              "--min-samples 1");
  ASSERT_EQ(over.status, 0) << over.err;
  const std::string fate = plan_rows(over.out).fate.at("cpu.naive b1 h4 s1024 d64 fp32");
  EXPECT_EQ(fate.rfind("skipped: predicted ", 0), 0u) << fate;
  EXPECT_EQ(fate.substr(fate.size() - 12), "(--max-time)") << fate;

  const Result files = faprobe("verify --dry-run --q q.npy --k k.npy --v v.npy --o o.npy");
  EXPECT_EQ(files.status, 2);
  EXPECT_NE(files.err.find("--dry-run"), std::string::npos) << files.err;
  EXPECT_EQ(std::count(files.err.begin(), files.err.end(), '\n'), 1) << files.err;
}

// cpu.naive at seq 1024, 4 heads of 64 is predicted at milliseconds per run on any machine, far over
// --max-time 0.001.
const std::string kLong = "--impl cpu.naive --seq 1024 --heads 4 --head-dim 64 --max-time 0.001 --warmup 3";

TEST_F(CliPlan, APairOverMaxTimeIsSkippedWithTheWayOut) {
  const Result dry = faprobe("sweep --dry-run " + kLong);
  ASSERT_EQ(dry.status, 0) << dry.err;
  const std::string fate = plan_rows(dry.out).fate.at("cpu.naive b1 h4 s1024 d64 fp32");
  EXPECT_EQ(fate.rfind("skipped: predicted ", 0), 0u) << fate;
  EXPECT_NE(fate.find("budget 1.000 ms (--max-time); --min-samples 1 runs it once"), std::string::npos) << fate;
  const Result run = faprobe("sweep " + kLong + " --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<Record> records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, Status::skipped);
  EXPECT_NE(records[0].reason.find("(--max-time); --min-samples 1 runs it once"), std::string::npos) << records[0].reason;
}

TEST_F(CliPlan, MinSamplesOneMeasuresAPairOverMaxTimeOnceAndEveryFormatSaysSo) {
  const std::string args = kLong + " --min-samples 1";
  const Result dry = faprobe("sweep --dry-run " + args);
  ASSERT_EQ(dry.status, 0) << dry.err;
  EXPECT_EQ(plan_rows(dry.out).fate.at("cpu.naive b1 h4 s1024 d64 fp32").rfind("measure once (n=1", 0), 0u) << dry.out;
  EXPECT_NE(dry.out.find("1 to measure (1 once)"), std::string::npos) << dry.out;

  const Result run = faprobe("sweep " + args + " --out r.jsonl --csv r.csv --md r.md");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<Record> records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(records[0].status, Status::ok) << records[0].reason;
  ASSERT_TRUE(records[0].time.has_value());
  EXPECT_EQ(records[0].time->samples, 1) << "no warm-up beyond the checked run, one sample";
  const nlohmann::json line = nlohmann::json::parse(read_file(path("r.jsonl")));
  EXPECT_EQ(line.at("time_s").at("one_sample"), true) << line.dump();
  EXPECT_NE(run.out.find(kOneSampleLegend), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("1 of 1 timed records have one sample (n 1, ± -)"), std::string::npos) << run.err;
  const std::string md = read_file(path("r.md"));
  EXPECT_NE(md.find(" | - | 1 | "), std::string::npos) << md;  // no spread, one sample
  EXPECT_NE(md.find(kOneSampleLegend), std::string::npos) << md;
  // CSV: the samples column.
  const std::string csv = read_file(path("r.csv"));
  const std::string header = csv.substr(0, csv.find('\n'));
  const std::string row = csv.substr(csv.find('\n') + 1);
  const auto column = [](const std::string& text, std::size_t index) {
    std::size_t begin = 0;
    for (std::size_t i = 0; i < index; ++i) begin = text.find(',', begin) + 1;
    return text.substr(begin, text.find_first_of(",\n", begin) - begin);
  };
  std::size_t samples = 0;
  while (column(header, samples) != "samples") ++samples;
  EXPECT_EQ(column(row, samples), "1") << csv;
}

TEST_F(CliPlan, MaxTotalSkipsThePairsPastTheBudgetInThePlanAndTheRun) {
  // Each pair samples for --min-time 0.01 s: about 0.01 s predicted, so one fits in 0.015 s and two do not.
  const std::string args = "--impl cpu.tiled --seq 64,65,66 --heads 2 --head-dim 16 --warmup 0 --min-samples 1 "
                           "--min-time 0.01 --max-noise 100 --max-time 1 --max-total 0.015";
  const Result dry = faprobe("sweep --dry-run " + args);
  ASSERT_EQ(dry.status, 0) << dry.err;
  const PlanRows plan = plan_rows(dry.out);
  ASSERT_EQ(plan.pairs.size(), 3u) << dry.out;
  EXPECT_NE(dry.out.find(" max_total 0.015 s\n"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("3 pairs: 1 to measure, 2 skipped"), std::string::npos) << dry.out;

  const Result run = faprobe("sweep " + args + " --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<Record> records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].status, Status::ok) << records[0].reason;
  EXPECT_EQ(plan.fate.at(plan.pairs[0]), "measure");
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(records[i].status, Status::skipped);
    EXPECT_NE(records[i].reason.find("of the budget 15.000 ms (--max-total) already planned"), std::string::npos)
        << records[i].reason;
    EXPECT_EQ(plan.fate.at(plan.pairs[i]).rfind("skipped: predicted ", 0), 0u) << dry.out;
    EXPECT_NE(plan.fate.at(plan.pairs[i]).find("(--max-total)"), std::string::npos) << dry.out;
  }

  // The config key says the same; bad values are one line naming the flag, exit 2, before anything runs.
  write("total.json", R"({"impl": "cpu.tiled", "seq": "64,65", "heads": 2, "head_dim": 16, "min_samples": 1,
    "min_time": 0.01, "max_time": 1, "max_total": 0.015})");
  const Result config = faprobe("sweep --dry-run --config total.json");
  ASSERT_EQ(config.status, 0) << config.err;
  EXPECT_NE(config.out.find("2 pairs: 1 to measure, 1 skipped"), std::string::npos) << config.out;
  for (const std::string bad : {"0", "-1", "abc", "nan"}) {
    const Result refused = faprobe("sweep --impl cpu.tiled --seq 64 --out x.jsonl --max-total " + bad);
    EXPECT_EQ(refused.status, 2) << bad;
    EXPECT_NE(refused.err.find("--max-total"), std::string::npos) << bad << ": " << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << bad << ": " << refused.err;
    EXPECT_FALSE(fs::exists(path("x.jsonl"))) << bad;
  }
}

// The progress line (drawn on a terminal only: script(1) gives the run one) shows an ETA from the first pair
// on, from the predictions: about 0.6 s for a pair that samples for --min-time 0.6, where it used to show
// "--:--" until a pair had finished.
TEST_F(CliPlan, TheProgressLineHasAnEtaFromTheFirstPairOn) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1) to run faprobe on a terminal";
  const Result run = shell("script -qec \"'" FAPROBE_BINARY "' sweep --impl cpu.tiled --seq 17 --heads 2 --head-dim 16 "
                           "--min-samples 2 --min-time 0.6 --max-noise 100 --max-time 5 --warmup 0 --out r.jsonl\" "
                           "/dev/null");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("[1/1] cpu.tiled b1 h2 s17 d16 fp32  ETA 0:01"), std::string::npos) << run.out;
}

// `faprobe ab` compares its sides' pairs and settings, not their predictions; a side from before the plan
// table, whose --dry-run lists "IMPL CASE" lines, gives the same pairs. Here that side also runs one thread,
// so the plans differ in their settings alone and ab stops before measuring.
TEST_F(CliPlan, AbReadsAPlanTableAndAnOlderListingAsTheSamePairs) {
  const fs::path old_side = write("old.sh", "#!/bin/sh\n"
                                            "case \" $* \" in *\" --dry-run \"*)\n"
                                            "  '" FAPROBE_BINARY "' \"$@\" --threads 1 | awk -F '  +' "
                                            "'/^impl  /{t=1;next} /^measure: /{print;t=0;next} t{print $1\" \"$2;n++} "
                                            "END{print n\" pairs\"}'; exit 0;;\n"
                                            "esac\n"
                                            "exec '" FAPROBE_BINARY "' \"$@\"\n");
  chmod(old_side.c_str(), 0755);
  const Result listing = shell("./old.sh sweep --dry-run --impl cpu.naive,cpu.tiled --seq 64 --heads 2");
  ASSERT_EQ(listing.status, 0) << listing.err;
  EXPECT_NE(listing.out.find("cpu.tiled b1 h2 s64 d64 fp32\n"), std::string::npos) << listing.out;
  const Result ab = faprobe("ab --base ./old.sh --repeat 2 --out-dir ab --impl cpu.naive,cpu.tiled --seq 64 --heads 2");
  EXPECT_EQ(ab.status, 2) << ab.err;
  EXPECT_NE(ab.err.find("the sides' plans differ: measure: BASE "), std::string::npos) << ab.err;
  EXPECT_NE(ab.err.find("threads 1"), std::string::npos) << ab.err;
  EXPECT_EQ(ab.err.find(" pairs"), std::string::npos) << "the pairs agree: " << ab.err;
}

}  // namespace
}  // namespace faprobe
