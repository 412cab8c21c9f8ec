// Internal to cuda.fa3: the host side shared by the entry points (fa3_emulated.cpp), the GPU launch path and
// the tests, which run the kernel with a planted defect (fa3.cuh's Defect) under the emulator. Production
// code instantiates forward_emulated<Defect::none> only.
#pragma once

#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa3/fa3.cuh"
#include "cuda/fa3/transpose_v.cuh"
#include "cuda/launchers.hpp"

namespace faprobe::cuda::fa3 {

// fp16, bf16 or e4m3 (for fp8_e4m3); throws std::invalid_argument naming fa3 otherwise.
ElementType fa3_element(DType dtype);

// The kernel's Params for args on target: make_attention_params's checks, then the tensor maps of Q, K and V
// (host pointers for the emulator, device pointers for the GPU; for e4m3, V's map reads V^T in
// args.workspace, which transpose_params's kernel must have written) and the tile count. Throws
// std::invalid_argument naming what is wrong.
Params make_params(const AttentionArgs& args, Target target);
// The e4m3 prologue's arguments: V in args.v, V^T in args.workspace.
TransposeParams transpose_params(const AttentionArgs& args);

// Runs the kernel body under the emulator on host memory, with kDefect planted, on a persistent grid of
// min(tiles, sms) CTAs (after the V transpose for e4m3).
template <Defect kDefect>
void forward_emulated(const AttentionArgs& args, int sms = kEmulatedSms) {
  const ElementType element = fa3_element(args.dtype);
  if (element == ElementType::e4m3) {
    const TransposeParams transpose = transpose_params(args);
    emu::LaunchConfig config;
    config.kernel_name = "fa3_transpose_v";
    config.grid = {static_cast<unsigned>(transpose.seq_k_padded / 32), static_cast<unsigned>(transpose.kv_heads),
                   static_cast<unsigned>(transpose.batch)};
    config.block.x = kTransposeThreads;
    emu::launch(config, [&] { transpose_v_body(transpose); });
  }
  const Params params = make_params(args, Target::emulator);
  dispatch_fa3_instantiation(element, static_cast<int>(args.head_dim), [&](auto instantiation) {
    using I = decltype(instantiation);
    using T = TraitsOf<typename I::Element, I::head_dim>;
    emu::LaunchConfig config;
    config.kernel_name = instantiation_name("fa3", args.dtype, args.head_dim);
    config.grid = {persistent_ctas(params, sms), 1, 1};
    config.block.x = T::threads;
    config.shared_bytes = T::shared_bytes;
    emu::launch(config, [&] { forward_body<typename I::Element, I::head_dim, kDefect>(params); });
  });
}

}  // namespace faprobe::cuda::fa3
