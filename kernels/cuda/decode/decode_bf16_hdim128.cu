// cuda.decode for bf16 with head_dim 128: the __global__ wrappers of the attention (contiguous and paged) and
// combine kernel bodies (decode.cuh), their launch and the attention kernels' occupancy. One small file per (dtype,
// head_dim) so that the instantiations compile in parallel.
#include "cuda/decode/decode_gpu.hpp"

namespace faprobe::cuda::decode {

__global__ void __launch_bounds__(Traits<128>::threads, Traits<128>::min_ctas_per_sm) decode_bf16_hdim128(Params params) {
  attend_body<isa::BFloat16, 128, /*kPaged=*/false>(params);
}

__global__ void __launch_bounds__(Traits<128>::threads, Traits<128>::min_ctas_per_sm) decode_paged_bf16_hdim128(Params params) {
  attend_body<isa::BFloat16, 128, /*kPaged=*/true>(params);
}

__global__ void __launch_bounds__(combine_threads) decode_combine_bf16_hdim128(Params params) {
  combine_body<isa::BFloat16, 128>(params);
}

template <>
void launch<isa::BFloat16, 128>(const Params& params, void* stream) {
  launch_kernels<decode_bf16_hdim128, decode_paged_bf16_hdim128, decode_combine_bf16_hdim128, 128>(
      "decode_bf16_hdim128", "decode_paged_bf16_hdim128", "decode_combine_bf16_hdim128", params, stream);
}

template <>
int occupancy<isa::BFloat16, 128>() {
  return kernels_occupancy<decode_bf16_hdim128, decode_paged_bf16_hdim128, 128>();
}

}  // namespace faprobe::cuda::decode
