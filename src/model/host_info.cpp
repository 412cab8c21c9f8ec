#include "model/host_info.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace faprobe {
namespace {
std::uint64_t meminfo_bytes(const std::string& field) {
  std::ifstream file("/proc/meminfo");
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream values(line.substr(field.size() + 1));
      std::uint64_t kib = 0;
      values >> kib;
      return kib * 1024;
    }
  }
  return 0;
}
}  // namespace

HostInfo host_info() {
  HostInfo info;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      info.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  }
  info.cores = int(std::thread::hardware_concurrency());
  info.memory_total_bytes = meminfo_bytes("MemTotal");
  info.memory_available_bytes = meminfo_bytes("MemAvailable");
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) info.hostname = name;
  return info;
}

void to_json(nlohmann::json& out, const HostInfo& info) {
  out = nlohmann::json{{"cpu_model", info.cpu_model},
                       {"cores", info.cores},
                       {"memory_total_bytes", info.memory_total_bytes},
                       {"memory_available_bytes", info.memory_available_bytes}};
}

std::uint64_t default_host_memory_limit() {
  const std::uint64_t available = host_info().memory_available_bytes;
  const std::uint64_t margin = available / 10 + (std::uint64_t(512) << 20);
  return available > margin ? available - margin : 0;
}

}  // namespace faprobe
