// cuda.decode for fp16 with head_dim 128: the __global__ wrappers of the attention (contiguous and paged) and
// combine kernel bodies (decode.cuh), their launch and the attention kernels' occupancy. One small file per (dtype,
// head_dim) so that the instantiations compile in parallel.
#include "cuda/decode/decode_gpu.hpp"

namespace faprobe::cuda::decode {

__global__ void __launch_bounds__(Traits<128>::threads, Traits<128>::min_ctas_per_sm) decode_fp16_hdim128(Params params) {
  attend_body<isa::Half, 128, /*kPaged=*/false>(params);
}

__global__ void __launch_bounds__(Traits<128>::threads, Traits<128>::min_ctas_per_sm) decode_paged_fp16_hdim128(Params params) {
  attend_body<isa::Half, 128, /*kPaged=*/true>(params);
}

__global__ void __launch_bounds__(combine_threads) decode_combine_fp16_hdim128(Params params) {
  combine_body<isa::Half, 128>(params);
}

template <>
void launch<isa::Half, 128>(const Params& params, void* stream) {
  launch_kernels<decode_fp16_hdim128, decode_paged_fp16_hdim128, decode_combine_fp16_hdim128, 128>(
      "decode_fp16_hdim128", "decode_paged_fp16_hdim128", "decode_combine_fp16_hdim128", params, stream);
}

template <>
int occupancy<isa::Half, 128>() {
  return kernels_occupancy<decode_fp16_hdim128, decode_paged_fp16_hdim128, 128>();
}

}  // namespace faprobe::cuda::decode
