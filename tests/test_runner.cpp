// The runner's bandwidth fraction: run_plan sets it on a timed record from the copy bandwidth of the device
// the implementation runs on (the host's for cpu.*), and leaves it absent when the record was not timed
// (verify, emulated implementations) or that bandwidth is unknown.
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace faprobe
