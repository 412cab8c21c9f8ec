// The machine a run happened on, for the --json header and for the default memory limit.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace faprobe {

struct HostInfo {
  std::string cpu_model;
  int cores = 0;  // logical CPUs this process may use
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_available_bytes = 0;
  std::string hostname;
};

HostInfo host_info();
void to_json(nlohmann::json& out, const HostInfo& info);

// Default --mem-limit: available memory less a margin (10 % and 512 MiB) for the process itself.
std::uint64_t default_host_memory_limit();

}  // namespace faprobe
