// The command line end to end: the faprobe binary on tiny configs, its files, its exit statuses, one-line
// errors for bad input, --save + verify of files, and a sweep interrupted midway then resumed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "npy.hpp"
#include "writers.hpp"

namespace fs = std::filesystem;

namespace faprobe {
namespace {

struct Result {
  int status = -1;
  std::string out, err;
};

std::string read_file(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() /
                 ("faprobe-cli-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  fs::path path(const std::string& name) const { return directory_ / name; }

  // Runs `faprobe ARGS` in the test's directory through the shell; captures stdout and stderr.
  Result faprobe(const std::string& args) const {
    const std::string command = "cd '" + directory_.string() + "' && '" FAPROBE_BINARY "' " + args + " >stdout.txt 2>stderr.txt";
    const int raw = std::system(command.c_str());
    Result result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    result.out = read_file(path("stdout.txt"));
    result.err = read_file(path("stderr.txt"));
    return result;
  }

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }

  fs::path directory_;
};

constexpr const char* kTinyConfig = R"({"impl": "cpu.naive,cpu.tiled", "seq": "17,64", "heads": 2,
  "head_dim": 16, "mask": "causal", "min_samples": 2, "min_time": 0, "max_noise": 100, "max_time": 1, "warmup": 0})";

TEST_F(Cli, SweepWritesEveryFormatWithTheSchemaFields) {
  write("tiny.json", kTinyConfig);
  const Result run = faprobe("sweep --config tiny.json --out r.jsonl --json r.json --csv r.csv --md r.md");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("cpu.tiled"), std::string::npos);
  const nlohmann::json document = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_EQ(document["schema"], "faprobe/1");
  for (const char* field : {"version", "git_revision", "command", "time", "host", "devices", "rates"}) {
    EXPECT_TRUE(document.contains(field)) << field;
  }
  ASSERT_EQ(document["records"].size(), 4u);
  for (const auto& record : document["records"]) {
    EXPECT_EQ(record["status"], "ok");
    EXPECT_TRUE(record["verify"]["passed"].get<bool>());
    EXPECT_GE(record["time_s"]["samples"].get<int>(), 2);
    EXPECT_GT(record["gflops"].get<double>(), 0.0);
    EXPECT_GT(record["memory"]["peak_bytes"].get<double>(), 0.0);
  }
  EXPECT_EQ(read_jsonl(path("r.jsonl").string()).size(), 4u);
  std::istringstream csv(read_file(path("r.csv")));
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 5);
  EXPECT_NE(read_file(path("r.md")).find("| cpu.naive |"), std::string::npos);
}

TEST_F(Cli, ListShowsImplementationsAndSupport) {
  const Result run = faprobe("list --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json listing = nlohmann::json::parse(run.out);
  ASSERT_GE(listing["implementations"].size(), 4u);
  EXPECT_EQ(listing["implementations"][0]["name"], "cpu.naive");
}

TEST_F(Cli, BadInputIsOneLineAndExitStatusTwo) {
  write("broken.json", "{\n  \"seq\": 512,\n  \"heads\": ,\n}");
  write("unknown.json", R"({"sequence": 512})");
  const std::pair<std::string, std::string> cases[] = {
      {"sweep --impl cpu.fast", "unknown implementation 'cpu.fast'"},
      {"sweep --head-dim 0", "--head-dim"},
      {"sweep --heads 8 --kv-heads 3", "does not divide"},
      {"sweep --seq 512..64", "empty"},
      {"sweep --seq 99999999999999999999999", "too large"},
      {"sweep --dtype fp64", "allowed: fp32, fp16, bf16"},
      {"sweep --config broken.json", "line 3, column"},
      {"sweep --config unknown.json", "unknown key \"sequence\""},
      {"sweep --config missing.json", "cannot open"},
      {"sweep --mem-limit lots", "not a size"},
      {"sweep --resume", "--resume needs --out"},
      {"sweep --no-such-flag", "no-such-flag"},
      {"run --seq 17,64 --impl cpu.tiled", "one case"},
      {"verify --q q.npy --k k.npy --v v.npy --o o.npy", "--q q.npy"},
      {"", "subcommand"},
  };
  for (const auto& [args, fragment] : cases) {
    const Result run = faprobe(args);
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_NE(run.err.find(fragment), std::string::npos) << args << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
  }
}

TEST_F(Cli, UnsupportedAndOverLimitCasesAreRecordedWithReasons) {
  const Result run = faprobe("sweep --impl cpu.naive,cpu.decode --seq 4096 --heads 64 --mem-limit 100MB "
                             "--max-time 1 --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].status, Status::skipped);
  EXPECT_NE(records[0].reason.find("needs 8.9 GB, limit 100.0 MB"), std::string::npos) << records[0].reason;
  EXPECT_EQ(records[1].status, Status::unsupported);
  EXPECT_EQ(faprobe("sweep --impl cpu.decode --seq 64 --strict --out s.jsonl").status, 2);
}

TEST_F(Cli, SavedOutputsVerifyAndACorruptedOutputDoesNot) {
  const Result run = faprobe("run --impl cpu.tiled --seq 33 --seq-q 17 --heads 4 --kv-heads 2 --head-dim 24 "
                             "--dtype bf16 --mask causal --min-samples 1 --min-time 0 --save saved");
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* name : {"q.npy", "k.npy", "v.npy", "o.npy", "case.json"}) EXPECT_TRUE(fs::exists(path("saved") / name));
  const std::string files = "--q saved/q.npy --k saved/k.npy --v saved/v.npy --o saved/o.npy";
  const Result good = faprobe("verify " + files);  // dtype and mask come from saved/case.json
  EXPECT_EQ(good.status, 0) << good.out << good.err;
  EXPECT_NE(good.err.find("mask causal from"), std::string::npos) << good.err;
  EXPECT_EQ(faprobe("verify " + files + " --mask none").status, 1);  // wrong without the causal mask

  HostTensor output = read_npy((path("saved") / "o.npy").string(), "--o");
  output.set(output.offset(0, 16, 3) + 5, output.get(output.offset(0, 16, 3) + 5) + 0.05f);
  write_npy((path("saved") / "o.npy").string(), output);
  const Result bad = faprobe("verify " + files + " --mask causal");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("row 16"), std::string::npos) << bad.out;

  const Result mismatched = faprobe("verify --q saved/q.npy --k saved/q.npy --v saved/v.npy --o saved/o.npy");
  EXPECT_EQ(mismatched.status, 2);
  EXPECT_NE(mismatched.err.find("--k"), std::string::npos) << mismatched.err;
}

