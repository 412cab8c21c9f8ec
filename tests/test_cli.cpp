// The command line end to end: the faprobe binary on tiny configs, its files, its exit statuses, one-line
// errors for bad input, --save + verify of files, a sweep interrupted midway then resumed, --strict, the
// list's devices and backend table, faults with and without --isolate (planted through the
// FAPROBE_TEST_FAULT hook of src/harness/run/runner.hpp), and --interleave.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "harness/io/npy.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {
namespace {

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
  ASSERT_TRUE(document["devices"].is_array());
  EXPECT_TRUE(!document["devices"].empty() || !document["no_device_reason"].get<std::string>().empty());
  // The host's vector ISA in use (what -march gave), and the CPU's own: the same for a native build.
  const nlohmann::json& host = document["host"];
  for (const char* field : {"march", "vector_isa", "vector_extensions", "cpu_vector_isa"}) {
    EXPECT_TRUE(host.contains(field)) << field;
  }
  EXPECT_NE(host["vector_isa"], "");
  if (host["march"] == "native") {
    EXPECT_EQ(host["vector_isa"], host["cpu_vector_isa"]) << host.dump();
  }
  ASSERT_EQ(document["records"].size(), 4u);
  for (const auto& record : document["records"]) {
    EXPECT_EQ(record["status"], "ok");
    EXPECT_TRUE(record["verify"]["passed"].get<bool>());
    EXPECT_GE(record["time_s"]["samples"].get<int>(), 2);
    EXPECT_GT(record["gflops"].get<double>(), 0.0);
    EXPECT_GT(record["memory"]["peak_bytes"].get<double>(), 0.0);
    EXPECT_EQ(record["time_s"]["order"], "sequential");  // without --interleave
    EXPECT_FALSE(record["time_s"].contains("interleaved_with"));
    EXPECT_NEAR(record["bandwidth_fraction"].get<double>(),
                record["gbytes_per_s"].get<double>() / document["rates"]["memory_gbytes_per_s"].get<double>(), 1e-9);
  }
  EXPECT_FALSE(document["rates"].contains("gpu"));  // measured only for a plan that times a GPU implementation
  EXPECT_EQ(read_jsonl(path("r.jsonl").string()).size(), 4u);
  std::istringstream csv(read_file(path("r.csv")));
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 5);
  EXPECT_NE(read_file(path("r.md")).find("| cpu.naive |"), std::string::npos);
}

TEST_F(Cli, CalibrateReportsTheHostAndTheGpuOrWhyThereIsNone) {
  const Result json = faprobe("calibrate --json --time 0.1");
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json document = nlohmann::json::parse(json.out);
  EXPECT_GT(document["fp32_gemm_gflops"].get<double>(), 0.0);
  EXPECT_GT(document["memory_gbytes_per_s"].get<double>(), 0.0);
  ASSERT_TRUE(document.contains("gpu"));
  const Result text = faprobe("calibrate --time 0.05");
  ASSERT_EQ(text.status, 0) << text.err;
  if (document["gpu"].is_null()) {  // this machine (or this build) has no GPU: say why, in both forms
    const std::string reason = document["no_device_reason"].get<std::string>();
    EXPECT_FALSE(reason.empty());
    EXPECT_NE(text.out.find("no GPU: " + reason), std::string::npos) << text.out;
  } else {
    EXPECT_FALSE(document.contains("no_device_reason"));
    EXPECT_GT(document["gpu"]["copy_gbytes_per_s"].get<double>(), 0.0);
    EXPECT_GT(document["gpu"]["bf16_gemm_tflops"].get<double>(), 0.0);
    EXPECT_NE(text.out.find(document["gpu"]["name"].get<std::string>() + " bf16 GEMM: "), std::string::npos)
        << text.out;
  }
}

// The host's ceilings at a thread count, each the median of its repetitions with their range: `calibrate
// --threads N` and a run's --json "rates" (measured at the run's --threads) say how many threads and how far
// the rounds spread. Bad thread counts are one line naming the flag and what is allowed, exit 2.
TEST_F(Cli, CeilingsAreMeasuredAtTheRunsThreadsWithTheirRange) {
  auto expect_ceilings = [](const nlohmann::json& rates) {
    EXPECT_EQ(rates.at("threads"), 1) << rates.dump();
    for (const char* rate : {"fp32_gemm_gflops", "memory_gbytes_per_s"}) {
      const nlohmann::json& range = rates.at(std::string(rate) + "_range");
      ASSERT_EQ(range.size(), 2u) << rates.dump();
      EXPECT_GT(range[0].get<double>(), 0.0) << rate;
      EXPECT_LE(range[0].get<double>(), rates.at(rate).get<double>()) << rate;
      EXPECT_LE(rates.at(rate).get<double>(), range[1].get<double>()) << rate;
    }
    EXPECT_GE(rates.at("fp32_gemm_repetitions").get<int>(), 1);
    EXPECT_GE(rates.at("memory_repetitions").get<int>(), 1);
  };
  const Result calibrate = faprobe("calibrate --json --time 0.05 --threads 1");
  ASSERT_EQ(calibrate.status, 0) << calibrate.err;
  expect_ceilings(nlohmann::json::parse(calibrate.out));
  const Result text = faprobe("calibrate --time 0.05 --threads 1");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("), 1 thread\nfp32 GEMM: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" rounds (Eigen, 512x512, one product per thread)"), std::string::npos) << text.out;

  const Result run = faprobe("sweep --json r.json --impl cpu.naive --seq 17 --heads 2 --head-dim 16 --min-samples 1 "
                             "--min-time 0 --max-noise 100 --warmup 0 --threads 1");
  ASSERT_EQ(run.status, 0) << run.err;
  expect_ceilings(nlohmann::json::parse(read_file(path("r.json"))).at("rates"));
  EXPECT_NE(run.err.find("copy "), std::string::npos);
  EXPECT_NE(run.err.find(" GB/s (1 thread, medians of the calibration)\n"), std::string::npos) << run.err;

  for (const char* bad : {"0", "x", "2000"}) {
    const Result refused = faprobe(std::string("calibrate --time 0.05 --threads ") + bad);
    EXPECT_EQ(refused.status, 2) << bad << ": " << refused.err;
    EXPECT_EQ(refused.err, std::string("faprobe: --threads: '") + bad +
                               "' is not a thread count (allowed: 1 to 1024; default: all cores)\n");
    EXPECT_EQ(refused.out, "") << bad;  // refused before anything is measured
  }
}

// The part of `text` from `begin` up to `end` (both searched for; "" when `begin` is missing).
std::string between(const std::string& text, const std::string& begin, const std::string& end) {
  const std::size_t from = text.find(begin);
  if (from == std::string::npos) return "";
  const std::size_t to = text.find(end, from + begin.size());
  return text.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

// Whether some line of `text`, its spaces removed, is `squeezed`.
bool has_line(const std::string& text, const std::string& squeezed) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    line.erase(std::remove(line.begin(), line.end(), ' '), line.end());
    if (line == squeezed) return true;
  }
  return false;
}

// The implementation's entry in `list --json`, and its probe for one combination.
const nlohmann::json& listed(const nlohmann::json& listing, const std::string& name) {
  for (const auto& entry : listing["implementations"])
    if (entry["name"] == name) return entry;
  throw std::runtime_error("not listed: " + name);
}

const nlohmann::json& probe_of(const nlohmann::json& entry, const std::string& dtype, int head_dim,
                               const std::string& mode, bool aligned) {
  for (const auto& probe : entry["support"])
    if (probe["dtype"] == dtype && probe["head_dim"] == head_dim && probe["mode"] == mode &&
        probe["mask"] == "causal" && probe["aligned"] == aligned)
      return probe;
  throw std::runtime_error("no probe");
}

