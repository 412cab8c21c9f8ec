// `faprobe compare` and `faprobe report` end to end: exit statuses (0 no regression, 1 a regression, 2 bad
// input), the outputs, and report's round trips. Timings are never asserted: a slower NEW is made by editing
// a real run's records (its raw samples scaled), so the verdicts are known.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"

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
    // These tests are about compare's verdicts on given samples. On a busy CI machine the fixture's records can
    // carry time_s.contended, which compare shows and never judges; base.jsonl (and every file edited from it)
    // is written without it. base.json, and measured.jsonl (the sweep's own JSONL, which base.csv and base.md
    // were written from), keep what was measured.
    std::filesystem::copy_file(path("base.jsonl"), path("measured.jsonl"));
    std::string text;
    for (const Record& record : read_jsonl(path("base.jsonl").string())) {
      nlohmann::json value = record;
      if (value["time_s"].is_object()) value["time_s"].erase("contended");
      text += value.dump() + "\n";
    }
    write("base.jsonl", text);
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
  EXPECT_NE(same.out.find("4 pairs: 0 slower, 0 faster, "), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("no regression"), std::string::npos) << same.out;
  const nlohmann::json diff = nlohmann::json::parse(read_file(path("diff.json")));
  EXPECT_EQ(diff["kind"], "compare");
  // base.json keeps the measured contention (SetUp): a pair measured on a busy machine is contended, else same.
  EXPECT_EQ(diff["summary"]["same"].get<int>() + diff["summary"]["contended"].get<int>(), 4);
  EXPECT_NE(read_file(path("diff.md")).find("| cpu.tiled |"), std::string::npos);
}

