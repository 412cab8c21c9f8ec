// The GPU side of the device input generator (body in fill_inputs.cuh): one __global__ wrapper per storage
// type and its launcher (fill_inputs_gpu.hpp).
#include <cuda_runtime.h>

#include "cuda/common/fill_inputs_gpu.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::fill {

template <class Store>
__global__ void __launch_bounds__(fill_input_threads) fill_input_kernel(GlobalSpan<typename Store::Storage> out,
                                                                        std::uint64_t key) {
  fill_input_values<Store>(out, key);
}

template <class Store>
void fill_input_on_gpu(void* stream, GlobalSpan<typename Store::Storage> out, std::uint64_t key) {
  // At most 4096 CTAs of 256 threads: about four full waves on a 132-SM H100/H200 (8 such CTAs resident
  // per SM); larger tensors loop in the grid stride rather than start more CTAs.
  const unsigned blocks = fill_input_blocks(out.size(), 4096);
  fill_input_kernel<Store><<<blocks, fill_input_threads, 0, static_cast<cudaStream_t>(stream)>>>(out, key);
  FAPROBE_CHECK_LAUNCH("fill_input");
}

template <class Store>
__global__ void __launch_bounds__(fill_input_threads)
    fill_paged_kernel(GlobalSpan<typename Store::Storage> out, std::uint64_t key, std::size_t row_width, int page_size,
                      GlobalSpan<const std::int32_t> page_first_row, GlobalSpan<const std::int32_t> page_valid_rows) {
  fill_paged_values<Store>(out, key, row_width, page_size, page_first_row, page_valid_rows);
}

template <class Store>
void fill_paged_on_gpu(void* stream, GlobalSpan<typename Store::Storage> out, std::uint64_t key, std::size_t row_width,
                       int page_size, GlobalSpan<const std::int32_t> page_first_row,
                       GlobalSpan<const std::int32_t> page_valid_rows) {
  const unsigned blocks = fill_input_blocks(out.size(), 4096);  // as fill_input_on_gpu
  fill_paged_kernel<Store><<<blocks, fill_input_threads, 0, static_cast<cudaStream_t>(stream)>>>(
      out, key, row_width, page_size, page_first_row, page_valid_rows);
  FAPROBE_CHECK_LAUNCH("fill_paged_input");
}

template void fill_input_on_gpu<isa::Float>(void*, GlobalSpan<float>, std::uint64_t);
template void fill_input_on_gpu<isa::Half>(void*, GlobalSpan<std::uint16_t>, std::uint64_t);
template void fill_input_on_gpu<isa::BFloat16>(void*, GlobalSpan<std::uint16_t>, std::uint64_t);
template void fill_input_on_gpu<E4m3Input>(void*, GlobalSpan<std::uint8_t>, std::uint64_t);

#define FAPROBE_FILL_PAGED(Store, Storage)                                                                     \
  template void fill_paged_on_gpu<Store>(void*, GlobalSpan<Storage>, std::uint64_t, std::size_t, int,             \
                                         GlobalSpan<const std::int32_t>, GlobalSpan<const std::int32_t>);
FAPROBE_FILL_PAGED(isa::Float, float)
FAPROBE_FILL_PAGED(isa::Half, std::uint16_t)
FAPROBE_FILL_PAGED(isa::BFloat16, std::uint16_t)
FAPROBE_FILL_PAGED(E4m3Input, std::uint8_t)
#undef FAPROBE_FILL_PAGED

}  // namespace faprobe::cuda::fill
