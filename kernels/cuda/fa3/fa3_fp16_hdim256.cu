// cuda.fa3 for fp16 with head_dim 256: the __global__ wrapper of the kernel body (fa3.cuh) and its launch.
// sm_90a only; __launch_bounds__ gives ptxas the register count at entry that setmaxnreg needs.
#include "cuda/fa3/fa3_gpu.hpp"

namespace faprobe::cuda::fa3 {

__global__ void __launch_bounds__(Traits<256>::threads, Traits<256>::min_ctas_per_sm)
    fa3_fp16_hdim256(const __grid_constant__ Params params) {
  forward_body<isa::Half, 256>(params);
}

template <>
void launch<isa::Half, 256>(const Params& params, unsigned ctas, void* stream) {
  launch_kernel<fa3_fp16_hdim256, Traits<256>>("fa3_fp16_hdim256", params, dim3(ctas), stream);
}

}  // namespace faprobe::cuda::fa3
