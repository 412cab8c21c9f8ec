// The GPU side of the part-1 instruction probes (bodies in warp_probes.cuh): one __global__ wrapper each.
// Built for every CMAKE_CUDA_ARCHITECTURES entry (default sm_80 and sm_90a), so the build checks that the
// instruction layer's inline PTX assembles; the launcher that runs them on a GPU comes with the harness.
#include "cuda/probes/warp_probes.cuh"

namespace faprobe::cuda::probes {

__global__ void block_sum_kernel(GlobalSpan<const float> values, GlobalSpan<float> block_sums) {
  block_sum(values, block_sums);
}

__global__ void warp_sum_kernel(GlobalSpan<const float> values, GlobalSpan<float> sums) { warp_sum(values, sums); }

__global__ void shuffle_kernel(ShuffleProbe probe, unsigned operand, unsigned width, GlobalSpan<const std::uint32_t> in,
                               GlobalSpan<std::uint32_t> out) {
  shuffle(probe, operand, width, in, out);
}

__global__ void vote_kernel(GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out) { vote(in, out); }

}  // namespace faprobe::cuda::probes
