// cuda.fa2's host entry points (fa2_launch.hpp): its list of instantiations, support, shape, and fa2_forward,
// which runs the kernel body (fa2.cuh) under the emulator for Target::emulator (through the generated
// per-instantiation files) and launches the nvcc-compiled instantiation (fa2_gpu.cu) for Target::gpu, both with
// the Params of make_attention_params.
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cuda/fa2/fa2_emulated.hpp"
#if defined(FAPROBE_WITH_CUDA)
#include "cuda/fa2/fa2_gpu.hpp"
#endif

namespace faprobe::cuda {

const TileList& fa2_instantiations() {
  static const TileList list = {
#define FAPROBE_FA2_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) \
  {DType::dtype, D, Tile{BQ, BK}, default_none != 0, default_causal != 0},
#include "cuda/fa2/fa2_instantiations.inc"
#undef FAPROBE_FA2_INSTANTIATION
  };
  return list;
}

std::string fa2_supports(const Case& c, const std::optional<Tile>& tile) {
  std::string reason = tensor_core_supports("fa2", c.dtype, c.head_dim);
  if (reason.empty() && c.mask == Mask::causal_top_left)
    reason = "the fa2 kernel's causal mask is bottom-right (flash-attention's), not causal-top-left";
  return reason.empty() ? tile_supports("fa2", fa2_instantiations(), c, tile) : reason;
}

KernelShape fa2_shape(DType dtype, std::int64_t head_dim, const Tile& tile) {
  KernelShape shape;
  if (dtype != DType::fp16 && dtype != DType::bf16) return shape;
  fa2::dispatch(element_type("fa2", dtype), static_cast<int>(head_dim), tile, [&](auto instance) {
    using T = fa2::TraitsOfInstance<decltype(instance)>;
    shape.block_q = T::block_q;
    shape.block_k = T::block_k;
    shape.threads = T::threads;
    shape.shared_bytes = T::shared_bytes;
  });
  return shape;
}

void fa2_forward(const Launch& launch, const AttentionArgs& args, const Tile& tile) {
  // The grid's y and z extents (heads, batch) are limited to 65535 by CUDA.
  constexpr std::int64_t grid_yz_max = 65535;
  if (args.heads > grid_yz_max || args.batch > grid_yz_max)
    throw std::invalid_argument(
        fmt::format("fa2_forward: heads {} and batch {} must each be at most {} (the grid's y and z extents)",
                    args.heads, args.batch, grid_yz_max));
  const fa2::Params params = make_attention_params("fa2", args);
  const ElementType element = element_type("fa2", args.dtype);
  if (launch.target == Target::emulator) {
    const bool ran = fa2::dispatch(element, static_cast<int>(args.head_dim), tile, [&](auto instance) {
      using I = decltype(instance);
      fa2::run_emulated<typename I::Element, I::head_dim, I::block_q, I::block_k>(params);
    });
    if (!ran)
      throw std::invalid_argument(fmt::format("fa2_forward: no instantiation for {} head_dim {} tile {} "
                                              "(kernels/cuda/fa2/CMakeLists.txt)",
                                              to_string(args.dtype), args.head_dim, tile.name()));
    return;
  }
#if defined(FAPROBE_WITH_CUDA)
  fa2::forward_gpu(params, element, static_cast<int>(args.head_dim), tile, launch.stream);
#else
  throw std::runtime_error("built without CUDA");
#endif
}

}  // namespace faprobe::cuda
