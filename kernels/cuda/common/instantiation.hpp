// The (element type, head_dim) instantiations of the tensor-core attention kernels (cuda.fa1, cuda.fa2):
// the one place where the runtime dtype and head_dim become template arguments, shared by the emulated
// and the GPU launch paths of every such kernel so that both always run the same instantiation.
#pragma once

#include "cuda/common/isa.hpp"

namespace faprobe::cuda {

enum class ElementType { fp16, bf16, e4m3 };  // e4m3: cuda.fa3 only (its own dispatch, fa3.cuh)

template <class E, int D>
struct Instantiation {
  using Element = E;  // isa::Half or isa::BFloat16
  static constexpr int head_dim = D;
};

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
