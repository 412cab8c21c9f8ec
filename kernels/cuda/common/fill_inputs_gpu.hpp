// The GPU launcher of the device input generator (fill_inputs.cuh), internal to fill_inputs_emulated.cpp,
// which holds the public entry point fill_input (launchers.hpp). Defined in fill_inputs_gpu.cu, only in
// CUDA builds (FAPROBE_WITH_CUDA); plain C++, no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/fill_inputs.cuh"

namespace faprobe::cuda::fill {

// Launches the generator on stream (a cudaStream_t; null = the default stream) over out (device memory,
// out.size() > 0) and checks the launch. Asynchronous. Instantiated for isa::Float, isa::Half, isa::BFloat16
// and E4m3Input.
template <class Store>
void fill_input_on_gpu(void* stream, GlobalSpan<typename Store::Storage> out, std::uint64_t key,
                       InputDistribution distribution, Store store);
// The same for a paged pool (fill_paged_values); page_first_row and page_valid_rows in device memory.
template <class Store>
void fill_paged_on_gpu(void* stream, GlobalSpan<typename Store::Storage> out, std::uint64_t key,
                       InputDistribution distribution, Store store, std::size_t row_width, int page_size,
                       GlobalSpan<const std::int32_t> page_first_row, GlobalSpan<const std::int32_t> page_valid_rows);
// The rotated rows of incoherent processing (fill_rotated_rows).
void fill_rotated_on_gpu(void* stream, GlobalSpan<std::uint8_t> out, std::uint64_t key, int head_dim,
                         InputDistribution distribution, std::uint64_t signs_key, int scale_exponent);

}  // namespace faprobe::cuda::fill
