// cuda.fa2 for fp16 with head_dim 64: the __global__ wrapper of the kernel body (fa2.cuh) and its launch.
// One small file per (dtype, head_dim) so that the instantiations compile in parallel.
#include "cuda/fa2/fa2_gpu.hpp"

namespace faprobe::cuda::fa2 {

__global__ void __launch_bounds__(Traits<64>::threads, Traits<64>::min_ctas_per_sm) fa2_fp16_hdim64(Params params) {
  forward_body<isa::Half, 64>(params);
}

template <>
void launch<isa::Half, 64>(const Params& params, void* stream) {
  launch_kernel<fa2_fp16_hdim64, 64>("fa2_fp16_hdim64", params, stream);
}

}  // namespace faprobe::cuda::fa2
