// cuda.decode for bf16 with head_dim 64: the __global__ wrappers of the attention (contiguous and paged) and
// combine kernel bodies (decode.cuh), their launch and the attention kernels' occupancy. One small file per (dtype,
// head_dim) so that the instantiations compile in parallel.
#include "cuda/decode/decode_gpu.hpp"

namespace faprobe::cuda::decode {

__global__ void __launch_bounds__(Traits<64>::threads, Traits<64>::min_ctas_per_sm) decode_bf16_hdim64(Params params) {
  attend_body<isa::BFloat16, 64, /*kPaged=*/false>(params);
}

__global__ void __launch_bounds__(Traits<64>::threads, Traits<64>::min_ctas_per_sm) decode_paged_bf16_hdim64(Params params) {
  attend_body<isa::BFloat16, 64, /*kPaged=*/true>(params);
}

__global__ void __launch_bounds__(combine_threads) decode_combine_bf16_hdim64(Params params) {
  combine_body<isa::BFloat16, 64>(params);
}

template <>
void launch<isa::BFloat16, 64>(const Params& params, void* stream) {
  launch_kernels<decode_bf16_hdim64, decode_paged_bf16_hdim64, decode_combine_bf16_hdim64, 64>(
      "decode_bf16_hdim64", "decode_paged_bf16_hdim64", "decode_combine_bf16_hdim64", params, stream);
}

template <>
int occupancy<isa::BFloat16, 64>() {
  return kernels_occupancy<decode_bf16_hdim64, decode_paged_bf16_hdim64, 64>();
}

}  // namespace faprobe::cuda::decode