TEST_F(Cli, VerifyFindsNoMismatchOnASmallMatrix) {
  const Result run = faprobe("verify --seq 1,17,129 --seq-q 17 --mode prefill,decode --kv-heads 8,1 "
                             "--dtype fp32,bf16 --mask none,causal --json v.json");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  const nlohmann::json document = nlohmann::json::parse(read_file(path("v.json")));
  int checked = 0;
  for (const auto& record : document["records"]) {
    if (record["status"] == "unsupported") continue;
    EXPECT_EQ(record["status"], "ok") << record.dump();
    EXPECT_EQ(record["time_s"], nullptr);
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

TEST_F(Cli, DefaultVerifyRunsTheCiMatrixAndPasses) {
  const Result run = faprobe("verify --out v.jsonl");  // configs/ci-verify.json, embedded
  ASSERT_EQ(run.status, 0) << run.err;
  const auto records = read_jsonl(path("v.jsonl").string());
  int checked = 0;
  for (const Record& record : records) {
    if (record.status == Status::unsupported) continue;
    EXPECT_EQ(record.status, Status::ok) << record.impl << " " << record.c.label() << ": " << record.reason;
    checked += record.verify.has_value();
  }
  EXPECT_GE(checked, 1000);
}

TEST_F(Cli, InterruptedSweepKeepsFinishedRecordsAndResumeDoesNotRedoThem) {
  const std::string args = "sweep --impl cpu.naive,cpu.tiled --seq 32..2048 --heads 2 --head-dim 16 "
                           "--min-samples 1 --min-time 0.3 --max-noise 0 --max-time 1 --out r.jsonl";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (chdir(directory_.c_str()) != 0) _exit(99);
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
    execl("/bin/sh", "sh", "-c", ("exec '" FAPROBE_BINARY "' " + args).c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  // Wait for three finished records, then interrupt as Ctrl-C would.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::size_t finished = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream text(read_file(path("r.jsonl")));
    finished = 0;
    for (std::string line; std::getline(text, line);) ++finished;
    if (finished >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(finished, 3u);
  kill(child, SIGINT);
  int raw = 0;
  waitpid(child, &raw, 0);
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 130);
  const auto before = read_jsonl(path("r.jsonl").string());
  ASSERT_GE(before.size(), 3u);
  ASSERT_LT(before.size(), 14u) << "the sweep finished before it was interrupted";

  const Result resumed = faprobe(args + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const auto after = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(after.size(), 14u);  // 7 lengths × 2 implementations, each exactly once
  std::set<std::string> keys;
  for (const Record& record : after) EXPECT_TRUE(keys.insert(record.key()).second) << record.key();
  for (std::size_t i = 0; i < before.size(); ++i) {  // the finished records were kept, not redone
    EXPECT_EQ(nlohmann::json(after[i]), nlohmann::json(before[i]));
  }
  EXPECT_NE(resumed.err.find(std::to_string(before.size()) + " resumed"), std::string::npos) << resumed.err;
}

}  // namespace
}  // namespace faprobe
