// Internal to cuda.fa2: the host side shared by the entry points (fa2_emulated.cpp) and the tests, which
// run the kernel with a planted defect (fa2.cuh's Defect) under the emulator. Production code instantiates
// forward_emulated<Defect::none> only, so a defect costs it nothing.
#pragma once

#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa2/fa2.cuh"
#include "cuda/launchers.hpp"

namespace faprobe::cuda::fa2 {

// Runs the kernel body under the emulator on host memory, with kDefect planted.
template <Defect kDefect>
void forward_emulated(const AttentionArgs& args) {
  const Params params = make_attention_params("fa2", args);
  dispatch_instantiation(element_type("fa2", args.dtype), static_cast<int>(args.head_dim), [&](auto instantiation) {
    using I = decltype(instantiation);
    using T = Traits<I::head_dim>;
    emu::LaunchConfig config;
    config.kernel_name = instantiation_name("fa2", args.dtype, args.head_dim);
    config.grid = {T::query_blocks(params.seq_q), static_cast<unsigned>(params.heads), static_cast<unsigned>(params.batch)};
    config.block.x = T::threads;
    config.shared_bytes = T::shared_bytes;
    emu::launch(config, [&] { forward_body<typename I::Element, I::head_dim, kDefect>(params); });
  });
}

}  // namespace faprobe::cuda::fa2
