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

// No static shared memory: what the probe sees is where the dynamic shared memory starts on its own, as in
// every faprobe kernel (all their shared memory is dynamic, through the instruction layer).
__global__ void dynamic_shared_alignment_kernel(GlobalSpan<const std::uint32_t> offsets,
                                                GlobalSpan<std::uint32_t> out) {
  dynamic_shared_alignment(offsets, out);
}

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

// Above 48 KiB of dynamic shared memory a kernel must opt in (CUDA C++ Programming Guide, "Shared Memory").
void dynamic_shared_alignment(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> offsets,
                              GlobalSpan<std::uint32_t> out) {
  if (config.shared_bytes > 48 * 1024)
    FAPROBE_CUDA_CHECK(cudaFuncSetAttribute(dynamic_shared_alignment_kernel,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(config.shared_bytes)));
  dynamic_shared_alignment_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      offsets, out);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

}  // namespace on_gpu
}  // namespace faprobe::cuda::probes
