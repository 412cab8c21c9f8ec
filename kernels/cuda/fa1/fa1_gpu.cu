// cuda.fa1 on the GPU: turns the runtime (element type, head_dim) into the instantiation to launch, through
// dispatch_instantiation (common/instantiation.hpp), the same one the emulated path uses. The kernels are
// in fa1_<dtype>_hdim<d>.cu.
#include <stdexcept>
#include <string>

#include "cuda/fa1/fa1_gpu.hpp"

namespace faprobe::cuda::fa1 {

void forward_gpu(const Params& params, ElementType element, int head_dim, void* stream) {
  const bool launched = dispatch_instantiation(element, head_dim, [&](auto instantiation) {
    using I = decltype(instantiation);
    launch<typename I::Element, I::head_dim>(params, stream);
  });
  if (!launched) throw std::invalid_argument("fa1: no GPU instantiation for head_dim " + std::to_string(head_dim));
}

}  // namespace faprobe::cuda::fa1
