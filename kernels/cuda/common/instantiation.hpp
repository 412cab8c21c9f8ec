// The (element type, head_dim) instantiations of the tensor-core attention kernels (cuda.fa1, cuda.fa2):
// the one place where the runtime dtype and head_dim become template arguments, shared by the emulated
// and the GPU launch paths of every such kernel so that both always run the same instantiation.
#pragma once

#include <type_traits>

#include "cuda/common/isa.hpp"

namespace faprobe::cuda {

enum class ElementType { fp16, bf16, e4m3 };  // e4m3: cuda.fa3 only (its own dispatch, fa3.cuh)

template <class E, int D>
struct Instantiation {
  using Element = E;  // isa::Half or isa::BFloat16
  static constexpr int head_dim = D;
};

// The ElementType of an element tag (isa::Half, isa::BFloat16, isa::E4M3).
template <class Element>
constexpr ElementType element_of() {
  if constexpr (std::is_same_v<Element, isa::Half>) return ElementType::fp16;
  else if constexpr (std::is_same_v<Element, isa::BFloat16>) return ElementType::bf16;
  else return ElementType::e4m3;
}

// One instantiation of a tiled kernel (cuda.fa2, cuda.fa3) as a type: what a dispatch hands its callback.
template <class E, int HeadDim, int BlockQ, int BlockK>
struct TiledInstance {
  using Element = E;
  static constexpr int head_dim = HeadDim, block_q = BlockQ, block_k = BlockK;
};

// The body of a kernel's dispatch over its generated list (<kernel>_instantiations.inc): for each entry, when the
// runtime (element, head_dim, tile) are its own, calls fn(TiledInstance<...>{}) and returns true. Used as
//   #define FAPROBE_FA2_INSTANTIATION(E, dtype, D, BQ, BK, dn, dc) FAPROBE_DISPATCH_TILE(E, D, BQ, BK)
// inside a function with element, head_dim, tile and fn in scope.
#define FAPROBE_DISPATCH_TILE(E, D, BQ, BK)                                                                  \
  if (element == ::faprobe::cuda::element_of<::faprobe::cuda::isa::E>() && head_dim == D &&                \
      tile.block_q == BQ && tile.block_k == BK) {                                                            \
    fn(::faprobe::cuda::TiledInstance<::faprobe::cuda::isa::E, D, BQ, BK>{});                                \
    return true;                                                                                             \
  }

// The head dimensions every tensor-core attention kernel is instantiated for.
constexpr bool instantiated_head_dim(long long head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

// Calls fn(Instantiation<Element, HeadDim>{}) and returns true, or returns false when head_dim has no
// instantiation.
template <class Fn>
bool dispatch_instantiation(ElementType element, int head_dim, Fn&& fn) {
  if (element == ElementType::e4m3) return false;  // no 16-bit instantiation
  const bool bf16 = element == ElementType::bf16;
  switch (head_dim) {
    case 64: bf16 ? fn(Instantiation<isa::BFloat16, 64>{}) : fn(Instantiation<isa::Half, 64>{}); return true;
    case 128: bf16 ? fn(Instantiation<isa::BFloat16, 128>{}) : fn(Instantiation<isa::Half, 128>{}); return true;
    case 256: bf16 ? fn(Instantiation<isa::BFloat16, 256>{}) : fn(Instantiation<isa::Half, 256>{}); return true;
    default: return false;
  }
}

}  // namespace faprobe::cuda
