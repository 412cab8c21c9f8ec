// What the GPU's clocks did while a run went on, from NVML (the NVIDIA Management Library), for the --json
// devices entries and the warning after the table: the SM and memory clocks and their maxima, the enforced
// power limit, and the union of the clock event ("throttle") reasons seen over the run's samples.
//
// NVML is loaded at run time (dlopen of libnvidia-ml.so.1, which comes with the driver, not the toolkit):
// nothing links it and its header is not needed, so the same code builds with and without CUDA and a
// binary runs where the driver is missing. Everything that can fail (no library, a library without NVML's
// symbols, nvmlInit failing, a device NVML does not know) makes the monitor or that device "unavailable"
// with the reason; nothing here throws or fails a run. FAPROBE_NVML_LIBRARY names another library to load
// (the tests point it at a missing file, a file that is not a library, one without NVML's symbols, and a
// fake NVML).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cuda/runtime/gpu.hpp"

namespace faprobe::gpu {

// The library the monitor loads: FAPROBE_NVML_LIBRARY when set, else "libnvidia-ml.so.1".
std::string nvml_library_name();

// The names of the clock event reasons in an NVML bit mask (nvmlClocksEventReason*, nvml.h), in bit order:
// gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown, sync_boost, sw_thermal_slowdown,
// hw_thermal_slowdown, hw_power_brake_slowdown, display_clock_setting; a bit NVML may add later as "0x...".
std::vector<std::string> clock_event_reason_names(std::uint64_t mask);
// Those of `reasons` that mean the GPU ran slower than it could (a power cap, thermal or hardware
// slowdown, the power brake): what the table warns about. Sync boost and display clocks do not.
std::vector<std::string> slowdown_reasons(const std::vector<std::string>& reasons);

// One watched device over the run.
struct NvmlDeviceReport {
  bool available = false;
  std::string reason_unavailable;  // why not, when !available
  // At the last sample; nullopt where NVML did not answer (a query this GPU does not support).
  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz;
  std::optional<unsigned> max_sm_clock_mhz, max_mem_clock_mhz;  // NVML_CLOCK_SM / _MEM maxima
  std::optional<double> power_limit_w;                          // nvmlDeviceGetEnforcedPowerLimit
  // The lowest SM clock among the samples in which the GPU was not idle: under load, the clock it really ran at.
  std::optional<unsigned> busy_sm_clock_mhz_min;
  // The union over every sample, without gpu_idle and applications_clocks_setting (they say nothing about
  // slowdowns under load), in bit order.
  std::vector<std::string> throttle_reasons_seen;
  int samples = 0;
};
void to_json(nlohmann::json& out, const NvmlDeviceReport& report);

class NvmlMonitor {
 public:
  // Loads `library` and initializes NVML; never throws (available() says whether it worked).
  explicit NvmlMonitor(const std::string& library = nvml_library_name());
  ~NvmlMonitor();  // stops sampling, then nvmlShutdown (the library stays loaded)
  NvmlMonitor(const NvmlMonitor&) = delete;
  NvmlMonitor& operator=(const NvmlMonitor&) = delete;

  bool available() const { return reason_unavailable_.empty(); }
  const std::string& reason_unavailable() const { return reason_unavailable_; }
  // {available, reason_unavailable, library, driver_version}: the top-level `nvml` of the --json header.
  nlohmann::json summary() const;

  // Watches a CUDA device, found in NVML by its PCI bus id (CUDA's and NVML's device orders may differ), or
  // by index when it has none. Its clocks' maxima and power limit are read now, its first sample taken.
  void watch(const DeviceInfo& device);
  // One sample of every watched device: the clocks now, and its clock event reasons added to the union.
  void sample();
  // sample() every `period` on a thread of its own until stop_sampling() or destruction; what a run does
  // while it times GPU cases, so that a power cap during a case is seen and not only after it.
  void start_sampling(std::chrono::milliseconds period);
  void stop_sampling();

  // The device watched under `index` (DeviceInfo::index); unavailable with the reason when it is not watched.
  NvmlDeviceReport report(int index) const;
  // One line per watched device that was slowed down ("GPU 0 (NVIDIA H200) was slowed down during the run:
  // sw_power_cap, hw_thermal_slowdown"); empty when none was.
  std::vector<std::string> slowdown_lines() const;

 private:
  struct Api;
  struct Watched;
  void sample_locked();

  std::string library_;
  std::string reason_unavailable_;
  std::string driver_version_;
  void* handle_ = nullptr;     // dlopen's
  std::unique_ptr<Api> api_;   // NVML's entry points, once every required one was found
  bool initialized_ = false;   // nvmlInit_v2 succeeded: nvmlShutdown is owed
  mutable std::mutex mutex_;   // the watched devices, between the sampling thread and the run's thread
  std::vector<Watched> watched_;
  std::thread sampler_;
  std::condition_variable stop_signal_;
  bool stop_requested_ = false;
};

}  // namespace faprobe::gpu
