// gpu_tensor_map (tensor_map.hpp): the driver's cuTensorMapEncodeTiled, reached through the runtime's
// cudaGetDriverEntryPointByVersion (CUDA Runtime API, "Driver Entry Point Access") because faprobe links
// the static CUDA runtime and never libcuda itself. CUDA builds only; plain C++ against the toolkit's
// headers.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "cuda/common/tensor_map.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda {
namespace {

// isa::TensorMap is laid out as cuda.h's CUtensorMap: the same 128 bytes, and the same alignment (CUDA 13
// declares it alignas(128); CUDA 12's alignas(64) is also the least the driver and the tensor copies take, so
// a TensorMap aligned more than that still holds one).
static_assert(sizeof(isa::TensorMap) == sizeof(CUtensorMap), "isa::TensorMap holds the bytes of a CUtensorMap");
#if CUDA_VERSION >= 13000
static_assert(alignof(isa::TensorMap) == alignof(CUtensorMap), "isa::TensorMap is aligned as CUDA 13's CUtensorMap");
#else
static_assert(alignof(isa::TensorMap) >= alignof(CUtensorMap), "isa::TensorMap is aligned at least as CUtensorMap");
#endif

// The driver function `symbol` as of CUDA version `version` (the version that introduced the signature).
void* driver_function(const char* symbol, unsigned version) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  FAPROBE_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &function, version, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || function == nullptr)
    throw gpu::CudaError(fmt::format("cudaGetDriverEntryPointByVersion(\"{}\", {}) found no such driver function "
                                     "(query result {}): the driver is older than CUDA {}.{}",
                                     symbol, version, static_cast<int>(found), version / 1000, version % 1000 / 10));
  return function;
}

// "CUDA_ERROR_INVALID_VALUE", or the number when the driver cannot name it.
std::string result_name(CUresult result) {
  const char* name = nullptr;
  try {
    const auto get_error_name = reinterpret_cast<PFN_cuGetErrorName_v6000>(driver_function("cuGetErrorName", 6000));
    if (get_error_name(result, &name) == CUDA_SUCCESS && name != nullptr) return name;
  } catch (const gpu::CudaError&) {
    // fall through to the number
  }
  return fmt::format("CUresult {}", static_cast<int>(result));
}

CUtensorMapDataType data_type(std::uint32_t element_bytes) {
  switch (element_bytes) {
    case 1: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case 2: return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    default: return CU_TENSOR_MAP_DATA_TYPE_UINT32;  // 4, the only other size validate_tensor_map lets through
  }
}

}  // namespace

isa::TensorMap gpu_tensor_map(const void* global_base, const TensorMapShape& shape) {
  validate_tensor_map(global_base, shape);
  // cuTensorMapEncodeTiled appeared in CUDA 12.0; the pointer is fetched once per process.
  static const auto encode_tiled =
      reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(driver_function("cuTensorMapEncodeTiled", 12000));
  cuuint64_t dims[5] = {};
  cuuint64_t strides[4] = {};  // the driver takes the strides of dimensions 1.. only
  cuuint32_t box[5] = {};
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  for (int d = 0; d < shape.rank; ++d) {
    dims[d] = shape.dims[d];
    box[d] = shape.box[d];
    if (d > 0) strides[d - 1] = shape.strides_bytes[d];
  }
  CUtensorMap encoded;
  std::memset(&encoded, 0, sizeof encoded);
  const CUresult result = encode_tiled(
      &encoded, data_type(shape.element_bytes), static_cast<cuuint32_t>(shape.rank), const_cast<void*>(global_base),
      dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      static_cast<CUtensorMapSwizzle>(static_cast<std::uint32_t>(shape.swizzle)), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    throw gpu::CudaError(fmt::format("cuTensorMapEncodeTiled(rank {}, {}-byte elements, box {}x{}x{}x{}x{}) failed: {}",
                                     shape.rank, shape.element_bytes, box[0], box[1], box[2], box[3], box[4],
                                     result_name(result)));
  isa::TensorMap map;
  std::memcpy(map.opaque, &encoded, sizeof map.opaque);
  return map;
}

}  // namespace faprobe::cuda