TEST_F(CliCompare, ASlowerRunIsARegression) {
  // BASE's samples made tight too (all at its slowest, 0.1 % apart): on a loaded machine a real run's samples
  // can spread so far that even NEW above all of them leaves the ratio's interval too wide to call.
  edited("tight.jsonl", [](nlohmann::json& r) { make_slower(r, 1.0); });
  edited("slow.jsonl", [](nlohmann::json& r) {
    make_slower(r, 1.0);
    if (r["impl"] == "cpu.tiled") make_slower(r, 1.5);
  });
  const Result slower = faprobe("compare tight.jsonl slow.jsonl");
  EXPECT_EQ(slower.status, 1) << slower.out << slower.err;
  EXPECT_NE(slower.out.find("2 slower"), std::string::npos) << slower.out;
  EXPECT_NE(slower.out.find("REGRESSION"), std::string::npos) << slower.out;
  // Faster is not a regression (tests/test_compare.cpp covers the threshold's and alpha's effect).
  EXPECT_EQ(faprobe("compare slow.jsonl tight.jsonl").status, 0);
  // The comparison as JSON on stdout, the table on stderr.
  const Result json = faprobe("compare tight.jsonl slow.jsonl --json -");
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

// BASE timed, NEW a verify run of the same pairs: every pair is "timed → not timed", a regression as
// "verified → not checked" is, and counted (the counts add up to the pairs; without it: "0 slower ... no
// regression", exit 0).
TEST_F(CliCompare, APairNoLongerTimedIsARegressionAndEveryPairIsCounted) {
  const Result verified = faprobe("verify --config tiny.json --out verified.jsonl");
  ASSERT_EQ(verified.status, 0) << verified.err;
  const Result gate = faprobe("compare base.jsonl verified.jsonl --json diff.json");
  EXPECT_EQ(gate.status, 1) << gate.out << gate.err;
  EXPECT_NE(gate.out.find("timed → not timed  REGRESSION"), std::string::npos) << gate.out;
  EXPECT_NE(gate.out.find("4 pairs: 0 slower, 0 faster, 0 same, 0 noise, 0 untested, 0 contended, 4 not timed"), std::string::npos)
      << gate.out;
  const nlohmann::json summary = nlohmann::json::parse(read_file(path("diff.json")))["summary"];
  int counted = 0;
  for (const char* count : {"slower", "faster", "same", "noise", "untested", "not_timed"}) counted += summary[count].get<int>();
  EXPECT_EQ(counted, summary["pairs"].get<int>()) << summary;
  EXPECT_EQ(summary["regressions"], 4);
  // The other way round, NEW timed where BASE was not, is no regression.
  EXPECT_EQ(faprobe("compare verified.jsonl base.jsonl").status, 0);
}

// Times that no run can have measured are bad input, naming the file, the line and the field: before, a
// median of 0 or below made the pair vanish from the counts, and a negative sample or a subnormal median
// gave ratios of -inf or NaN.
TEST_F(CliCompare, ImpossibleTimesAreBadInput) {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> forged = {
      {[](nlohmann::json& t) { t["median"] = 0; }, "time_s.median: 0 is not a time"},
      {[](nlohmann::json& t) { t["median"] = -1e-3; }, "time_s.median: -0.001 is not a time"},
      {[](nlohmann::json& t) { t["median"] = nullptr; }, "time_s.median: expected a number of seconds, found null"},
      {[](nlohmann::json& t) { t["median"] = 5e-320; }, "time_s.median: 5e-320 is not a time"},
      {[](nlohmann::json& t) { t["mean"] = 0; }, "time_s.mean: 0 is not a time"},
      {[](nlohmann::json& t) { t["samples_s"][3] = -1e-4; }, "time_s.samples_s: -0.0001 is not a time"},
      {[](nlohmann::json& t) { t["samples_s"][0] = 1e-310; }, "time_s.samples_s: 1e-310 is not a time"},
      {[](nlohmann::json& t) { t["q1"] = "fast"; }, "time_s.q1: expected a number of seconds, found string"},
  };
  for (const auto& [forge, message] : forged) {
    int line = 0;
    edited("forged.jsonl", [&, &forge = forge](nlohmann::json& r) {
      if (++line == 3) forge(r["time_s"]);
    });
    const Result bad = faprobe("compare base.jsonl forged.jsonl");
    EXPECT_EQ(bad.status, 2) << message << "\n" << bad.out << bad.err;
    EXPECT_NE(bad.err.find("NEW forged.jsonl:3: not a faprobe record: " + message), std::string::npos) << bad.err;
  }
}

// A file that is not what it should be is named with the line or record, the field and what was expected,
// not with the JSON library's words ("type must be string, but is number", "key 'impl' not found").
TEST_F(CliCompare, ErrorsNameTheFileTheRecordAndTheField) {
  int line = 0;
  edited("device.jsonl", [&](nlohmann::json& r) {
    if (++line == 2) r["device"] = 5;
  });
  nlohmann::json document = nlohmann::json::parse(read_file(path("base.json")));
  document["records"][1]["case"]["dtype"] = nullptr;
  write("dtype.json", document.dump(2));
  document.erase("records");
  write("metadata.json", document.dump(2));  // a document without "records"
  write("line.jsonl", R"({"schema": "faprobe/1", "host": {}})" "\n");
  ASSERT_EQ(faprobe("compare base.jsonl base.json --json diff.json").status, 0);
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"compare base.jsonl device.jsonl", "NEW device.jsonl:2: not a faprobe record: device: expected a string, found 5"},
           {"report dtype.json", "FILE dtype.json: record 2: not a faprobe record: case.dtype: expected a string, found null"},
           {"compare base.jsonl metadata.json", "NEW metadata.json: one JSON object with neither \"records\""},
           {"report line.jsonl", "FILE line.jsonl: one JSON object with neither \"records\""},
           {"compare diff.json base.jsonl", "BASE diff.json: a comparison (the --json of faprobe compare), not the results of a run"},
           {"merge diff.json --out m.jsonl", "PART diff.json: a comparison"}}) {
    const Result bad = faprobe(args);
    EXPECT_EQ(bad.status, 2) << args << "\n" << bad.err;
    EXPECT_NE(bad.err.find(message), std::string::npos) << args << "\n" << bad.err;
    EXPECT_EQ(bad.err.find("json.exception"), std::string::npos) << args << "\n" << bad.err;
  }
}

// An output that is one of compare's inputs, by any name (./, a symbolic link, a hard link), is refused
// before anything is read, and the input is left as it was.
TEST_F(CliCompare, AnOutputThatIsAnInputIsRefused) {
  fs::create_symlink("base.json", path("link.json"));
  fs::create_hard_link(path("base.jsonl"), path("hard.jsonl"));
  const std::string jsonl = read_file(path("base.jsonl")), json = read_file(path("base.json"));
  for (const std::string args : {"compare base.jsonl base.json --md base.json",
                                  "compare base.jsonl base.json --json ./base.jsonl",
                                  "compare base.jsonl base.json --md link.json",
                                  "compare base.jsonl base.json --json hard.jsonl",
                                  "compare --base base.jsonl --new base.json --json base.json",
                                  "compare base.json --baseline-impl cpu.naive --md link.json"}) {
    const Result bad = faprobe(args);
    EXPECT_EQ(bad.status, 2) << args << "\n" << bad.err;
    EXPECT_NE(bad.err.find("is also an input"), std::string::npos) << args << "\n" << bad.err;
    EXPECT_EQ(read_file(path("base.jsonl")), jsonl) << args;
    EXPECT_EQ(read_file(path("base.json")), json) << args;
  }
}

