// A stand-in for libnvidia-ml.so.1, loaded by the NVML monitor's tests through FAPROBE_NVML_LIBRARY
// (tests/test_nvml.cpp) on machines without a GPU: the entry points faprobe uses, with NVML's signatures,
// serving one device at PCI bus id 00000000:65:00.0 (index 0). Built twice: with the current name of the
// clock event reasons query (nvmlDeviceGetCurrentClocksEventReasons) and, with FAKE_NVML_OLD_DRIVER, with
// only the name older drivers have (nvmlDeviceGetCurrentClocksThrottleReasons).
//
// Read at nvmlInit_v2: FAKE_NVML_INIT_STATUS (what nvmlInit_v2 returns, default 0 = NVML_SUCCESS) and
// FAKE_NVML_REASONS, the reason masks of successive queries as comma-separated decimal numbers (the last one
// repeats; default 0). The SM clock is 1980 MHz in a query whose mask has no slowdown bit (power cap 0x4,
// hardware 0x8, thermal 0x20 / 0x40, power brake 0x80) and 1410 MHz in one that has; 345 MHz when idle (0x1).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotFound = 6;
constexpr int kUninitialized = 1;
constexpr unsigned long long kSlowdownBits = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

int g_device = 0;  // the one device's handle is this object's address
bool g_initialized = false;
std::vector<unsigned long long> g_reasons;
std::size_t g_next_reason = 0;
unsigned long long g_current = 0;  // the mask of the latest reasons query

void read_settings() {
  g_reasons.clear();
  g_next_reason = 0;
  g_current = 0;
  const char* reasons = std::getenv("FAKE_NVML_REASONS");
  std::string text = reasons != nullptr ? reasons : "0";
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) g_reasons.push_back(std::strtoull(item.c_str(), nullptr, 10));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (g_reasons.empty()) g_reasons.push_back(0);
}

bool is_device(void* device) { return device == &g_device; }

int reasons(void* device, unsigned long long* mask) {
  if (!g_initialized) return kUninitialized;
  if (!is_device(device) || mask == nullptr) return kInvalidArgument;
  g_current = g_reasons[g_next_reason < g_reasons.size() ? g_next_reason : g_reasons.size() - 1];
  ++g_next_reason;
  *mask = g_current;
  return kSuccess;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* status = std::getenv("FAKE_NVML_INIT_STATUS");
  if (status != nullptr && std::atoi(status) != kSuccess) return std::atoi(status);
  read_settings();
  g_initialized = true;
  return kSuccess;
}

int nvmlShutdown() {
  g_initialized = false;
  return kSuccess;
}

const char* nvmlErrorString(int status) {
  switch (status) {
    case kSuccess: return "Success";
    case kUninitialized: return "Uninitialized";
    case kInvalidArgument: return "Invalid Argument";
    case kNotFound: return "Not Found";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  if (version == nullptr || length < 10) return kInvalidArgument;
  std::strcpy(version, "999.99.99");
  return kSuccess;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* pci_bus_id, void** device) {
  if (!g_initialized) return kUninitialized;
  if (pci_bus_id == nullptr || device == nullptr) return kInvalidArgument;
  if (std::strcmp(pci_bus_id, "00000000:65:00.0") != 0 && std::strcmp(pci_bus_id, "0000:65:00.0") != 0) return kNotFound;
  *device = &g_device;
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (!g_initialized) return kUninitialized;
  if (device == nullptr) return kInvalidArgument;
  if (index != 0) return kNotFound;
  *device = &g_device;
  return kSuccess;
}

// NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2.
int nvmlDeviceGetClockInfo(void* device, int type, unsigned* mhz) {
  if (!g_initialized) return kUninitialized;
  if (!is_device(device) || mhz == nullptr || (type != 1 && type != 2)) return kInvalidArgument;
  if (type == 2) {
    *mhz = 3201;
  } else {
    *mhz = (g_current & 0x1) != 0 ? 345 : (g_current & kSlowdownBits) != 0 ? 1410 : 1980;
  }
  return kSuccess;
}

int nvmlDeviceGetMaxClockInfo(void* device, int type, unsigned* mhz) {
  if (!g_initialized) return kUninitialized;
  if (!is_device(device) || mhz == nullptr || (type != 1 && type != 2)) return kInvalidArgument;
  *mhz = type == 1 ? 1980 : 3201;
  return kSuccess;
}

int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned* milliwatts) {
  if (!g_initialized) return kUninitialized;
  if (!is_device(device) || milliwatts == nullptr) return kInvalidArgument;
  *milliwatts = 700000;
  return kSuccess;
}

#if defined(FAKE_NVML_OLD_DRIVER)
int nvmlDeviceGetCurrentClocksThrottleReasons(void* device, unsigned long long* mask) { return reasons(device, mask); }
#else
int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* mask) { return reasons(device, mask); }
#endif

}  // extern "C"
