// cuda.decode for fp16 with head_dim 256: the __global__ wrappers of the attention (contiguous and paged) and
// combine kernel bodies (decode.cuh), their launch and the attention kernels' occupancy. One small file per (dtype,
// head_dim) so that the instantiations compile in parallel.
#include "cuda/decode/decode_gpu.hpp"

namespace faprobe::cuda::decode {

__global__ void __launch_bounds__(Traits<256>::threads, Traits<256>::min_ctas_per_sm) decode_fp16_hdim256(Params params) {
  attend_body<isa::Half, 256, /*kPaged=*/false>(params);
}

__global__ void __launch_bounds__(Traits<256>::threads, Traits<256>::min_ctas_per_sm) decode_paged_fp16_hdim256(Params params) {
  attend_body<isa::Half, 256, /*kPaged=*/true>(params);
}

__global__ void __launch_bounds__(combine_threads) decode_combine_fp16_hdim256(Params params) {
  combine_body<isa::Half, 256>(params);
}

template <>
void launch<isa::Half, 256>(const Params& params, void* stream) {
  launch_kernels<decode_fp16_hdim256, decode_paged_fp16_hdim256, decode_combine_fp16_hdim256, 256>(
      "decode_fp16_hdim256", "decode_paged_fp16_hdim256", "decode_combine_fp16_hdim256", params, stream);
}

template <>
int occupancy<isa::Half, 256>() {
  return kernels_occupancy<decode_fp16_hdim256, decode_paged_fp16_hdim256, 256>();
}

}  // namespace faprobe::cuda::decode
