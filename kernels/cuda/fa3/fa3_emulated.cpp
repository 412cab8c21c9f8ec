// cuda.fa3's host entry points (launchers.hpp): support, shape, and fa3_forward, which runs the kernel body
// (fa3.cuh) under the emulator for Target::emulator and launches the nvcc-compiled sm_90a instantiation
// (fa3_gpu.cu) for Target::gpu, both with the Params of make_params: FA-2's checked arguments plus the TMA
// tensor maps of Q, K and V.
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cuda/common/tensor_map.hpp"
#include "cuda/fa3/fa3_emulated.hpp"
#if defined(FAPROBE_WITH_FA3_GPU)
#include "cuda/fa3/fa3_gpu.hpp"
#endif

namespace faprobe::cuda {
namespace fa3 {
namespace {

// The map of a (batch, seq, heads, head_dim) tensor of 16-bit elements: dims innermost first, boxes of 64
// columns (128 bytes, the 128-byte swizzle's span) by box_rows rows of one head.
TensorMapShape tensor_shape(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                            int box_rows) {
  TensorMapShape shape;
  shape.rank = 4;
  shape.element_bytes = 2;
  const auto element = std::uint64_t{shape.element_bytes};
  shape.dims[0] = static_cast<std::uint64_t>(head_dim);
  shape.dims[1] = static_cast<std::uint64_t>(seq);
  shape.dims[2] = static_cast<std::uint64_t>(heads);
  shape.dims[3] = static_cast<std::uint64_t>(batch);
  shape.strides_bytes[0] = element;
  shape.strides_bytes[1] = static_cast<std::uint64_t>(heads * head_dim) * element;
  shape.strides_bytes[2] = static_cast<std::uint64_t>(head_dim) * element;
  shape.strides_bytes[3] = static_cast<std::uint64_t>(seq * heads * head_dim) * element;
  shape.box[0] = 64;
  shape.box[1] = static_cast<std::uint32_t>(box_rows);
  shape.box[2] = 1;
  shape.box[3] = 1;
  shape.swizzle = isa::TmaSwizzle::bytes128;
  return shape;
}

isa::TensorMap tensor_map(Target target, const void* base, const TensorMapShape& shape) {
  if (target == Target::emulator) return emulated_tensor_map(base, shape);
#if defined(FAPROBE_WITH_CUDA)
  return gpu_tensor_map(base, shape);
#else
  throw std::runtime_error("built without CUDA");
#endif
}

}  // namespace

Params make_params(const AttentionArgs& args, Target target) {
  Params params;
  params.attention = make_attention_params("fa3", args);
  // The shell passes every case's layout; fa3 takes the contiguous one of equal lengths (kernel_supports).
  if (args.block_table != nullptr || (args.kv_rows != 0 && args.kv_rows != args.batch * args.seq_k))
    throw std::invalid_argument("fa3_forward: K and V must be contiguous (batch, seq_k) tensors");
  int block_k = 0;
  dispatch_instantiation(element_type("fa3", args.dtype), static_cast<int>(args.head_dim),
                         [&](auto instantiation) { block_k = Traits<decltype(instantiation)::head_dim>::block_k; });
  params.q_map = tensor_map(target, args.q, tensor_shape(args.batch, args.seq_q, args.heads, args.head_dim, Traits<64>::block_q));
  params.k_map = tensor_map(target, args.k, tensor_shape(args.batch, args.seq_k, args.kv_heads, args.head_dim, block_k));
  params.v_map = tensor_map(target, args.v, tensor_shape(args.batch, args.seq_k, args.kv_heads, args.head_dim, block_k));
  const std::int64_t tiles = std::int64_t{Traits<64>::query_blocks(params.attention.seq_q)} * args.heads * args.batch;
  if (tiles > std::int64_t{1} << 30)
    throw std::invalid_argument(fmt::format("fa3_forward: {} tiles (query blocks · heads · batch) exceed 2^30", tiles));
  params.tiles = static_cast<int>(tiles);
  return params;
}

}  // namespace fa3

std::string fa3_gpu_missing() {
#if defined(FAPROBE_WITH_FA3_GPU)
  return "";
#elif defined(FAPROBE_WITH_CUDA)
  return "this binary holds no sm_90a code for the fa3 kernel (CMAKE_CUDA_ARCHITECTURES lacks 90a)";
#else
  return "built without CUDA";
#endif
}

std::string fa3_supports(DType dtype, std::int64_t head_dim) {
  if (dtype != DType::fp16 && dtype != DType::bf16)
    return fmt::format("the fa3 kernel supports fp16 and bf16 (wgmma inputs), not {}", to_string(dtype));
  if (!instantiated_head_dim(head_dim))
    return fmt::format("the fa3 kernel is instantiated for head_dim 64, 128 and 256, not {}", head_dim);
  return "";
}

KernelShape fa3_shape(DType dtype, std::int64_t head_dim) {
  KernelShape shape;
  if (!fa3_supports(dtype, head_dim).empty()) return shape;
  dispatch_instantiation(element_type("fa3", dtype), static_cast<int>(head_dim), [&](auto instantiation) {
    using T = fa3::Traits<decltype(instantiation)::head_dim>;
    shape.block_q = T::block_q;
    shape.block_k = T::block_k;
    shape.threads = T::threads;
    shape.shared_bytes = T::shared_bytes;
  });
  return shape;
}

void fa3_forward(const Launch& launch, const AttentionArgs& args) {
  if (launch.target == Target::emulator) {
    fa3::forward_emulated<fa3::Defect::none>(args);
    return;
  }
#if defined(FAPROBE_WITH_FA3_GPU)
  fa3::forward_gpu(fa3::make_params(args, Target::gpu), element_type("fa3", args.dtype), static_cast<int>(args.head_dim),
                   launch.stream);
#else
  throw std::runtime_error(fa3_gpu_missing());
#endif
}

}  // namespace faprobe::cuda
