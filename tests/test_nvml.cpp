// The NVML monitor (kernels/cuda/runtime/nvml.hpp) without a GPU: a missing library, a file that is not a
// library, a library without NVML's symbols and an nvmlInit that fails each make it unavailable with the
// reason, and nothing throws; against a fake NVML (tests/fake_nvml.cpp) the clocks, the power limit and the
// union of the clock event reasons are reported, gpu_idle and applications_clocks_setting left out, and a
// power cap or a thermal slowdown (planted in the fake's answers) is named in the warning lines while a GPU
// that was only idle or boosted gives none. Both names of the reasons query (drivers before and after 535)
// are taken, and the sampling thread samples.
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/runtime/nvml.hpp"
#include "temp_dir_support.hpp"

namespace faprobe::gpu {
namespace {

using Names = std::vector<std::string>;

DeviceInfo fake_device(const std::string& pci_bus_id = "00000000:65:00.0") {
  DeviceInfo device;
  device.index = 0;
  device.name = "Fake H200";
  device.pci_bus_id = pci_bus_id;
  return device;
}

// The fake's answers for one test: its reason masks, one per query, and nvmlInit_v2's status.
class FakeNvml : public test_support::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    ::unsetenv("FAKE_NVML_INIT_STATUS");
    ::unsetenv("FAKE_NVML_REASONS");
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_INIT_STATUS");
    ::unsetenv("FAKE_NVML_REASONS");
    TempDirTest::TearDown();
  }
  static void answer(const std::string& reasons) { ::setenv("FAKE_NVML_REASONS", reasons.c_str(), 1); }
};

// Unavailable, with a reason that contains `expected`; a device watched under it is unavailable too, and
// sampling it does nothing.
void expect_unavailable(NvmlMonitor& monitor, const std::string& expected) {
  EXPECT_FALSE(monitor.available());
  EXPECT_NE(monitor.reason_unavailable().find(expected), std::string::npos) << monitor.reason_unavailable();
  EXPECT_NO_THROW(monitor.watch(fake_device()));
  EXPECT_NO_THROW(monitor.sample());
  monitor.start_sampling(std::chrono::milliseconds(1));  // no thread without NVML
  monitor.stop_sampling();
  const NvmlDeviceReport report = monitor.report(0);
  EXPECT_FALSE(report.available);
  EXPECT_EQ(report.reason_unavailable, monitor.reason_unavailable());
  EXPECT_EQ(report.samples, 0);
  EXPECT_TRUE(monitor.slowdown_lines().empty());
  const nlohmann::json summary = monitor.summary();
  EXPECT_EQ(summary["available"], false);
  EXPECT_EQ(summary["reason_unavailable"], monitor.reason_unavailable());
  const nlohmann::json device = report;
  EXPECT_EQ(device, (nlohmann::json{{"available", false}, {"reason_unavailable", monitor.reason_unavailable()}}));
}

TEST(Nvml, TheLibraryNameCanBeOverridden) {
  ::unsetenv("FAPROBE_NVML_LIBRARY");
  EXPECT_EQ(nvml_library_name(), "libnvidia-ml.so.1");
  ::setenv("FAPROBE_NVML_LIBRARY", "/somewhere/libnvidia-ml.so", 1);
  EXPECT_EQ(nvml_library_name(), "/somewhere/libnvidia-ml.so");
  ::unsetenv("FAPROBE_NVML_LIBRARY");
}

TEST(Nvml, AMissingLibraryIsUnavailableWithTheReason) {
  NvmlMonitor monitor("/nonexistent/libnvidia-ml.so.1");
  expect_unavailable(monitor, "cannot load /nonexistent/libnvidia-ml.so.1");
}

TEST_F(FakeNvml, AFileThatIsNotALibraryIsUnavailableWithTheReason) {
  std::ofstream(path("libnvidia-ml.so.1")) << "not an ELF file\n";
  NvmlMonitor monitor(path("libnvidia-ml.so.1"));
  expect_unavailable(monitor, "cannot load " + path("libnvidia-ml.so.1"));
}

TEST(Nvml, ALibraryWithoutNvmlsSymbolsIsUnavailableWithTheReason) {
  NvmlMonitor monitor("libc.so.6");  // a library every Linux process has, with none of NVML's functions
  expect_unavailable(monitor, "libc.so.6 is not NVML: it has no nvmlInit_v2, nvmlShutdown");
}

TEST_F(FakeNvml, AFailingInitIsUnavailableWithNvmlsError) {
  ::setenv("FAKE_NVML_INIT_STATUS", "9", 1);  // NVML_ERROR_DRIVER_NOT_LOADED
  NvmlMonitor monitor(FAPROBE_FAKE_NVML);
  expect_unavailable(monitor, "nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)");
}

