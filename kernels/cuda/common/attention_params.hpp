// The arguments every flash-style tensor-core kernel (cuda.fa1, cuda.fa2) takes, as the kernel sees them,
// and their one host-side constructor, which checks an AttentionArgs before any kernel runs.
// Tensors are 16-bit storage bits in (batch, seq, heads, head_dim) layout, as in flash-attention.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/common/instantiation.hpp"
#include "cuda/common/spans.hpp"

#if !defined(__CUDACC__)
#include "cuda/launchers.hpp"
#endif

namespace faprobe::cuda {

struct AttentionParams {
  GlobalSpan<const std::uint16_t> q;  // (batch, seq_q, heads, d)
  GlobalSpan<const std::uint16_t> k;  // (batch, seq_k, kv_heads, d)
  GlobalSpan<const std::uint16_t> v;  // (batch, seq_k, kv_heads, d)
  GlobalSpan<std::uint16_t> o;        // (batch, seq_q, heads, d)
  GlobalSpan<float> lse;              // (batch, heads, seq_q), natural log; size 0 when not wanted
  int batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1;
  bool causal = false;
  float scale_log2 = 0.0f;  // softmax scale · log2(e), folded on the host: scores go straight to ex2
};

#if !defined(__CUDACC__)
// "" when a tensor-core kernel named kernel ("fa1", "fa2") has an instantiation for dtype and head_dim,
// else the reason, naming the kernel and the allowed values.
std::string tensor_core_supports(const char* kernel, DType dtype, std::int64_t head_dim);
// fp16 or bf16; throws std::invalid_argument naming the kernel otherwise.
ElementType element_type(const char* kernel, DType dtype);
// "<kernel>_<dtype>_hdim<d>": a kernel instantiation's name in errors and profiles.
std::string instantiation_name(const char* kernel, DType dtype, std::int64_t head_dim);

// The KernelShape (block_q, block_k, threads, shared_bytes) of kernel's instantiation for dtype and
// head_dim, read from its Traits<head_dim>; all zeros when it has none.
template <template <int> class Traits>
KernelShape instantiated_shape(const char* kernel, DType dtype, std::int64_t head_dim) {
  KernelShape shape;
  if (!tensor_core_supports(kernel, dtype, head_dim).empty()) return shape;
  dispatch_instantiation(element_type(kernel, dtype), static_cast<int>(head_dim), [&](auto instantiation) {
    using T = Traits<decltype(instantiation)::head_dim>;
    shape.block_q = T::block_q;
    shape.block_k = T::block_k;
    shape.threads = T::threads;
    shape.shared_bytes = T::shared_bytes;
  });
  return shape;
}

// The AttentionParams for args (spans sized from the shapes). Throws std::invalid_argument starting with
// "<kernel>_forward: " naming what is wrong: an unsupported dtype or head_dim, inconsistent shapes, a null
// tensor, a tensor not aligned to 16 bytes (cp.async copies 16 bytes), or a size past an int.
AttentionParams make_attention_params(const char* kernel, const AttentionArgs& args);
#endif

}  // namespace faprobe::cuda
