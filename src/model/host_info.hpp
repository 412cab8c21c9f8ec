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

// What bounds the memory this process may still take: the smallest of the host's MemAvailable, the
// process's RLIMIT_AS and RLIMIT_DATA, and its cgroup's limit less its usage (v2 memory.max - memory.current,
// v1 memory.limit_in_bytes - memory.usage_in_bytes), each read afresh; bound_by names the one that won
// ("MemAvailable", "RLIMIT_AS", "RLIMIT_DATA", "cgroup memory.max"). A reading that fails or reads 0 takes no
// part; when none is left, bytes is 0 and bound_by "".
// The cgroup's files are looked up through /proc/self/cgroup under /sys/fs/cgroup, or, for the tests, in the
// directory FAPROBE_TEST_CGROUP_DIR names; FAPROBE_TEST_MEMINFO names a file read instead of /proc/meminfo.
struct HostMemoryLimit {
  std::uint64_t bytes = 0;
  std::string bound_by;
};
HostMemoryLimit host_memory_limit();

// Default --mem-limit: host_memory_limit() less a margin for the process itself (10 % and 512 MiB, or half
// of it where that margin would leave less than half). Never 0: with no reading it is UINT64_MAX (no limit).
std::uint64_t default_host_memory_limit();
// What bound default_host_memory_limit(), for a skip's reason: "MemAvailable", "RLIMIT_AS", ...
std::string default_host_memory_limit_source();

}  // namespace faprobe
