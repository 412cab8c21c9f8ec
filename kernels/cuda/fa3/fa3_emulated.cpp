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

// The map of a (batch, seq, heads, head_dim) tensor: dims innermost first, boxes of one swizzled column block
// (column_elements columns) by box_rows rows of one head.
template <class T>
TensorMapShape tensor_shape(std::int64_t batch, std::int64_t seq, std::int64_t heads, int box_rows) {
  TensorMapShape shape;
  shape.rank = 4;
  shape.element_bytes = T::fp8 ? 1 : 2;
  const auto element = std::uint64_t{shape.element_bytes};
  const auto d = static_cast<std::uint64_t>(T::head_dim);
  shape.dims[0] = d;
  shape.dims[1] = static_cast<std::uint64_t>(seq);
  shape.dims[2] = static_cast<std::uint64_t>(heads);
  shape.dims[3] = static_cast<std::uint64_t>(batch);
  shape.strides_bytes[0] = element;
  shape.strides_bytes[1] = static_cast<std::uint64_t>(heads) * d * element;
  shape.strides_bytes[2] = d * element;
  shape.strides_bytes[3] = static_cast<std::uint64_t>(seq * heads) * d * element;
  shape.box[0] = static_cast<std::uint32_t>(T::column_elements);
  shape.box[1] = static_cast<std::uint32_t>(box_rows);
  shape.box[2] = 1;
  shape.box[3] = 1;
  shape.swizzle = T::qk_tma_swizzle;
  return shape;
}

