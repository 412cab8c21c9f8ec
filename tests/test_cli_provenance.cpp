// Provenance end to end: the --json header's `build` object (compiler, flags, build type, CUDA, revision and
// a boolean git_dirty) and the CPU's vector extensions; NVML missing, not a library or without its symbols
// (FAPROBE_NVML_LIBRARY) is "unavailable" with the reason and the exit status does not change; and every
// record's `repro` run through the shell and the faprobe binary (the same parsing as any command line)
// gives a record of the same case, whose own repro is the same command, for a plain case, a causal GQA one,
// a paged decode, a variable-length one, and the records of a sweep and of verify, whose settings came from
// a config.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace faprobe {
namespace {

// Quick measure settings, so that each run here (and each repro of it) takes a fraction of a second.
constexpr const char* kQuickMeasure = " --warmup 0 --min-samples 2 --min-time 0 --max-noise 100 --max-time 1";

class CliProvenance : public Cli {
 protected:
  nlohmann::json document(const std::string& name) const { return nlohmann::json::parse(read_file(path(name))); }

  // Runs `repro` (a record's "faprobe run ...") through the shell with this build's binary and returns the
  // --json document it wrote.
  nlohmann::json run_repro(const std::string& repro, const std::string& json_name) const {
    const std::string prefix = "faprobe ";
    EXPECT_EQ(repro.rfind(prefix, 0), 0u) << repro;
    const Result rerun = faprobe(repro.substr(prefix.size()) + " --json " + json_name);
    EXPECT_EQ(rerun.status, 0) << repro << "\n" << rerun.err;
    return document(json_name);
  }

