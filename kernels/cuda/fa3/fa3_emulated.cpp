// cuda.fa3's host entry points (fa3_launch.hpp): its list of instantiations, support, shape, and fa3_forward,
// which runs the kernel body (fa3.cuh) under the emulator for Target::emulator (through the generated
// per-instantiation files) and launches the nvcc-compiled sm_90a instantiation (fa3_gpu.cu) for Target::gpu,
// both with the Params of make_params: FA-2's checked arguments plus the TMA tensor maps of Q, K, V and O.
#include <algorithm>
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

// The map of a (batch, seq, heads, head_dim) tensor of element_bytes-byte elements: dims innermost first,
// boxes of box_columns columns (one swizzled column block) by box_rows rows of one head.
TensorMapShape tensor_shape(std::int64_t batch, std::int64_t seq, std::int64_t heads, int head_dim, int element_bytes,
                            int box_columns, int box_rows, isa::TmaSwizzle swizzle) {
  TensorMapShape shape;
  shape.rank = 4;
  shape.element_bytes = static_cast<std::uint32_t>(element_bytes);
  const auto element = std::uint64_t{shape.element_bytes};
  const auto d = static_cast<std::uint64_t>(head_dim);
  shape.dims[0] = d;
  shape.dims[1] = static_cast<std::uint64_t>(seq);
  shape.dims[2] = static_cast<std::uint64_t>(heads);
  shape.dims[3] = static_cast<std::uint64_t>(batch);
  shape.strides_bytes[0] = element;
  shape.strides_bytes[1] = static_cast<std::uint64_t>(heads) * d * element;
  shape.strides_bytes[2] = d * element;
  shape.strides_bytes[3] = static_cast<std::uint64_t>(seq * heads) * d * element;
  shape.box[0] = static_cast<std::uint32_t>(box_columns);
  shape.box[1] = static_cast<std::uint32_t>(box_rows);
  shape.box[2] = 1;
  shape.box[3] = 1;
  shape.swizzle = swizzle;
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

void transpose_v_emulated(const AttentionArgs& args) {
  const TransposeParams transpose = transpose_params(args);
  emu::LaunchConfig config;
  config.kernel_name = "fa3_transpose_v";
  config.grid = {static_cast<unsigned>(transpose.seq_k_padded / 32), static_cast<unsigned>(transpose.kv_heads),
                 static_cast<unsigned>(transpose.batch)};
  config.block.x = kTransposeThreads;
  emu::launch(config, [&] { transpose_v_body(transpose); });
}

Params make_params(const AttentionArgs& args, Target target, const Tile& tile) {
  Params params;
  const bool fp8 = args.dtype == DType::fp8_e4m3;
  AttentionArgs checked = args;
  if (fp8) checked.dtype = DType::bf16;  // the same checks; O is bf16 (output_dtype), Q, K and V go by TMA
  params.attention = make_attention_params("fa3", checked);
  if (args.block_table != nullptr || (args.kv_rows != 0 && args.kv_rows != args.batch * args.seq_k))
    throw std::invalid_argument("fa3_forward: K and V must be contiguous (batch, seq_k) tensors");
  if (fp8) {
    params.attention.q = {};
    params.attention.k = {};
    params.attention.v = {};
    params.attention.scale_log2 *= args.q_scale * args.k_scale;  // S from the codes, then Q's and K's scales
    params.output_scale = args.v_scale;
  }
  params.attention.o = {};  // O goes by TMA (o_map)
  int block_q = 0;
  const bool dispatched = dispatch(fa3_element(args.dtype), static_cast<int>(args.head_dim), tile, [&](auto instance) {
    using T = TraitsOfInstance<decltype(instance)>;
    const int element_bytes = T::fp8 ? 1 : 2;
    params.q_map = tensor_map(target, args.q, tensor_shape(args.batch, args.seq_q, args.heads, T::head_dim, element_bytes,
                                                           T::column_elements, T::block_q, T::qk_tma_swizzle));
    params.k_map = tensor_map(target, args.k, tensor_shape(args.batch, args.seq_k, args.kv_heads, T::head_dim, element_bytes,
                                                           T::column_elements, T::block_k, T::qk_tma_swizzle));
    if constexpr (T::fp8) {
      params.v_map = tensor_map(target, args.workspace,
                                transposed_v_shape<T>(args.batch, args.kv_heads, transposed_keys(static_cast<int>(args.seq_k))));
    } else {
      params.v_map = tensor_map(target, args.v, tensor_shape(args.batch, args.seq_k, args.kv_heads, T::head_dim, element_bytes,
                                                             T::column_elements, T::block_k, T::qk_tma_swizzle));
    }
    // O: 16-bit (bf16 for e4m3), stored 64 columns by one consumer's 64 rows at a time.
    params.o_map = tensor_map(target, args.o, tensor_shape(args.batch, args.seq_q, args.heads, T::head_dim, 2, 64,
                                                           T::rows_per_consumer, isa::TmaSwizzle::bytes128));
    block_q = T::block_q;
  });
  if (!dispatched)
    throw std::invalid_argument(fmt::format("fa3_forward: no instantiation for {} head_dim {} tile {} (kernels/cuda/fa3/CMakeLists.txt)",
                                            to_string(args.dtype), args.head_dim, tile.name()));
  const std::int64_t query_blocks = (args.seq_q + block_q - 1) / block_q;
  const std::int64_t tiles = query_blocks * args.heads * args.batch;
  if (tiles > std::int64_t{1} << 30)
    throw std::invalid_argument(fmt::format("fa3_forward: {} tiles (query blocks · heads · batch) exceed 2^30", tiles));
  params.tiles = static_cast<int>(tiles);
  params.query_blocks = static_cast<int>(query_blocks);
  params.section_pairs = section_pairs(args.batch, args.heads, args.kv_heads, args.seq_k, static_cast<int>(args.head_dim),
                                       fp8 ? 1 : 2);
  return params;
}

void forward_emulated(const AttentionArgs& args, const Tile& tile, int sms) {
  if (fa3_element(args.dtype) == ElementType::e4m3) transpose_v_emulated(args);
  const Params params = make_params(args, Target::emulator, tile);
  dispatch(fa3_element(args.dtype), static_cast<int>(args.head_dim), tile, [&](auto instance) {
    using I = decltype(instance);
    run_emulated<typename I::Element, I::head_dim, I::block_q, I::block_k>(params, persistent_ctas(params, sms));
  });
}

}  // namespace fa3

