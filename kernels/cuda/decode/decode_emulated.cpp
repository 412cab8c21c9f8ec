// cuda.decode's host entry points (launchers.hpp): support, shape, occupancy, workspace, and decode_forward,
// which runs the kernel bodies (decode.cuh) under the emulator for Target::emulator and launches the
// nvcc-compiled instantiations (decode_gpu.cu) for Target::gpu, both with the Params of make_params.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cuda/decode/decode_emulated.hpp"
#if defined(FAPROBE_WITH_CUDA)
#include "cuda/decode/decode_gpu.hpp"
#endif

namespace faprobe::cuda {
namespace decode {
namespace {

// The CTA's fp32 partials: (splits, batch, heads, d) outputs, then (splits, batch, heads) LSEs.
std::int64_t partial_rows(const AttentionArgs& args) { return args.splits * args.batch * args.heads; }

}  // namespace

Params make_params(const AttentionArgs& args) {
  const auto require = [](bool condition, const std::string& what) {
    if (!condition) throw std::invalid_argument("decode_forward: " + what);
  };
  require(args.seq_q == 1, fmt::format("decode has one query row per sequence, got seq_q {}", args.seq_q));
  require(args.seq_starts != nullptr, "seq_starts (batch + 1 key offsets) must be given");
  require(args.splits >= 1 && args.splits <= 65535, fmt::format("splits must be 1 to 65535, got {}", args.splits));
  require(args.block_table == nullptr || (args.page_size > 0 && args.pages_per_seq > 0),
          "a block table needs page_size and pages_per_seq");
  // The kernel finds a key's page by shifts and masks, and gathers rows through 32-bit storage row numbers.
  require(args.block_table == nullptr || (args.page_size & (args.page_size - 1)) == 0,
          fmt::format("the page size must be a power of two, got {}", args.page_size));
  require(args.block_table == nullptr || args.page_size <= (std::int64_t{1} << 20),
          fmt::format("the page size must be at most 2^20 keys, got {}", args.page_size));
  const std::int64_t kv_rows = args.kv_rows != 0 ? args.kv_rows : args.batch * args.seq_k;
  require(kv_rows <= std::numeric_limits<std::int32_t>::max(),
          fmt::format("K and V must have at most 2^31 - 1 rows, got {}", kv_rows));
  require(args.splits == 1 || args.workspace != nullptr, "split-K needs a workspace (decode_workspace_bytes)");
  Params p;
  static_cast<AttentionParams&>(p) = make_attention_params("decode", args);
  p.head_chunks = head_chunks(static_cast<int>(args.heads / args.kv_heads));
  // The grid's y and z extents are limited to 65535 by CUDA; x (the splits) is checked above.
  require(args.kv_heads * p.head_chunks <= 65535 && args.batch <= 65535,
          fmt::format("kv_heads · ceil(group / 16) = {} and batch {} must each be at most 65535 (grid y and z)",
                      args.kv_heads * p.head_chunks, args.batch));
  p.seq_starts = GlobalSpan<const std::int32_t>(args.seq_starts, static_cast<std::size_t>(args.batch + 1), "seq_starts");
  if (args.block_table != nullptr) {
    require(args.page_size <= std::numeric_limits<int>::max() && args.batch * args.pages_per_seq <= std::numeric_limits<int>::max(),
            "the block table must be indexable with an int");
    p.block_table = GlobalSpan<const std::int32_t>(args.block_table, static_cast<std::size_t>(args.batch * args.pages_per_seq),
                                                   "block_table");
    p.page_size = static_cast<int>(args.page_size);
    p.pages_per_seq = static_cast<int>(args.pages_per_seq);
    while ((1 << p.log2_page_size) < p.page_size) ++p.log2_page_size;
  }
  p.splits = static_cast<int>(args.splits);
  if (args.splits > 1) {
    float* partials = static_cast<float*>(args.workspace);
    const std::size_t rows = static_cast<std::size_t>(partial_rows(args));
    p.partial_o = GlobalSpan<float>(partials, rows * static_cast<std::size_t>(args.head_dim), "partial_o");
    p.partial_lse = GlobalSpan<float>(partials + rows * static_cast<std::size_t>(args.head_dim), rows, "partial_lse");
  }
  return p;
}

}  // namespace decode

std::string decode_supports(DType dtype, std::int64_t head_dim) { return tensor_core_supports("decode", dtype, head_dim); }

KernelShape decode_shape(DType dtype, std::int64_t head_dim) {
  return instantiated_shape<decode::Traits>("decode", dtype, head_dim);
}

int decode_ctas_per_sm(const Launch& launch, DType dtype, std::int64_t head_dim) {
  const KernelShape shape = decode_shape(dtype, head_dim);
  if (shape.threads == 0) return 1;
  if (launch.target == Target::gpu) {
#if defined(FAPROBE_WITH_CUDA)
    return decode::ctas_per_sm_gpu(element_type("decode", dtype), static_cast<int>(head_dim));
#else
    throw std::runtime_error("built without CUDA");
#endif
  }
  // An H200 (sm_90): 228 KiB of shared memory per SM, of which 1 KiB per resident CTA is reserved by the
  // system, 2048 threads and 32 CTAs per SM (CUDA C++ Programming Guide, "Compute Capabilities").
  const std::size_t by_shared = (228 * 1024) / (shape.shared_bytes + 1024);
  const std::size_t by_threads = 2048 / static_cast<std::size_t>(shape.threads);
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>({by_shared, by_threads, 32})));
}

std::size_t decode_workspace_bytes(const AttentionArgs& args) {
  if (args.splits <= 1) return 0;
  return static_cast<std::size_t>(decode::partial_rows(args) * (args.head_dim + 1)) * sizeof(float);
}

void decode_forward(const Launch& launch, const AttentionArgs& args) {
  if (launch.target == Target::emulator) {
    decode::forward_emulated<decode::Defect::none>(args);
    return;
  }
#if defined(FAPROBE_WITH_CUDA)
  decode::forward_gpu(decode::make_params(args), element_type("decode", args.dtype), static_cast<int>(args.head_dim),
                      launch.stream);
#else
  throw std::runtime_error("built without CUDA");
#endif
}

}  // namespace faprobe::cuda
