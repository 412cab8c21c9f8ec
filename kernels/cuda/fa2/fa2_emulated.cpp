// cuda.fa2's host entry points (launchers.hpp): support, shape, and fa2_forward, which runs the kernel body
// (fa2.cuh) under the emulator for Target::emulator and launches the nvcc-compiled instantiation
// (fa2_gpu.cu) for Target::gpu, both with the Params of make_attention_params.
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cuda/fa2/fa2_emulated.hpp"
#if defined(FAPROBE_WITH_CUDA)
#include "cuda/fa2/fa2_gpu.hpp"
#endif

namespace faprobe::cuda {

std::string fa2_supports(DType dtype, std::int64_t head_dim) { return tensor_core_supports("fa2", dtype, head_dim); }

KernelShape fa2_shape(DType dtype, std::int64_t head_dim) {
  return instantiated_shape<fa2::Traits>("fa2", dtype, head_dim);
}

void fa2_forward(const Launch& launch, const AttentionArgs& args) {
  // The grid's y and z extents (heads, batch) are limited to 65535 by CUDA.
  constexpr std::int64_t grid_yz_max = 65535;
  if (args.heads > grid_yz_max || args.batch > grid_yz_max)
    throw std::invalid_argument(
        fmt::format("fa2_forward: heads {} and batch {} must each be at most {} (the grid's y and z extents)",
                    args.heads, args.batch, grid_yz_max));
  if (launch.target == Target::emulator) {
    fa2::forward_emulated<fa2::Defect::none>(args);
    return;
  }
#if defined(FAPROBE_WITH_CUDA)
  fa2::forward_gpu(make_attention_params("fa2", args), element_type("fa2", args.dtype),
                   static_cast<int>(args.head_dim), launch.stream);
#else
  throw std::runtime_error("built without CUDA");
#endif
}

}  // namespace faprobe::cuda
