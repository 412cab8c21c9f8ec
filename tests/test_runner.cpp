// The runner's bandwidth fraction: run_plan sets it on a timed record from the copy bandwidth of the device
// the implementation runs on (the host's for cpu.*), and leaves it absent when the record was not timed
// (verify, emulated implementations) or that bandwidth is unknown. The checked run: run_one poisons the
// outputs right before it and never before a timed sample (nor at all with --no-verify), reads them after
// it, and every kernel that writes an LSE has it checked.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/registry.hpp"
#include "harness/runner.hpp"

namespace faprobe {
namespace {

// One tiny case of `impl`, measured quickly: two samples, no noise target.
Plan tiny_plan(const std::string& impl) {
  SettingsSource source;
  source.load_config_text(R"({"impl": ")" + impl + R"(", "seq": 17, "heads": 2, "head_dim": 16, "warmup": 0,
    "min_samples": 2, "min_time": 0, "max_noise": 100, "max_time": 1})",
                          "tiny");
  return make_plan(source);
}

// The one record of a tiny plan run in this process (RunOptions without a child executable never isolates).
Record run_tiny(const std::string& impl, const RunOptions& options, std::string* table = nullptr) {
  std::ostringstream table_out;
  const RunSummary summary = run_plan(tiny_plan(impl), options, table_out);
  if (table != nullptr) *table = table_out.str();
  EXPECT_EQ(summary.records.size(), 1u);
  return summary.records.empty() ? Record{} : summary.records.front();
}

TEST(Runner, TimedCpuRecordIsReadAgainstTheHostCopyBandwidth) {
  RunOptions options;
  options.rates.memory_gbytes_per_s = 3.5;
  options.rates.gpu_copy_gbytes_per_s = 4000.0;  // the GPU's: not for a CPU implementation
  std::string table;
  const Record record = run_tiny("cpu.naive", options, &table);
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  ASSERT_TRUE(record.gbytes_per_s().has_value());
  ASSERT_TRUE(record.bandwidth_fraction.has_value());
  EXPECT_NEAR(*record.bandwidth_fraction, *record.gbytes_per_s() / 3.5, 1e-12);
  EXPECT_NE(table.find("BW %"), std::string::npos) << table;
}

TEST(Runner, UntimedRecordHasNoBandwidthFraction) {
  RunOptions options;
  options.timing = false;  // what `verify` runs
  options.rates.memory_gbytes_per_s = 3.5;
  const Record record = run_tiny("cpu.naive", options);
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  EXPECT_FALSE(record.time.has_value());
  EXPECT_FALSE(record.bandwidth_fraction.has_value());
}

// A timed implementation on the GPU, for bandwidth_fraction's choice of rate; never prepared.
class GpuStandIn final : public Implementation {
 public:
  std::string name() const override { return "test.gpu"; }
  std::string device() const override { return "test GPU"; }
  std::string supports(const Case&) const override { return ""; }
  std::uint64_t predicted_bytes(const Case&) const override { return 0; }
  double predicted_seconds(const Case&, const MachineRates&) const override { return 0; }
  bool runs_on_gpu() const override { return true; }
  std::unique_ptr<PreparedCase> prepare(const Case&) const override { return nullptr; }
};

TEST(Runner, GpuRecordIsReadAgainstTheGpuCopyBandwidthAndHasNoneWhenItIsUnknown) {
  Record record;
  record.time = TimeStats{1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 0, 10, {}};
  MachineRates rates;
  rates.memory_gbytes_per_s = 3.5;
  rates.gpu_copy_gbytes_per_s = 4000.0;
  const GpuStandIn gpu;
  ASSERT_TRUE(bandwidth_fraction(gpu, record, rates).has_value());
  EXPECT_NEAR(*bandwidth_fraction(gpu, record, rates), *record.gbytes_per_s() / 4000.0, 1e-12);
  rates.gpu_copy_gbytes_per_s = 0;  // not measured: no fraction, not one against the host's bandwidth
  EXPECT_FALSE(bandwidth_fraction(gpu, record, rates).has_value());
}

TEST(Runner, EmulatedRecordHasNoBandwidthFraction) {
  RunOptions options;
  options.rates.memory_gbytes_per_s = 3.5;
  options.rates.gpu_copy_gbytes_per_s = 4000.0;
  const Record record = run_tiny("emu.naive", options);
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  EXPECT_FALSE(record.time.has_value());
  EXPECT_FALSE(record.bandwidth_fraction.has_value());
}

// --- The checked run: outputs poisoned right before it and only then; the LSE checked where there is one. ---

