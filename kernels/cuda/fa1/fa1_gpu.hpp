// Internal to cuda.fa1: its GPU side. forward_gpu (fa1_gpu.cu) picks the instantiation for (element type,
// head_dim) and calls its launch function, defined with its __global__ wrapper in fa1_<dtype>_hdim<d>.cu.
// The declarations are plain C++ (called from fa1_emulated.cpp in CUDA builds); launch_kernel, which the
// instantiation files share, is compiled by nvcc only.
#pragma once

#include "cuda/fa1/fa1.cuh"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include "cuda/runtime/gpu.hpp"
#endif

namespace faprobe::cuda::fa1 {

// Launches the kernel for params on the cudaStream_t stream (as void*); throws gpu::CudaError on a failed
// launch and std::invalid_argument when there is no instantiation.
void forward_gpu(const Params& params, ElementType element, int head_dim, void* stream);

// One per instantiation file.
template <class Element, int HeadDim>
void launch(const Params& params, void* stream);
template <> void launch<isa::Half, 64>(const Params& params, void* stream);
template <> void launch<isa::Half, 128>(const Params& params, void* stream);
template <> void launch<isa::Half, 256>(const Params& params, void* stream);
template <> void launch<isa::BFloat16, 64>(const Params& params, void* stream);
template <> void launch<isa::BFloat16, 128>(const Params& params, void* stream);
template <> void launch<isa::BFloat16, 256>(const Params& params, void* stream);

#if defined(__CUDACC__)
// Launches Kernel (a __global__ wrapper of forward_body) with batch·heads CTAs of Traits::threads threads
// and Traits::shared_bytes of dynamic shared memory, opting in above the default 48 KiB once per process
// (CUDA C++ Programming Guide, "Shared Memory": dynamic allocations above 48 KB need
// cudaFuncAttributeMaxDynamicSharedMemorySize), then checks the launch.
template <auto Kernel, int HeadDim>
void launch_kernel(const char* name, const Params& params, void* stream) {
  using T = Traits<HeadDim>;
  if constexpr (T::shared_bytes > 48 * 1024) {
    static const bool opted_in = [] {
      FAPROBE_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(T::shared_bytes)));
      return true;
    }();
    (void)opted_in;
  }
  const unsigned grid = static_cast<unsigned>(params.batch) * static_cast<unsigned>(params.heads);
  Kernel<<<grid, T::threads, T::shared_bytes, static_cast<cudaStream_t>(stream)>>>(params);
  FAPROBE_CHECK_LAUNCH(name);
}
#endif

}  // namespace faprobe::cuda::fa1
