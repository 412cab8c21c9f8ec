// The device input generator: writes a Q, K or V tensor on the device from the counter-based generator of
// src/model/inputs.hpp, element i = input_value(key, i) rounded once to the storage type, so that the GPU never
// needs the host's inputs copied over and its bits equal the host's make_inputs (src/model/tensor.cpp) exactly:
// input_value is integer arithmetic plus one exact fp32 scaling (nvcc runs the constexpr function on the
// device with --expt-relaxed-constexpr), and the rounding is cvt.rn, round to nearest even, like Eigen's.
// fp8_e4m3 inputs are the e4m3 code of value / scale (fp8_input_scale_of the case's input distribution)
// through the host's own codec (src/model/fp8.hpp: integer arithmetic, compiled for the device too), so no
// conversion instruction is involved (E4m3Input). Every value comes from input_value(key, i, distribution), the
// outliers included. Under incoherent processing Q and K are filled a row at a time instead (fill_rotated_rows):
// the row's generator integers, its sign flips and Walsh–Hadamard transform in int32, one rounding to e4m3
// (src/model/incoherent.hpp: incoherent_row_codes, which the host calls too).
//
// Shape: a grid-stride loop, fill_input_threads threads per CTA and a bounded grid, so each thread writes
// consecutive-by-stride elements (coalesced) and the emulator starts few fibers.
// Costs: per element 3 SplitMix64 mixes (~30 integer ops, 64-bit multiplies; ~15 more for an e4m3 code, one
// more mix with outliers) and one store of 4, 2 or 1 bytes: integer-throughput-bound on a GPU (tens of µs for a
// few million elements), far below the attention kernels that consume the tensors. A rotated row adds
// log2(head_dim) butterfly passes per element, five of them through warp shuffles (fill_rotated_rows); never
// timed (incoherent.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/common/isa.hpp"
#include "model/fp8.hpp"
#include "model/incoherent.hpp"
#include "model/inputs.hpp"

namespace faprobe::cuda::fill {

inline constexpr unsigned fill_input_threads = 256;

// The storage tag of fp8_e4m3 inputs, beside isa::Float, isa::Half and isa::BFloat16: one code per element,
// of value / scale (the scale the case's three fp8 inputs share); NaN (a page's padding) is 0x7F. The fills
// take the tag by value, so that this one carries its scale (the others' from_float are static).
struct E4m3Input {
  using Storage = std::uint8_t;
  float scale = fp8_input_scale;
  FAPROBE_DEVICE std::uint8_t from_float(float value) const { return quantize_e4m3(value, scale); }
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
FAPROBE_DEVICE void fill_input_values(GlobalSpan<typename Store::Storage> out, std::uint64_t key,
                                      InputDistribution distribution, Store store) {
  const std::size_t stride = std::size_t{isa::grid_dim_x()} * isa::block_dim_x();
  for (std::size_t i = std::size_t{isa::block_idx_x()} * isa::block_dim_x() + isa::thread_idx_x(); i < out.size();
       i += stride) {
    out[i] = store.from_float(input_value(key, i, distribution));
  }
}

// Q or K under incoherent processing: out holds rows of HeadDim e4m3 codes (incoherent_head_dim), row r the
// rotated, rounded elements r · HeadDim ... of the tensor, equal to the host's incoherent_row_codes. A warp per
// row, the grid's warps striding over rows: lane l holds elements l · per_lane ... l · per_lane + per_lane − 1
// in registers, so the transform's passes of stride below per_lane stay in the lane and those of stride
// per_lane · m (m = 1, 2, ..., 16) pair lane l with lane l ^ m through one shuffle per value (the lane with
// bit m clear keeps a + b, the other a − b). The passes are the host's, stride after stride, on the same
// elements, in exact int32 arithmetic: the integers, and so the codes, are equal.
template <int HeadDim>
FAPROBE_DEVICE void fill_rotated_rows(GlobalSpan<std::uint8_t> out, std::uint64_t key, InputDistribution distribution,
                                      std::uint64_t signs_key, int scale_exponent) {
  static_assert(incoherent_head_dim(HeadDim), "a power of two from 32 to 256");
  constexpr int per_lane = HeadDim / static_cast<int>(isa::warp_size);
  constexpr std::uint32_t full_warp = 0xffffffffu;
  const std::size_t rows = out.size() / HeadDim;
  const std::size_t warps = std::size_t{isa::grid_dim_x()} * isa::block_dim_x() / isa::warp_size;
  const unsigned lane = isa::lane_id();
  // The same row for every lane of a warp, so all 32 take part in each shuffle.
  for (std::size_t row = (std::size_t{isa::block_idx_x()} * isa::block_dim_x() + isa::thread_idx_x()) / isa::warp_size;
       row < rows; row += warps) {
    const int first_column = static_cast<int>(lane) * per_lane;
    const std::size_t first = row * HeadDim + static_cast<unsigned>(first_column);
    std::int32_t values[per_lane];
    FAPROBE_UNROLL
    for (int j = 0; j < per_lane; ++j) {
      const std::int32_t units = input_units(key, first + static_cast<unsigned>(j), distribution);
      values[j] = incoherent_sign_negative(signs_key, static_cast<std::uint64_t>(first_column + j)) ? -units : units;
    }
    FAPROBE_UNROLL
    for (int stride = 1; stride < per_lane; stride *= 2) {
      FAPROBE_UNROLL
      for (int j = 0; j < per_lane; ++j) {
        if ((j & stride) != 0) continue;
        const std::int32_t a = values[j], b = values[j + stride];
        values[j] = a + b;
        values[j + stride] = a - b;
      }
    }
    FAPROBE_UNROLL
    for (unsigned m = 1; m < isa::warp_size; m *= 2) {
      FAPROBE_UNROLL
      for (int j = 0; j < per_lane; ++j) {
        const std::int32_t partner = isa::shfl_xor_sync(full_warp, values[j], m);
        values[j] = (lane & m) != 0 ? partner - values[j] : values[j] + partner;
      }
    }
    FAPROBE_UNROLL
    for (int j = 0; j < per_lane; ++j) {
      out[first + static_cast<unsigned>(j)] = fixed_to_e4m3(values[j], -16 - scale_exponent);  // 2^-16 units / 2^e
    }
  }
}

// Calls fn(std::integral_constant<int, head_dim>{}) for a head_dim incoherent_head_dim takes (32, 64, 128, 256).
template <class Fn> void dispatch_rotated_head_dim(int head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32: return fn(std::integral_constant<int, 32>{});
    case 64: return fn(std::integral_constant<int, 64>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    case 256: return fn(std::integral_constant<int, 256>{});
    default: return;
  }
}

// A paged K or V pool: rows of row_width elements in pages of page_size rows; row r of pool page p holds
// logical (packed) row page_first_row[p] + r when r < page_valid_rows[p], and NaN otherwise (the unused end
// of an entry's last page: a kernel that lets it reach its output fails the check). Element i of logical
// row L gets input_value(key, L · row_width + i % row_width), as in a contiguous tensor.
template <class Store>
FAPROBE_DEVICE void fill_paged_values(GlobalSpan<typename Store::Storage> out, std::uint64_t key,
                                      InputDistribution distribution, Store store, std::size_t row_width,
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
      out[i] = store.from_float(input_value(key, logical_row * row_width + i % row_width, distribution));
    } else {
      out[i] = store.from_float(std::numeric_limits<float>::quiet_NaN());
    }
  }
}

}  // namespace faprobe::cuda::fill
