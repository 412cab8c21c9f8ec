// Launching a tensor-core attention kernel on the GPU (nvcc only): the one launch path of cuda.fa1 and
// cuda.fa2, used by their per-instantiation .cu files.
#pragma once

#include <cuda_runtime.h>

#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda {

// Launches Kernel (a __global__ wrapper of a kernel body taking Params) on grid with T::threads threads and
// T::shared_bytes of dynamic shared memory on the cudaStream_t stream, opting in above the default 48 KiB
// once per process (CUDA C++ Programming Guide, "Shared Memory": dynamic allocations above 48 KB need
// cudaFuncAttributeMaxDynamicSharedMemorySize), then checks the launch, naming the kernel on failure.
template <auto Kernel, class T, class Params>
void launch_kernel(const char* name, const Params& params, dim3 grid, void* stream) {
  if constexpr (T::shared_bytes > 48 * 1024) {
    static const bool opted_in = [] {
      FAPROBE_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(T::shared_bytes)));
      return true;
    }();
    (void)opted_in;
  }
  Kernel<<<grid, T::threads, T::shared_bytes, static_cast<cudaStream_t>(stream)>>>(params);
  FAPROBE_CHECK_LAUNCH(name);
}

}  // namespace faprobe::cuda
