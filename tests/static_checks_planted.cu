// Planted defects for test_static_checks, compiled without -warn-spills/-warn-lmem-usage and never linked
// into faprobe; the static checks must flag both, which shows they can fail:
// - local_array_kernel: a per-thread array indexed by data cannot live in registers, so ptxas puts it in
//   local memory (a 256-byte stack frame, STL/LDL in the SASS);
// - register_spill_kernel: 96 running sums live across a loop, built with --maxrregcount=24 (tests/CMakeLists),
//   so ptxas spills registers.
// Neither has a tensor-core instruction, for the negative instruction check.
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/common/spans.hpp"

namespace faprobe::planted {

__global__ void local_array_kernel(cuda::GlobalSpan<float> values, cuda::GlobalSpan<const std::uint32_t> slots) {
  float per_thread[64];
  for (int i = 0; i < 64; ++i) per_thread[i] = 0.0f;
  for (std::size_t i = 0; i < slots.size(); ++i) per_thread[slots[i] % 64] += values[i];
  const unsigned thread = cuda::isa::thread_idx_x();
  values[thread] = per_thread[slots[thread] % 64];
}

__global__ void register_spill_kernel(cuda::GlobalSpan<float> values, cuda::GlobalSpan<const float> inputs) {
  constexpr int kSums = 96;
  float sums[kSums];
  for (int s = 0; s < kSums; ++s) sums[s] = float(s);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float x = inputs[i];
    for (int s = 0; s < kSums; ++s) sums[s] = sums[s] * x + float(s + 1);
  }
  float total = 0.0f;
  for (int s = 0; s < kSums; ++s) total += sums[s] * sums[(s + 7) % kSums];
  values[cuda::isa::thread_idx_x()] = total;
}

}  // namespace faprobe::planted
