// Planted defects for test_static_checks, compiled without -warn-spills/-warn-lmem-usage and never linked
// into faprobe; the static checks must flag each, which shows they can fail:
// - local_array_kernel: a per-thread array indexed by data cannot live in registers, so ptxas puts it in
//   local memory (a 256-byte stack frame, STL/LDL in the SASS);
// - register_spill_kernel: 96 running sums live across a loop in at most 24 registers (__maxnreg__: a cap on
//   this kernel alone, since --maxrregcount for the file would tell ptxas every kernel's register count at
//   entry and hide the next defect), so ptxas spills registers;
// - setmaxnreg_unbounded_kernel (sm_90a): one warpgroup hands registers to the other with setmaxnreg, as
//   FA-3's producer and consumers do, but without __launch_bounds__(threads, blocks per SM) ptxas cannot
//   tell the register count at entry and drops it: "(C7508) Potential Performance Loss: 'setmaxnreg'
//   ignored", and no USETMAXREG in the SASS. Its twin setmaxnreg_bounded_kernel, with the bounds, is the
//   control that the same checks pass. (Below sm_90a the instruction layer traps instead.)
// - register_budget_mismatch_kernel (sm_90a): FA-3's warp specialization and register budget (fa3.cuh's
//   Traits: 384 threads entering with registers_at_entry = 168, then 128 · 24 + 256 · 240), compiled with
//   __launch_bounds__ for two CTAs per SM instead of one, so ptxas allots 80 registers at entry and the
//   consumers' setmaxnreg.inc to 240 would wait for registers that never come free. The check of registers
//   at entry must report it; its twin register_budget_kept_kernel, with fa3's own bounds, is the control.
// None has a tensor-core instruction, for the negative instruction check. The kernels that lose speed are in
// static_checks_planted_speed.cu.
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/common/spans.hpp"
#include "cuda/fa3/fa3.cuh"

namespace faprobe::planted {

__global__ void local_array_kernel(cuda::GlobalSpan<float> values, cuda::GlobalSpan<const std::uint32_t> slots) {
  float per_thread[64];
  for (int i = 0; i < 64; ++i) per_thread[i] = 0.0f;
  for (std::size_t i = 0; i < slots.size(); ++i) per_thread[slots[i] % 64] += values[i];
  const unsigned thread = cuda::isa::thread_idx_x();
  values[thread] = per_thread[slots[thread] % 64];
}

__global__ void __maxnreg__(24) register_spill_kernel(cuda::GlobalSpan<float> values, cuda::GlobalSpan<const float> inputs) {
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

// Two warpgroups: the first (a producer's role) releases registers down to 40, the second (a consumer's)
// takes up to 232; 256 threads at one block per SM fit either way.
__device__ void exchange_registers(cuda::GlobalSpan<float> values) {
  const unsigned thread = cuda::isa::thread_idx_x();
  if (thread / 128 == 0) {
    cuda::isa::setmaxnreg<40, false>();
    values[thread] = 1.0f;
  } else {
    cuda::isa::setmaxnreg<232, true>();
    values[thread] = 2.0f;
  }
}

__global__ void setmaxnreg_unbounded_kernel(cuda::GlobalSpan<float> values) { exchange_registers(values); }

__global__ void __launch_bounds__(256, 1) setmaxnreg_bounded_kernel(cuda::GlobalSpan<float> values) {
  exchange_registers(values);
}

// FA-3's roles as far as registers go: warpgroup 0 gives its registers away, warpgroups 1 and 2 take them.
using Fa3Budget = cuda::fa3::Traits<128, 2, 128, 128>;

__device__ void trade_registers_as_fa3(cuda::GlobalSpan<float> values) {
  const unsigned thread = cuda::isa::thread_idx_x();
  if (thread / 128 == 0) {
    cuda::isa::setmaxnreg<Fa3Budget::producer_registers, false>();
    values[thread] = 1.0f;
  } else {
    cuda::isa::setmaxnreg<Fa3Budget::consumer_registers, true>();
    values[thread] = 2.0f;
  }
}

__global__ void __launch_bounds__(Fa3Budget::threads, 2 * Fa3Budget::min_ctas_per_sm)
    register_budget_mismatch_kernel(cuda::GlobalSpan<float> values) {
  trade_registers_as_fa3(values);
}

__global__ void __launch_bounds__(Fa3Budget::threads, Fa3Budget::min_ctas_per_sm)
    register_budget_kept_kernel(cuda::GlobalSpan<float> values) {
  trade_registers_as_fa3(values);
}

}  // namespace faprobe::planted
