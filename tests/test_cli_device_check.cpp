// The GPU CI gate in scripts/device-check.sh's summary.md (scripts/device_summary.py), without a GPU: each
// implementation's `faprobe verify` run as device-check.sh runs it, one step each through
// scripts/device_steps.sh's step() (so steps.tsv holds the statuses a real run writes), on emulated
// implementations and a tiny case instead of cuda.* and configs/gpu-verify.json. The gate line and the
// per-implementation table must say "passed" for clean records, and "failed" with the reason and the exit
// status for a planted mismatch record, a verify that exits 1 (a planted fault: every record failed), a
// timed-out step and an implementation whose verify never ran.
#include <cstdlib>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace faprobe {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class CliDeviceCheck : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    if (std::system("command -v python3 >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "python3 is missing (./scripts/test installs it): device_summary.py needs it";
  }

  // `faprobe verify` of each implementation on a tiny case, each a step named verify.IMPL in
  // scratch/device-check (the work folder device-check.sh packs), with `env` set for the steps.
  void verify_steps(const std::string& impls, const std::string& env = "") const {
    const std::string script = R"(
set -uo pipefail
scratch="$PWD/scratch" work="$PWD/scratch/device-check" out="$PWD/out"
log="$out/log.txt" deadline=$((SECONDS + 600)) archive=device-check archive_exclude='*.npy'
mkdir -p "$work/logs" "$work/verify" "$out"
[ -f "$log" ] || : > "$log"
[ -f "$work/steps.tsv" ] || printf 'step\tstatus\tseconds\tcommand\n' > "$work/steps.tsv"
source ')" FAPROBE_SOURCE_DIR R"(/scripts/device_steps.sh'
refresh() { :; }
)" + env + R"(
for impl in )" + impls + R"(; do
  step "verify.$impl" 120 ')" FAPROBE_BINARY R"(' verify --impl "$impl" --batch 1 --heads 2 --seq 33 --seq-q 17 \
    --head-dim 64 --dtype bf16 --mask causal --no-isolate --out "$work/verify/verify.jsonl"
done
exit 0  # a failing step is recorded in steps.tsv, as in device-check.sh
)";
    write("steps.sh", script);
    const Result ran = shell("bash steps.sh");
    ASSERT_EQ(ran.status, 0) << ran.out << ran.err;
  }

  std::string summary() const {
    const Result made = shell("python3 '" FAPROBE_SOURCE_DIR "/scripts/device_summary.py' scratch/device-check");
    EXPECT_EQ(made.status, 0) << made.err;
    return made.out;
  }

  // The table row of `impl` in the summary's verify section.
  static std::string row_of(const std::string& text, const std::string& impl) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("| " + impl + " |", 0) == 0) return line;
    return "";
  }
};

TEST_F(CliDeviceCheck, TheSummarySaysWhetherTheGpuCiGatePassedWithItsExitStatus) {
  verify_steps("emu.naive emu.fa1");
  write("scratch/device-check/implementations.txt", "emu.naive\nemu.fa1\n");
  const std::string clean = summary();
  const std::string passed = "**GPU CI gate: passed** (exit status 0)";
  ASSERT_TRUE(contains(clean, passed)) << clean;
  EXPECT_LT(clean.find(passed), clean.find("## Steps")) << "the gate is the summary's headline:\n" << clean;
  EXPECT_TRUE(contains(clean, "passed for each of the 2 implementations")) << clean;
  for (const char* impl : {"emu.naive", "emu.fa1"}) {
    const std::string row = row_of(clean, impl);
    EXPECT_TRUE(contains(row, " | 0 | ")) << impl << "'s verify exited 0: " << row;  // the exit status column
    EXPECT_TRUE(contains(row, "| 0 | 0 | 0 | 0 | passed |")) << row;  // no mismatch, failed, skipped, unsupported
  }

  // Planted: one of emu.fa1's records turned into a mismatch (its step still exited 0).
  const std::string records_path = "scratch/device-check/verify/verify.jsonl";
  const std::string original = read_file(path(records_path));
  std::string planted;
  bool flipped = false;
  std::istringstream lines(original);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    nlohmann::json record = nlohmann::json::parse(line);
    if (!flipped && record.at("impl") == "emu.fa1" && record.at("status") == "ok") {
      record["status"] = "mismatch";
      record["reason"] = "planted by test_cli_device_check";
      flipped = true;
    }
    planted += record.dump() + "\n";
  }
  ASSERT_TRUE(flipped) << original;
  write(records_path, planted);
  const std::string mismatched = summary();
  EXPECT_TRUE(contains(mismatched, "**GPU CI gate: failed** (exit status 1)")) << mismatched;
  EXPECT_TRUE(contains(mismatched, "emu.fa1: 1 mismatch")) << mismatched;
  EXPECT_TRUE(contains(row_of(mismatched, "emu.fa1"), "**failed**")) << mismatched;
  EXPECT_TRUE(contains(row_of(mismatched, "emu.naive"), "| passed |")) << mismatched;
  EXPECT_FALSE(contains(mismatched, "GPU CI gate: passed")) << mismatched;
  write(records_path, original);

  // Planted: a third implementation whose verify fails for real (FAPROBE_TEST_FAULT=throw: every case
  // fails, verify exits 1).
  verify_steps("emu.fa2", "export FAPROBE_TEST_FAULT=throw");
  write("scratch/device-check/implementations.txt", "emu.naive\nemu.fa1\nemu.fa2\n");
  const std::string failing = summary();
  EXPECT_TRUE(contains(failing, "**GPU CI gate: failed** (exit status 1)")) << failing;
  EXPECT_TRUE(contains(failing, "emu.fa2: exit 1, 1 failed")) << failing;
  EXPECT_TRUE(contains(row_of(failing, "emu.fa2"), "| 1 | 0 | 0 | 1 |")) << failing;

  // A step that timed out (exit 124 by timeout(1)) and an implementation whose verify never ran.
  write("scratch/device-check/implementations.txt", "emu.naive\nemu.fa1\nemu.fa2\nemu.decode\n");
  std::string steps = read_file(path("scratch/device-check/steps.tsv"));
  write("scratch/device-check/steps.tsv", steps + "verify.emu.fa2\tTIMEOUT after 75s\t75\tfaprobe verify\n");
  const std::string cut_short = summary();
  EXPECT_TRUE(contains(cut_short, "**GPU CI gate: failed** (exit status 124)")) << cut_short;
  EXPECT_TRUE(contains(cut_short, "emu.fa2: exit 124")) << cut_short;
  EXPECT_TRUE(contains(cut_short, "emu.decode: verify has not run")) << cut_short;
}

}  // namespace
}  // namespace faprobe
