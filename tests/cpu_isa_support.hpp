// For the tests of the CPU kernels' code paths (kernels/cpu/cpu_isa.hpp): FAPROBE_MAX_CPU_ISA set for one
// scope (the previous value, or its absence, restored after), and the levels this CPU runs.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cpu/cpu_isa.hpp"

namespace faprobe::test_support {

class ScopedMaxCpuIsa {
 public:
  explicit ScopedMaxCpuIsa(const std::string& value) {
    if (const char* old = std::getenv(cpu::kMaxCpuIsaVariable)) previous_ = old;
    ::setenv(cpu::kMaxCpuIsaVariable, value.c_str(), 1);
  }
  explicit ScopedMaxCpuIsa(cpu::CpuIsa isa) : ScopedMaxCpuIsa(std::string(cpu::to_string(isa))) {}
  ~ScopedMaxCpuIsa() {
    if (previous_) {
      ::setenv(cpu::kMaxCpuIsaVariable, previous_->c_str(), 1);
    } else {
      ::unsetenv(cpu::kMaxCpuIsaVariable);
    }
  }
  ScopedMaxCpuIsa(const ScopedMaxCpuIsa&) = delete;
  ScopedMaxCpuIsa& operator=(const ScopedMaxCpuIsa&) = delete;

 private:
  std::optional<std::string> previous_;
};

inline const std::vector<cpu::CpuIsa>& all_cpu_isas() {
  static const std::vector<cpu::CpuIsa> levels = {cpu::CpuIsa::portable, cpu::CpuIsa::avx512,
                                                  cpu::CpuIsa::avx512_bf16};
  return levels;
}

}  // namespace faprobe::test_support
