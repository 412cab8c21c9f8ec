// Internal to cuda.decode / cuda.decode-splitk: the host side shared by the entry points
// (decode_emulated.cpp), the GPU launchers and the tests, which run the kernels with a planted defect
// (decode.cuh's Defect) under the emulator. Production code instantiates Defect::none only.
#pragma once

#include "cuda/common/emu/emulator.hpp"
#include "cuda/decode/decode.cuh"
#include "cuda/launchers.hpp"

namespace faprobe::cuda::decode {

// The Params for args: make_attention_params's checks (dtype, head_dim, shapes, null and 16-byte-aligned
// tensors) plus the decode ones (seq_q = 1, seq_starts given, splits in range, grid extents), the layout's
// spans, and the partials carved out of args.workspace. Throws std::invalid_argument naming the problem.
Params make_params(const AttentionArgs& args);

// The attention grid: (splits, kv_heads · head_chunks, batch).
inline emu::Dim3 attend_grid(const Params& p) {
  return {static_cast<unsigned>(p.splits), static_cast<unsigned>(p.kv_heads * p.head_chunks),
          static_cast<unsigned>(p.batch)};
}

// Runs both kernels (the attention kernel for the layout, contiguous or paged) under the emulator on host
// memory, with kDefect planted.
template <Defect kDefect>
void forward_emulated(const AttentionArgs& args) {
  const Params params = make_params(args);
  dispatch_instantiation(element_type("decode", args.dtype), static_cast<int>(args.head_dim), [&](auto instantiation) {
    using I = decltype(instantiation);
    using T = Traits<I::head_dim>;
    emu::LaunchConfig attend;
    attend.kernel_name = instantiation_name("decode", args.dtype, args.head_dim);
    attend.grid = attend_grid(params);
    attend.block.x = T::threads;
    attend.shared_bytes = T::shared_bytes;
    if (params.block_table.size() != 0) {
      emu::launch(attend, [&] { attend_body<typename I::Element, I::head_dim, /*kPaged=*/true, kDefect>(params); });
    } else {
      emu::launch(attend, [&] { attend_body<typename I::Element, I::head_dim, /*kPaged=*/false, kDefect>(params); });
    }
    if (params.splits == 1) return;
    emu::LaunchConfig combine;
    combine.kernel_name = instantiation_name("decode_combine", args.dtype, args.head_dim);
    combine.grid = {static_cast<unsigned>(params.heads), static_cast<unsigned>(params.batch), 1};
    combine.block.x = combine_threads;
    emu::launch(combine, [&] { combine_body<typename I::Element, I::head_dim, kDefect>(params); });
  });
}

}  // namespace faprobe::cuda::decode
