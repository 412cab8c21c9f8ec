// `faprobe merge` and `faprobe report` over hostile or incomplete shards, end to end: counts read from files
// are bounded before anything is sized by them, a shard holding a pair it never had is refused, report fails
// a split sweep with a shard missing, two merges into one new --out leave exactly one result, and a line far
// longer than any record is bad input naming file and line.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {
namespace {

class CliMerge : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    for (const char* shard : {"1", "2"}) {
      const Result run = faprobe("sweep --impl cpu.naive --seq 16,32,48 --heads 1 --head-dim 16 --min-samples 1 "
                                 "--min-time 0 --max-noise 100 --no-verify --shard " +
                                 std::string(shard) + "/2 --out s" + shard + ".jsonl");
      ASSERT_EQ(run.status, 0) << run.err;
    }
  }

  // The lines of a JSONL file, each parsed.
  std::vector<nlohmann::json> lines_of(const std::string& name) const {
    std::vector<nlohmann::json> lines;
    for (const Record& record : read_jsonl(path(name).string())) lines.push_back(record);
    return lines;
  }
  void write_lines(const std::string& name, const std::vector<nlohmann::json>& lines) const {
    std::string text;
    for (const nlohmann::json& line : lines) text += line.dump() + "\n";
    write(name, text);
  }
};

TEST_F(CliMerge, AShardCountReadFromAFileIsBoundedNamingTheFieldAndFile) {
  for (const long long count : {2147483647LL, 1000000000000LL, 100001LL}) {
    std::vector<nlohmann::json> lines = lines_of("s1.jsonl");
    for (nlohmann::json& line : lines) line["shard"]["count"] = count;
    write_lines("claims.jsonl", lines);
    const Result merged = faprobe("merge claims.jsonl s2.jsonl --out m.jsonl");
    EXPECT_EQ(merged.status, 2) << merged.err;
    EXPECT_NE(merged.err.find("PART claims.jsonl:1: "), std::string::npos) << merged.err;
    EXPECT_NE(merged.err.find("shard.count " + std::to_string(count) + " (allowed: 1 <= count <= 100000"),
              std::string::npos)
        << merged.err;
    EXPECT_EQ(std::count(merged.err.begin(), merged.err.end(), '\n'), 1) << merged.err;
    EXPECT_FALSE(fs::exists(path("m.jsonl")));
  }
}

TEST_F(CliMerge, AShardHoldingAPairItNeverHadIsRefusedWithoutThePlan) {
  std::vector<nlohmann::json> lines = lines_of("s1.jsonl");
  nlohmann::json foreign = lines.front();  // shard 1's tag, a case of another run
  foreign["case"]["seq_q"] = foreign["case"]["seq_k"] = 64;
  lines.push_back(foreign);
  write_lines("s1.jsonl", lines);
  const Result merged = faprobe("merge s1.jsonl s2.jsonl --out m.jsonl");
  EXPECT_EQ(merged.status, 2) << merged.err;
  EXPECT_NE(merged.err.find("shard 1 holds " + std::to_string(lines.size()) + " records, more than its " +
                            std::to_string(lines.size() - 1) + " pairs"),
            std::string::npos)
      << merged.err;
  EXPECT_FALSE(fs::exists(path("m.jsonl")));
}

TEST_F(CliMerge, ReportOfShardsFailsWhileAWholeShardIsMissing) {
  const Result one = faprobe("report s1.jsonl");
  EXPECT_EQ(one.status, 1) << one.err;
  EXPECT_NE(one.err.find(": missing shard (no records): 2/2"), std::string::npos) << one.err;
  const Result both = faprobe("report s1.jsonl s2.jsonl");
  EXPECT_EQ(both.status, 0) << both.err;
  EXPECT_EQ(both.err.find("missing shard"), std::string::npos) << both.err;
}

// Two merges into one new --out at once: whichever order the scheduler gives them, exactly one writes it and
// the other says so in one line (before its work, or at the end if both passed the first check).
TEST_F(CliMerge, TwoMergesIntoOneNewOutLeaveExactlyOneResult) {
  for (int round = 0; round < 3; ++round) {
    const std::string out = "m" + std::to_string(round) + ".jsonl";
    const Result both = shell("{ ('" FAPROBE_BINARY "' merge s1.jsonl s2.jsonl --out " + out +
                              " 2>a.txt; echo $? >a.status) & ('" FAPROBE_BINARY "' merge s2.jsonl s1.jsonl --out " +
                              out + " 2>b.txt; echo $? >b.status) & wait; }");
    ASSERT_EQ(both.status, 0);
    const std::string a = read_file(path("a.status")), b = read_file(path("b.status"));
    EXPECT_TRUE((a == "0\n" && b == "2\n") || (a == "2\n" && b == "0\n")) << a << b;
    const std::string loser = read_file(path(a == "2\n" ? "a.txt" : "b.txt"));
    EXPECT_TRUE(loser.find("exists; merge never overwrites") != std::string::npos ||
                loser.find("was created by another process") != std::string::npos)
        << loser;
    EXPECT_EQ(read_jsonl(path(out).string()).size(), lines_of("s1.jsonl").size() + lines_of("s2.jsonl").size());
  }
}

TEST_F(CliMerge, ALineLongerThanAnyRecordIsBadInputNamingFileAndLine) {
  const std::string huge = "{\"impl\": \"" + std::string(4 << 20, 'x') + "\"}\n";
  write("huge.jsonl", read_file(path("s1.jsonl")) + huge);
  write("huge.json", "{\"schema\": \"faprobe/1\",\n \"records\": [" + huge + "]}\n");
  const std::string jsonl_line = "huge.jsonl:" + std::to_string(lines_of("s1.jsonl").size() + 1) + ": a line of ";
  const std::pair<const char*, std::string> cases[] = {{"report huge.jsonl", "FILE " + jsonl_line},
                                                       {"merge huge.jsonl s2.jsonl --out m.jsonl", "PART " + jsonl_line},
                                                       {"compare s1.jsonl huge.jsonl", jsonl_line},
                                                       {"report huge.json", "FILE huge.json:2: a line of "}};
  for (const auto& [command, fragment] : cases) {
    const Result refused = faprobe(command);
    EXPECT_EQ(refused.status, 2) << command << "\n" << refused.err;
    EXPECT_NE(refused.err.find(fragment), std::string::npos) << command << "\n" << refused.err;
    EXPECT_NE(refused.err.find("more than the 1 MiB"), std::string::npos) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  }
  EXPECT_FALSE(fs::exists(path("m.jsonl")));
}

}  // namespace
}  // namespace faprobe
