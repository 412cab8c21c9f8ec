// The host side of attention_params.hpp: the checks every flash-style tensor-core kernel's launcher runs.
#include "cuda/common/attention_params.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace faprobe::cuda {
namespace {

template <class T>
GlobalSpan<T> span(T* data, std::int64_t count, const char* name) {
  return GlobalSpan<T>(data, static_cast<std::size_t>(count), name);
}

}  // namespace

std::string tensor_core_supports(const char* kernel, DType dtype, std::int64_t head_dim) {
  if (dtype != DType::fp16 && dtype != DType::bf16)
    return fmt::format("the {} kernel supports fp16 and bf16 (tensor-core mma.sync inputs), not {}", kernel,
                       to_string(dtype));
  if (!instantiated_head_dim(head_dim))
    return fmt::format("the {} kernel is instantiated for head_dim 64, 128 and 256, not {}", kernel, head_dim);
  return "";
}

ElementType element_type(const char* kernel, DType dtype) {
  switch (dtype) {
    case DType::fp16: return ElementType::fp16;
    case DType::bf16: return ElementType::bf16;
    default: break;
  }
  throw std::invalid_argument(fmt::format("{}: no instantiation for dtype {}", kernel, to_string(dtype)));
}

std::string instantiation_name(const char* kernel, DType dtype, std::int64_t head_dim) {
  return fmt::format("{}_{}_hdim{}", kernel, to_string(dtype), head_dim);
}

AttentionParams make_attention_params(const char* kernel, const AttentionArgs& args) {
  const auto require = [kernel](bool condition, const std::string& what) {
    if (!condition) throw std::invalid_argument(fmt::format("{}_forward: {}", kernel, what));
  };
  const std::string unsupported = tensor_core_supports(kernel, args.dtype, args.head_dim);
  require(unsupported.empty(), unsupported);
  constexpr std::int64_t int_max = std::numeric_limits<int>::max();
  require(args.batch >= 1 && args.heads >= 1 && args.kv_heads >= 1 && args.seq_q >= 1 && args.seq_k >= 1,
          "batch, heads, kv_heads, seq_q and seq_k must be at least 1");
  require(args.heads % args.kv_heads == 0,
          fmt::format("kv_heads {} does not divide heads {}", args.kv_heads, args.heads));
  require(args.seq_q <= int_max && args.seq_k <= int_max && args.batch * args.heads <= int_max,
          "seq_q, seq_k and batch·heads must fit in an int (the grid and the kernel's row indices)");
  require(args.q != nullptr && args.k != nullptr && args.v != nullptr && args.o != nullptr,
          "q, k, v and o must not be null");
  for (const void* tensor : {args.q, args.k, args.v, static_cast<const void*>(args.o)})
    require(reinterpret_cast<std::uintptr_t>(tensor) % 16 == 0, "q, k, v and o must be 16-byte aligned");

  const std::int64_t q_elements = args.batch * args.seq_q * args.heads * args.head_dim;
  const std::int64_t kv_rows = args.kv_rows != 0 ? args.kv_rows : args.batch * args.seq_k;
  const std::int64_t kv_elements = kv_rows * args.kv_heads * args.head_dim;
  const std::int64_t rows = args.batch * args.heads * args.seq_q;
  AttentionParams p;
  p.q = span(static_cast<const std::uint16_t*>(args.q), q_elements, "q");
  p.k = span(static_cast<const std::uint16_t*>(args.k), kv_elements, "k");
  p.v = span(static_cast<const std::uint16_t*>(args.v), kv_elements, "v");
  p.o = span(static_cast<std::uint16_t*>(args.o), q_elements, "o");
  p.lse = span(args.lse, args.lse != nullptr ? rows : 0, "lse");
  p.batch = static_cast<int>(args.batch);
  p.heads = static_cast<int>(args.heads);
  p.kv_heads = static_cast<int>(args.kv_heads);
  p.seq_q = static_cast<int>(args.seq_q);
  p.seq_k = static_cast<int>(args.seq_k);
  p.causal = args.causal;
  constexpr float log2_e = 1.4426950408889634f;
  p.scale_log2 = args.scale * log2_e;
  return p;
}

}  // namespace faprobe::cuda
