// cuda.fa1's host entry points (launchers.hpp): support, shape and workspace size, and fa1_forward, which
// runs the kernel body (fa1.cuh) under the emulator for Target::emulator and launches the nvcc-compiled
// instantiation (fa1_gpu.cu) for Target::gpu. The kernel's Params are built here, in one place, for both.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cuda/fa1/fa1_emulated.hpp"
#if defined(FAPROBE_WITH_CUDA)
#include "cuda/fa1/fa1_gpu.hpp"
#endif

namespace faprobe::cuda {
namespace fa1 {
namespace {

constexpr float log2_e = 1.4426950408889634f;

bool supported_head_dim(std::int64_t head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

template <class T>
GlobalSpan<T> span(T* data, std::int64_t count, const char* name) {
  return GlobalSpan<T>(data, static_cast<std::size_t>(count), name);
}

void require(bool condition, const std::string& what) {
  if (!condition) throw std::invalid_argument("fa1_forward: " + what);
}

}  // namespace

ElementType element_type(DType dtype) {
  switch (dtype) {
    case DType::fp16: return ElementType::fp16;
    case DType::bf16: return ElementType::bf16;
    default: break;
  }
  throw std::invalid_argument(fmt::format("fa1: no instantiation for dtype {}", to_string(dtype)));
}

std::string kernel_name(DType dtype, std::int64_t head_dim) {
  return fmt::format("fa1_{}_hdim{}", to_string(dtype), head_dim);
}

Params make_params(const AttentionArgs& args) {
  const std::string unsupported = fa1_supports(args.dtype, args.head_dim);
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
  require(args.workspace != nullptr, "the workspace (fa1_workspace_bytes) must be allocated by the caller");
  for (const void* tensor : {args.q, args.k, args.v})
    require(reinterpret_cast<std::uintptr_t>(tensor) % 16 == 0, "q, k and v must be 16-byte aligned (cp.async)");

  const std::int64_t q_elements = args.batch * args.seq_q * args.heads * args.head_dim;
  const std::int64_t kv_elements = args.batch * args.seq_k * args.kv_heads * args.head_dim;
  const std::int64_t rows = args.batch * args.heads * args.seq_q;
  Params p;
  p.q = span(static_cast<const std::uint16_t*>(args.q), q_elements, "q");
  p.k = span(static_cast<const std::uint16_t*>(args.k), kv_elements, "k");
  p.v = span(static_cast<const std::uint16_t*>(args.v), kv_elements, "v");
  p.o = span(static_cast<std::uint16_t*>(args.o), q_elements, "o");
  p.lse = span(args.lse, args.lse != nullptr ? rows : 0, "lse");
  float* workspace = static_cast<float*>(args.workspace);
  p.o_acc = span(workspace, rows * args.head_dim, "workspace O");
  p.row_max = span(workspace + rows * args.head_dim, rows, "workspace row max");
  p.row_sum = span(workspace + rows * (args.head_dim + 1), rows, "workspace row sum");
  p.batch = static_cast<int>(args.batch);
  p.heads = static_cast<int>(args.heads);
  p.kv_heads = static_cast<int>(args.kv_heads);
  p.seq_q = static_cast<int>(args.seq_q);
  p.seq_k = static_cast<int>(args.seq_k);
  p.causal = args.causal;
  p.scale_log2 = args.scale * log2_e;
  return p;
}

}  // namespace fa1

std::string fa1_supports(DType dtype, std::int64_t head_dim) {
  if (dtype != DType::fp16 && dtype != DType::bf16)
    return fmt::format("the fa1 kernel supports fp16 and bf16 (tensor-core mma.sync inputs), not {}", to_string(dtype));
  if (!fa1::supported_head_dim(head_dim))
    return fmt::format("the fa1 kernel is instantiated for head_dim 64, 128 and 256, not {}", head_dim);
  return "";
}

KernelShape fa1_shape(DType dtype, std::int64_t head_dim) {
  KernelShape shape;
  if (!fa1_supports(dtype, head_dim).empty()) return shape;
  fa1::dispatch(fa1::element_type(dtype), static_cast<int>(head_dim), [&](auto instantiation) {
    using T = fa1::Traits<decltype(instantiation)::head_dim>;
    shape.block_q = T::block_q;
    shape.block_k = T::block_k;
    shape.threads = T::threads;
    shape.shared_bytes = T::shared_bytes;
  });
  return shape;
}

std::size_t fa1_workspace_bytes(const AttentionArgs& args) {
  const std::int64_t rows = args.batch * args.heads * args.seq_q;
  return static_cast<std::size_t>(rows * (args.head_dim + 2)) * sizeof(float);
}

void fa1_forward(const Launch& launch, const AttentionArgs& args) {
  if (launch.target == Target::emulator) {
    fa1::forward_emulated<fa1::Defect::none>(args);
    return;
  }
#if defined(FAPROBE_WITH_CUDA)
  fa1::forward_gpu(fa1::make_params(args), fa1::element_type(args.dtype), static_cast<int>(args.head_dim),
                   launch.stream);
#else
  throw std::runtime_error("built without CUDA");
#endif
}

}  // namespace faprobe::cuda
