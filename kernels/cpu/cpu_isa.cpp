#include "cpu/cpu_isa.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace faprobe::cpu {

std::string_view to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::portable: return "portable";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512_bf16: return "avx512-bf16";
  }
  return "?";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view text) {
  for (CpuIsa isa : {CpuIsa::portable, CpuIsa::avx512, CpuIsa::avx512_bf16}) {
    if (text == to_string(isa)) return isa;
  }
  return std::nullopt;
}

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // __builtin_cpu_supports reads cpuid once and counts a feature only where the OS saves its register state.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return CpuIsa::avx512_bf16;
  if (avx512) return CpuIsa::avx512;
#endif
  return CpuIsa::portable;
}

std::optional<CpuIsa> max_cpu_isa_setting() {
  const char* setting = std::getenv(kMaxCpuIsaVariable);
  if (setting == nullptr || *setting == '\0') return std::nullopt;
  if (const std::optional<CpuIsa> isa = parse_cpu_isa(setting)) return isa;
  throw std::invalid_argument(std::string(kMaxCpuIsaVariable) + ": '" + setting +
                              "' is not an instruction set level (allowed: portable, avx512, avx512-bf16)");
}

std::optional<std::string> cpu_path_setting() {
  const char* value = std::getenv(kCpuPathVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::string setting(value);
  if (setting == "portable-fp32" || setting == "avx512-fp32" || setting == "avx512-bf16") return setting;
  throw std::invalid_argument(std::string(kCpuPathVariable) + ": '" + setting +
                              "' is not a code path (allowed: portable-fp32, avx512-fp32, avx512-bf16)");
}

CpuIsa cpu_isa() {
  const CpuIsa detected = detected_cpu_isa();
  const std::optional<CpuIsa> cap = max_cpu_isa_setting();
  return cap ? std::min(detected, *cap) : detected;
}

}  // namespace faprobe::cpu
