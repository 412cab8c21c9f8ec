// The shape checks shared by both kinds of tensor map, and the emulated map (tensor_map.hpp). Each check
// quotes the cuTensorMapEncodeTiled requirement it mirrors (CUDA Driver API, "Tensor Map Object
// Managment"), restricted to CU_TENSOR_MAP_INTERLEAVE_NONE and element strides of 1.
#include "cuda/common/tensor_map.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cuda/common/emu/tma.hpp"

namespace faprobe::cuda {
namespace {

[[noreturn]] void reject(const std::string& what) { throw std::invalid_argument("tensor map: " + what); }

std::uint32_t swizzle_span(isa::TmaSwizzle swizzle) {
  return swizzle == isa::TmaSwizzle::none ? 0u : 16u << static_cast<std::uint32_t>(swizzle);
}

}  // namespace

TensorMapShape matrix_shape(std::uint64_t rows, std::uint64_t cols, std::uint32_t element_bytes, std::uint32_t box_cols,
                            std::uint32_t box_rows, isa::TmaSwizzle swizzle) {
  TensorMapShape shape;
  shape.rank = 2;
  shape.element_bytes = element_bytes;
  shape.dims[0] = cols;
  shape.dims[1] = rows;
  shape.strides_bytes[0] = element_bytes;
  shape.strides_bytes[1] = element_bytes * cols;
  shape.box[0] = box_cols;
  shape.box[1] = box_rows;
  shape.swizzle = swizzle;
  return shape;
}

std::size_t box_bytes(const TensorMapShape& shape) {
  std::size_t bytes = shape.element_bytes;
  for (int d = 0; d < shape.rank && d < 5; ++d) bytes *= shape.box[d];
  return bytes;
}

void validate_tensor_map(const void* global_base, const TensorMapShape& shape) {
  const auto address = reinterpret_cast<std::uintptr_t>(global_base);
  if (address % 16 != 0)
    reject(fmt::format("global address {} is not 16-byte aligned (globalAddress must be 16 byte aligned)",
                       global_base));
  if (shape.rank < 1 || shape.rank > 5)
    reject(fmt::format("rank {} is outside 1..5 (tensorRank must be non-zero and at most 5)", shape.rank));
  if (shape.element_bytes != 1 && shape.element_bytes != 2 && shape.element_bytes != 4)
    reject(fmt::format("element size {} bytes is not 1, 2 or 4 (the unsigned tensorDataType of that width)",
                       shape.element_bytes));
  for (int d = 0; d < shape.rank; ++d)
    if (shape.dims[d] == 0 || shape.dims[d] > (std::uint64_t{1} << 32))
      reject(fmt::format("dims[{}] = {} is outside 1..2^32 (globalDim must be non-zero and at most 2^32)", d,
                         shape.dims[d]));
  if (shape.strides_bytes[0] != shape.element_bytes)
    reject(fmt::format("strides_bytes[0] = {} is not the element size {} (dimension 0 must be contiguous)",
                       shape.strides_bytes[0], shape.element_bytes));
  for (int d = 1; d < shape.rank; ++d) {
    if (shape.strides_bytes[d] % 16 != 0)
      reject(fmt::format("strides_bytes[{}] = {} is not a multiple of 16 (globalStrides must be multiples of 16)", d,
                         shape.strides_bytes[d]));
    if (shape.strides_bytes[d] >= (std::uint64_t{1} << 40))
      reject(fmt::format("strides_bytes[{}] = {} is not below 2^40 (globalStrides must be less than 2^40)", d,
                         shape.strides_bytes[d]));
  }
  for (int d = 0; d < shape.rank; ++d)
    if (shape.box[d] == 0 || shape.box[d] > 256)
      reject(fmt::format("box[{}] = {} is outside 1..256 (boxDim must be non-zero and at most 256)", d, shape.box[d]));
  const std::uint64_t row_bytes = std::uint64_t{shape.box[0]} * shape.element_bytes;
  if (row_bytes % 16 != 0)
    reject(fmt::format("box[0] * element size = {} bytes is not a multiple of 16 (boxDim[0] * elementSize must be a "
                       "multiple of 16 bytes)", row_bytes));
  if (static_cast<std::uint32_t>(shape.swizzle) > 3)
    reject(fmt::format("swizzle {} is not none, 32B, 64B or 128B", static_cast<std::uint32_t>(shape.swizzle)));
  const std::uint32_t span = swizzle_span(shape.swizzle);
  if (span != 0 && row_bytes > span)
    reject(fmt::format("box[0] * element size = {} bytes exceeds the {}-byte swizzle span (the bounding box inner "
                       "dimension must be at most the swizzle size)", row_bytes, span));
}

isa::TensorMap emulated_tensor_map(const void* global_base, const TensorMapShape& shape) {
  validate_tensor_map(global_base, shape);
  emu::TensorMapParams params{};
  params.base = global_base;
  params.rank = static_cast<std::uint32_t>(shape.rank);
  params.element_bytes = shape.element_bytes;
  for (int d = 0; d < shape.rank; ++d) {
    params.dims[d] = shape.dims[d];
    params.strides_bytes[d] = shape.strides_bytes[d];
    params.box[d] = shape.box[d];
  }
  params.swizzle_bits = static_cast<std::uint32_t>(shape.swizzle);
  params.magic = emu::tensor_map_magic;
  isa::TensorMap map{};
  std::memcpy(map.opaque, &params, sizeof params);
  return map;
}

}  // namespace faprobe::cuda
