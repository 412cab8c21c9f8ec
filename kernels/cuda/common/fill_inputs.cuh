// The device input generator: writes a Q, K or V tensor on the device from the counter-based generator of
// src/model/inputs.hpp, element i = input_value(key, i) rounded once to the storage type, so that the GPU never
// needs the host's inputs copied over and its bits equal the host's make_inputs (src/model/tensor.cpp) exactly:
// input_value is integer arithmetic plus one exact fp32 scaling (nvcc runs the constexpr function on the
// device with --expt-relaxed-constexpr), and the rounding is cvt.rn, round to nearest even, like Eigen's.
// fp8_e4m3 inputs are the e4m3 code of value / fp8_input_scale through the host's own codec (src/model/fp8.hpp:
// integer arithmetic, compiled for the device too), so no conversion instruction is involved (E4m3Input).
//
// Shape: a grid-stride loop, fill_input_threads threads per CTA and a bounded grid, so each thread writes
// consecutive-by-stride elements (coalesced) and the emulator starts few fibers.
// Costs: per element 3 SplitMix64 mixes (~30 integer ops, 64-bit multiplies; ~15 more for an e4m3 code) and
// one store of 4, 2 or 1 bytes: integer-throughput-bound on a GPU (tens of µs for a few million elements), far below the
// attention kernels that consume the tensors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "cuda/common/isa.hpp"
#include "model/fp8.hpp"
#include "model/inputs.hpp"

namespace faprobe::cuda::fill {

inline constexpr unsigned fill_input_threads = 256;

// The storage tag of fp8_e4m3 inputs, beside isa::Float, isa::Half and isa::BFloat16: one code per element,
// of value / fp8_input_scale (the scale every fp8 input tensor shares); NaN (a page's padding) is 0x7F.
struct E4m3Input {
  using Storage = std::uint8_t;
  static FAPROBE_DEVICE std::uint8_t from_float(float value) { return quantize_e4m3(value, fp8_input_scale); }
};

// CTAs for count elements: one per fill_input_threads elements, at most max_blocks (the grid stride
// covers the rest); at least 1.
inline unsigned fill_input_blocks(std::size_t count, unsigned max_blocks) {
  const std::size_t needed = (count + fill_input_threads - 1) / fill_input_threads;
  return static_cast<unsigned>(std::clamp<std::size_t>(needed, 1, max_blocks));
}

// The kernel body: every thread of a 1-D grid writes out[i] for i = its global index, then every
// grid-size-th element after it.
template <class Store>
FAPROBE_DEVICE void fill_input_values(GlobalSpan<typename Store::Storage> out, std::uint64_t key) {
  const std::size_t stride = std::size_t{isa::grid_dim_x()} * isa::block_dim_x();
  for (std::size_t i = std::size_t{isa::block_idx_x()} * isa::block_dim_x() + isa::thread_idx_x(); i < out.size();
       i += stride) {
    out[i] = Store::from_float(input_value(key, i));
  }
}

// A paged K or V pool: rows of row_width elements in pages of page_size rows; row r of pool page p holds
// logical (packed) row page_first_row[p] + r when r < page_valid_rows[p], and NaN otherwise (the unused end
// of an entry's last page: a kernel that lets it reach its output fails the check). Element i of logical
// row L gets input_value(key, L · row_width + i % row_width), as in a contiguous tensor.
template <class Store>
FAPROBE_DEVICE void fill_paged_values(GlobalSpan<typename Store::Storage> out, std::uint64_t key, std::size_t row_width,
                                      int page_size, GlobalSpan<const std::int32_t> page_first_row,
                                      GlobalSpan<const std::int32_t> page_valid_rows) {
  const std::size_t stride = std::size_t{isa::grid_dim_x()} * isa::block_dim_x();
  for (std::size_t i = std::size_t{isa::block_idx_x()} * isa::block_dim_x() + isa::thread_idx_x(); i < out.size();
       i += stride) {
    const std::size_t row = i / row_width;
    const std::size_t page = row / static_cast<unsigned>(page_size);
    const int in_page = static_cast<int>(row % static_cast<unsigned>(page_size));
    if (in_page < page_valid_rows[page]) {
      const std::size_t logical_row = static_cast<std::size_t>(page_first_row[page]) + static_cast<unsigned>(in_page);
      out[i] = Store::from_float(input_value(key, logical_row * row_width + i % row_width));
    } else {
      out[i] = Store::from_float(std::numeric_limits<float>::quiet_NaN());
    }
  }
}

}  // namespace faprobe::cuda::fill