TEST_F(Cli, ListShowsDevicesAndTheBackendTableWithReasons) {
  const Result run = faprobe("list --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json listing = nlohmann::json::parse(run.out);
  ASSERT_GE(listing["implementations"].size(), 4u);
  EXPECT_EQ(listing["implementations"][0]["name"], "cpu.naive");
  // Devices: the CUDA devices, or none and why.
  ASSERT_TRUE(listing["devices"].is_array());
  if (listing["devices"].empty()) {
    EXPECT_FALSE(listing["no_device_reason"].get<std::string>().empty());
  } else {
    for (const char* field : {"name", "compute_capability", "sm_count", "memory_total_bytes", "l2_bytes"})
      EXPECT_TRUE(listing["devices"][0].contains(field)) << field;
  }
  EXPECT_FALSE(listing["host"]["cpu_model"].get<std::string>().empty());
  // Every implementation: 4 dtypes × 8 head dims × 3 masks × 2 modes × 2 alignments, each with its answer.
  for (const auto& entry : listing["implementations"]) {
    EXPECT_EQ(entry["support"].size(), 384u) << entry["name"];
    for (const auto& probe : entry["support"])
      EXPECT_EQ(probe["supported"].get<bool>(), probe["reason"].get<std::string>().empty()) << probe.dump();
  }
  const auto& tiled = listed(listing, "cpu.tiled");
  EXPECT_TRUE(probe_of(tiled, "fp32", 100, "prefill", false)["supported"].get<bool>());
  EXPECT_FALSE(probe_of(tiled, "fp8_e4m3", 128, "prefill", true)["supported"].get<bool>());
  const auto& decode = listed(listing, "cpu.decode");
  EXPECT_TRUE(probe_of(decode, "bf16", 72, "decode", false)["supported"].get<bool>());
  const std::string prefill_reason = probe_of(decode, "bf16", 72, "prefill", true)["reason"];
  EXPECT_FALSE(prefill_reason.empty());
  // cuDNN's SDPA is listed like faprobe's own kernels; without a GPU each probe names what is missing.
  const auto& cudnn = listed(listing, "cuda.cudnn");
  if (listing["devices"].empty()) {
    for (const auto& probe : cudnn["support"]) {
      EXPECT_NE(probe["reason"].get<std::string>().find(listing["no_device_reason"].get<std::string>()),
                std::string::npos) << probe.dump();
    }
  }

  // The terminal table: rows split by mode (and mask) only for the implementation where they matter, and
  // the reasons under the blocks.
  const Result table = faprobe("list --all");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("devices:"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("  cuda "), std::string::npos) << table.out;
  const std::string decode_text = between(table.out, "\ncpu.decode (", "\ncpu.decode-splitk (");
  // Split by mask too: the decode implementations refuse causal-top-left.
  EXPECT_TRUE(has_line(decode_text, "fp32prefillnone✗✗✗✗✗✗✗✗")) << decode_text;
  EXPECT_TRUE(has_line(decode_text, "fp32decodenone✓✓✓✓✓✓✓✓")) << decode_text;
  EXPECT_TRUE(has_line(decode_text, "fp32decodecausal-top-left✗✗✗✗✗✗✗✗")) << decode_text;
  EXPECT_NE(decode_text.find("✗ " + prefill_reason), std::string::npos) << decode_text;
  const std::string tiled_text = between(table.out, "\ncpu.tiled (", "\ncpu.decode (");
  EXPECT_EQ(tiled_text.find("prefill"), std::string::npos) << tiled_text;  // the mode changes nothing there
  EXPECT_TRUE(has_line(tiled_text, "fp32✓✓✓✓✓✓✓✓")) << tiled_text;
  EXPECT_TRUE(has_line(tiled_text, "fp8_e4m3✗✗✗✗✗✗✗✗")) << tiled_text;
}

TEST_F(Cli, BadInputIsOneLineAndExitStatusTwo) {
  write("broken.json", "{\n  \"seq\": 512,\n  \"heads\": ,\n}");
  write("unknown.json", R"({"sequence": 512})");
  write("dup.json", R"({"seq": 64, "seq_q": 3, "seq-q": 4})");
  // A FIFO nobody writes: opening it for reading would block the run forever (no writer ever comes).
  ASSERT_EQ(::mkfifo(path("fifo.json").c_str(), 0600), 0);
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
      {"sweep --isolate --no-isolate", "excludes"},
      {"sweep --isolate-timeout 0", "--isolate-timeout"},
      {"run --isolated-child not-a-job", "not a job"},
      {"verify --q q.npy --k k.npy --v v.npy --o o.npy", "--q q.npy"},
      {"", "subcommand"},
      {"frobnicate --seq 4", "unknown subcommand 'frobnicate' (allowed: list, sweep, verify, run, calibrate, probes, compare, report, merge, ab)"},
      {"calibrate --time nan", "--time: 'nan' is not a number"},
      {"calibrate --time 0", "--time: 0 is outside"},
      {"probes --seed -1", "--seed: -1 is below the minimum 0"},
      {"sweep --seq 1..2147483648:+1", "gives 2147483648 values"},
      {"sweep --seq 1:2..8", "--seq: '1:2..8' is not a range"},
      {"sweep --seq 1..60000:+1 --heads 1..64:+1", "the plan has"},
      {"sweep --config dup.json", "duplicate key \"seq-q\" (the same setting as \"seq_q\")"},
      {"sweep --config /dev/zero", "--config /dev/zero: is a character device, not a regular file"},
      {"sweep --config fifo.json", "--config fifo.json: is a FIFO, not a regular file"},
      {"sweep --config .", "is a directory"},
      {"verify --q fifo.json --k k.npy --v v.npy --o o.npy", "--q fifo.json: is a FIFO"},
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
}

TEST_F(Cli, Fp8CasesAreUnsupportedOnTheCpuWithTheReason) {
  const Result run = faprobe("run --impl cpu.tiled --dtype fp8_e4m3 --seq 64 --heads 2 --head-dim 16 "
                             "--min-samples 1 --min-time 0 --max-time 1 --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, Status::unsupported);
  EXPECT_NE(records[0].reason.find("fp8_e4m3 is not supported: CPU implementations compute on fp32, fp16 or bf16"),
            std::string::npos)
      << records[0].reason;
  EXPECT_NE(run.out.find("fp8_e4m3 is not supported"), std::string::npos) << run.out;
}

TEST_F(Cli, StrictMakesAnUnsupportedPairAnErrorInSweepVerifyAndRun) {
  const std::string tiny = " --seq 64 --heads 2 --head-dim 16 --min-samples 1 --min-time 0 --max-time 1";
  for (const std::string command : {"sweep", "verify", "run"}) {
    const Result strict = faprobe(command + " --impl cpu.decode --strict --out s.jsonl" + tiny);
    EXPECT_EQ(strict.status, 2) << command << "\n" << strict.err;
    EXPECT_NE(strict.err.find("--strict: cpu.decode does not support"), std::string::npos) << command << strict.err;
    EXPECT_EQ(std::count(strict.err.begin(), strict.err.end(), '\n'), 1) << command << "\n" << strict.err;
    const Result lenient = faprobe(command + " --impl cpu.decode --out l.jsonl" + tiny);
    // A verify that checked nothing at all has not passed (issue: it used to exit 0).
    EXPECT_EQ(lenient.status, command == "verify" ? 1 : 0) << command << "\n" << lenient.err;
    if (command == "verify") {
      EXPECT_NE(lenient.err.find("verify: nothing was checked"), std::string::npos) << lenient.err;
    }
    const auto records = read_jsonl(path("l.jsonl").string());
    ASSERT_EQ(records.size(), 1u) << command;
    EXPECT_EQ(records[0].status, Status::unsupported) << command;
    fs::remove(path("l.jsonl"));
  }
  // --strict screens every pair before running any: the supported cpu.tiled pair did not run either.
  const Result mixed = faprobe("sweep --impl cpu.tiled,cpu.decode --strict --out m.jsonl" + tiny);
  EXPECT_EQ(mixed.status, 2) << mixed.err;
  EXPECT_TRUE(!fs::exists(path("m.jsonl")) || read_file(path("m.jsonl")).empty());
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

  // Execution flags that checking files ignores say so, one line each, and the check still runs; a value
  // flag other than --mask and --dtype is refused.
  const Result ignored = faprobe("verify " + files + " --mask causal --strict --resume");
  EXPECT_EQ(ignored.status, 1) << ignored.err;  // the corrupted output above
  for (const char* flag : {"--strict", "--resume"}) {
    EXPECT_NE(ignored.err.find(std::string("verify: ") + flag + " has no effect when checking files"),
              std::string::npos)
        << flag << "\n" << ignored.err;
  }
  EXPECT_EQ(ignored.err.find("--mask has no effect"), std::string::npos) << ignored.err;
  for (const char* flag : {"--warmup 3", "--no-flush-l2", "--isolate"}) {
    const Result refused = faprobe("verify " + files + " " + flag);
    EXPECT_EQ(refused.status, 2) << flag;
    EXPECT_NE(refused.err.find(" cannot be combined with --q/--k/--v/--o"), std::string::npos) << refused.err;
  }
  const Result no_verify = faprobe("verify " + files + " --no-verify");
  EXPECT_EQ(no_verify.status, 2);
  EXPECT_EQ(no_verify.err, "faprobe: --no-verify makes `faprobe verify` check nothing\n");
}

// FAPROBE_CALIBRATION_SECONDS (how long the host's rates are measured before a run) is checked like a flag,
// before any file is opened, and the time used is in the --json document.
TEST_F(Cli, CalibrationTimeComesFromTheEnvironmentAndIsRecorded) {
  const std::string tiny = " --impl cpu.naive --seq 17 --heads 2 --head-dim 16 --min-samples 1 --min-time 0";
  for (const char* bad : {"fast", "0", "-1", "nan", "1e9"}) {
    const Result run = faprobe("sweep --out r.jsonl" + tiny, std::string("FAPROBE_CALIBRATION_SECONDS=") + bad);
    EXPECT_EQ(run.status, 2) << bad << ": " << run.err;
    EXPECT_EQ(run.err.rfind("faprobe: FAPROBE_CALIBRATION_SECONDS", 0), 0u) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_FALSE(fs::exists(path("r.jsonl"))) << bad;
  }
  const Result run = faprobe("sweep --json r.json" + tiny, "FAPROBE_CALIBRATION_SECONDS=0.02");
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json document = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_DOUBLE_EQ(document.at("rates").at("calibration_seconds").get<double>(), 0.02);
  EXPECT_GT(document.at("rates").at("fp32_gemm_gflops").get<double>(), 0.0);  // a quick calibration still measures
  EXPECT_GT(document.at("rates").at("memory_gbytes_per_s").get<double>(), 0.0);
}

// FAPROBE_MAX_CPU_ISA (the CPU kernels' cap, kernels/cpu/cpu_isa.hpp) is checked like a flag: a bad value is one
// line and exit 2 before anything runs, for sweep, verify and list; a good one reaches the record's details.
TEST_F(Cli, MaxCpuIsaIsCheckedBeforeAnythingRunsAndNamesThePathTaken) {
  const std::string tiny = " --impl cpu.tiled --seq 64 --heads 2 --head-dim 16 --min-samples 1 --min-time 0";
  for (const std::string& command : {"sweep --out r.jsonl" + tiny, "verify --out r.jsonl" + tiny, std::string("list")}) {
    const Result run = faprobe(command, "FAPROBE_MAX_CPU_ISA=avx2");
    EXPECT_EQ(run.status, 2) << command << ": " << run.err;
    EXPECT_EQ(run.err, "faprobe: FAPROBE_MAX_CPU_ISA: 'avx2' is not an instruction set level (allowed: portable, "
                       "avx512, avx512-bf16, amx)\n");
    EXPECT_FALSE(fs::exists(path("r.jsonl"))) << command;
  }
  for (const std::string& command : {"sweep --out r.jsonl" + tiny, std::string("list")}) {  // and FAPROBE_CPU_PATH
    const Result run = faprobe(command, "FAPROBE_CPU_PATH=amx");
    EXPECT_EQ(run.status, 2) << command << ": " << run.err;
    EXPECT_EQ(run.err, "faprobe: FAPROBE_CPU_PATH: 'amx' is not a code path (allowed: portable-fp32, avx512-fp32, "
                       "avx512-bf16, amx-bf16)\n");
    EXPECT_EQ(run.out, "") << command;
  }
  const Result run = faprobe("sweep --out r.jsonl" + tiny, "FAPROBE_MAX_CPU_ISA=portable");
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json record = nlohmann::json::parse(read_file(path("r.jsonl")));
  EXPECT_EQ(record.at("details").at("path"), "portable-fp32") << record.dump();
  const Result list = faprobe("list --json", "FAPROBE_MAX_CPU_ISA=portable");
  ASSERT_EQ(list.status, 0) << list.err;
  const nlohmann::json listing = nlohmann::json::parse(list.out);
  EXPECT_EQ(listing.at("cpu_kernel_isa").at("used"), "portable");
  EXPECT_EQ(listing.at("cpu_kernel_isa").at("cap"), "portable");
  // cpu.tiled's path per dtype and head_dim, as the cap leaves it: portable for all 3 × 3, each saying why.
  ASSERT_EQ(listing.at("cpu_tiled_paths").size(), 9u) << listing.at("cpu_tiled_paths").dump();
  for (const auto& entry : listing.at("cpu_tiled_paths")) {
    EXPECT_EQ(entry.at("path"), "portable-fp32") << entry.dump();
  }
  const Result text = faprobe("list", "FAPROBE_MAX_CPU_ISA=portable");
  EXPECT_NE(text.out.find("  cpu.tiled bf16 d64: portable-fp32"), std::string::npos) << text.out.substr(0, 2000);
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

// The tile variants: listed only with --variants (the plain list names how many there are), each with the
// implementation it is a variant of; run only when named, exactly or as cuda.fa3@*; a record names its tile, and
// plain emu.fa3 records the default tile of each case. An unknown variant is a usage error naming the form.
TEST_F(Cli, TileVariantsAreListedAndRunOnlyWhenNamed) {
  const Result plain = faprobe("list");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(plain.out.find("variants of cuda.fa2, cuda.fa3, emu.fa2, emu.fa3 (one tile each, run only when named): "
                           "faprobe list --variants"),
            std::string::npos)
      << plain.out;
  EXPECT_EQ(plain.out.find("emu.fa3@128x176"), std::string::npos) << "variants are not in the plain list";

  const Result listing_run = faprobe("list --variants --json");
  ASSERT_EQ(listing_run.status, 0) << listing_run.err;
  const nlohmann::json listing = nlohmann::json::parse(listing_run.out);
  std::set<std::string> variants;
  for (const auto& entry : listing.at("variants")) {
    variants.insert(entry.at("name").get<std::string>());
    const std::string name = entry.at("name");
    EXPECT_EQ(entry.at("variant_of").get<std::string>(), name.substr(0, name.find('@'))) << name;
  }
  for (const char* expected : {"cuda.fa3@128x176", "cuda.fa3@192x128", "emu.fa3@128x80", "cuda.fa2@64x64", "emu.fa2@128x32"})
    EXPECT_EQ(variants.count(expected), 1u) << expected;
  for (const auto& entry : listing.at("implementations"))
    EXPECT_FALSE(entry.contains("variant_of")) << entry.at("name");

  // bf16 d128 without a mask: plain emu.fa3 runs 128x176 (fa3/CMakeLists.txt), causal 128x128; emu.fa3@* runs
  // each tile built, and the ones not built for d128 say where they are.
  const Result run = faprobe("verify --impl emu.fa3,emu.fa3@* --seq 129 --heads 1 --head-dim 128 --dtype bf16 "
                             "--mask none,causal --out v.jsonl");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  std::map<std::string, std::string> tiles;  // "impl mask" -> the tile its record names
  for (const Record& record : read_jsonl(path("v.jsonl").string())) {
    const std::string key = record.impl + " " + std::string(to_string(record.c.mask));
    if (record.status == Status::unsupported) {
      tiles[key] = "unsupported: " + record.reason;
      continue;
    }
    EXPECT_EQ(record.status, Status::ok) << key << ": " << record.reason;
    tiles[key] = record.details.at("tile").get<std::string>();
  }
  EXPECT_EQ(tiles["emu.fa3 none"], "128x176");
  EXPECT_EQ(tiles["emu.fa3 causal"], "128x128");
  EXPECT_EQ(tiles["emu.fa3@128x176 causal"], "128x176");
  EXPECT_NE(tiles["emu.fa3@192x128 none"].find("the fa3 tile 192x128 is instantiated for fp16 d64, bf16 d64, fp8_e4m3 d64 only"),
            std::string::npos)
      << tiles["emu.fa3@192x128 none"];

  const Result plain_verify = faprobe("verify --impl emu.* --seq 17 --heads 1 --head-dim 64 --dtype fp16 --out w.jsonl");
  ASSERT_EQ(plain_verify.status, 0) << plain_verify.err;
  for (const Record& record : read_jsonl(path("w.jsonl").string()))
    EXPECT_EQ(record.impl.find('@'), std::string::npos) << "emu.* runs no variant: " << record.impl;

  const Result unknown = faprobe("verify --impl emu.fa3@1x1 --seq 17");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("--impl: unknown implementation 'emu.fa3@1x1'"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("cuda.fa3@*: faprobe list --variants"), std::string::npos) << unknown.err;
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

// An empty value ("--shard $UNSET" in a job script) is bad input for every option that takes a value, in
// every subcommand: one line naming the option, exit 2, before any work (without the check, `--shard ""` ran
// the whole plan and `--devices ""` ran without workers). Each option name is tried once, with the
// subcommand --help lists it under first.
TEST_F(Cli, AnEmptyValueIsBadInputForEveryOption) {
  std::map<std::string, std::string> options;  // option → a subcommand that has it
  for (const std::string sub : {"list", "sweep", "verify", "run", "calibrate", "probes", "compare", "report", "merge"}) {
    const Result help = faprobe(sub + " --help");
    ASSERT_EQ(help.status, 0) << sub;
    std::istringstream lines(help.out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch match;  // "  --shard TEXT   ..." (a flag has no type: "  --strict   ...")
      if (std::regex_search(line, match, std::regex(R"(^\s+(?:-\w,)?(--[a-z0-9-]+) [A-Z]+(\s|$))"))) {
        options.emplace(match[1].str(), sub);
      }
    }
  }
  ASSERT_GT(options.size(), 40u);  // the help's format was understood
  for (const std::string required : {"--shard", "--devices", "--out", "--json", "--config", "--plugin", "--impl"}) {
    EXPECT_EQ(options.count(required), 1u) << required;
  }
  auto expect_refused = [&](const std::string& args, const std::string& name) {
    const Result run = faprobe(args);
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_NE(run.err.find(name + ": the value is empty"), std::string::npos) << args << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
    EXPECT_TRUE(run.out.empty()) << args << "\n" << run.out;
  };
  for (const auto& [option, sub] : options) expect_refused(sub + " " + option + " ''", option);
  expect_refused("compare '' base.jsonl", "files");
  EXPECT_FALSE(fs::exists(path("faprobe-out")));  // nothing ran
}

TEST_F(Cli, InterruptedSweepKeepsFinishedRecordsAndResumeDoesNotRedoThem) {
  const std::string args = "sweep --impl cpu.naive,cpu.tiled --seq 32..2048 --heads 2 --head-dim 16 "
                           "--min-samples 1 --min-time 0.3 --max-noise 0 --max-time 1 --out r.jsonl";
  const pid_t child = start_in_background(args);
  ASSERT_GE(child, 0);
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
  EXPECT_EQ(interrupt_and_wait(child), 130);
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

// The hidden entry point of --isolate takes its job like user input: a case that the parent would have
// refused (kv_heads 0 would divide by zero) is a one-line error and exit 2, not a SIGFPE.
TEST_F(Cli, AnIsolatedChildRefusesAnImpossibleJob) {
  const std::string job = R"('{"impl": "cpu.tiled", "case": {"batch": 1, "heads": 4, "kv_heads": 0, "seq_q": 8,)"
                          R"( "seq_k": 8, "head_dim": 16, "dtype": "fp32", "mask": "none", "mode": "prefill"},)"
                          R"( "measure": {"warmup": 0, "min_samples": 1, "max_noise_percent": 1, "min_time_s": 0,)"
                          R"( "max_time_s": 1, "verify": true, "flush_l2": false, "threads": 1}, "timing": true,)"
                          R"( "mem_limit": 0, "rates": {"gemm_gflops": 10, "memory_gbytes_per_s": 10}}')";
  const Result refused = faprobe("run --isolated-child " + job);
  EXPECT_EQ(refused.status, 2) << refused.err;
  EXPECT_NE(refused.err.find("not a job: --kv-heads must be at least 1, got 0"), std::string::npos) << refused.err;
  std::string fixed = job;
  const std::string zero = "\"kv_heads\": 0";
  fixed.replace(fixed.find(zero), zero.size(), "\"kv_heads\": 2");
  const Result ran = faprobe("run --isolated-child " + fixed);
  EXPECT_EQ(ran.status, 0) << ran.err;
  EXPECT_NE(ran.out.find("faprobe-record {"), std::string::npos) << ran.out;
}

// Ctrl-C answers at once in calibrate (ten minutes asked for), as it does in a sweep.
TEST_F(Cli, CalibrateAnswersCtrlCAtOnce) {
  const pid_t child = start_in_background("calibrate --time 600");
  ASSERT_GE(child, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto interrupted_at = std::chrono::steady_clock::now();
  kill(child, SIGINT);
  int raw = 0;
  while (waitpid(child, &raw, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - interrupted_at > std::chrono::seconds(20)) {
      kill(child, SIGKILL);
      waitpid(child, &raw, 0);
      FAIL() << "calibrate did not stop on SIGINT";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 130);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - interrupted_at).count(), 5.0);
}

constexpr const char* kTwoCases = " --impl cpu.tiled --seq 17,64 --heads 2 --head-dim 16 --min-samples 2 "
                                  "--min-time 0 --max-noise 100 --max-time 1 --warmup 0 --out r.jsonl";

TEST_F(Cli, AThrowingCaseIsAFailedRecordAndTheSweepGoesOn) {
  for (const std::string isolation : {"", " --isolate"}) {
    fs::remove(path("r.jsonl"));
    const Result run = faprobe("sweep" + isolation + kTwoCases, "FAPROBE_TEST_FAULT=throw@17");
    EXPECT_EQ(run.status, 1) << isolation << run.err;  // docs/DESIGN.md: a failed case is exit status 1
    const auto records = read_jsonl(path("r.jsonl").string());
    ASSERT_EQ(records.size(), 2u) << isolation;
    EXPECT_EQ(records[0].c.seq_k, 17);
    EXPECT_EQ(records[0].status, Status::failed);
    EXPECT_NE(records[0].reason.find("planted error (throw)"), std::string::npos) << records[0].reason;
    EXPECT_EQ(records[1].status, Status::ok) << records[1].reason;
    EXPECT_EQ(records[1].details.value("isolated", false), !isolation.empty()) << records[1].details.dump();
  }
}

TEST_F(Cli, IsolatedCrashAndHangAreFailedRecordsAndTheNextCaseRuns) {
  const Result crash = faprobe("sweep --isolate" + std::string(kTwoCases), "FAPROBE_TEST_FAULT=crash@17");
  EXPECT_EQ(crash.status, 1) << crash.err;
  auto records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 2u) << crash.err;
  EXPECT_EQ(records[0].status, Status::failed);
  EXPECT_EQ(records[0].reason, "child exited with signal 11 (SIGSEGV)");
  EXPECT_EQ(records[0].impl, "cpu.tiled");
  EXPECT_EQ(records[1].status, Status::ok) << records[1].reason;
  EXPECT_TRUE(records[1].verify && records[1].verify->passed);
  EXPECT_GE(records[1].time->samples, 2);  // measured in the child like in the parent

  fs::remove(path("r.jsonl"));
  const auto start = std::chrono::steady_clock::now();
  const Result hang = faprobe("sweep --isolate --isolate-timeout 2" + std::string(kTwoCases),
                              "FAPROBE_TEST_FAULT=hang@17");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(hang.status, 1) << hang.err;
  records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 2u) << hang.err;
  EXPECT_EQ(records[0].status, Status::failed);
  EXPECT_EQ(records[0].reason, "timed out after 2 s (isolated)");
  EXPECT_EQ(records[1].status, Status::ok) << records[1].reason;
  EXPECT_LT(seconds, 30.0);

  // The config key does what the flag does, and the flag overrides it.
  write("isolated.json", R"({"isolate": true, "isolate_timeout": 2})");
  fs::remove(path("r.jsonl"));
  EXPECT_EQ(faprobe("sweep --config isolated.json" + std::string(kTwoCases), "FAPROBE_TEST_FAULT=hang@17").status, 1);
  records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].reason, "timed out after 2 s (isolated)");
  fs::remove(path("r.jsonl"));
  EXPECT_EQ(faprobe("sweep --config isolated.json --no-isolate" + std::string(kTwoCases),
                    "FAPROBE_TEST_FAULT=throw@17").status, 1);
  records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].details.value("isolated", false));

  // run and verify isolate the same way.
  const Result run = faprobe("run --isolate --impl cpu.tiled --seq 17 --heads 2 --head-dim 16 --min-samples 1 "
                             "--min-time 0", "FAPROBE_TEST_FAULT=crash");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.out.find("child exited with signal 11 (SIGSEGV)"), std::string::npos) << run.out;
  const Result verify = faprobe("verify --isolate --impl cpu.tiled --seq 17,64 --heads 2 --head-dim 16 --out v.jsonl",
                                "FAPROBE_TEST_FAULT=crash@64");
  EXPECT_EQ(verify.status, 1) << verify.err;
  records = read_jsonl(path("v.jsonl").string());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].status, Status::ok) << records[0].reason;
  EXPECT_EQ(records[1].reason, "child exited with signal 11 (SIGSEGV)");
}

