#include "model/host_info.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

namespace faprobe {
namespace {
std::uint64_t meminfo_bytes(const std::string& field, const char* path = "/proc/meminfo") {
  std::ifstream file(path);
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
// What the compiler was allowed to use, from its predefined macros (this file is built with FAPROBE_MARCH).
std::string compiled_vector_isa() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#elif defined(__AVX__)
  return "avx";
#elif defined(__SSE4_2__)
  return "sse4.2";
#elif defined(__SSE2__)
  return "sse2";
#elif defined(__ARM_FEATURE_SVE)
  return "sve";
#elif defined(__ARM_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

std::vector<std::string> compiled_vector_extensions() {
  std::vector<std::string> extensions;
  auto add = [&](bool defined, const char* name) {
    if (defined) extensions.emplace_back(name);
  };
#if defined(__x86_64__)
  add(true, "sse2");
#endif
#if defined(__SSE4_2__)
  add(true, "sse4.2");
#endif
#if defined(__AVX__)
  add(true, "avx");
#endif
#if defined(__AVX2__)
  add(true, "avx2");
#endif
#if defined(__FMA__)
  add(true, "fma");
#endif
#if defined(__F16C__)
  add(true, "f16c");
#endif
#if defined(__AVX512F__)
  add(true, "avx512f");
#endif
#if defined(__AVX512BW__)
  add(true, "avx512bw");
#endif
#if defined(__AVX512DQ__)
  add(true, "avx512dq");
#endif
#if defined(__AVX512VL__)
  add(true, "avx512vl");
#endif
#if defined(__AVX512BF16__)
  add(true, "avx512bf16");
#endif
#if defined(__AVX512FP16__)
  add(true, "avx512fp16");
#endif
#if defined(__AVX512VNNI__)
  add(true, "avx512vnni");
#endif
#if defined(__AVXVNNI__)
  add(true, "avxvnni");
#endif
#if defined(__AMX_TILE__)
  add(true, "amx-tile");
#endif
#if defined(__AMX_BF16__)
  add(true, "amx-bf16");
#endif
#if defined(__AMX_INT8__)
  add(true, "amx-int8");
#endif
#if defined(__ARM_NEON)
  add(true, "neon");
#endif
#if defined(__ARM_FEATURE_SVE)
  add(true, "sve");
#endif
  return extensions;
}

// What this CPU has, asked at run time.
std::string cpu_vector_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  if (__builtin_cpu_supports("avx")) return "avx";
  if (__builtin_cpu_supports("sse4.2")) return "sse4.2";
  return "sse2";
#else
  return compiled_vector_isa();
#endif
}

}  // namespace

std::vector<std::string> vector_extensions_from_cpu_flags(const std::string& flags) {
  // (the kernel's name, the compiler's), in the order of compiled_vector_extensions.
  static constexpr std::pair<const char*, const char*> kNames[] = {
      {"sse2", "sse2"},              {"sse4_2", "sse4.2"},          {"avx", "avx"},
      {"avx2", "avx2"},              {"fma", "fma"},                {"f16c", "f16c"},
      {"avx512f", "avx512f"},        {"avx512bw", "avx512bw"},      {"avx512dq", "avx512dq"},
      {"avx512vl", "avx512vl"},      {"avx512_bf16", "avx512bf16"}, {"avx512_fp16", "avx512fp16"},
      {"avx512_vnni", "avx512vnni"}, {"avx_vnni", "avxvnni"},       {"amx_tile", "amx-tile"},
      {"amx_bf16", "amx-bf16"},      {"amx_int8", "amx-int8"},      {"amx_fp16", "amx-fp16"},
      {"asimd", "neon"},             {"sve", "sve"},                {"sve2", "sve2"}};
  std::istringstream words(flags);
  std::vector<std::string> present;
  for (std::string word; words >> word;) present.push_back(word);
  std::vector<std::string> extensions;
  for (const auto& [kernel_name, name] : kNames) {
    if (std::find(present.begin(), present.end(), kernel_name) != present.end()) extensions.emplace_back(name);
  }
  return extensions;
}

HostInfo host_info() {
  HostInfo info;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool have_flags = false;
  while (std::getline(cpuinfo, line) && (info.cpu_model.empty() || !have_flags)) {
    if (line.rfind("model name", 0) == 0 && info.cpu_model.empty()) info.cpu_model = line.substr(line.find(':') + 2);
    // The first CPU's flags stand for all of them (Linux lists the same set for every core of a machine).
    if (!have_flags && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) &&
        line.find(':') != std::string::npos) {
      info.cpu_vector_extensions = vector_extensions_from_cpu_flags(line.substr(line.find(':') + 1));
      have_flags = true;
    }
  }
  info.cores = int(std::thread::hardware_concurrency());
  info.memory_total_bytes = meminfo_bytes("MemTotal");
  info.memory_available_bytes = meminfo_bytes("MemAvailable");
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) info.hostname = name;
  info.march = FAPROBE_MARCH;
  info.vector_isa = compiled_vector_isa();
  info.vector_extensions = compiled_vector_extensions();
  info.cpu_vector_isa = cpu_vector_isa();
  return info;
}

