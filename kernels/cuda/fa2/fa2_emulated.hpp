// Internal to cuda.fa2: the host side shared by the entry points (fa2_emulated.cpp), the generated
// per-instantiation files and the tests, which run the kernel with a planted defect (fa2.cuh's Defect) under the
// emulator. Production code instantiates Defect::none only, so a defect costs it nothing.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa2/fa2.cuh"
#include "cuda/fa2/fa2_dispatch.hpp"
#include "cuda/fa2/fa2_launch.hpp"

namespace faprobe::cuda::fa2 {

// One instantiation's kernel body under the emulator with kDefect planted, on FA-2's grid.
template <class Element, int HeadDim, int BlockQ, int BlockK, Defect kDefect>
void run_emulated_body(const Params& params) {
  using T = Traits<HeadDim, BlockQ, BlockK>;
  emu::LaunchConfig config;
  config.kernel_name = fmt::format("fa2_{}_hdim{}_{}x{}", element_of<Element>() == ElementType::bf16 ? "bf16" : "fp16",
                                   HeadDim, BlockQ, BlockK);
  config.grid = {T::query_blocks(params.seq_q), static_cast<unsigned>(params.heads), static_cast<unsigned>(params.batch)};
  config.block.x = T::threads;
  config.shared_bytes = T::shared_bytes;
  emu::launch(config, [&] { forward_body<Element, HeadDim, BlockQ, BlockK, kDefect>(params); });
}

// Defect::none of each instantiation, defined in its generated file (fa2_emulated_instance.cpp.in).
template <class Element, int HeadDim, int BlockQ, int BlockK>
void run_emulated(const Params& params);
#define FAPROBE_FA2_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) \
  template <>                                                                       \
  void run_emulated<isa::E, D, BQ, BK>(const Params& params);
#include "cuda/fa2/fa2_instantiations.inc"
#undef FAPROBE_FA2_INSTANTIATION

// Runs kDefect planted in the instantiation of the case's dtype and head_dim with plain cuda.fa2's tile (its
// default without a mask), under the emulator on host memory: the tests plant defects this way.
template <Defect kDefect>
void forward_emulated(const AttentionArgs& args) {
  const Params params = make_attention_params("fa2", args);
  const std::optional<Tile> tile = default_tile(fa2_instantiations(), args.dtype, args.head_dim, Mask::none);
  if (!tile) throw std::invalid_argument(fmt::format("fa2: no tile for head_dim {}", args.head_dim));
  const bool ran = dispatch(element_type("fa2", args.dtype), static_cast<int>(args.head_dim), *tile, [&](auto instance) {
    using I = decltype(instance);
    run_emulated_body<typename I::Element, I::head_dim, I::block_q, I::block_k, kDefect>(params);
  });
  if (!ran) throw std::invalid_argument(fmt::format("fa2: no instantiation for head_dim {}", args.head_dim));
}

}  // namespace faprobe::cuda::fa2
