// cuda.fa1 for bf16 with head_dim 128: the __global__ wrapper of the kernel body (fa1.cuh) and its launch.
// One small file per (dtype, head_dim) so that the instantiations compile in parallel.
#include "cuda/fa1/fa1_gpu.hpp"

namespace faprobe::cuda::fa1 {

__global__ void __launch_bounds__(Traits<128>::threads, Traits<128>::min_ctas_per_sm) fa1_bf16_hdim128(Params params) {
  forward_body<isa::BFloat16, 128>(params);
}

template <>
void launch<isa::BFloat16, 128>(const Params& params, void* stream) {
  launch_kernel<fa1_bf16_hdim128, 128>("fa1_bf16_hdim128", params, stream);
}

}  // namespace faprobe::cuda::fa1
