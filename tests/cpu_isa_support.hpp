// For the tests of the CPU kernels' code paths (kernels/cpu/cpu_isa.hpp): FAPROBE_MAX_CPU_ISA and
// FAPROBE_CPU_PATH set for one scope (the previous value, or its absence, restored after), and the levels
// this CPU runs.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cpu/cpu_isa.hpp"

namespace faprobe::test_support {

// An environment variable set for one scope (the previous value, or its absence, restored after).
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name_)) previous_ = old;
    ::setenv(name_, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (previous_) {
      ::setenv(name_, previous_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

class ScopedMaxCpuIsa : public ScopedVariable {
 public:
  explicit ScopedMaxCpuIsa(const std::string& value) : ScopedVariable(cpu::kMaxCpuIsaVariable, value) {}
  explicit ScopedMaxCpuIsa(cpu::CpuIsa isa) : ScopedMaxCpuIsa(std::string(cpu::to_string(isa))) {}
};

// FAPROBE_CPU_PATH for one scope: a path forced where the case can take it.
class ScopedCpuPath : public ScopedVariable {
 public:
  explicit ScopedCpuPath(const std::string& path) : ScopedVariable(cpu::kCpuPathVariable, path) {}
};

inline const std::vector<cpu::CpuIsa>& all_cpu_isas() {
  static const std::vector<cpu::CpuIsa> levels = {cpu::CpuIsa::portable, cpu::CpuIsa::avx512,
                                                  cpu::CpuIsa::avx512_bf16, cpu::CpuIsa::amx};
  return levels;
}

// Why this CPU cannot run `level` (for GTEST_SKIP), or "" when it can: the machine CI runs on may lack AMX
// or AVX-512, and then says so instead of passing silently.
inline std::string cannot_run(cpu::CpuIsa level) {
  if (cpu::detected_cpu_isa() >= level) return "";
  std::string why = "this CPU runs up to " + std::string(cpu::to_string(cpu::detected_cpu_isa())) + ", not " +
                    std::string(cpu::to_string(level));
  if (level == cpu::CpuIsa::amx && !cpu::amx_refusal().empty()) why += ": " + cpu::amx_refusal();
  return why;
}

}  // namespace faprobe::test_support
