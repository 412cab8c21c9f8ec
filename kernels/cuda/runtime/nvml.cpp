// NVML through dlopen (the interface: nvml.hpp). The handful of NVML types and entry points faprobe uses
// are declared here from the NVML API reference rather than taken from nvml.h, which is not installed on
// most machines that have the driver: nvmlReturn_t is an int-sized enum (NVML_SUCCESS = 0), nvmlDevice_t
// an opaque pointer, nvmlClockType_t NVML_CLOCK_SM = 1 and NVML_CLOCK_MEM = 2, power in milliwatts, and
// the clock event reasons a 64-bit mask. Since driver 535 the reasons are read by
// nvmlDeviceGetCurrentClocksEventReasons; older drivers only have nvmlDeviceGetCurrentClocksThrottleReasons,
// the same call under its former name, so either is taken.
#include "cuda/runtime/nvml.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace faprobe::gpu {

namespace {

using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;
constexpr int kNvmlClockMem = 2;

// nvmlClocksEventReason* bits, in bit order; a slowdown is one that lowers clocks under load.
struct ReasonBit {
  std::uint64_t bit;
  const char* name;
  bool slowdown;
};
constexpr ReasonBit kReasonBits[] = {
    {0x1, "gpu_idle", false},
    {0x2, "applications_clocks_setting", false},
    {0x4, "sw_power_cap", true},
    {0x8, "hw_slowdown", true},
    {0x10, "sync_boost", false},
    {0x20, "sw_thermal_slowdown", true},
    {0x40, "hw_thermal_slowdown", true},
    {0x80, "hw_power_brake_slowdown", true},
    {0x100, "display_clock_setting", false},
};
constexpr std::uint64_t kGpuIdle = 0x1;
constexpr std::uint64_t kNotReported = 0x1 | 0x2;  // gpu_idle, applications_clocks_setting

template <class Function> Function symbol(void* handle, const char* name) {
  return reinterpret_cast<Function>(dlsym(handle, name));
}

}  // namespace

std::string nvml_library_name() {
  const char* setting = std::getenv("FAPROBE_NVML_LIBRARY");
  return setting != nullptr && *setting != '\0' ? setting : "libnvidia-ml.so.1";
}

std::vector<std::string> clock_event_reason_names(std::uint64_t mask) {
  std::vector<std::string> names;
  std::uint64_t known = 0;
  for (const ReasonBit& reason : kReasonBits) {
    known |= reason.bit;
    if ((mask & reason.bit) != 0) names.emplace_back(reason.name);
  }
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t value = std::uint64_t(1) << bit;
    if ((mask & value) != 0 && (known & value) == 0) names.push_back(fmt::format("{:#x}", value));
  }
  return names;
}

std::vector<std::string> slowdown_reasons(const std::vector<std::string>& reasons) {
  std::vector<std::string> slowdowns;
  for (const ReasonBit& reason : kReasonBits) {
    if (reason.slowdown && std::find(reasons.begin(), reasons.end(), reason.name) != reasons.end()) {
      slowdowns.emplace_back(reason.name);
    }
  }
  return slowdowns;
}

// NVML's entry points. The reasons come from whichever of the two names the library has.
struct NvmlMonitor::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*enforced_power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*clock_event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;  // optional: only for the summary

  std::string error(NvmlReturn status) const {
    const char* text = error_string(status);
    return fmt::format("{} (NVML error {})", text != nullptr ? text : "unknown error", status);
  }
  std::optional<unsigned> read_clock(NvmlReturn (*query)(NvmlDevice, int, unsigned*), NvmlDevice device,
                                     int type) const {
    unsigned mhz = 0;
    if (query(device, type, &mhz) != kNvmlSuccess) return std::nullopt;
    return mhz;
  }
};

struct NvmlMonitor::Watched {
  DeviceInfo device;
  NvmlDevice handle = nullptr;
  NvmlDeviceReport report;
  std::uint64_t reasons_seen = 0;  // the union of every sample's mask
};