TEST_F(Cli, InterruptingAnIsolatedCaseStopsItsChildAndRecordsNothingForIt) {
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    if (chdir(directory_.c_str()) != 0) _exit(99);
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
    setenv("FAPROBE_TEST_FAULT", "hang@64", 1);
    execl("/bin/sh", "sh", "-c", ("exec '" FAPROBE_BINARY "' sweep --isolate" + std::string(kTwoCases)).c_str(),
          static_cast<char*>(nullptr));
    _exit(98);
  }
  // The first case (seq 17) finishes; the second hangs in its child until the interrupt.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && read_file(path("r.jsonl")).empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(parent, SIGINT);
  const auto interrupted_at = std::chrono::steady_clock::now();
  int raw = 0;
  while (waitpid(parent, &raw, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - interrupted_at > std::chrono::seconds(20)) {
      kill(parent, SIGKILL);
      waitpid(parent, &raw, 0);
      FAIL() << "the interrupted sweep did not exit";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 130);
  const auto records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].c.seq_k, 17);
  EXPECT_EQ(records[0].status, Status::ok);
}

TEST_F(Cli, InterleavedSweepRecordsTheOrderAndRefusesIsolation) {
  write("tiny.json", kTinyConfig);
  const Result run = faprobe("sweep --config tiny.json --interleave --out r.jsonl --json r.json");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("sampled in rounds (interleaved)"), std::string::npos) << run.err;
  const auto records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 4u);
  for (const Record& record : records) {
    ASSERT_EQ(record.status, Status::ok) << record.key() << ": " << record.reason;
    EXPECT_TRUE(record.verify->passed);
    ASSERT_TRUE(record.time.has_value());
    EXPECT_GE(record.time->samples, 2);
    EXPECT_EQ(record.time->order, SampleOrder::interleaved);
    EXPECT_EQ(record.time->interleaved_with, (std::vector<std::string>{"cpu.naive", "cpu.tiled"}));
  }
  const nlohmann::json document = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_EQ(document["measure"]["interleave"], true);
  EXPECT_EQ(document["records"][0]["time_s"]["order"], "interleaved");
  EXPECT_EQ(document["records"][0]["time_s"]["interleaved_with"], nlohmann::json({"cpu.naive", "cpu.tiled"}));

  // Interleaving is in one process: isolation beside it is refused, from a flag or a config, before anything
  // is measured or written.
  write("isolated.json", R"({"impl": "cpu.tiled", "seq": 17, "heads": 2, "head_dim": 16, "min_samples": 2,
    "min_time": 0, "max_noise": 100, "max_time": 1, "interleave": true, "isolate": true})");
  const std::pair<std::string, std::string> refused[] = {
      {"sweep --config tiny.json --interleave --isolate --out refused.jsonl",
       "faprobe: --isolate cannot be combined with --interleave: interleaved implementations are sampled in turn in "
       "one process (allowed: --interleave with --no-isolate or neither)\n"},
      {"sweep --config isolated.json --out refused.jsonl",
       "faprobe: --config isolated.json: \"isolate\" cannot be combined with --config isolated.json: \"interleave\": "
       "interleaved implementations are sampled in turn in one process (allowed: --interleave with --no-isolate or "
       "neither)\n"},
  };
  for (const auto& [args, message] : refused) {
    const Result refusal = faprobe(args);
    EXPECT_EQ(refusal.status, 2) << args;
    EXPECT_EQ(refusal.err, message) << args;
    EXPECT_FALSE(fs::exists(path("refused.jsonl"))) << args;
  }
  EXPECT_EQ(faprobe("sweep --interleave --no-interleave").status, 2);
  // --no-isolate is what --interleave does anyway; --no-interleave overrides a config's "interleave".
  EXPECT_EQ(faprobe("sweep --config isolated.json --no-isolate --out r2.jsonl").status, 0);
  EXPECT_EQ(read_jsonl(path("r2.jsonl").string())[0].time->order, SampleOrder::interleaved);
  EXPECT_EQ(faprobe("sweep --config isolated.json --no-interleave --out r3.jsonl").status, 0);
  EXPECT_EQ(read_jsonl(path("r3.jsonl").string())[0].time->order, SampleOrder::sequential);

  // Implementations isolated by default (cuda.*) run in this process, and a warning says so.
  const Result gpu = faprobe("sweep --impl cuda.naive,cpu.tiled --seq 17 --heads 2 --head-dim 16 --min-samples 2 "
                             "--min-time 0 --max-noise 100 --max-time 1 --interleave --out r4.jsonl");
  EXPECT_NE(gpu.err.find("faprobe: warning: --interleave runs cuda.naive in this process, not isolated"),
            std::string::npos) << gpu.err;
  for (const Record& record : read_jsonl(path("r4.jsonl").string())) {
    EXPECT_FALSE(record.details.value("isolated", false)) << record.key();
  }

  // verify times nothing and run measures one implementation: there --interleave has no effect, and says so.
  const Result verify = faprobe("verify --impl cpu.naive,cpu.tiled --seq 17 --heads 2 --head-dim 16 --interleave");
  EXPECT_EQ(verify.status, 0) << verify.err;
  EXPECT_NE(verify.err.find("verify: --interleave has no effect (nothing is timed)"), std::string::npos) << verify.err;
  const Result one = faprobe("run --impl cpu.tiled --seq 17 --heads 2 --head-dim 16 --min-samples 2 --min-time 0 "
                             "--max-noise 100 --max-time 1 --interleave --isolate --out one.jsonl");
  EXPECT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.err.find("run: --interleave has no effect (run measures one implementation)"), std::string::npos)
      << one.err;
  EXPECT_EQ(read_jsonl(path("one.jsonl").string())[0].time->order, SampleOrder::sequential);
}

