// cuda.fa3 on the GPU: turns the runtime (element type, head_dim) into the instantiation to launch, through
// dispatch_instantiation (common/instantiation.hpp), the same one the emulated path uses, on a persistent
// grid of one CTA per SM (at most one per tile). The kernels are in fa3_<dtype>_hdim<d>.cu.
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "cuda/fa3/fa3_gpu.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::fa3 {

void forward_gpu(const Params& params, ElementType element, int head_dim, void* stream) {
  static const int sms = [] {
    const std::vector<gpu::DeviceInfo> found = gpu::devices();
    return found.empty() ? kEmulatedSms : found.front().sm_count;
  }();
  const unsigned ctas = persistent_ctas(params, sms);
  const bool launched = dispatch_fa3_instantiation(element, head_dim, [&](auto instantiation) {
    using I = decltype(instantiation);
    launch<typename I::Element, I::head_dim>(params, ctas, stream);
  });
  if (!launched) throw std::invalid_argument("fa3: no GPU instantiation for head_dim " + std::to_string(head_dim));
}

__global__ void __launch_bounds__(kTransposeThreads) fa3_transpose_v(TransposeParams params) { transpose_v_body(params); }

void transpose_v_gpu(const TransposeParams& params, void* stream) {
  const dim3 grid(static_cast<unsigned>(params.seq_k_padded / 32), static_cast<unsigned>(params.kv_heads),
                  static_cast<unsigned>(params.batch));
  fa3_transpose_v<<<grid, kTransposeThreads, 0, static_cast<cudaStream_t>(stream)>>>(params);
  FAPROBE_CHECK_LAUNCH("fa3_transpose_v");
}

}  // namespace faprobe::cuda::fa3
