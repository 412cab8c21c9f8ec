// cuda.decode on the GPU: turns the runtime (element type, head_dim) into the instantiation to launch or
// query, through dispatch_instantiation (common/instantiation.hpp), as the emulated path does. The kernels
// are in decode_<dtype>_hdim<d>.cu.
#include <stdexcept>
#include <string>

#include "cuda/decode/decode_gpu.hpp"

namespace faprobe::cuda::decode {

void forward_gpu(const Params& params, ElementType element, int head_dim, void* stream) {
  const bool launched = dispatch_instantiation(element, head_dim, [&](auto instantiation) {
    using I = decltype(instantiation);
    launch<typename I::Element, I::head_dim>(params, stream);
  });
  if (!launched) throw std::invalid_argument("decode: no GPU instantiation for head_dim " + std::to_string(head_dim));
}

int ctas_per_sm_gpu(ElementType element, int head_dim) {
  int ctas = 0;
  const bool found = dispatch_instantiation(element, head_dim, [&](auto instantiation) {
    using I = decltype(instantiation);
    ctas = occupancy<typename I::Element, I::head_dim>();
  });
  if (!found) throw std::invalid_argument("decode: no GPU instantiation for head_dim " + std::to_string(head_dim));
  return ctas;
}

}  // namespace faprobe::cuda::decode