NvmlMonitor::NvmlMonitor(const std::string& library) : library_(library) {
  handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    // dlerror() names the file itself ("libnvidia-ml.so.1: cannot open shared object file: ..."): said once.
    const char* error = dlerror();
    std::string why = error != nullptr ? error : "dlopen failed";
    if (why.rfind(library + ": ", 0) == 0) why.erase(0, library.size() + 2);
    reason_unavailable_ = fmt::format("cannot load {}: {}", library, why);
    return;
  }
  auto api = std::make_unique<Api>();
  std::vector<std::string> missing;
  auto require = [&](auto& entry, const char* name) {
    entry = symbol<std::remove_reference_t<decltype(entry)>>(handle_, name);
    if (entry == nullptr) missing.emplace_back(name);
  };
  require(api->init, "nvmlInit_v2");
  require(api->shutdown, "nvmlShutdown");
  require(api->error_string, "nvmlErrorString");
  require(api->handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  require(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  require(api->clock_info, "nvmlDeviceGetClockInfo");
  require(api->max_clock_info, "nvmlDeviceGetMaxClockInfo");
  require(api->enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  api->clock_event_reasons = symbol<decltype(api->clock_event_reasons)>(handle_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api->clock_event_reasons == nullptr) {
    api->clock_event_reasons = symbol<decltype(api->clock_event_reasons)>(handle_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  if (api->clock_event_reasons == nullptr) {
    missing.emplace_back("nvmlDeviceGetCurrentClocksEventReasons (or ...ThrottleReasons)");
  }
  api->driver_version = symbol<decltype(api->driver_version)>(handle_, "nvmlSystemGetDriverVersion");
  if (!missing.empty()) {
    reason_unavailable_ = fmt::format("{} is not NVML: it has no {}", library, fmt::join(missing, ", "));
    dlclose(handle_);  // none of its functions was called: nothing needs it loaded
    handle_ = nullptr;
    return;
  }
  if (const NvmlReturn status = api->init(); status != kNvmlSuccess) {
    reason_unavailable_ = fmt::format("nvmlInit_v2 failed: {}", api->error(status));
    return;
  }
  initialized_ = true;
  if (api->driver_version != nullptr) {
    char version[96] = {};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
    if (api->driver_version(version, sizeof(version)) == kNvmlSuccess) driver_version_ = version;
  }
  api_ = std::move(api);
}

NvmlMonitor::~NvmlMonitor() {
  stop_sampling();
  if (initialized_) (void)api_->shutdown();
  // No dlclose (pynvml does not unload it either): NVML may leave threads or exit handlers of its own behind
  // nvmlShutdown, and unloading code they could still run buys nothing at the end of a run.
}

nlohmann::json NvmlMonitor::summary() const {
  return {{"available", available()},
          {"reason_unavailable", reason_unavailable_},
          {"library", library_},
          {"driver_version", driver_version_.empty() ? nlohmann::json(nullptr) : nlohmann::json(driver_version_)}};
}

void NvmlMonitor::watch(const DeviceInfo& device) {
  Watched watched;
  watched.device = device;
  if (!available()) {
    watched.report.reason_unavailable = reason_unavailable_;
  } else {
    const NvmlReturn status = device.pci_bus_id.empty()
                                  ? api_->handle_by_index(unsigned(device.index), &watched.handle)
                                  : api_->handle_by_pci_bus_id(device.pci_bus_id.c_str(), &watched.handle);
    if (status != kNvmlSuccess) {
      watched.report.reason_unavailable =
          device.pci_bus_id.empty()
              ? fmt::format("NVML has no device {}: {}", device.index, api_->error(status))
              : fmt::format("NVML has no device at PCI {}: {}", device.pci_bus_id, api_->error(status));
    } else {
      NvmlDeviceReport& report = watched.report;
      report.available = true;
      report.max_sm_clock_mhz = api_->read_clock(api_->max_clock_info, watched.handle, kNvmlClockSm);
      report.max_mem_clock_mhz = api_->read_clock(api_->max_clock_info, watched.handle, kNvmlClockMem);
      unsigned milliwatts = 0;
      if (api_->enforced_power_limit(watched.handle, &milliwatts) == kNvmlSuccess) {
        report.power_limit_w = double(milliwatts) / 1000.0;
      }
    }
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  watched_.push_back(std::move(watched));
  sample_locked();
}

void NvmlMonitor::sample() {
  const std::lock_guard<std::mutex> lock(mutex_);
  sample_locked();
}

void NvmlMonitor::sample_locked() {
  for (Watched& watched : watched_) {
    if (!watched.report.available) continue;
    NvmlDeviceReport& report = watched.report;
    unsigned long long mask = 0;
    const bool have_reasons = api_->clock_event_reasons(watched.handle, &mask) == kNvmlSuccess;
    report.sm_clock_mhz = api_->read_clock(api_->clock_info, watched.handle, kNvmlClockSm);
    report.mem_clock_mhz = api_->read_clock(api_->clock_info, watched.handle, kNvmlClockMem);
    if (have_reasons) watched.reasons_seen |= mask;
    if (have_reasons && (mask & kGpuIdle) == 0 && report.sm_clock_mhz) {
      report.busy_sm_clock_mhz_min = std::min(report.busy_sm_clock_mhz_min.value_or(*report.sm_clock_mhz),
                                              *report.sm_clock_mhz);
    }
    report.throttle_reasons_seen = clock_event_reason_names(watched.reasons_seen & ~kNotReported);
    ++report.samples;
  }
}

void NvmlMonitor::start_sampling(std::chrono::milliseconds period) {
  if (!available() || sampler_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = false;
  }
  // The thread starts with every signal blocked (it inherits this thread's mask, restored right after), so
  // that Ctrl-C is never delivered to it.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  sampler_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_signal_.wait_for(lock, period, [this] { return stop_requested_; })) sample_locked();
  });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void NvmlMonitor::stop_sampling() {
  if (!sampler_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = true;
  }
  stop_signal_.notify_all();
  sampler_.join();
}

NvmlDeviceReport NvmlMonitor::report(int index) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const Watched& watched : watched_) {
    if (watched.device.index == index) return watched.report;
  }
  NvmlDeviceReport missing;
  missing.reason_unavailable = available() ? fmt::format("device {} was not watched", index) : reason_unavailable_;
  return missing;
}

std::vector<std::string> NvmlMonitor::slowdown_lines() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> lines;
  for (const Watched& watched : watched_) {
    const std::vector<std::string> slowdowns = slowdown_reasons(watched.report.throttle_reasons_seen);
    if (slowdowns.empty()) continue;
    lines.push_back(fmt::format("GPU {} ({}) was slowed down during the run: {}", watched.device.index,
                                watched.device.name, fmt::join(slowdowns, ", ")));
  }
  return lines;
}

void to_json(nlohmann::json& out, const NvmlDeviceReport& report) {
  auto optional = [](const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(nullptr); };
  out = nlohmann::json{{"available", report.available}, {"reason_unavailable", report.reason_unavailable}};
  if (!report.available) return;
  out["sm_clock_mhz"] = optional(report.sm_clock_mhz);
  out["mem_clock_mhz"] = optional(report.mem_clock_mhz);
  out["max_sm_clock_mhz"] = optional(report.max_sm_clock_mhz);
  out["max_mem_clock_mhz"] = optional(report.max_mem_clock_mhz);
  out["busy_sm_clock_mhz_min"] = optional(report.busy_sm_clock_mhz_min);
  out["power_limit_w"] = optional(report.power_limit_w);
  out["throttle_reasons_seen"] = report.throttle_reasons_seen;
  out["samples"] = report.samples;
}

}  // namespace faprobe::gpu
