// Element types of a case. Storage is the dtype itself; every CPU implementation computes in fp32 and the
// reference in float64. Conversions are Eigen's (round to nearest even), never hand-written.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <Eigen/Core>

namespace faprobe {

enum class DType { fp32, fp16, bf16, fp8_e4m3 };

std::string_view to_string(DType dtype);
DType parse_dtype(std::string_view text, std::string_view what);  // throws UsageError naming `what`
std::size_t dtype_bytes(DType dtype);

// The C++ storage type of each dtype (fp8 has none on the CPU: no CPU implementation supports it).
template <DType D> struct StorageOf;
template <> struct StorageOf<DType::fp32> { using type = float; };
template <> struct StorageOf<DType::fp16> { using type = Eigen::half; };
template <> struct StorageOf<DType::bf16> { using type = Eigen::bfloat16; };

// Rounds a float to the dtype and back (the "rounded once" input values; the plain-precision check).
float round_to(DType dtype, float value);

// Calls fn(StorageType{}) for the storage type of a CPU dtype; throws for dtypes without CPU storage.
template <class Fn> decltype(auto) dispatch_storage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::fp16: return fn(Eigen::half{});
    case DType::bf16: return fn(Eigen::bfloat16{});
    case DType::fp32: return fn(float{});
    case DType::fp8_e4m3: break;
  }
  throw std::invalid_argument("dtype fp8_e4m3 has no CPU storage");
}

}  // namespace faprobe
