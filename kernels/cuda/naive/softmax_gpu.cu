// The GPU side of cuda.naive's softmax (bodies in softmax.cuh): one __global__ wrapper per variant and
// output storage, and the launcher softmax_on_gpu (softmax_launch.hpp).
#include <cuda_runtime.h>

#include "cuda/naive/softmax_launch.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::naive {

// __launch_bounds__: the largest CTA each variant launches, so ptxas keeps the cached row in at most
// 64 registers per thread (65536 / 1024) instead of failing the launch.
template <class Out>
__global__ void __launch_bounds__(softmax_max_threads)
    softmax_cached_kernel(SoftmaxParams params, GlobalSpan<const float> scores,
                          GlobalSpan<typename Out::Storage> probs) {
  softmax_rows_cached<Out>(params, scores, probs);
}

template <class Out>
__global__ void __launch_bounds__(softmax_streamed_threads)
    softmax_streamed_kernel(SoftmaxParams params, GlobalSpan<const float> scores,
                            GlobalSpan<typename Out::Storage> probs) {
  softmax_rows_streamed<Out>(params, scores, probs);
}

template <class Out>
void softmax_on_gpu(void* stream, const SoftmaxLaunchShape& shape, const SoftmaxParams& params,
                    GlobalSpan<const float> scores, GlobalSpan<typename Out::Storage> probs) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const std::size_t shared = softmax_shared_bytes;
  if (shape.cached) {
    softmax_cached_kernel<Out><<<shape.blocks, shape.threads, shared, cuda_stream>>>(params, scores, probs);
    FAPROBE_CHECK_LAUNCH("naive_softmax (cached rows)");
  } else {
    softmax_streamed_kernel<Out><<<shape.blocks, shape.threads, shared, cuda_stream>>>(params, scores, probs);
    FAPROBE_CHECK_LAUNCH("naive_softmax (streamed rows)");
  }
}

template void softmax_on_gpu<isa::Float>(void*, const SoftmaxLaunchShape&, const SoftmaxParams&, GlobalSpan<const float>,
                                        GlobalSpan<float>);
template void softmax_on_gpu<isa::Half>(void*, const SoftmaxLaunchShape&, const SoftmaxParams&, GlobalSpan<const float>,
                                        GlobalSpan<std::uint16_t>);
template void softmax_on_gpu<isa::BFloat16>(void*, const SoftmaxLaunchShape&, const SoftmaxParams&, GlobalSpan<const float>,
                                        GlobalSpan<std::uint16_t>);

}  // namespace faprobe::cuda::naive
