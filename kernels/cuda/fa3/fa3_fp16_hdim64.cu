// cuda.fa3 for fp16 with head_dim 64: the __global__ wrapper of the kernel body (fa3.cuh) and its launch.
// sm_90a only; __launch_bounds__ gives ptxas the register count at entry that setmaxnreg needs.
#include "cuda/fa3/fa3_gpu.hpp"

namespace faprobe::cuda::fa3 {

__global__ void __launch_bounds__(Traits<64>::threads, Traits<64>::min_ctas_per_sm)
    fa3_fp16_hdim64(const __grid_constant__ Params params) {
  forward_body<isa::Half, 64>(params);
}

template <>
void launch<isa::Half, 64>(const Params& params, unsigned ctas, void* stream) {
  launch_kernel<fa3_fp16_hdim64, Traits<64>>("fa3_fp16_hdim64", params, dim3(ctas), stream);
}

}  // namespace faprobe::cuda::fa3
