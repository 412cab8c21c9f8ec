// `faprobe compare` and `faprobe report` end to end: exit statuses (0 no regression, 1 a regression, 2 bad
// input), the outputs, and report's round trips. Timings are never asserted: a slower NEW is made by editing
// a real run's records (its raw samples scaled), so the verdicts are known.
#include <algorithm>
#include <functional>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/writers.hpp"

namespace faprobe {
namespace {

constexpr const char* kCompareConfig = R"({"impl": "cpu.naive,cpu.tiled", "seq": "17,64", "heads": 2, "head_dim": 16,
  "mask": "causal", "min_samples": 12, "min_time": 0, "max_noise": 100, "max_time": 1, "warmup": 0})";

class CliCompare : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    write("tiny.json", kCompareConfig);
    const Result run = faprobe("sweep --config tiny.json --out base.jsonl --json base.json --csv base.csv --md base.md");
    ASSERT_EQ(run.status, 0) << run.err;
  }

  // base.jsonl with `edit` applied to every record as JSON, written to `name`.
  void edited(const std::string& name, const std::function<void(nlohmann::json&)>& edit) const {
    std::string text;
    for (const Record& record : read_jsonl(path("base.jsonl").string())) {
      nlohmann::json value = record;
      edit(value);
      text += value.dump() + "\n";
    }
    write(name, text);
  }
};

// NEW's samples all above BASE's slowest, by `factor`: a change the test sees whatever load the run's
// samples saw (a loaded machine spreads a tiny case's samples over 100×, which scaling alone would overlap).
void make_slower(nlohmann::json& record, double factor) {
  nlohmann::json& time = record["time_s"];
  std::vector<double> raw = time["samples_s"].get<std::vector<double>>();
  const double slowest = *std::max_element(raw.begin(), raw.end());
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = slowest * factor * (1 + 1e-3 * double(i));
  time["samples_s"] = raw;
  for (const char* field : {"median", "mean", "q1", "q3"}) time[field] = raw[raw.size() / 2];
  time["min"] = raw.front();
  time["max"] = raw.back();
}

TEST_F(CliCompare, ARunAgainstItselfIsNoRegression) {
  const Result same = faprobe("compare base.jsonl base.json --md diff.md --json diff.json");
  EXPECT_EQ(same.status, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("4 pairs: 0 slower, 0 faster, 4 same"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("no regression"), std::string::npos) << same.out;
  const nlohmann::json diff = nlohmann::json::parse(read_file(path("diff.json")));
  EXPECT_EQ(diff["kind"], "compare");
  EXPECT_EQ(diff["summary"]["same"], 4);
  EXPECT_NE(read_file(path("diff.md")).find("| cpu.tiled |"), std::string::npos);
}

TEST_F(CliCompare, ASlowerRunIsARegression) {
  edited("slow.jsonl", [](nlohmann::json& r) {
    if (r["impl"] == "cpu.tiled") make_slower(r, 1.5);
  });
  const Result slower = faprobe("compare base.jsonl slow.jsonl");
  EXPECT_EQ(slower.status, 1) << slower.out << slower.err;
  EXPECT_NE(slower.out.find("2 slower"), std::string::npos) << slower.out;
  EXPECT_NE(slower.out.find("REGRESSION"), std::string::npos) << slower.out;
  // Faster is not a regression (tests/test_compare.cpp covers the threshold's and alpha's effect).
  EXPECT_EQ(faprobe("compare slow.jsonl base.jsonl").status, 0);
  // The comparison as JSON on stdout, the table on stderr.
  const Result json = faprobe("compare base.jsonl slow.jsonl --json -");
  EXPECT_EQ(json.status, 1);
  EXPECT_EQ(nlohmann::json::parse(json.out)["summary"]["slower"], 2) << json.out;
  EXPECT_NE(json.err.find("REGRESSION"), std::string::npos);
}

TEST_F(CliCompare, AStatusChangeIsARegression) {
  edited("broken.jsonl", [](nlohmann::json& r) {
    if (r["impl"] == "cpu.naive" && r["case"]["seq_k"] == 64) {
      r["status"] = "mismatch";
      r["verify"]["passed"] = false;
    }
  });
  const Result broken = faprobe("compare --base base.jsonl --new broken.jsonl");
  EXPECT_EQ(broken.status, 1) << broken.out << broken.err;
  EXPECT_NE(broken.out.find("status ok → mismatch"), std::string::npos) << broken.out;
}

TEST_F(CliCompare, BaselineImplAndPartialOverlap) {
  const Result within = faprobe("compare base.json --baseline-impl cpu.naive");
  EXPECT_EQ(within.status, 0) << within.err;
  EXPECT_NE(within.out.find("2 pairs"), std::string::npos) << within.out;  // cpu.tiled at 17 and at 64
  const Result run = faprobe("sweep --config tiny.json --seq 64,128 --out other.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  const Result overlap = faprobe("compare base.jsonl other.jsonl");
  EXPECT_NE(overlap.out.find("only in BASE (2)"), std::string::npos) << overlap.out;
  EXPECT_NE(overlap.out.find("only in NEW (2)"), std::string::npos) << overlap.out;
}

TEST_F(CliCompare, BadInputIsExitStatusTwo) {
  edited("elsewhere.jsonl", [](nlohmann::json& r) { r["device"] = "NVIDIA H200"; });
  write("not.jsonl", "hello\n");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"compare base.jsonl", "compare takes two result files"},
           {"compare base.jsonl missing.jsonl", "NEW missing.jsonl"},
           {"compare base.jsonl not.jsonl", "not.jsonl:1: not a faprobe record"},
           {"compare base.jsonl base.jsonl --threshold -1", "--threshold"},
           {"compare base.jsonl base.jsonl --alpha 2", "--alpha"},
           {"compare base.jsonl elsewhere.jsonl", "--ignore-device"},
           {"compare base.jsonl --baseline-impl cuda.fa3", "no record of cuda.fa3"},
           {"compare base.jsonl base.jsonl --json /nonexistent/d.json", "--json"},
           {"report base.jsonl base.json", "appears twice"},
           {"report base.jsonl --csv base.jsonl", "is also an input"}}) {
    const Result bad = faprobe(args);
    EXPECT_EQ(bad.status, 2) << args << "\n" << bad.err;
    EXPECT_NE(bad.err.find(message), std::string::npos) << args << "\n" << bad.err;
  }
  EXPECT_EQ(faprobe("compare base.jsonl elsewhere.jsonl --ignore-device").status, 0);
}

