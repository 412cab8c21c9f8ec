// The GPU side of the part-2 and part-3 instruction probes (bodies in matrix_probes.cuh and
// conversion_probes.cuh): one __global__ wrapper each, and its launcher for `faprobe probes` (declared in
// probe_launch_gpu.hpp), which compares them with the emulator. Built for every CMAKE_CUDA_ARCHITECTURES
// entry (default sm_80 and sm_90a), so the build also checks that the instruction layer's mma.sync,
// ldmatrix, cp.async, ex2 (plain and .ftz), load and cvt PTX assembles.
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "cuda/probes/conversion_probes.cuh"
#include "cuda/probes/matrix_probes.cuh"
#include "cuda/probes/probe_launch_cuda.cuh"
#include "cuda/probes/probe_launch_gpu.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::probes {

__global__ void mma_m16n8k16_kernel(MmaProbeType type, GlobalSpan<const std::uint16_t> a,
                                    GlobalSpan<const std::uint16_t> b, GlobalSpan<const float> c,
                                    GlobalSpan<float> d, GlobalSpan<const std::uint32_t> source_lane) {
  mma_m16n8k16(type, a, b, c, d, source_lane);
}

// One instantiation per (matrices, .trans): with both known at compile time the body's register loop
// unrolls and its fragments stay in registers (a runtime count would index them through local memory).
template <unsigned Matrices, bool Transpose>
__global__ void ldmatrix_kernel(GlobalSpan<const std::uint16_t> image, GlobalSpan<const std::uint32_t> row_offsets,
                                GlobalSpan<std::uint32_t> out) {
  ldmatrix(Matrices, Transpose, image, row_offsets, out);
}

__global__ void async_copy_kernel(GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> copied,
                                  GlobalSpan<std::uint32_t> loaded, GlobalSpan<float> exp2) {
  async_copy(in, copied, loaded, exp2);
}

__global__ void ex2_ftz_kernel(GlobalSpan<const std::uint32_t> in, GlobalSpan<float> out) { ex2_ftz(in, out); }

__global__ void convert_kernel(ConversionProbe probe, GlobalSpan<const std::uint32_t> in,
                               GlobalSpan<std::uint32_t> out) {
  convert(probe, in, out);
}

namespace on_gpu {

void mma_m16n8k16(const emu::LaunchConfig& config, MmaProbeType type, GlobalSpan<const std::uint16_t> a,
                  GlobalSpan<const std::uint16_t> b, GlobalSpan<const float> c, GlobalSpan<float> d,
                  GlobalSpan<const std::uint32_t> source_lane) {
  mma_m16n8k16_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      type, a, b, c, d, source_lane);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void ldmatrix(const emu::LaunchConfig& config, unsigned matrices, bool transpose, GlobalSpan<const std::uint16_t> image,
              GlobalSpan<const std::uint32_t> row_offsets, GlobalSpan<std::uint32_t> out) {
  using Kernel = void (*)(GlobalSpan<const std::uint16_t>, GlobalSpan<const std::uint32_t>, GlobalSpan<std::uint32_t>);
  Kernel kernel = nullptr;
  switch (matrices * 2 + (transpose ? 1 : 0)) {
    case 2: kernel = ldmatrix_kernel<1, false>; break;
    case 3: kernel = ldmatrix_kernel<1, true>; break;
    case 4: kernel = ldmatrix_kernel<2, false>; break;
    case 5: kernel = ldmatrix_kernel<2, true>; break;
    case 8: kernel = ldmatrix_kernel<4, false>; break;
    case 9: kernel = ldmatrix_kernel<4, true>; break;
    default: throw std::invalid_argument("ldmatrix loads 1, 2 or 4 matrices, not " + std::to_string(matrices));
  }
  kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(image, row_offsets, out);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void async_copy(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> copied,
                GlobalSpan<std::uint32_t> loaded, GlobalSpan<float> exp2) {
  async_copy_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      in, copied, loaded, exp2);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void ex2_ftz(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> in, GlobalSpan<float> out) {
  ex2_ftz_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(in, out);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

void convert(const emu::LaunchConfig& config, ConversionProbe probe, GlobalSpan<const std::uint32_t> in,
             GlobalSpan<std::uint32_t> out) {
  convert_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(probe, in,
                                                                                                     out);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

}  // namespace on_gpu
}  // namespace faprobe::cuda::probes
