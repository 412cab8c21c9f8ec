// Tensor maps for the TMA copies of cuda/common/isa_tma.hpp, made on the host: one shape description, and
// a map for either target from it. Both check exactly the rules that the driver's cuTensorMapEncodeTiled
// enforces for the tiled, non-interleaved maps faprobe uses (CUDA Driver API, "Tensor Map Object
// Managment"), so a shape that works under the emulator is accepted by the GPU and a bad one fails on the
// host with the rule it breaks, not later as a launch error.
//
// emulated_tensor_map is plain C++ (in the emulator library, tensor_map.cpp); gpu_tensor_map exists in
// CUDA builds only (tensor_map_gpu.cpp): it fetches cuTensorMapEncodeTiled from the driver through the
// runtime (cudaGetDriverEntryPointByVersion), so nothing links libcuda. The GPU map uses no interleave,
// L2 promotion 128B and OOB fill NONE (out-of-bounds elements load as zeros), and an unsigned data type of
// the element's width: TMA moves raw bits, the kernels convert.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa_tma.hpp"

namespace faprobe::cuda {

struct TensorMapShape {
  int rank = 0;                           // 1..5
  std::uint32_t element_bytes = 0;        // 1, 2 or 4
  std::uint64_t dims[5] = {};             // elements per dimension, innermost first, each 1..2^32
  // Bytes from one index of dimension i to the next: strides_bytes[0] == element_bytes (the innermost
  // dimension is contiguous); strides_bytes[i] for i >= 1 a multiple of 16 and below 2^40.
  std::uint64_t strides_bytes[5] = {};
  std::uint32_t box[5] = {};              // the box copied, in elements: each 1..256, box[0] · element_bytes a
                                          // multiple of 16 and, when swizzling, at most the swizzle span
  isa::TmaSwizzle swizzle = isa::TmaSwizzle::none;
};

// The 2-D shape of a row-major rows × cols matrix of element_bytes-byte elements (dims (cols, rows)), copied
// in boxes of box_cols × box_rows.
TensorMapShape matrix_shape(std::uint64_t rows, std::uint64_t cols, std::uint32_t element_bytes, std::uint32_t box_cols,
                            std::uint32_t box_rows, isa::TmaSwizzle swizzle = isa::TmaSwizzle::none);

// Bytes of one box (what a load's expect_tx announces): element_bytes · box[0] · ... · box[rank-1].
std::size_t box_bytes(const TensorMapShape& shape);

// Throws std::invalid_argument with a one-line message naming the violated cuTensorMapEncodeTiled rule:
// global address 16-byte aligned, rank 1..5, element size 1, 2 or 4, dims 1..2^32, strides_bytes[0] the
// element size and the others multiples of 16 below 2^40, box dims 1..256, box[0] · element_bytes a
// multiple of 16 and, with a swizzle, at most its span (32, 64 or 128 bytes).
void validate_tensor_map(const void* global_base, const TensorMapShape& shape);

// A map for the emulator (isa::TensorMap holding an emu::TensorMapParams). global_base is a host pointer
// to the tensor's first element; stores write through it.
isa::TensorMap emulated_tensor_map(const void* global_base, const TensorMapShape& shape);

#if defined(FAPROBE_WITH_CUDA)
// A map for the GPU (the encoded CUtensorMap): global_base is a device pointer. Validates as above, then
// throws gpu::CudaError naming the call and its result when the driver refuses the map or cannot be asked.
isa::TensorMap gpu_tensor_map(const void* global_base, const TensorMapShape& shape);
#endif

}  // namespace faprobe::cuda
