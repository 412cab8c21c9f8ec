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
// None of those has a tensor-core instruction, for the negative instruction check. Then the kernels that lose
// the speed the steady-state checks guard, each FA-2's or FA-3's own body with a planted defect (their
// Defect enums), compiled with the production kernels' launch bounds:
// - planted_fa3_slow_softmax: ex2.approx without .ftz (a range check and two multiplies around every MUFU.EX2)
//   and a compare-and-select max (no FMNMX): over the instruction budget;
// - planted_fa3_mask_every_block, planted_fa2_mask_every_block: the mask behind a run-time test in the
//   steady-state loop (a branch per block, index arithmetic per score): over the budget;
// - planted_fa3_unpinned_wait: without wgmma_wait_after ptxas moves the P·V wait above the softmax: no
//   exponential left between the two waits;
// - planted_fa3_scores_read_in_flight: the softmax reads S while its wgmma may still run (wait_group 2 where
//   1 is needed): ptxas serializes the kernel's wgmma ("Potential Performance Loss: wgmma.mma_async
//   instructions are serialized").
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/common/spans.hpp"
#include "cuda/fa2/fa2.cuh"
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

// FA-3 (bf16, head_dim 128, 128x128 tiles) and FA-2 (bf16, head_dim 128) with a planted loss of speed.
using PlantedFa3 = cuda::fa3::TraitsOf<cuda::isa::BFloat16, 128, 128, 128>;
template <cuda::fa3::Defect kDefect>
__device__ void planted_fa3(const cuda::fa3::Params& params) {
  cuda::fa3::forward_body<cuda::isa::BFloat16, 128, 128, 128, kDefect>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_slow_softmax(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::slow_softmax>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_mask_every_block(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::mask_every_block>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_unpinned_wait(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::unpinned_wait>(params);
}
__global__ void __launch_bounds__(PlantedFa3::threads, PlantedFa3::min_ctas_per_sm)
    planted_fa3_scores_read_in_flight(const __grid_constant__ cuda::fa3::Params params) {
  planted_fa3<cuda::fa3::Defect::scores_read_in_flight>(params);
}
using PlantedFa2 = cuda::fa2::Traits<128, 128, 32>;
__global__ void __launch_bounds__(PlantedFa2::threads, PlantedFa2::min_ctas_per_sm)
    planted_fa2_mask_every_block(const cuda::fa2::Params params) {
  cuda::fa2::forward_body<cuda::isa::BFloat16, 128, 128, 32, cuda::fa2::Defect::mask_every_block>(params);
}

}  // namespace faprobe::planted