// Starts `faprobe ARGS` in the test's directory with its stdout into a one-page pipe that nobody reads (its
// stderr to stderr.txt) and waits for its first bytes there: faprobe is then writing its table or a document
// to stdout, more than the pipe holds, and cannot get past it to the files that follow until the pipe is
// read. Then `signal`; the pipe is drained (so that nothing can block), and the exit status returned (-1:
// killed by a signal; -2: nothing came; -3: no pipe of one page).
int signal_while_writing_stdout(const fs::path& directory, const std::string& args, int signal) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -3;
  ::fcntl(fds[0], F_SETPIPE_SZ, 4096);  // one page
  if (::fcntl(fds[0], F_GETPIPE_SZ) > 4096) {  // the outputs below are larger than this; not a 64 KiB pipe
    ::close(fds[0]);
    ::close(fds[1]);
    return -3;
  }
  const std::string command = "exec '" FAPROBE_BINARY "' " + args;
  const pid_t child = fork();
  if (child == 0) {
    const int err = ::open((directory / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (::chdir(directory.c_str()) != 0 || err < 0 || ::dup2(fds[1], STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) _exit(99);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  ::close(fds[1]);
  int queued = 0, raw = 0;
  bool ended = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::ioctl(fds[0], FIONREAD, &queued) == 0 && queued == 0 && std::chrono::steady_clock::now() < deadline) {
    if ((ended = waitpid(child, &raw, WNOHANG) == child)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool writing = queued > 0;
  if (!ended) ::kill(child, writing ? signal : SIGKILL);
  char buffer[1 << 16];
  while (::read(fds[0], buffer, sizeof(buffer)) > 0) {
  }
  ::close(fds[0]);
  if (!ended) waitpid(child, &raw, 0);
  if (!writing) return -2;
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

// The documents a command would have written after stdout, and any temporary file of them, are absent.
void expect_nothing_written(const fs::path& directory, const std::vector<std::string>& documents) {
  for (const std::string& name : documents) EXPECT_FALSE(fs::exists(directory / name)) << name;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory))
    EXPECT_EQ(entry.path().filename().string().find(".partial."), std::string::npos) << entry.path();
}

// The first SIGTERM or SIGINT ends compare, report and merge at once with 130, whatever they are doing (here:
// blocked on a full stdout), and leaves no document, whole or half.
TEST_F(CliCompare, TheFirstSignalEndsCompareReportAndMergeWith130) {
  std::string many;  // 50 seeds of the run's 4 pairs: a table larger than the pipe
  for (int seed = 0; seed < 50; ++seed) {
    for (const Record& record : read_jsonl(path("base.jsonl").string())) {
      nlohmann::json value = record;
      value["case"]["seed"] = seed;
      many += value.dump() + "\n";
    }
  }
  write("many.jsonl", many);
  EXPECT_EQ(signal_while_writing_stdout(directory_, "compare many.jsonl many.jsonl --json d.json --md d.md", SIGTERM), 130)
      << read_file(path("stderr.txt"));
  expect_nothing_written(directory_, {"d.json", "d.md"});
  EXPECT_EQ(signal_while_writing_stdout(directory_, "report many.jsonl --json r.json --csv r.csv", SIGINT), 130)
      << read_file(path("stderr.txt"));
  expect_nothing_written(directory_, {"r.json", "r.csv"});
  for (const std::string shard : {"1/2", "2/2"}) {
    const Result part = faprobe("sweep --config tiny.json --shard " + shard + " --out part" + shard.substr(0, 1) + ".jsonl");
    ASSERT_EQ(part.status, 0) << part.err;
  }
  // merge writes --out, then the --json document (on stdout, where it blocks), then --csv.
  EXPECT_EQ(signal_while_writing_stdout(directory_, "merge part1.jsonl part2.jsonl --out m.jsonl --json - --csv m.csv",
                                        SIGTERM), 130)
      << read_file(path("stderr.txt"));
  expect_nothing_written(directory_, {"m.csv"});
}

TEST_F(CliCompare, ReportRebuildsEveryFormat) {
  // From the sweep's own JSONL (base.jsonl lost any contention SetUp erased, which base.csv and base.md show).
  const Result from_jsonl = faprobe("report measured.jsonl --csv r.csv --md r.md");
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
