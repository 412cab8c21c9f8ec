// Internal to cuda.fa3: its GPU side (sm_90a only). forward_gpu (fa3_gpu.cu) picks the instantiation for
// (element type, head_dim) and calls its launch function, defined with its __global__ wrapper in
// fa3_<dtype>_hdim<d>.cu. The kernel takes its Params as a __grid_constant__ parameter: the tensor maps
// must stay in parameter space, where cp.async.bulk.tensor reads them.
#pragma once

#include "cuda/fa3/fa3.cuh"
#include "cuda/fa3/transpose_v.cuh"

#if defined(__CUDACC__)
#include "cuda/common/launch_gpu.cuh"
#endif

namespace faprobe::cuda::fa3 {

// Launches the persistent kernel (min(tiles, SMs) CTAs) for params on the cudaStream_t stream (as void*);
// throws gpu::CudaError on a failed launch, std::invalid_argument when there is no instantiation, and
// std::runtime_error when the binary holds no sm_90a code.
void forward_gpu(const Params& params, ElementType element, int head_dim, void* stream);

// The e4m3 prologue (transpose_v.cuh) on the stream.
void transpose_v_gpu(const TransposeParams& params, void* stream);

// One per instantiation file.
template <class Element, int HeadDim>
void launch(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::Half, 64>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::Half, 128>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::Half, 256>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::BFloat16, 64>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::BFloat16, 128>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::BFloat16, 256>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::E4M3, 64>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::E4M3, 128>(const Params& params, unsigned ctas, void* stream);
template <> void launch<isa::E4M3, 256>(const Params& params, unsigned ctas, void* stream);

}  // namespace faprobe::cuda::fa3
