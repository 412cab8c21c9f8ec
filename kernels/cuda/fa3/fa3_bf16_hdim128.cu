// cuda.fa3 for bf16 with head_dim 128: the __global__ wrapper of the kernel body (fa3.cuh) and its launch.
// sm_90a only; __launch_bounds__ gives ptxas the register count at entry that setmaxnreg needs.
#include "cuda/fa3/fa3_gpu.hpp"

namespace faprobe::cuda::fa3 {

__global__ void __launch_bounds__(Traits<128>::threads, Traits<128>::min_ctas_per_sm)
    fa3_bf16_hdim128(const __grid_constant__ Params params) {
  forward_body<isa::BFloat16, 128>(params);
}

template <>
void launch<isa::BFloat16, 128>(const Params& params, unsigned ctas, void* stream) {
  launch_kernel<fa3_bf16_hdim128, Traits<128>>("fa3_bf16_hdim128", params, dim3(ctas), stream);
}

}  // namespace faprobe::cuda::fa3
