// Internal to cuda.fa3: its GPU side (sm_90a only). forward_gpu (fa3_gpu.cu) picks the instantiation for
// (element type, head_dim, tile) and calls its launch function, defined with its __global__ wrapper in the
// instantiation's generated file (fa3_kernel.cu.in). The kernel takes its Params as a __grid_constant__
// parameter: the tensor maps must stay in parameter space, where cp.async.bulk.tensor reads them.
#pragma once

#include "cuda/fa3/fa3.cuh"
#include "cuda/fa3/transpose_v.cuh"

#if defined(__CUDACC__)
#include "cuda/common/launch_gpu.cuh"
#endif

namespace faprobe::cuda {
struct Tile;  // cuda/common/tile_list.hpp: not included, so that each kernel's file stays small for nvcc
}  // namespace faprobe::cuda

namespace faprobe::cuda::fa3 {

// Launches the persistent kernel (min(tiles, SMs) CTAs) for params on the cudaStream_t stream (as void*);
// throws gpu::CudaError on a failed launch and std::invalid_argument when there is no instantiation.
void forward_gpu(const Params& params, ElementType element, int head_dim, const Tile& tile, void* stream);

// The e4m3 prologue (transpose_v.cuh) on the stream.
void transpose_v_gpu(const TransposeParams& params, void* stream);

// One per instantiation, in its generated file.
template <class Element, int HeadDim, int BlockQ, int BlockK>
void launch(const Params& params, unsigned ctas, void* stream);
#define FAPROBE_FA3_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) \
  template <>                                                                       \
  void launch<isa::E, D, BQ, BK>(const Params& params, unsigned ctas, void* stream);
#include "cuda/fa3/fa3_instantiations.inc"
#undef FAPROBE_FA3_INSTANTIATION

}  // namespace faprobe::cuda::fa3