  // The record of `args` (one case) and the record its repro gives: the same case and the same repro.
  void expect_round_trip(const std::string& args) const {
    SCOPED_TRACE(args);
    const Result first = faprobe(args + " --json first.json");
    ASSERT_EQ(first.status, 0) << first.err;
    const nlohmann::json original = document("first.json")["records"].at(0);
    ASSERT_TRUE(original["repro"].is_string()) << original.dump();
    const nlohmann::json again = run_repro(original["repro"], "again.json")["records"].at(0);
    EXPECT_EQ(again["case"], original["case"]);
    EXPECT_EQ(again["impl"], original["impl"]);
    EXPECT_EQ(again["repro"], original["repro"]);
    EXPECT_EQ(again["status"], original["status"]);
  }
};

TEST_F(CliProvenance, TheHeaderRecordsTheBuildAndTheCpusVectorExtensions) {
  const Result run = faprobe(std::string("run --impl cpu.naive --seq 17 --heads 2 --head-dim 16") + kQuickMeasure +
                             " --json r.json");
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json header = document("r.json");
  ASSERT_TRUE(header.contains("build")) << header.dump();
  const nlohmann::json& build = header["build"];
  EXPECT_FALSE(build["compiler"]["id"].get<std::string>().empty());
  EXPECT_FALSE(build["compiler"]["version"].get<std::string>().empty());
  EXPECT_FALSE(build["cxx_flags"].get<std::string>().empty());
  EXPECT_FALSE(build["build_type"].get<std::string>().empty());
  EXPECT_TRUE(build["git_dirty"].is_boolean());
  EXPECT_EQ(build["git_revision"], header["git_revision"]);  // the contract's top-level field stays
  if (header["host"]["march"] != "") {
    EXPECT_NE(build["cxx_flags"].get<std::string>().find("-march=" + header["host"]["march"].get<std::string>()),
              std::string::npos);
  }
  EXPECT_TRUE(build["cuda"].is_null() || !build["cuda"]["architectures"].empty()) << build.dump();

  // The CPU's extensions, as /proc/cpuinfo lists them: AVX512-BF16 and AVX-VNNI where the CPU has them.
  const nlohmann::json& extensions = header["host"]["cpu_vector_extensions"];
  ASSERT_TRUE(extensions.is_array());
  std::string flags;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  auto listed = [&](const char* name) {
    return std::find(extensions.begin(), extensions.end(), name) != extensions.end();
  };
  EXPECT_EQ(listed("avx512bf16"), flags.find(" avx512_bf16 ") != std::string::npos) << extensions.dump();
  EXPECT_EQ(listed("avxvnni"), flags.find(" avx_vnni ") != std::string::npos) << extensions.dump();
  EXPECT_EQ(listed("amx-bf16"), flags.find(" amx_bf16 ") != std::string::npos) << extensions.dump();

  const Result version = faprobe("--version");
  ASSERT_EQ(version.status, 0) << version.err;
  const std::string revision = build["git_revision"].get<std::string>() + (build["git_dirty"].get<bool>() ? "-dirty" : "");
  EXPECT_NE(version.out.find("(" + revision + ")"), std::string::npos) << version.out;
}

TEST_F(CliProvenance, WithoutNvmlTheHeaderSaysWhyAndTheRunGoesOn) {
  write("libnvidia-ml.so.1", "not a shared library\n");
  const std::string run = std::string("run --impl cpu.naive --seq 17 --heads 2 --head-dim 16") + kQuickMeasure + " --json r.json";
  struct Setting {
    std::string library, reason;
  };
  for (const Setting& setting : {Setting{"/nonexistent/libnvidia-ml.so.1", "cannot load /nonexistent/libnvidia-ml.so.1"},
                                 Setting{path("libnvidia-ml.so.1").string(), "cannot load " + path("libnvidia-ml.so.1").string()},
                                 Setting{"libc.so.6", "libc.so.6 is not NVML: it has no nvmlInit_v2"}}) {
    SCOPED_TRACE(setting.library);
    const Result result = faprobe(run, "FAPROBE_NVML_LIBRARY='" + setting.library + "'");
    ASSERT_EQ(result.status, 0) << result.err;
    const nlohmann::json nvml = document("r.json")["nvml"];
    EXPECT_EQ(nvml["available"], false);
    EXPECT_EQ(nvml["library"], setting.library);
    EXPECT_NE(nvml["reason_unavailable"].get<std::string>().find(setting.reason), std::string::npos) << nvml.dump();
    for (const nlohmann::json& device : document("r.json")["devices"]) {
      EXPECT_EQ(device["nvml"]["available"], false);
    }
    EXPECT_EQ(result.out.find("warning:"), std::string::npos) << result.out;
  }
  // This machine's own NVML, whatever it is: available or not, never an error.
  const Result own = faprobe(run);
  ASSERT_EQ(own.status, 0) << own.err;
  const nlohmann::json nvml = document("r.json")["nvml"];
  ASSERT_TRUE(nvml["available"].is_boolean());
  if (!nvml["available"].get<bool>()) {
    EXPECT_FALSE(nvml["reason_unavailable"].get<std::string>().empty());
  }
}

TEST_F(CliProvenance, APlainCaseRoundTrips) {
  expect_round_trip(std::string("run --impl cpu.naive --seq 17 --heads 2 --head-dim 16") + kQuickMeasure);
}

TEST_F(CliProvenance, ACausalGqaCaseWithSeqQBelowSeqRoundTrips) {
  expect_round_trip(std::string("run --impl cpu.tiled --seq 100 --seq-q 17 --batch 2 --heads 8 --kv-heads 2 "
                                "--head-dim 80 --dtype bf16 --mask causal --seed 7 --threads 1") +
                    kQuickMeasure);
}

TEST_F(CliProvenance, APagedDecodeCaseRoundTrips) {
  expect_round_trip(std::string("run --impl cpu.decode-splitk --mode decode --batch 2 --seq 70 --page-size 32 "
                                "--heads 4 --kv-heads 1 --splits 3 --dtype fp16") +
                    kQuickMeasure);
}

TEST_F(CliProvenance, AVariableLengthPagedCaseRoundTrips) {
  expect_round_trip(std::string("run --impl cpu.decode-splitk --mode decode --seqlens 40,17,33,17 --page-size 16 "
                                "--heads 4 --kv-heads 2 --mask causal --no-verify") +
                    kQuickMeasure);
}

TEST_F(CliProvenance, SweepAndVerifyRecordsCarryTheirConfigsSettings) {
  write("tiny.json", R"({"impl": "cpu.naive,cpu.tiled", "seq": "17,33", "heads": 2, "head_dim": 16,
    "mask": "causal", "min_samples": 2, "min_time": 0, "max_noise": 100, "max_time": 1, "warmup": 0})");
  const Result sweep = faprobe("sweep --config tiny.json --json sweep.json");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  const nlohmann::json records = document("sweep.json")["records"];
  ASSERT_EQ(records.size(), 4u);
  for (const nlohmann::json& record : records) {
    const std::string repro = record["repro"];
    EXPECT_NE(repro.find("--min-samples 2"), std::string::npos) << repro;
    EXPECT_NE(repro.find("--max-time 1"), std::string::npos) << repro;
  }
  const nlohmann::json last = run_repro(records.back()["repro"], "again.json")["records"].at(0);
  EXPECT_EQ(last["case"], records.back()["case"]);

  const Result verify = faprobe("verify --impl cpu.tiled --seq 33 --heads 2 --head-dim 16 --json verify.json");
  ASSERT_EQ(verify.status, 0) << verify.err;
  const nlohmann::json checked = document("verify.json")["records"].at(0);
  // verify's own cap (60 s) is not run's default (10 s): the repro says it, so the case is screened alike.
  EXPECT_NE(checked["repro"].get<std::string>().find("--max-time 60"), std::string::npos) << checked.dump();
}

}  // namespace
}  // namespace faprobe
