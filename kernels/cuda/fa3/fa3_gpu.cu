// cuda.fa3 on the GPU: turns the runtime (element type, head_dim, tile) into the instantiation to launch,
// through the generated list (fa3_instantiations.inc) the emulated path uses too, on a persistent grid of one
// CTA per SM (at most one per tile). The kernels are in the generated fa3_<dtype>_hdim<d>_<tile>.cu files.
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "cuda/fa3/fa3_dispatch.hpp"
#include "cuda/fa3/fa3_gpu.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::fa3 {
void forward_gpu(const Params& params, ElementType element, int head_dim, const Tile& tile, void* stream) {
  static const int sms = [] {
    const std::vector<gpu::DeviceInfo> found = gpu::devices();
    return found.empty() ? emu::emulated_device.sm_count : found.front().sm_count;
  }();
  const unsigned ctas = persistent_ctas(params, sms);
  const bool launched = dispatch(element, head_dim, tile, [&](auto instance) {
    using I = decltype(instance);
    launch<typename I::Element, I::head_dim, I::block_q, I::block_k>(params, ctas, stream);
  });
  if (launched) return;
  throw std::invalid_argument("fa3: no GPU instantiation for head_dim " + std::to_string(head_dim) + " tile " + tile.name());
}

__global__ void __launch_bounds__(kTransposeThreads) fa3_transpose_v(TransposeParams params) { transpose_v_body(params); }

void transpose_v_gpu(const TransposeParams& params, void* stream) {
  const dim3 grid(static_cast<unsigned>(params.seq_k_padded / 32), static_cast<unsigned>(params.kv_heads),
                  static_cast<unsigned>(params.batch));
  fa3_transpose_v<<<grid, kTransposeThreads, 0, static_cast<cudaStream_t>(stream)>>>(params);
  FAPROBE_CHECK_LAUNCH("fa3_transpose_v");
}

}  // namespace faprobe::cuda::fa3