// e4m3's V^T (batch, kv_heads, d, seq_k padded): boxes of block_k keys (128 bytes) by all d rows.
template <class T>
TensorMapShape transposed_v_shape(std::int64_t batch, std::int64_t kv_heads, int seq_k_padded) {
  TensorMapShape shape;
  shape.rank = 4;
  shape.element_bytes = 1;
  const auto d = static_cast<std::uint64_t>(T::head_dim);
  const auto keys = static_cast<std::uint64_t>(seq_k_padded);
  shape.dims[0] = keys;
  shape.dims[1] = d;
  shape.dims[2] = static_cast<std::uint64_t>(kv_heads);
  shape.dims[3] = static_cast<std::uint64_t>(batch);
  shape.strides_bytes[0] = 1;
  shape.strides_bytes[1] = keys;
  shape.strides_bytes[2] = d * keys;
  shape.strides_bytes[3] = static_cast<std::uint64_t>(kv_heads) * d * keys;
  shape.box[0] = static_cast<std::uint32_t>(T::block_k);
  shape.box[1] = static_cast<std::uint32_t>(T::head_dim);
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

ElementType fa3_element(DType dtype) {
  if (dtype == DType::fp8_e4m3) return ElementType::e4m3;
  return element_type("fa3", dtype);
}

TransposeParams transpose_params(const AttentionArgs& args) {
  if (args.workspace == nullptr) throw std::invalid_argument("fa3_forward: fp8_e4m3 needs a workspace for V^T");
  TransposeParams t;
  t.batch = static_cast<int>(args.batch);
  t.kv_heads = static_cast<int>(args.kv_heads);
  t.seq_k = static_cast<int>(args.seq_k);
  t.seq_k_padded = transposed_keys(t.seq_k);
  t.head_dim = static_cast<int>(args.head_dim);
  const auto v_elements = static_cast<std::size_t>(args.batch * args.seq_k * args.kv_heads * args.head_dim);
  t.v = GlobalSpan<const std::uint8_t>(static_cast<const std::uint8_t*>(args.v), v_elements, "v");
  t.v_t = GlobalSpan<std::uint8_t>(static_cast<std::uint8_t*>(args.workspace), fa3_workspace_bytes(args), "v_t");
  return t;
}

Params make_params(const AttentionArgs& args, Target target) {
  Params params;
  const bool fp8 = args.dtype == DType::fp8_e4m3;
  AttentionArgs checked = args;
  if (fp8) checked.dtype = DType::bf16;  // the same checks; O is bf16 (output_dtype), Q, K and V go by TMA
  params.attention = make_attention_params("fa3", checked);
  params.output_pairs = GlobalSpan<std::uint32_t>(static_cast<std::uint32_t*>(args.o), params.attention.o.size() / 2, "o");
  if (args.block_table != nullptr || (args.kv_rows != 0 && args.kv_rows != args.batch * args.seq_k))
    throw std::invalid_argument("fa3_forward: K and V must be contiguous (batch, seq_k) tensors");
  if (fp8) {
    params.attention.q = {};
    params.attention.k = {};
    params.attention.v = {};
    params.attention.scale_log2 *= args.q_scale * args.k_scale;  // S from the codes, then Q's and K's scales
    params.output_scale = args.v_scale;
  }
  const bool dispatched =
      dispatch_fa3_instantiation(fa3_element(args.dtype), static_cast<int>(args.head_dim), [&](auto instantiation) {
        using I = decltype(instantiation);
        using T = TraitsOf<typename I::Element, I::head_dim>;
        params.q_map = tensor_map(target, args.q, tensor_shape<T>(args.batch, args.seq_q, args.heads, T::block_q));
        params.k_map = tensor_map(target, args.k, tensor_shape<T>(args.batch, args.seq_k, args.kv_heads, T::block_k));
        if constexpr (T::fp8) {
          params.v_map = tensor_map(target, args.workspace,
                                    transposed_v_shape<T>(args.batch, args.kv_heads, transposed_keys(static_cast<int>(args.seq_k))));
        } else {
          params.v_map = tensor_map(target, args.v, tensor_shape<T>(args.batch, args.seq_k, args.kv_heads, T::block_k));
        }
      });
  if (!dispatched) throw std::invalid_argument(fmt::format("fa3_forward: no instantiation for head_dim {}", args.head_dim));
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
  if (dtype != DType::fp16 && dtype != DType::bf16 && dtype != DType::fp8_e4m3)
    return fmt::format("the fa3 kernel supports fp16 and bf16, and fp8_e4m3 with per-tensor scales (wgmma inputs), not {}", to_string(dtype));
  if (!instantiated_head_dim(head_dim))
    return fmt::format("the fa3 kernel is instantiated for head_dim 64, 128 and 256, not {}", head_dim);
  return "";
}

KernelShape fa3_shape(DType dtype, std::int64_t head_dim) {
  KernelShape shape;
  if (!fa3_supports(dtype, head_dim).empty()) return shape;
  fa3::dispatch_fa3_instantiation(fa3::fa3_element(dtype), static_cast<int>(head_dim), [&](auto instantiation) {
    using I = decltype(instantiation);
    using T = fa3::TraitsOf<typename I::Element, I::head_dim>;
    shape.block_q = T::block_q;
    shape.block_k = T::block_k;
    shape.threads = T::threads;
    shape.shared_bytes = T::shared_bytes;
  });
  return shape;
}

std::size_t fa3_workspace_bytes(const AttentionArgs& args) {
  if (args.dtype != DType::fp8_e4m3) return 0;
  return static_cast<std::size_t>(args.batch * args.kv_heads * args.head_dim) *
         static_cast<std::size_t>(fa3::transposed_keys(static_cast<int>(args.seq_k)));
}

void fa3_forward(const Launch& launch, const AttentionArgs& args) {
  if (launch.target == Target::emulator) {
    fa3::forward_emulated<fa3::Defect::none>(args);
    return;
  }
#if defined(FAPROBE_WITH_FA3_GPU)
  const ElementType element = fa3::fa3_element(args.dtype);
  if (element == ElementType::e4m3) fa3::transpose_v_gpu(fa3::transpose_params(args), launch.stream);
  fa3::forward_gpu(fa3::make_params(args, Target::gpu), element, static_cast<int>(args.head_dim), launch.stream);
#else
  throw std::runtime_error(fa3_gpu_missing());
#endif
}

}  // namespace faprobe::cuda
