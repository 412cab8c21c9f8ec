// Internal to cuda.fa1: the host side shared by the entry points (fa1_emulated.cpp) and the tests, which
// run the kernel with a planted defect (fa1.cuh's Defect) under the emulator. Production code instantiates
// forward_emulated<Defect::none> only, so a defect costs it nothing.
#pragma once

#include <string>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa1/fa1.cuh"
#include "cuda/launchers.hpp"

namespace faprobe::cuda::fa1 {

// The kernel's Params for args: make_attention_params's checks and spans, and the workspace split into O,
// m and l. Throws std::invalid_argument naming what is wrong (also a null workspace).
Params make_params(const AttentionArgs& args);

// Runs the kernel body under the emulator on host memory, with kDefect planted.
template <Defect kDefect>
void forward_emulated(const AttentionArgs& args) {
  const Params params = make_params(args);
  dispatch_instantiation(element_type("fa1", args.dtype), static_cast<int>(args.head_dim), [&](auto instantiation) {
    using I = decltype(instantiation);
    using T = Traits<I::head_dim>;
    emu::LaunchConfig config;
    config.kernel_name = instantiation_name("fa1", args.dtype, args.head_dim);
    config.grid.x = static_cast<unsigned>(args.batch * args.heads);
    config.block.x = T::threads;
    config.shared_bytes = T::shared_bytes;
    emu::launch(config, [&] { forward_body<typename I::Element, I::head_dim, kDefect>(params); });
  });
}

}  // namespace faprobe::cuda::fa1