// Wraps a registered implementation and logs the calls the runner makes on its prepared case, in order.
class Logged final : public Implementation {
 public:
  Logged(const Implementation& inner, std::vector<std::string>& log) : inner_(inner), log_(log) {}
  std::string name() const override { return inner_.name(); }
  std::string device() const override { return inner_.device(); }
  std::string supports(const Case& c) const override { return inner_.supports(c); }
  std::uint64_t predicted_bytes(const Case& c) const override { return inner_.predicted_bytes(c); }
  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    return inner_.predicted_seconds(c, rates);
  }
  std::unique_ptr<PreparedCase> prepare(const Case& c) const override {
    return std::make_unique<LoggedCase>(inner_.prepare(c), log_);
  }

 private:
  class LoggedCase final : public PreparedCase {
   public:
    LoggedCase(std::unique_ptr<PreparedCase> inner, std::vector<std::string>& log)
        : inner_(std::move(inner)), log_(log) {}
    void poison_outputs() override {
      log_.push_back("poison");
      inner_->poison_outputs();
    }
    double timed_run() override {
      log_.push_back("run");
      return inner_->timed_run();
    }
    const HostTensor& output() override {
      log_.push_back("output");
      return inner_->output();
    }
    const LseTensor* lse() override {
      log_.push_back("lse");
      return inner_->lse();
    }

   private:
    std::unique_ptr<PreparedCase> inner_;
    std::vector<std::string>& log_;
  };
  const Implementation& inner_;
  std::vector<std::string>& log_;
};

Case small_case(std::int64_t seq_q, std::int64_t seq_k, Mode mode = Mode::prefill) {
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = 64;
  c.dtype = DType::fp16;
  c.mask = Mask::causal;
  c.mode = mode;
  c.validate();
  return c;
}

TEST(RunnerPoison, TheCheckedRunAloneIsPoisonedAndItsOutputsAreReadAfterIt) {
  const Case c = small_case(40, 17);
  MeasureSettings measure;
  measure.warmup = 1;
  measure.min_samples = 3;
  measure.min_time_s = 0;
  measure.max_noise_percent = 100;
  std::vector<std::string> log;
  const Record record = run_one(Logged(*find_implementation("cpu.tiled"), log), c, measure, RunOptions{});
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  ASSERT_GE(log.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(log.begin(), log.begin() + 2), (std::vector<std::string>{"poison", "run"}));
  std::vector<std::string> read(log.begin() + 2, log.begin() + 4);  // both read for the check, in either order
  std::sort(read.begin(), read.end());
  EXPECT_EQ(read, (std::vector<std::string>{"lse", "output"}));
  EXPECT_EQ(std::count(log.begin(), log.end(), "poison"), 1) << "the timed samples are not poisoned";
  EXPECT_GE(std::count(log.begin(), log.end(), "run"), 4);  // the checked run and three samples

  log.clear();
  measure.verify = false;  // --no-verify: nothing checked, nothing poisoned
  const Record unchecked = run_one(Logged(*find_implementation("cpu.tiled"), log), c, measure, RunOptions{});
  ASSERT_EQ(unchecked.status, Status::ok) << unchecked.reason;
  EXPECT_EQ(std::count(log.begin(), log.end(), "poison"), 0);
  EXPECT_FALSE(unchecked.verify.has_value());
}

// The CUDA kernels that write an LSE have it checked in every record (under the emulator here; the same
// shell for cuda.*), rows without keys included; the others say they produced none.
TEST(RunnerPoison, EveryKernelThatWritesAnLseHasItChecked) {
  RunOptions options;
  options.timing = false;
  const Case prefill = small_case(40, 17);  // causal: rows 0..22 see no key
  const Case decode = small_case(1, 300, Mode::decode);
  for (const std::string name : {"emu.fa1", "emu.fa2", "emu.fa3", "emu.decode", "emu.decode-splitk", "emu.naive",
                                 "cpu.tiled", "cpu.decode-splitk"}) {
    const Implementation& impl = *find_implementation(name);
    const Case& c = impl.supports(prefill).empty() ? prefill : decode;
    ASSERT_EQ(impl.supports(c), "") << name;
    const Record record = run_one(impl, c, MeasureSettings{}, options);
    ASSERT_EQ(record.status, Status::ok) << name << ": " << record.reason;
    ASSERT_TRUE(record.verify.has_value()) << name;
    const bool writes_lse = name != "emu.naive" && name.rfind("cpu.", 0) != 0;
    EXPECT_EQ(record.verify->lse_checked, writes_lse) << name;
    if (writes_lse) {
      EXPECT_LE(record.verify->lse_max_abs_diff, record.verify->lse_tolerance) << name;
    }
    const nlohmann::json json = record;
    EXPECT_EQ(json.at("verify").at("lse_checked"), writes_lse) << name;
    EXPECT_EQ(json.at("verify").contains("lse_tolerance"), writes_lse) << name;
  }
}

}  // namespace
}  // namespace faprobe