void to_json(nlohmann::json& out, const HostInfo& info) {
  out = nlohmann::json{{"cpu_model", info.cpu_model},
                       {"cores", info.cores},
                       {"memory_total_bytes", info.memory_total_bytes},
                       {"memory_available_bytes", info.memory_available_bytes},
                       {"march", info.march},
                       {"vector_isa", info.vector_isa},
                       {"vector_extensions", info.vector_extensions},
                       {"cpu_vector_isa", info.cpu_vector_isa},
                       {"cpu_vector_extensions", info.cpu_vector_extensions}};
}

namespace {

// The first number in a file (a cgroup's memory.max holds "max" for none: nullopt, as for a failed read).
std::optional<std::uint64_t> file_number(const std::string& path) {
  std::ifstream file(path);
  std::uint64_t value = 0;
  if (!(file >> value)) return std::nullopt;
  return value;
}

// The directory of this process's memory cgroup, and whether it is cgroup v1's.
std::pair<std::string, bool> cgroup_directory() {
  if (const char* test = std::getenv("FAPROBE_TEST_CGROUP_DIR"); test != nullptr && *test != '\0') {
    return {test, std::ifstream(std::string(test) + "/memory.limit_in_bytes").good()};
  }
  std::ifstream file("/proc/self/cgroup");
  std::string v2;
  for (std::string line; std::getline(file, line);) {
    // "0::/user.slice/..." (v2), "4:memory:/docker/..." (v1)
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers == "memory") return {"/sys/fs/cgroup/memory" + path, true};
    if (controllers.empty() && line.rfind("0:", 0) == 0) v2 = "/sys/fs/cgroup" + path;
  }
  return {v2, false};
}

}  // namespace

HostMemoryLimit host_memory_limit() {
  HostMemoryLimit limit;
  const auto consider = [&limit](std::uint64_t bytes, const char* source) {
    if (bytes != 0 && (limit.bytes == 0 || bytes < limit.bytes)) limit = {bytes, source};
  };
  const char* test_meminfo = std::getenv("FAPROBE_TEST_MEMINFO");
  consider(meminfo_bytes("MemAvailable", test_meminfo != nullptr && *test_meminfo != '\0' ? test_meminfo : "/proc/meminfo"),
           "MemAvailable");
  // An rlimit bounds the whole address space (data segment), so what is left is the limit less what the
  // process has mapped already (/proc/self/status VmSize, VmData).
  for (const auto& [resource, name, used] : {std::tuple{RLIMIT_AS, "RLIMIT_AS", "VmSize"},
                                             std::tuple{RLIMIT_DATA, "RLIMIT_DATA", "VmData"}}) {
    rlimit value{};
    if (getrlimit(resource, &value) != 0 || value.rlim_cur == RLIM_INFINITY) continue;
    const std::uint64_t mapped = meminfo_bytes(used, "/proc/self/status");
    if (value.rlim_cur > mapped) consider(value.rlim_cur - mapped, name);
  }
  if (const auto [directory, v1] = cgroup_directory(); !directory.empty()) {
    const auto max = file_number(directory + (v1 ? "/memory.limit_in_bytes" : "/memory.max"));
    const auto current = file_number(directory + (v1 ? "/memory.usage_in_bytes" : "/memory.current"));
    if (max && current && *max > *current) {  // a full cgroup (usage at the limit) is a failed reading too
      consider(*max - *current, v1 ? "cgroup memory.limit_in_bytes" : "cgroup memory.max");
    }
  }
  return limit;
}

namespace {
std::uint64_t with_margin(std::uint64_t bytes) {
  if (bytes == 0) return std::numeric_limits<std::uint64_t>::max();  // nothing could be read: no limit
  const std::uint64_t margin = bytes / 10 + (std::uint64_t(512) << 20);
  return bytes / 2 > margin ? bytes - margin : std::max<std::uint64_t>(bytes / 2, 1);
}
}  // namespace

std::uint64_t default_host_memory_limit() { return with_margin(host_memory_limit().bytes); }

std::string default_host_memory_limit_source() { return host_memory_limit().bound_by; }

}  // namespace faprobe
