// The GPU side of the part-2 instruction probes (bodies in matrix_probes.cuh): one __global__ wrapper each.
// Built for every CMAKE_CUDA_ARCHITECTURES entry (default sm_80 and sm_90a), so the build checks that the
// instruction layer's mma.sync, ldmatrix, cp.async, ex2 and load PTX assembles; the launcher that runs
// them on a GPU comes with the harness.
#include "cuda/probes/matrix_probes.cuh"

namespace faprobe::cuda::probes {

__global__ void mma_m16n8k16_kernel(MmaProbeType type, GlobalSpan<const std::uint16_t> a,
                                    GlobalSpan<const std::uint16_t> b, GlobalSpan<const float> c,
                                    GlobalSpan<float> d) {
  mma_m16n8k16(type, a, b, c, d);
}

__global__ void ldmatrix_kernel(unsigned matrices, bool transpose, GlobalSpan<const std::uint16_t> image,
                                GlobalSpan<const std::uint32_t> row_offsets, GlobalSpan<std::uint32_t> out) {
  ldmatrix(matrices, transpose, image, row_offsets, out);
}

__global__ void async_copy_kernel(GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> copied,
                                  GlobalSpan<std::uint32_t> loaded, GlobalSpan<float> exp2) {
  async_copy(in, copied, loaded, exp2);
}

}  // namespace faprobe::cuda::probes