TEST_F(Cli, AnInterleavedCaseThatThrowsFailsAloneAndAnInterruptedOneIsNotRecorded) {
  const Result run = faprobe("sweep --interleave --impl cpu.naive,cpu.tiled --seq 17,64 --heads 2 --head-dim 16 "
                             "--min-samples 2 --min-time 0 --max-noise 100 --max-time 1 --warmup 0 --out r.jsonl",
                             "FAPROBE_TEST_FAULT=throw@17");
  EXPECT_EQ(run.status, 1) << run.err;
  const auto records = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(records.size(), 4u);
  for (int i : {0, 1}) EXPECT_EQ(records[std::size_t(i)].status, Status::failed) << records[std::size_t(i)].key();
  for (int i : {2, 3}) EXPECT_EQ(records[std::size_t(i)].status, Status::ok) << records[std::size_t(i)].reason;

  // Ctrl-C while a case is sampled: the cases on disk are whole (both implementations, never one alone),
  // and --resume runs the rest.
  fs::remove(path("r.jsonl"));
  const std::string args = "sweep --interleave --impl cpu.naive,cpu.tiled --seq 32..256 --heads 2 --head-dim 16 "
                           "--min-samples 1 --min-time 0.3 --max-noise 0 --max-time 0.5 --out r.jsonl";
  const pid_t child = start_in_background(args);
  ASSERT_GE(child, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && read_file(path("r.jsonl")).empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // into the second case's rounds
  EXPECT_EQ(interrupt_and_wait(child), 130);
  const auto before = read_jsonl(path("r.jsonl").string());
  ASSERT_GE(before.size(), 2u);
  ASSERT_LT(before.size(), 8u) << "the sweep finished before it was interrupted";
  EXPECT_EQ(before.size() % 2, 0u);
  const Result resumed = faprobe(args + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const auto after = read_jsonl(path("r.jsonl").string());
  ASSERT_EQ(after.size(), 8u);  // 4 lengths × 2 implementations
  std::set<std::string> keys;
  for (const Record& record : after) EXPECT_TRUE(keys.insert(record.key()).second) << record.key();
}


// --shard I/N end to end: three shards of one plan hold exactly the unsharded plan's pairs, once each, every
// record tagged with its shard and the same fingerprint; --resume of a shard refuses another shard's file,
// and a bad --shard is one line and exit 2 before anything runs.
TEST_F(Cli, ShardsOfAPlanAreExactlyThePlanAndResumeStaysInItsShard) {
  const std::string axes = "--impl cpu.naive,cpu.tiled,cpu.decode --seq 16..256 --mode prefill,decode --heads 2 "
                           "--head-dim 16";
  const std::string plan = axes + " --min-samples 1 --min-time 0 --max-noise 100 --no-verify";  // one sample a pair
  ASSERT_EQ(faprobe("sweep " + plan + " --out all.jsonl").status, 0);
  std::multiset<std::string> whole, parts;
  for (const Record& record : read_jsonl(path("all.jsonl").string())) {
    whole.insert(record.key());
    EXPECT_FALSE(record.shard.has_value());
  }
  std::set<std::string> fingerprints;
  for (int index = 1; index <= 3; ++index) {
    const std::string out = "s" + std::to_string(index) + ".jsonl";
    const Result run = faprobe("sweep " + plan + " --shard " + std::to_string(index) + "/3 --out " + out);
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.err.find("shard " + std::to_string(index) + "/3 of plan "), std::string::npos) << run.err;
    for (const Record& record : read_jsonl(path(out).string())) {
      parts.insert(record.key());
      ASSERT_TRUE(record.shard.has_value()) << record.key();
      EXPECT_EQ(record.shard->index, index);
      EXPECT_EQ(record.shard->count, 3);
      fingerprints.insert(record.shard->plan_fingerprint);
    }
  }
  EXPECT_EQ(parts, whole);  // every pair once, none twice, none left out
  EXPECT_EQ(fingerprints.size(), 1u);

  // merge: the three parts are the plan, pair by pair, in the unsharded run's order.
  const Result merged = faprobe("merge s3.jsonl s1.jsonl s2.jsonl --out merged.jsonl --csv merged.csv " + axes);
  ASSERT_EQ(merged.status, 0) << merged.err;
  EXPECT_NE(merged.err.find("checked pair by pair against the plan"), std::string::npos) << merged.err;
  std::vector<std::string> whole_order, merged_order;
  for (const Record& record : read_jsonl(path("all.jsonl").string())) whole_order.push_back(record.key());
  for (const Record& record : read_jsonl(path("merged.jsonl").string())) merged_order.push_back(record.key());
  EXPECT_EQ(merged_order, whole_order);
  EXPECT_TRUE(fs::exists(path("merged.csv")));
  const Result again = faprobe("merge s1.jsonl s2.jsonl s3.jsonl --out merged.jsonl");
  EXPECT_EQ(again.status, 2);
  EXPECT_EQ(again.err, "faprobe: --out merged.jsonl: exists; merge never overwrites a result (give a new file)\n");
  // A missing shard is named, and so is every pair of it; the rest is written, with exit status 1.
  const Result partial = faprobe("merge s1.jsonl s3.jsonl --out partial.jsonl " + axes);
  EXPECT_EQ(partial.status, 1) << partial.err;
  EXPECT_NE(partial.err.find("missing shard (no records): 2/3"), std::string::npos) << partial.err;
  EXPECT_NE(partial.err.find("(shard 2/3)"), std::string::npos) << partial.err;
  EXPECT_EQ(read_jsonl(path("partial.jsonl").string()).size(),
            read_jsonl(path("s1.jsonl").string()).size() + read_jsonl(path("s3.jsonl").string()).size());
  // A part given twice, a part of another plan, a plan that is not theirs: refused, nothing written.
  const Result twice = faprobe("merge s1.jsonl s1.jsonl s2.jsonl s3.jsonl --out twice.jsonl");
  EXPECT_EQ(twice.status, 2);
  EXPECT_NE(twice.err.find("appears twice: s1.jsonl record 1 and s1.jsonl record "), std::string::npos) << twice.err;
  EXPECT_FALSE(fs::exists(path("twice.jsonl")));
  const Result kept = faprobe("merge s1.jsonl s1.jsonl s2.jsonl s3.jsonl --allow-duplicates --out kept.jsonl");
  EXPECT_EQ(kept.status, 0) << kept.err;
  EXPECT_NE(kept.err.find("kept the better-measured record"), std::string::npos) << kept.err;
  const std::string other = "--impl cpu.naive --seq 16 --head-dim 16";
  ASSERT_EQ(faprobe("sweep " + other + " --min-samples 1 --min-time 0 --max-noise 100 --no-verify --shard 1/3 "
                    "--out other.jsonl").status,
            0);
  const Result mixed = faprobe("merge s1.jsonl other.jsonl --out mixed.jsonl");
  EXPECT_EQ(mixed.status, 2);
  EXPECT_NE(mixed.err.find("parts of different plans"), std::string::npos) << mixed.err;
  const Result wrong = faprobe("merge s1.jsonl s2.jsonl s3.jsonl --out wrong.jsonl " + other);
  EXPECT_EQ(wrong.status, 2);
  EXPECT_NE(wrong.err.find("is not the plan of these parts"), std::string::npos) << wrong.err;
  EXPECT_FALSE(fs::exists(path("wrong.jsonl")));

  const Result resumed = faprobe("sweep " + plan + " --shard 2/3 --resume --out s1.jsonl");
  EXPECT_EQ(resumed.status, 2);
  EXPECT_NE(resumed.err.find("--resume: s1.jsonl holds "), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("from shard 1/3 of plan "), std::string::npos) << resumed.err;
  const std::size_t shard_records = read_jsonl(path("s1.jsonl").string()).size();
  const Result same = faprobe("sweep " + plan + " --shard 1/3 --resume --out s1.jsonl");
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(read_jsonl(path("s1.jsonl").string()).size(), shard_records);  // the shard was complete: nothing redone

  const Result bad = faprobe("sweep " + plan + " --shard 0/3 --out bad.jsonl");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "faprobe: --shard: '0/3' is not a shard (allowed: I/N, whole numbers with 1 <= I <= N <= 100000, "
                     "e.g. 2/8; or slurm)\n");
  EXPECT_FALSE(fs::exists(path("bad.jsonl")));
}


