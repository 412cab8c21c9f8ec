// Internal to cuda.fa3: the one place where the runtime (element type, head_dim, tile) becomes an instantiation
// of kernels/cuda/fa3/CMakeLists.txt's list, shared by the emulated and the GPU launch paths so that both always
// run the same one.
#pragma once

#include "cuda/common/instantiation.hpp"
#include "cuda/common/tile_list.hpp"
#include "cuda/fa3/fa3.cuh"

namespace faprobe::cuda::fa3 {

// Calls fn(TiledInstance<...>{}) for the instantiation of (element, head_dim, tile) and returns true, or returns
// false when the list has none.
template <class Fn>
bool dispatch(ElementType element, int head_dim, const Tile& tile, Fn&& fn) {
#define FAPROBE_FA3_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) FAPROBE_DISPATCH_TILE(E, D, BQ, BK)
#include "cuda/fa3/fa3_instantiations.inc"
#undef FAPROBE_FA3_INSTANTIATION
  return false;
}

// The Traits of an instantiation.
template <class I>
using TraitsOfInstance = TraitsOf<typename I::Element, I::head_dim, I::block_q, I::block_k>;

}  // namespace faprobe::cuda::fa3
