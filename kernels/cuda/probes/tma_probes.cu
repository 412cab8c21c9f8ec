// The GPU side of the part-4 instruction probes (body in tma_probes.cuh): the __global__ wrapper and its
// launcher for `faprobe probes` (declared in probe_launch_gpu.hpp). The tensor maps are kernel parameters
// (`const __grid_constant__`), so the generic address the tensor copies take is that of the parameter
// itself. Built for every CMAKE_CUDA_ARCHITECTURES entry: for sm_90a the body (whose SASS must hold UTMALDG
// and UTMASTG, tests/test_static_checks.cpp); below sm_90 a stub that traps, since TMA does not exist there
// and the suite never launches the probe on such a GPU (Probe::min_sm).
#include <cuda_runtime.h>

#include "cuda/probes/probe_launch_cuda.cuh"
#include "cuda/probes/probe_launch_gpu.hpp"
#include "cuda/probes/tma_probes.cuh"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::probes {

__global__ void tma_copy_kernel(const __grid_constant__ isa::TensorMap load_map,
                                const __grid_constant__ isa::TensorMap store_map,
                                GlobalSpan<std::uint32_t> shared_words) {
#if FAPROBE_SM90_PTX
  tma_copy(load_map, store_map, shared_words);
#else
  (void)load_map, (void)store_map, (void)shared_words;
  __trap();
#endif
}

namespace on_gpu {

void tma_copy(const emu::LaunchConfig& config, const isa::TensorMap& load_map, const isa::TensorMap& store_map,
              GlobalSpan<std::uint32_t> shared_words) {
  tma_copy_kernel<<<to_dim3(config.grid), to_dim3(config.block), config.shared_bytes, probe_stream()>>>(
      load_map, store_map, shared_words);
  FAPROBE_CHECK_LAUNCH(config.kernel_name.c_str());
}

}  // namespace on_gpu
}  // namespace faprobe::cuda::probes
