// cuda.fa2 on the GPU: turns the runtime (element type, head_dim, tile) into the instantiation to launch, through
// the generated list (fa2_instantiations.inc) the emulated path uses too. The kernels are in the generated
// fa2_<dtype>_hdim<d>_<tile>.cu files.
#include <stdexcept>
#include <string>

#include "cuda/fa2/fa2_dispatch.hpp"
#include "cuda/fa2/fa2_gpu.hpp"

namespace faprobe::cuda::fa2 {

void forward_gpu(const Params& params, ElementType element, int head_dim, const Tile& tile, void* stream) {
  const bool launched = dispatch(element, head_dim, tile, [&](auto instance) {
    using I = decltype(instance);
    launch<typename I::Element, I::head_dim, I::block_q, I::block_k>(params, stream);
  });
  if (launched) return;
  throw std::invalid_argument("fa2: no GPU instantiation for head_dim " + std::to_string(head_dim) + " tile " + tile.name());
}

}  // namespace faprobe::cuda::fa2
