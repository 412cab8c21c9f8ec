// The entry point fill_input (launchers.hpp) of the device input generator (fill_inputs.cuh): on the GPU
// through fill_inputs_gpu.cu, under the emulator by running the same kernel body on host memory.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/fill_inputs.cuh"
#include "cuda/common/fill_inputs_gpu.hpp"
#include "cuda/launchers.hpp"

namespace faprobe::cuda {
namespace {

// The emulator's grid: at most 4 CTAs of 256 threads (each fiber start costs more than an element), each
// thread looping over count / 1024 elements.
constexpr unsigned emulated_fill_max_blocks = 4;

template <class Store>
void fill_as(const Launch& launch, void* data, std::size_t count, std::uint64_t key, InputDistribution distribution,
             Store store) {
  using Storage = typename Store::Storage;
  const GlobalSpan<Storage> out(static_cast<Storage*>(data), count, "input");
  if (launch.target == Target::gpu) {
#if defined(FAPROBE_WITH_CUDA)
    fill::fill_input_on_gpu<Store>(launch.stream, out, key, distribution, store);
    return;
#else
    throw std::runtime_error("built without CUDA");
#endif
  }
  const emu::LaunchConfig config{"fill_input", {fill::fill_input_blocks(count, emulated_fill_max_blocks)},
                                 {fill::fill_input_threads}, 0};
  emu::launch(config,
              [out, key, distribution, store] { fill::fill_input_values<Store>(out, key, distribution, store); });
}

template <class Store>
void fill_paged_as(const Launch& launch, void* data, std::size_t count, std::uint64_t key,
                   InputDistribution distribution, Store store, const PagedFill& paged) {
  using Storage = typename Store::Storage;
  const GlobalSpan<Storage> out(static_cast<Storage*>(data), count, "input");
  const GlobalSpan<const std::int32_t> first(paged.page_first_row, paged.pages, "page_first_row");
  const GlobalSpan<const std::int32_t> valid(paged.page_valid_rows, paged.pages, "page_valid_rows");
  const std::size_t width = paged.row_width;
  const int page_size = paged.page_size;
  if (launch.target == Target::gpu) {
#if defined(FAPROBE_WITH_CUDA)
    fill::fill_paged_on_gpu<Store>(launch.stream, out, key, distribution, store, width, page_size, first, valid);
    return;
#else
    throw std::runtime_error("built without CUDA");
#endif
  }
  const emu::LaunchConfig config{"fill_paged_input", {fill::fill_input_blocks(count, emulated_fill_max_blocks)},
                                 {fill::fill_input_threads}, 0};
  emu::launch(config,
              [=] { fill::fill_paged_values<Store>(out, key, distribution, store, width, page_size, first, valid); });
}

}  // namespace

void fill_paged_input(const Launch& launch, void* data, DType dtype, std::uint64_t key, InputDistribution distribution,
                      const PagedFill& paged) {
  const std::size_t count = paged.pages * std::size_t(paged.page_size) * paged.row_width;
  if (count == 0) return;
  switch (dtype) {
    case DType::fp32: return fill_paged_as(launch, data, count, key, distribution, isa::Float{}, paged);
    case DType::fp16: return fill_paged_as(launch, data, count, key, distribution, isa::Half{}, paged);
    case DType::bf16: return fill_paged_as(launch, data, count, key, distribution, isa::BFloat16{}, paged);
    case DType::fp8_e4m3:
      return fill_paged_as(launch, data, count, key, distribution, fill::E4m3Input{fp8_input_scale_of(distribution)},
                           paged);
  }
  throw std::invalid_argument("fill_paged_input: dtype " + std::string(to_string(dtype)) +
                              " has no device input generator (fp32, fp16, bf16, fp8_e4m3)");
}

void fill_input(const Launch& launch, void* data, DType dtype, std::size_t count, std::uint64_t key,
                InputDistribution distribution) {
  if (count == 0) return;  // a grid of zero CTAs is not a valid launch
  switch (dtype) {
    case DType::fp32: return fill_as(launch, data, count, key, distribution, isa::Float{});
    case DType::fp16: return fill_as(launch, data, count, key, distribution, isa::Half{});
    case DType::bf16: return fill_as(launch, data, count, key, distribution, isa::BFloat16{});
    case DType::fp8_e4m3:
      return fill_as(launch, data, count, key, distribution, fill::E4m3Input{fp8_input_scale_of(distribution)});
  }
  throw std::invalid_argument("fill_input: dtype " + std::string(to_string(dtype)) +
                              " has no device input generator (fp32, fp16, bf16, fp8_e4m3)");
}

void fill_rotated_input(const Launch& launch, void* data, std::size_t count, int head_dim, std::uint64_t key,
                        InputDistribution distribution, std::uint64_t signs_key) {
  if (!incoherent_head_dim(head_dim) || count % static_cast<unsigned>(head_dim) != 0) {
    throw std::invalid_argument("fill_rotated_input: head_dim " + std::to_string(head_dim) +
                                " is not a power of two from 32 to 256 dividing " + std::to_string(count));
  }
  if (count == 0) return;
  const GlobalSpan<std::uint8_t> out(static_cast<std::uint8_t*>(data), count, "input");
  const int scale_exponent = incoherent_scale_exponent(head_dim, distribution);
  if (launch.target == Target::gpu) {
#if defined(FAPROBE_WITH_CUDA)
    fill::fill_rotated_on_gpu(launch.stream, out, key, head_dim, distribution, signs_key, scale_exponent);
    return;
#else
    throw std::runtime_error("built without CUDA");
#endif
  }
  // A warp per row: rows · 32 threads.
  const emu::LaunchConfig config{"fill_rotated_input",
                                 {fill::fill_input_blocks(count / static_cast<unsigned>(head_dim) * isa::warp_size,
                                                          emulated_fill_max_blocks)},
                                 {fill::fill_input_threads}, 0};
  fill::dispatch_rotated_head_dim(head_dim, [&](auto head_dim_constant) {
    constexpr int kHeadDim = decltype(head_dim_constant)::value;
    emu::launch(config, [=] { fill::fill_rotated_rows<kHeadDim>(out, key, distribution, signs_key, scale_exponent); });
  });
}

}  // namespace faprobe::cuda