// PyTorch's is_causal on seq_q != seq_k is top-left aligned. Its output, computed here independently of
// faprobe (a plain double loop where row i sees keys j <= i), passes `verify --mask causal-top-left` and fails
// `--mask causal` (bottom-right, flash-attention's), whose rows see 800 keys more.
TEST_F(Cli, ATopLeftCausalOutputPassesAsCausalTopLeftAndFailsAsCausal) {
  const std::int64_t seq_q = 100, seq_k = 900, heads = 4, kv_heads = 2, head_dim = 16;
  HostTensor q(DType::fp32, 1, seq_q, heads, head_dim), k(DType::fp32, 1, seq_k, kv_heads, head_dim),
      v(DType::fp32, 1, seq_k, kv_heads, head_dim), o(DType::fp32, 1, seq_q, heads, head_dim);
  std::uint64_t state = 12345;
  auto draw = [&state] {  // uniform in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float(double(state >> 11) / double(1ull << 53) * 2.0 - 1.0);
  };
  for (HostTensor* tensor : {&q, &k, &v})
    for (std::int64_t i = 0; i < tensor->elements(); ++i) tensor->set(i, draw());
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::int64_t kv = h / (heads / kv_heads);
    for (std::int64_t i = 0; i < seq_q; ++i) {
      std::vector<double> weights(std::size_t(i + 1));
      double top = -1e300, sum = 0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::int64_t d = 0; d < head_dim; ++d) {
          dot += double(q.get(q.offset(0, i, h) + d)) * k.get(k.offset(0, j, kv) + d);
        }
        weights[std::size_t(j)] = dot / std::sqrt(double(head_dim));
        top = std::max(top, weights[std::size_t(j)]);
      }
      for (double& w : weights) sum += (w = std::exp(w - top));
      for (std::int64_t d = 0; d < head_dim; ++d) {
        double out = 0;
        for (std::int64_t j = 0; j <= i; ++j) out += weights[std::size_t(j)] * v.get(v.offset(0, j, kv) + d);
        o.set(o.offset(0, i, h) + d, float(out / sum));
      }
    }
  }
  write_npy(path("q.npy").string(), q);
  write_npy(path("k.npy").string(), k);
  write_npy(path("v.npy").string(), v);
  write_npy(path("o.npy").string(), o);
  const std::string files = "verify --q q.npy --k k.npy --v v.npy --o o.npy ";
  const Result top_left = faprobe(files + "--mask causal-top-left");
  EXPECT_EQ(top_left.status, 0) << top_left.out << top_left.err;
  EXPECT_NE(top_left.out.find("q100 k900 d16 fp32 causal-top-left ok"), std::string::npos) << top_left.out;
  const Result bottom_right = faprobe(files + "--mask causal");
  EXPECT_EQ(bottom_right.status, 1) << bottom_right.out << bottom_right.err;
  EXPECT_NE(bottom_right.out.find("mismatch"), std::string::npos) << bottom_right.out;
  const Result bad = faprobe(files + "--mask top-left");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("unknown mask 'top-left' (allowed: none, causal (bottom-right), causal-top-left"),
            std::string::npos)
      << bad.err;
}

