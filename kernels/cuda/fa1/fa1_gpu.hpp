// Internal to cuda.fa1: its GPU side. forward_gpu (fa1_gpu.cu) picks the instantiation for (element type,
// head_dim) and calls its launch function, defined with its __global__ wrapper in fa1_<dtype>_hdim<d>.cu.
// The declarations are plain C++ (called from fa1_emulated.cpp in CUDA builds); launch_kernel, which the
// instantiation files share, is compiled by nvcc only.
#pragma once

#include "cuda/fa1/fa1.cuh"

#if defined(__CUDACC__)
#include "cuda/common/launch_gpu.cuh"
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
// Launches Kernel with the paper's grid: batch·heads CTAs.
template <auto Kernel, int HeadDim>
void launch_kernel(const char* name, const Params& params, void* stream) {
  cuda::launch_kernel<Kernel, Traits<HeadDim>>(
      name, params, dim3(static_cast<unsigned>(params.batch) * static_cast<unsigned>(params.heads)), stream);
}
#endif

}  // namespace faprobe::cuda::fa1
