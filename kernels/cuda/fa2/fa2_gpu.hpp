// Internal to cuda.fa2: its GPU side. forward_gpu (fa2_gpu.cu) picks the instantiation for (element type,
// head_dim, tile) and calls its launch function, defined with its __global__ wrapper in the instantiation's
// generated file (fa2_kernel.cu.in). The declarations are plain C++ (called from fa2_emulated.cpp in CUDA
// builds); launch_kernel, which the instantiation files share, is compiled by nvcc only.
#pragma once

#include "cuda/fa2/fa2.cuh"

#if defined(__CUDACC__)
#include "cuda/common/launch_gpu.cuh"
#endif

namespace faprobe::cuda {
struct Tile;  // cuda/common/tile_list.hpp: not included, so that each kernel's file stays small for nvcc
}  // namespace faprobe::cuda

namespace faprobe::cuda::fa2 {

// Launches the kernel for params on the cudaStream_t stream (as void*); throws gpu::CudaError on a failed
// launch and std::invalid_argument when there is no instantiation.
void forward_gpu(const Params& params, ElementType element, int head_dim, const Tile& tile, void* stream);

// One per instantiation, in its generated file.
template <class Element, int HeadDim, int BlockQ, int BlockK>
void launch(const Params& params, void* stream);
#define FAPROBE_FA2_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) \
  template <>                                                                       \
  void launch<isa::E, D, BQ, BK>(const Params& params, void* stream);
#include "cuda/fa2/fa2_instantiations.inc"
#undef FAPROBE_FA2_INSTANTIATION

#if defined(__CUDACC__)
// Launches Kernel on FA-2's grid: (query blocks, heads, batch); y and z are at most 65535 each
// (make_attention_params checks batch·heads against an int only, fa2_forward the extents).
template <auto Kernel, class T>
void launch_kernel(const char* name, const Params& params, void* stream) {
  cuda::launch_kernel<Kernel, T>(
      name, params,
      dim3(T::query_blocks(params.seq_q), static_cast<unsigned>(params.heads), static_cast<unsigned>(params.batch)),
      stream);
}
#endif

}  // namespace faprobe::cuda::fa2
