// The GPU side of the part-1 instruction probes (bodies in warp_probes.cuh): one __global__ wrapper each,
// and its launcher for `faprobe probes` (declared in probe_launch_gpu.hpp), which compares them with the
// emulator. Built for every CMAKE_CUDA_ARCHITECTURES entry (default sm_80 and sm_90a), so the build also
// checks that the instruction layer's inline PTX assembles.
#include <cuda_runtime.h>

#include "cuda/probes/probe_launch_cuda.cuh"
#include "cuda/probes/probe_launch_gpu.hpp"
#include "cuda/probes/warp_probes.cuh"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::probes {

__global__ void block_sum_kernel(GlobalSpan<const float> values, GlobalSpan<float> block_sums) {
  block_sum(values, block_sums);
}

__global__ void warp_sum_kernel(GlobalSpan<const float> values, GlobalSpan<float> sums) { warp_sum(values, sums); }

__global__ void shuffle_kernel(ShuffleProbe probe, unsigned operand, unsigned width, GlobalSpan<const std::uint32_t> in,
                               GlobalSpan<std::uint32_t> out) {
  shuffle(probe, operand, width, in, out);
}

__global__ void vote_kernel(GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out) { vote(in, out); }

namespace on_gpu {

void block_sum(const emu::LaunchConfig& config, GlobalSpan<const float> values, GlobalSpan<float> block_sums) {
  block_sum_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(values,
                                                                                                       block_sums);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void warp_sum(const emu::LaunchConfig& config, GlobalSpan<const float> values, GlobalSpan<float> sums) {
  warp_sum_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(values, sums);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void shuffle(const emu::LaunchConfig& config, ShuffleProbe probe, unsigned operand, unsigned width,
             GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out) {
  shuffle_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      probe, operand, width, in, out);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void vote(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out) {
  vote_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(in, out);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

}  // namespace on_gpu
}  // namespace faprobe::cuda::probes
