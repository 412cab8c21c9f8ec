// Internal to cuda.fa3: the host side shared by the entry points (fa3_emulated.cpp), the GPU launch path and
// the tests, which run the kernel with a planted defect (fa3.cuh's Defect) under the emulator. Production
// code instantiates forward_emulated<Defect::none> only.
#pragma once

#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa3/fa3.cuh"
#include "cuda/launchers.hpp"

namespace faprobe::cuda::fa3 {

// The kernel's Params for args on target: make_attention_params's checks, then the tensor maps of Q, K and V
// (host pointers for the emulator, device pointers for the GPU) and the tile count. Throws
// std::invalid_argument naming what is wrong.
Params make_params(const AttentionArgs& args, Target target);

// Runs the kernel body under the emulator on host memory, with kDefect planted, on a persistent grid of
// min(tiles, sms) CTAs.
template <Defect kDefect>
void forward_emulated(const AttentionArgs& args, int sms = kEmulatedSms) {
  const Params params = make_params(args, Target::emulator);
  dispatch_instantiation(element_type("fa3", args.dtype), static_cast<int>(args.head_dim), [&](auto instantiation) {
    using I = decltype(instantiation);
    using T = Traits<I::head_dim>;
    emu::LaunchConfig config;
    config.kernel_name = instantiation_name("fa3", args.dtype, args.head_dim);
    config.grid = {persistent_ctas(params, sms), 1, 1};
    config.block.x = T::threads;
    config.shared_bytes = T::shared_bytes;
    emu::launch(config, [&] { forward_body<typename I::Element, I::head_dim, kDefect>(params); });
  });
}

}  // namespace faprobe::cuda::fa3
