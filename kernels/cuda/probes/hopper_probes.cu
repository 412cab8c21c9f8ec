// The GPU side of the part-5 instruction probes (bodies in hopper_probes.cuh): one __global__ wrapper each and
// its launcher for `faprobe probes` (declared in probe_launch_gpu.hpp). Built for every CMAKE_CUDA_ARCHITECTURES
// entry: for sm_90a the bodies, whose SASS must hold HGMMA and QGMMA (wgmma, f16/bf16 and e4m3), STSM
// (stmatrix), SYNCS (mbarrier) and ELECT (elect.sync), tests/test_static_checks.cpp; below sm_90 stubs that
// trap, since these instructions do not exist there and the suite never launches the probes on such a GPU
// (Probe::min_sm).
#include <cuda_runtime.h>

#include "cuda/probes/hopper_probes.cuh"
#include "cuda/probes/probe_launch_cuda.cuh"
#include "cuda/probes/probe_launch_gpu.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::probes {

// Each wrapper: the body on sm_90 and up, a trap below.
__global__ void __launch_bounds__(wgmma_probe_threads, 1)
    wgmma_f16_ss_swizzle128_kernel(GlobalSpan<const std::uint16_t> a, GlobalSpan<const std::uint16_t> b,
                                   GlobalSpan<float> d) {
#if FAPROBE_SM90_PTX
  wgmma_f16_ss_swizzle128(a, b, d);
#else
  (void)a, (void)b, (void)d;
  __trap();
#endif
}

__global__ void __launch_bounds__(wgmma_probe_threads, 1)
    wgmma_bf16_rs_n_major_kernel(GlobalSpan<const std::uint16_t> a, GlobalSpan<const std::uint16_t> b,
                                 GlobalSpan<float> d) {
#if FAPROBE_SM90_PTX
  wgmma_bf16_rs_n_major(a, b, d);
#else
  (void)a, (void)b, (void)d;
  __trap();
#endif
}

__global__ void __launch_bounds__(wgmma_probe_threads, 1)
    wgmma_e4m3_ss_swizzle64_kernel(GlobalSpan<const float> a, GlobalSpan<const float> b, GlobalSpan<float> d) {
#if FAPROBE_SM90_PTX
  wgmma_e4m3_ss_swizzle64(a, b, d);
#else
  (void)a, (void)b, (void)d;
  __trap();
#endif
}

__global__ void stmatrix_x4_kernel(GlobalSpan<const std::uint32_t> fragments,
                                   GlobalSpan<const std::uint32_t> row_offsets, GlobalSpan<std::uint32_t> images) {
#if FAPROBE_SM90_PTX
  stmatrix_x4(fragments, row_offsets, images);
#else
  (void)fragments, (void)row_offsets, (void)images;
  __trap();
#endif
}

__global__ void mbarrier_phases_kernel(GlobalSpan<const std::uint32_t> values,
                                       GlobalSpan<const std::uint32_t> member_masks,
                                       GlobalSpan<std::uint32_t> records) {
#if FAPROBE_SM90_PTX
  mbarrier_phases(values, member_masks, records);
#else
  (void)values, (void)member_masks, (void)records;
  __trap();
#endif
}

namespace on_gpu {

void wgmma_f16_ss_swizzle128(const emu::LaunchConfig& config, GlobalSpan<const std::uint16_t> a,
                             GlobalSpan<const std::uint16_t> b, GlobalSpan<float> d) {
  wgmma_f16_ss_swizzle128_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      a, b, d);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void wgmma_bf16_rs_n_major(const emu::LaunchConfig& config, GlobalSpan<const std::uint16_t> a,
                           GlobalSpan<const std::uint16_t> b, GlobalSpan<float> d) {
  wgmma_bf16_rs_n_major_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      a, b, d);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void wgmma_e4m3_ss_swizzle64(const emu::LaunchConfig& config, GlobalSpan<const float> a, GlobalSpan<const float> b,
                             GlobalSpan<float> d) {
  wgmma_e4m3_ss_swizzle64_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      a, b, d);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void stmatrix_x4(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> fragments,
                 GlobalSpan<const std::uint32_t> row_offsets, GlobalSpan<std::uint32_t> images) {
  stmatrix_x4_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      fragments, row_offsets, images);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void mbarrier_phases(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> values,
                     GlobalSpan<const std::uint32_t> member_masks, GlobalSpan<std::uint32_t> records) {
  mbarrier_phases_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      values, member_masks, records);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

}  // namespace on_gpu
}  // namespace faprobe::cuda::probes
