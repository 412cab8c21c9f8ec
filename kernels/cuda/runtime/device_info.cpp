// DeviceInfo's plain-C++ parts, shared by the CUDA build (gpu.cpp) and the build without CUDA
// (gpu_stub.cpp): the compute capability as text and the device object of the --json header.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cuda/runtime/gpu.hpp"

namespace faprobe::gpu {

std::string DeviceInfo::compute_capability() const { return fmt::format("{}.{}", compute_major, compute_minor); }

void to_json(nlohmann::json& out, const DeviceInfo& info) {
  out = nlohmann::json{{"index", info.index},
                       {"name", info.name},
                       {"compute_capability", info.compute_capability()},
                       {"sm_count", info.sm_count},
                       {"memory_total_bytes", info.memory_total_bytes},
                       {"l2_bytes", info.l2_bytes},
                       {"clock_mhz", info.clock_mhz},
                       {"memory_clock_mhz", info.memory_clock_mhz},
                       {"memory_bus_bits", info.memory_bus_bits},
                       {"driver_version", info.driver_version},
                       {"runtime_version", info.runtime_version},
                       {"pci_bus_id", info.pci_bus_id}};
}

}  // namespace faprobe::gpu