const TileList& fa3_instantiations() {
  static const TileList list = {
#define FAPROBE_FA3_INSTANTIATION(E, dtype, D, BQ, BK, default_none, default_causal) \
  {DType::dtype, D, Tile{BQ, BK}, default_none != 0, default_causal != 0},
#include "cuda/fa3/fa3_instantiations.inc"
#undef FAPROBE_FA3_INSTANTIATION
  };
  return list;
}

std::string fa3_gpu_missing() {
#if defined(FAPROBE_WITH_FA3_GPU)
  return "";
#elif defined(FAPROBE_WITH_CUDA)
  return "this binary holds no sm_90a code for the fa3 kernel (CMAKE_CUDA_ARCHITECTURES lacks 90a)";
#else
  return "built without CUDA";
#endif
}

std::string fa3_supports(const Case& c, const std::optional<Tile>& tile) {
  if (c.dtype != DType::fp16 && c.dtype != DType::bf16 && c.dtype != DType::fp8_e4m3)
    return fmt::format("the fa3 kernel supports fp16 and bf16, and fp8_e4m3 with per-tensor scales (wgmma inputs), not {}",
                       to_string(c.dtype));
  if (!instantiated_head_dim(c.head_dim))
    return fmt::format("the fa3 kernel is instantiated for head_dim 64, 128 and 256, not {}", c.head_dim);
  if (c.mask == Mask::causal_top_left)
    return "the fa3 kernel's causal mask is bottom-right (flash-attention's), not causal-top-left";
  return tile_supports("fa3", fa3_instantiations(), c, tile);
}

KernelShape fa3_shape(DType dtype, std::int64_t head_dim, const Tile& tile) {
  KernelShape shape;
  if (dtype != DType::fp16 && dtype != DType::bf16 && dtype != DType::fp8_e4m3) return shape;
  fa3::dispatch(fa3::fa3_element(dtype), static_cast<int>(head_dim), tile, [&](auto instance) {
    using T = fa3::TraitsOfInstance<decltype(instance)>;
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

void fa3_forward(const Launch& launch, const AttentionArgs& args, const Tile& tile) {
  if (launch.target == Target::emulator) {
    fa3::forward_emulated(args, tile);
    return;
  }
#if defined(FAPROBE_WITH_FA3_GPU)
  const ElementType element = fa3::fa3_element(args.dtype);
  if (element == ElementType::e4m3) fa3::transpose_v_gpu(fa3::transpose_params(args), launch.stream);
  fa3::forward_gpu(fa3::make_params(args, Target::gpu, tile), element, static_cast<int>(args.head_dim), tile, launch.stream);
#else
  throw std::runtime_error(fa3_gpu_missing());
#endif
}

}  // namespace faprobe::cuda
