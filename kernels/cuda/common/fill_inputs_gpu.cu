// The GPU side of the device input generator (body in fill_inputs.cuh): one __global__ wrapper per storage
// type and its launcher (fill_inputs_gpu.hpp).
#include <cuda_runtime.h>

#include "cuda/common/fill_inputs_gpu.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::fill {

template <class Store>
__global__ void __launch_bounds__(fill_input_threads) fill_input_kernel(GlobalSpan<typename Store::Storage> out,
                                                                        std::uint64_t key,
                                                                        InputDistribution distribution, Store store) {
  fill_input_values<Store>(out, key, distribution, store);
}

template <class Store>
void fill_input_on_gpu(void* stream, GlobalSpan<typename Store::Storage> out, std::uint64_t key,
                       InputDistribution distribution, Store store) {
  // At most 4096 CTAs of 256 threads: about four full waves on a 132-SM H100/H200 (8 such CTAs resident
  // per SM); larger tensors loop in the grid stride rather than start more CTAs.
  const unsigned blocks = fill_input_blocks(out.size(), 4096);
  fill_input_kernel<Store><<<blocks, fill_input_threads, 0, static_cast<cudaStream_t>(stream)>>>(out, key, distribution,
                                                                                                   store);
  FAPROBE_CHECK_LAUNCH("fill_input");
}

template <class Store>
__global__ void __launch_bounds__(fill_input_threads)
    fill_paged_kernel(GlobalSpan<typename Store::Storage> out, std::uint64_t key, InputDistribution distribution,
                      Store store, std::size_t row_width, int page_size, GlobalSpan<const std::int32_t> page_first_row,
                      GlobalSpan<const std::int32_t> page_valid_rows) {
  fill_paged_values<Store>(out, key, distribution, store, row_width, page_size, page_first_row, page_valid_rows);
}

template <class Store>
void fill_paged_on_gpu(void* stream, GlobalSpan<typename Store::Storage> out, std::uint64_t key,
                       InputDistribution distribution, Store store, std::size_t row_width, int page_size,
                       GlobalSpan<const std::int32_t> page_first_row, GlobalSpan<const std::int32_t> page_valid_rows) {
  const unsigned blocks = fill_input_blocks(out.size(), 4096);  // as fill_input_on_gpu
  fill_paged_kernel<Store><<<blocks, fill_input_threads, 0, static_cast<cudaStream_t>(stream)>>>(
      out, key, distribution, store, row_width, page_size, page_first_row, page_valid_rows);
  FAPROBE_CHECK_LAUNCH("fill_paged_input");
}

template <int HeadDim>
__global__ void __launch_bounds__(fill_input_threads)
    fill_rotated_kernel(GlobalSpan<std::uint8_t> out, std::uint64_t key, InputDistribution distribution,
                        std::uint64_t signs_key, int scale_exponent) {
  fill_rotated_rows<HeadDim>(out, key, distribution, signs_key, scale_exponent);
}

void fill_rotated_on_gpu(void* stream, GlobalSpan<std::uint8_t> out, std::uint64_t key, int head_dim,
                         InputDistribution distribution, std::uint64_t signs_key, int scale_exponent) {
  // A warp per row, at most 4096 CTAs of 8 warps (as fill_input_on_gpu); more rows loop in the grid stride.
  const unsigned blocks = fill_input_blocks(out.size() / static_cast<unsigned>(head_dim) * 32, 4096);
  dispatch_rotated_head_dim(head_dim, [&](auto head_dim_constant) {
    constexpr int kHeadDim = decltype(head_dim_constant)::value;
    fill_rotated_kernel<kHeadDim><<<blocks, fill_input_threads, 0, static_cast<cudaStream_t>(stream)>>>(
        out, key, distribution, signs_key, scale_exponent);
  });
  FAPROBE_CHECK_LAUNCH("fill_rotated_input");
}

#define FAPROBE_FILL(Store, Storage)                                                                             \
  template void fill_input_on_gpu<Store>(void*, GlobalSpan<Storage>, std::uint64_t, InputDistribution, Store);    \
  template void fill_paged_on_gpu<Store>(void*, GlobalSpan<Storage>, std::uint64_t, InputDistribution, Store,      \
                                         std::size_t, int, GlobalSpan<const std::int32_t>,                       \
                                         GlobalSpan<const std::int32_t>);
FAPROBE_FILL(isa::Float, float)
FAPROBE_FILL(isa::Half, std::uint16_t)
FAPROBE_FILL(isa::BFloat16, std::uint16_t)
FAPROBE_FILL(E4m3Input, std::uint8_t)
#undef FAPROBE_FILL

}  // namespace faprobe::cuda::fill
