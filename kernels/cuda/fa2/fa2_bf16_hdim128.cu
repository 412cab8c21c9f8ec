// cuda.fa2 for bf16 with head_dim 128: the __global__ wrapper of the kernel body (fa2.cuh) and its launch.
// One small file per (dtype, head_dim) so that the instantiations compile in parallel.
#include "cuda/fa2/fa2_gpu.hpp"

namespace faprobe::cuda::fa2 {

__global__ void __launch_bounds__(Traits<128>::threads, Traits<128>::min_ctas_per_sm) fa2_bf16_hdim128(Params params) {
  forward_body<isa::BFloat16, 128>(params);
}

template <>
void launch<isa::BFloat16, 128>(const Params& params, void* stream) {
  launch_kernel<fa2_bf16_hdim128, 128>("fa2_bf16_hdim128", params, stream);
}

}  // namespace faprobe::cuda::fa2
