// cuda.fa3 for fp8_e4m3 with head_dim 128 (bf16 output): the __global__ wrapper of the kernel body (fa3.cuh)
// and its launch. sm_90a only; __launch_bounds__ gives ptxas the register count at entry that setmaxnreg needs.
#include "cuda/fa3/fa3_gpu.hpp"

namespace faprobe::cuda::fa3 {

__global__ void __launch_bounds__(TraitsOf<isa::E4M3, 128>::threads, TraitsOf<isa::E4M3, 128>::min_ctas_per_sm)
    fa3_fp8_e4m3_hdim128(const __grid_constant__ Params params) {
  forward_body<isa::E4M3, 128>(params);
}

template <>
void launch<isa::E4M3, 128>(const Params& params, unsigned ctas, void* stream) {
  launch_kernel<fa3_fp8_e4m3_hdim128, TraitsOf<isa::E4M3, 128>>("fa3_fp8_e4m3_hdim128", params, dim3(ctas), stream);
}

}  // namespace faprobe::cuda::fa3