TEST_F(Cli, InputsChooseTheDistributionAndRecordsCarryIt) {
  const Result bad = faprobe("verify --impl cpu.naive --seq 17 --inputs heavy --out r.jsonl");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "faprobe: --inputs: unknown input distribution 'heavy' (allowed: normal, outliers (0.1 % of entries "
                     "with standard deviation 10, FlashAttention-3's FP8 test))\n");
  EXPECT_FALSE(fs::exists(path("r.jsonl")));
  std::ofstream(path("bad.json")) << R"({"impl": "cpu.naive", "seq": 17, "inputs": ["normal", "cauchy"]})";
  const Result bad_config = faprobe("verify --config bad.json --out r.jsonl");
  EXPECT_EQ(bad_config.status, 2);
  EXPECT_NE(bad_config.err.find("\"inputs\": unknown input distribution 'cauchy' (allowed: normal, outliers"),
            std::string::npos)
      << bad_config.err;

  // A config's list, and the fp8 kernels: the records say "inputs": "outliers" (and nothing for normal inputs,
  // as records always read), the table and the repro command name them, and fp8 records carry the error
  // against the unquantized inputs.
  std::ofstream(path("inputs.json")) << R"({"impl": "cpu.naive,emu.fa3,emu.fa3-incoherent", "seq": 33, "heads": 1,
                                          "head_dim": 64, "dtype": "fp8_e4m3,fp32", "inputs": ["normal", "outliers"]})";
  const Result run = faprobe("verify --config inputs.json --out r.jsonl");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("emu.fa3-incoherent b1 h1 s33 d64 fp8_e4m3 outliers    ok"), std::string::npos) << run.out;
  std::istringstream lines(read_file(path("r.jsonl")));
  std::map<std::string, int> ran;  // "impl dtype inputs" of the records that ran
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    const nlohmann::json& c = record.at("case");
    const std::string inputs = c.value("inputs", std::string("(absent)"));
    EXPECT_NE(inputs, "normal") << line;  // a normal case keeps the key it always had
    if (record.at("status") != "ok") continue;
    const std::string dtype = c.at("dtype").get<std::string>();
    ++ran[record.at("impl").get<std::string>() + " " + dtype + " " + inputs];
    EXPECT_EQ(record.at("verify").contains("exact_inputs_o_rms"), dtype == "fp8_e4m3") << line;
    EXPECT_EQ(record.at("repro").get<std::string>().find("--inputs outliers") != std::string::npos, inputs == "outliers")
        << line;
  }
  for (const char* expected : {"cpu.naive fp32 (absent)", "cpu.naive fp32 outliers", "emu.fa3 fp8_e4m3 outliers",
                               "emu.fa3-incoherent fp8_e4m3 (absent)", "emu.fa3-incoherent fp8_e4m3 outliers"}) {
    EXPECT_EQ(ran[expected], 1) << expected;
  }
  EXPECT_EQ(ran.count("emu.fa3-incoherent fp32 (absent)"), 0u);  // fp8_e4m3 only: unsupported

  // --resume reads the distribution back: nothing runs twice.
  const Result resumed = faprobe("verify --config inputs.json --out r.jsonl --resume");
  EXPECT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE((resumed.out + resumed.err).find("(12 resumed)"), std::string::npos) << resumed.out << resumed.err;
}

