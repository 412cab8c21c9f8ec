#include "cpu/cpu_isa.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FAPROBE_X86_64_GNU 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace faprobe::cpu {

std::string_view to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::portable: return "portable";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512_bf16: return "avx512-bf16";
    case CpuIsa::amx: return "amx";
  }
  return "?";
}

namespace {
constexpr CpuIsa kLevels[] = {CpuIsa::portable, CpuIsa::avx512, CpuIsa::avx512_bf16, CpuIsa::amx};

// "a, b, c": the allowed values an error message lists.
template <class Values, class Name> std::string joined(const Values& values, Name name) {
  std::string list;
  for (const auto& value : values) list += (list.empty() ? "" : ", ") + std::string(name(value));
  return list;
}
}  // namespace

std::optional<CpuIsa> parse_cpu_isa(std::string_view text) {
  for (CpuIsa isa : kLevels) {
    if (text == to_string(isa)) return isa;
  }
  return std::nullopt;
}

namespace {

#if FAPROBE_X86_64_GNU
// AMX as the CPU lists it (CPUID leaf 7: EDX bit 24 AMX-TILE, bit 22 AMX-BF16) and as the OS enables it
// (XCR0 bits 17 and 18, the tile configuration and data), then the process's permission: Linux 5.16 on hands
// out the 8 KiB of tile data per thread only to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM with
// XFEATURE_XTILEDATA), once, before any thread touches a tile. The answer is kept for the process.
struct AmxState {
  bool listed = false;  // the CPU has AMX-TILE and AMX-BF16
  bool usable = false;  // ... and this process may use them
  std::string refusal;
};

AmxState ask_for_amx() {
  AmxState state;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return state;
  state.listed = (edx >> 24 & 1u) != 0 && (edx >> 22 & 1u) != 0;
  if (!state.listed) return state;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low >> 17 & 3u) != 3u) {
    state.refusal = "the OS does not enable the AMX tile state (XCR0 bits 17-18)";
    return state;
  }
  constexpr long kArchReqXcompPerm = 0x1023;  // <asm/prctl.h>, Linux 5.16
  constexpr long kXfeatureXtiledata = 18;
  if (::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    state.refusal = std::string("Linux refused this process the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ") +
                    std::strerror(errno) + ")";
    return state;
  }
  state.usable = true;
  return state;
}

const AmxState& amx_state() {
  static const AmxState state = ask_for_amx();
  return state;
}
#endif

}  // namespace

std::string amx_refusal() {
#if FAPROBE_X86_64_GNU
  return amx_state().refusal;
#else
  return "";
#endif
}

CpuIsa detected_cpu_isa() {
#if FAPROBE_X86_64_GNU
  // __builtin_cpu_supports reads cpuid once and counts a feature only where the OS saves its register state.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return amx_state().usable ? CpuIsa::amx : CpuIsa::avx512_bf16;
  if (avx512) return CpuIsa::avx512;
#endif
  return CpuIsa::portable;
}

std::optional<CpuIsa> max_cpu_isa_setting() {
  const char* setting = std::getenv(kMaxCpuIsaVariable);
  if (setting == nullptr || *setting == '\0') return std::nullopt;
  if (const std::optional<CpuIsa> isa = parse_cpu_isa(setting)) return isa;
  throw std::invalid_argument(std::string(kMaxCpuIsaVariable) + ": '" + setting +
                              "' is not an instruction set level (allowed: " +
                              joined(kLevels, [](CpuIsa isa) { return to_string(isa); }) + ")");
}

std::optional<std::string> cpu_path_setting() {
  const char* value = std::getenv(kCpuPathVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::string setting(value);
  for (const char* path : kCpuPaths) {
    if (setting == path) return setting;
  }
  throw std::invalid_argument(std::string(kCpuPathVariable) + ": '" + setting +
                              "' is not a code path (allowed: " +
                              joined(kCpuPaths, [](const char* path) { return path; }) + ")");
}

CpuIsa cpu_isa() {
  const CpuIsa detected = detected_cpu_isa();
  const std::optional<CpuIsa> cap = max_cpu_isa_setting();
  return cap ? std::min(detected, *cap) : detected;
}

}  // namespace faprobe::cpu