TEST_F(CliCompare, ReportRebuildsEveryFormat) {
  const Result from_jsonl = faprobe("report base.jsonl --csv r.csv --md r.md");
  ASSERT_EQ(from_jsonl.status, 0) << from_jsonl.err;
  EXPECT_EQ(read_file(path("r.csv")), read_file(path("base.csv")));
  EXPECT_EQ(read_file(path("r.md")), read_file(path("base.md")));
  EXPECT_NE(from_jsonl.out.find("cpu.tiled"), std::string::npos);
  // From the --json document: the records as they were, and its metadata kept.
  const Result from_json = faprobe("report base.json --json r.json");
  ASSERT_EQ(from_json.status, 0) << from_json.err;
  const nlohmann::json before = nlohmann::json::parse(read_file(path("base.json")));
  const nlohmann::json after = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_EQ(after["records"], before["records"]);
  EXPECT_EQ(after["host"], before["host"]);
  EXPECT_TRUE(after.contains("report"));
  // Merged shards: two files with different cases make one report.
  const Result run = faprobe("sweep --config tiny.json --seq 128 --out more.jsonl --json more.json");
  ASSERT_EQ(run.status, 0) << run.err;
  const Result merged = faprobe("report base.jsonl more.jsonl --json -");
  ASSERT_EQ(merged.status, 0) << merged.err;
  const nlohmann::json shards = nlohmann::json::parse(merged.out);
  EXPECT_EQ(shards["records"].size(), 6u);
  EXPECT_FALSE(shards.contains("host"));  // a JSONL does not say where it ran
  EXPECT_EQ(shards["report"]["sources"].size(), 2u);
  // Two documents of this machine: its host at the top, though each run read its free memory anew.
  const Result documents = faprobe("report base.json more.json --json -");
  ASSERT_EQ(documents.status, 0) << documents.err;
  EXPECT_EQ(nlohmann::json::parse(documents.out)["host"]["cpu_model"], before["host"]["cpu_model"]);
  // The exit status is the runs': a mismatch in the records is 1.
  edited("broken.jsonl", [](nlohmann::json& r) { r["status"] = "mismatch"; });
  EXPECT_EQ(faprobe("report broken.jsonl").status, 1);
}

}  // namespace
}  // namespace faprobe