TEST_F(Cli, DevicesRefuseBadInputAndTimedCpuCasesAndSayWhenThereIsNoGpu) {
  const Result bad = faprobe("sweep --impl cuda.fa2 --seq 64 --devices 0,x --out d.jsonl");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "faprobe: --devices: 'x' is not a device (allowed: all, or device numbers like 0,2,3)\n");
  const Result twice = faprobe("sweep --impl cuda.fa2 --seq 64 --devices 1,1 --out d.jsonl");
  EXPECT_EQ(twice.status, 2);
  EXPECT_EQ(twice.err, "faprobe: --devices: device 1 is named twice\n");
  const Result cpu = faprobe("sweep --impl cpu.naive,cuda.fa2 --seq 64 --devices all --out d.jsonl");
  EXPECT_EQ(cpu.status, 2);
  EXPECT_NE(cpu.err.find("--devices: this sweep times cpu.naive on the CPU; timed side by side, CPU cases disturb "
                         "each other's timing"),
            std::string::npos)
      << cpu.err;
  const Result files = faprobe("verify --q q.npy --k k.npy --v v.npy --o o.npy --devices all");
  EXPECT_EQ(files.status, 2);
  EXPECT_NE(files.err.find("--devices: checking files runs nothing on a device"), std::string::npos) << files.err;
  const Result none = faprobe("sweep --impl cuda.fa2 --seq 64 --devices all --out d.jsonl", "FAPROBE_TEST_DEVICE_COUNT=0");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("faprobe: --devices all: this machine has no CUDA device ("), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("); run without --devices"), std::string::npos) << none.err;
  const Result beyond = faprobe("verify --impl cpu.naive --seq 64 --devices 0,2 --out d.jsonl", "FAPROBE_TEST_DEVICE_COUNT=2");
  EXPECT_EQ(beyond.status, 2);
  EXPECT_EQ(beyond.err, "faprobe: --devices: there is no device 2 (this machine has 2: 0..1)\n");
  const Result no_out = faprobe("verify --impl cpu.naive --seq 64 --devices all", "FAPROBE_TEST_DEVICE_COUNT=2");
  EXPECT_EQ(no_out.status, 2);
  EXPECT_NE(no_out.err.find("--devices needs --out FILE.jsonl"), std::string::npos) << no_out.err;
  EXPECT_FALSE(fs::exists(path("d.jsonl")));
}