TEST(Nvml, ReasonNamesFollowTheBitsAndUnknownBitsAreKept) {
  EXPECT_EQ(clock_event_reason_names(0), Names{});
  EXPECT_EQ(clock_event_reason_names(0x1 | 0x2 | 0x4 | 0x40 | (std::uint64_t(1) << 20)),
            (Names{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_thermal_slowdown", "0x100000"}));
  EXPECT_EQ(clock_event_reason_names(0x1ff).size(), 9u);
  EXPECT_EQ(slowdown_reasons(clock_event_reason_names(0x1ff)),
            (Names{"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}));
  EXPECT_EQ(slowdown_reasons({"gpu_idle", "sync_boost", "display_clock_setting", "0x100000"}), Names{});
}

TEST_F(FakeNvml, ClocksPowerAndTheUnionOfSlowdownsAreReported) {
  // watch()'s first sample: idle, with the applications clocks set; then a power cap, a clean busy sample,
  // and a thermal slowdown.
  answer("3,4,0,64");
  NvmlMonitor monitor(FAPROBE_FAKE_NVML);
  ASSERT_TRUE(monitor.available()) << monitor.reason_unavailable();
  EXPECT_EQ(monitor.summary()["driver_version"], "999.99.99");
  monitor.watch(fake_device());
  NvmlDeviceReport report = monitor.report(0);
  ASSERT_TRUE(report.available) << report.reason_unavailable;
  EXPECT_EQ(report.samples, 1);
  EXPECT_EQ(report.throttle_reasons_seen, Names{});  // idle and applications clocks are not reported
  EXPECT_EQ(report.sm_clock_mhz, 345u);
  EXPECT_FALSE(report.busy_sm_clock_mhz_min.has_value());  // only idle so far
  EXPECT_TRUE(monitor.slowdown_lines().empty());
  for (int i = 0; i < 3; ++i) monitor.sample();
  report = monitor.report(0);
  EXPECT_EQ(report.samples, 4);
  EXPECT_EQ(report.throttle_reasons_seen, (Names{"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(report.sm_clock_mhz, 1410u);
  EXPECT_EQ(report.mem_clock_mhz, 3201u);
  EXPECT_EQ(report.max_sm_clock_mhz, 1980u);
  EXPECT_EQ(report.max_mem_clock_mhz, 3201u);
  EXPECT_EQ(report.busy_sm_clock_mhz_min, 1410u);
  ASSERT_TRUE(report.power_limit_w.has_value());
  EXPECT_DOUBLE_EQ(*report.power_limit_w, 700.0);
  EXPECT_EQ(monitor.slowdown_lines(),
            Names{"GPU 0 (Fake H200) was slowed down during the run: sw_power_cap, hw_thermal_slowdown"});
  const nlohmann::json json = report;
  EXPECT_EQ(json["throttle_reasons_seen"], nlohmann::json::array({"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(json["power_limit_w"], 700.0);
  EXPECT_EQ(json["max_sm_clock_mhz"], 1980);
  EXPECT_EQ(json["available"], true);
}

TEST_F(FakeNvml, AGpuThatWasOnlyIdleOrBoostedGivesNoWarning) {
  answer("1,2,16,256,0");  // idle, applications clocks, sync boost, display clocks, nothing
  NvmlMonitor monitor(FAPROBE_FAKE_NVML);
  monitor.watch(fake_device());
  for (int i = 0; i < 5; ++i) monitor.sample();
  const NvmlDeviceReport report = monitor.report(0);
  EXPECT_EQ(report.throttle_reasons_seen, (Names{"sync_boost", "display_clock_setting"}));
  EXPECT_EQ(report.busy_sm_clock_mhz_min, 1980u);
  EXPECT_TRUE(monitor.slowdown_lines().empty());
}

TEST_F(FakeNvml, OlderDriversNameOfTheReasonsQueryIsTaken) {
  answer("0,32");  // a software thermal slowdown
  NvmlMonitor monitor(FAPROBE_FAKE_NVML_OLD_DRIVER);
  ASSERT_TRUE(monitor.available()) << monitor.reason_unavailable();
  monitor.watch(fake_device());
  monitor.sample();
  EXPECT_EQ(monitor.report(0).throttle_reasons_seen, Names{"sw_thermal_slowdown"});
}

TEST_F(FakeNvml, ADeviceNvmlDoesNotKnowIsUnavailableAndTheOthersStayWatched) {
  NvmlMonitor monitor(FAPROBE_FAKE_NVML);
  DeviceInfo unknown = fake_device("00000000:b3:00.0");
  unknown.index = 1;
  monitor.watch(fake_device());
  monitor.watch(unknown);
  EXPECT_TRUE(monitor.report(0).available);
  const NvmlDeviceReport report = monitor.report(1);
  EXPECT_FALSE(report.available);
  EXPECT_EQ(report.reason_unavailable, "NVML has no device at PCI 00000000:b3:00.0: Not Found (NVML error 6)");
  EXPECT_EQ(monitor.report(7).reason_unavailable, "device 7 was not watched");
  // Without a PCI bus id the device is found by its index.
  DeviceInfo by_index = fake_device("");
  by_index.index = 0;
  NvmlMonitor second(FAPROBE_FAKE_NVML);
  second.watch(by_index);
  EXPECT_TRUE(second.report(0).available) << second.report(0).reason_unavailable;
}

TEST_F(FakeNvml, TheSamplingThreadSamplesUntilStopped) {
  answer("0,0,0,4");
  NvmlMonitor monitor(FAPROBE_FAKE_NVML);
  monitor.watch(fake_device());
  monitor.start_sampling(std::chrono::milliseconds(1));
  // Waits for the thread's samples (a bounded wait, not a timing assertion).
  for (int i = 0; i < 10000 && monitor.report(0).samples < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  monitor.stop_sampling();
  const NvmlDeviceReport report = monitor.report(0);
  ASSERT_GE(report.samples, 5);
  EXPECT_EQ(report.throttle_reasons_seen, Names{"sw_power_cap"});
  EXPECT_EQ(monitor.report(0).samples, report.samples);  // stopped: no more samples
}

}  // namespace
}  // namespace faprobe::gpu
