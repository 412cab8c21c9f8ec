// The machine a run happened on, for the --json header and for the default memory limit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace faprobe {

struct HostInfo {
  std::string cpu_model;
  int cores = 0;  // logical CPUs this process may use
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_available_bytes = 0;
  std::string hostname;
  // The CPU code's instruction set: the -march it was built with (FAPROBE_MARCH: "native", "x86-64-v4", or
  // "" for the compiler's default), the widest vector extension that gave it (vector_isa: avx512, avx2,
  // avx, sse4.2, sse2, neon, sve or scalar) and the extensions beside it (fma, f16c, avx512bw, ...); and the
  // widest one this CPU has (cpu_vector_isa), which differs when the binary was built for another machine,
  // and the extensions this CPU has (cpu_vector_extensions, from /proc/cpuinfo's flags: avx512bf16, avxvnni,
  // amx-bf16, ... in the compiler's -m names, as vector_extensions).
  std::string march;
  std::string vector_isa;
  std::vector<std::string> vector_extensions;
  std::string cpu_vector_isa;
  std::vector<std::string> cpu_vector_extensions;
};

HostInfo host_info();

// The vector extensions named in a /proc/cpuinfo "flags" (x86) or "Features" (Arm) line, as the compiler's
// -m options name them (the kernel's avx512_bf16 is avx512bf16, amx_tile amx-tile, asimd neon), in a fixed
// order from SSE2 to AMX; flags that are not vector extensions are left out.
std::vector<std::string> vector_extensions_from_cpu_flags(const std::string& flags);
void to_json(nlohmann::json& out, const HostInfo& info);

// Default --mem-limit: available memory less a margin (10 % and 512 MiB) for the process itself.
std::uint64_t default_host_memory_limit();

}  // namespace faprobe