// Workers without a GPU: FAPROBE_TEST_DEVICE_COUNT stands in for three devices, and a verify of CPU
// implementations (untimed, so allowed side by side) runs on them.
TEST_F(Cli, DevicesSplitThePlanOverWorkersAndResumeFinishesACrashedOne) {
  const std::string plan = "verify --impl cpu.naive,cpu.tiled --seq 16,32,64,128,257 --heads 2 --head-dim 16 ";
  ASSERT_EQ(faprobe(plan + "--out whole.jsonl").status, 0);
  std::multiset<std::string> whole;
  for (const Record& record : read_jsonl(path("whole.jsonl").string())) whole.insert(record.key());

  const std::string devices = "FAPROBE_TEST_DEVICE_COUNT=3";
  const Result run = faprobe(plan + "--devices all --out all.jsonl", devices);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("devices: 3 workers: GPU 0 (shard 1/3), GPU 1 (shard 2/3), GPU 2 (shard 3/3)"),
            std::string::npos)
      << run.err;
  std::multiset<std::string> keys;
  std::set<int> shards;
  for (const Record& record : read_jsonl(path("all.jsonl").string())) {
    keys.insert(record.key());
    ASSERT_TRUE(record.shard.has_value());
    EXPECT_EQ(record.shard->count, 3);
    shards.insert(record.shard->index);
  }
  EXPECT_EQ(keys, whole);  // every pair once
  EXPECT_EQ(shards, (std::set<int>{1, 2, 3}));
  EXPECT_FALSE(fs::exists(path("all.jsonl.workers")));  // done: the workers' copies are gone

  // A worker that crashes (a planted SIGSEGV in its pairs at seq 257) leaves the others' records and its own
  // file; the run says which worker and exits 1; --resume without the fault finishes its part alone.
  const Result crashed = faprobe(plan + "--devices 0,1,2 --out part.jsonl", devices + " FAPROBE_TEST_FAULT=crash@257");
  EXPECT_EQ(crashed.status, 1) << crashed.err;
  EXPECT_NE(crashed.err.find("was killed by signal 11"), std::string::npos) << crashed.err;
  EXPECT_NE(crashed.err.find("with --resume to finish"), std::string::npos) << crashed.err;
  EXPECT_TRUE(fs::exists(path("part.jsonl.workers")));
  const std::size_t before = read_jsonl(path("part.jsonl").string()).size();
  EXPECT_LT(before, whole.size());
  const Result fresh = faprobe(plan + "--devices 0,1,2 --out part.jsonl", devices);
  EXPECT_EQ(fresh.status, 2);
  EXPECT_NE(fresh.err.find("--out part.jsonl: holds " + std::to_string(before) + " records; continue it with --resume"),
            std::string::npos)
      << fresh.err;
  const Result resumed = faprobe(plan + "--devices 0,1,2 --resume --out part.jsonl", devices);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  keys.clear();
  for (const Record& record : read_jsonl(path("part.jsonl").string())) keys.insert(record.key());
  EXPECT_EQ(keys, whole);  // each pair once: nothing lost, nothing twice
  EXPECT_NE(resumed.err.find("(" + std::to_string(before) + " resumed)"), std::string::npos) << resumed.err;
  EXPECT_FALSE(fs::exists(path("part.jsonl.workers")));
}

}  // namespace
}  // namespace faprobe
