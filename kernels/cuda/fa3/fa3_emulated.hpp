// Internal to cuda.fa3: the host side shared by the entry points (fa3_emulated.cpp), the GPU launch path, the
// generated per-instantiation files and the tests, which run the kernel with a planted defect (fa3.cuh's
// Defect) under the emulator. The instantiations are kernels/cuda/fa3/CMakeLists.txt's list, read here through
// the generated fa3_instantiations.inc.
#pragma once

#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa3/fa3.cuh"
#include "cuda/fa3/fa3_dispatch.hpp"
#include "cuda/fa3/fa3_launch.hpp"
#include "cuda/fa3/transpose_v.cuh"

namespace faprobe::cuda::fa3 {

// fp16, bf16 or e4m3 (for fp8_e4m3); throws std::invalid_argument naming fa3 otherwise.
ElementType fa3_element(DType dtype);

// The kernel's Params for args and a tile on target: make_attention_params's checks, then the tensor maps of
// Q, K, V and O (host pointers for the emulator, device pointers for the GPU; for e4m3, V's map reads V^T in
// args.workspace, which transpose_params's kernel must have written) and the schedule. Throws
// std::invalid_argument naming what is wrong.
Params make_params(const AttentionArgs& args, Target target, const Tile& tile);
// The e4m3 prologue's arguments: V in args.v, V^T in args.workspace.
TransposeParams transpose_params(const AttentionArgs& args);

// One instantiation's kernel body under the emulator with kDefect planted, on a persistent grid of ctas CTAs.
template <class Element, int HeadDim, int BlockQ, int BlockK, Defect kDefect>
void run_emulated_body(const Params& params, unsigned ctas) {
  using T = TraitsOf<Element, HeadDim, BlockQ, BlockK>;
  emu::LaunchConfig config;
  config.kernel_name = fmt::format("fa3_{}_hdim{}_{}x{}",
                                   element_of<Element>() == ElementType::e4m3 ? "fp8_e4m3"
                                   : element_of<Element>() == ElementType::bf16 ? "bf16" : "fp16",
                                   HeadDim, BlockQ, BlockK);
  config.grid = {ctas, 1, 1};
  config.block.x = T::threads;
  config.shared_bytes = T::shared_bytes;
  emu::launch(config, [&] { forward_body<Element, HeadDim, BlockQ, BlockK, kDefect>(params); });
}

// Defect::none of each instantiation, defined in its generated file (fa3_emulated_instance.cpp.in), so that
// the host compiler builds them in parallel.
template <class Element, int HeadDim, int BlockQ, int BlockK>
void run_emulated(const Params& params, unsigned ctas);
#define FAPROBE_FA3_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) \
  template <>                                                                       \
  void run_emulated<isa::E, D, BQ, BK>(const Params& params, unsigned ctas);
#include "cuda/fa3/fa3_instantiations.inc"
#undef FAPROBE_FA3_INSTANTIATION

// The e4m3 prologue (V^T into args.workspace) under the emulator.
void transpose_v_emulated(const AttentionArgs& args);

// Runs instantiation I (a TiledInstance) with kDefect planted under the emulator on host memory, on a persistent
// grid of min(tiles, sms) CTAs (after the V transpose for e4m3). The tests plant defects this way, each in one
// instantiation; fa3_forward runs Defect::none of any through the generated files.
template <class I, Defect kDefect>
void forward_emulated(const AttentionArgs& args, int sms = emu::emulated_device.sm_count) {
  if (fa3_element(args.dtype) != element_of<typename I::Element>() || args.head_dim != I::head_dim)
    throw std::invalid_argument(fmt::format("forward_emulated: the instantiation is for head_dim {}, the case has {} {}",
                                            I::head_dim, to_string(args.dtype), args.head_dim));
  if (fa3_element(args.dtype) == ElementType::e4m3) transpose_v_emulated(args);
  const Params params = make_params(args, Target::emulator, Tile{I::block_q, I::block_k});
  run_emulated_body<typename I::Element, I::head_dim, I::block_q, I::block_k, kDefect>(params, persistent_ctas(params, sms));
}

// Defect::none of the instantiation (args.dtype, args.head_dim, tile) under the emulator, on min(tiles, sms) CTAs.
void forward_emulated(const AttentionArgs& args, const Tile& tile, int sms = emu::emulated_device.sm_count);

}  // namespace faprobe::cuda::fa3
