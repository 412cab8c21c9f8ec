// Element types of a case. Storage is the dtype itself; every CPU implementation computes in fp32 and the
// reference in float64. fp32, fp16 and bf16 convert with Eigen (round to nearest even).
//
// fp8_e4m3 follows FlashAttention-3's FP8 forward (fp8.hpp): Q, K and V are stored as e4m3 codes (1 byte),
// each tensor with a per-tensor scale, x stored as e4m3(x / scale) (round to nearest even, saturating to ±448,
// as cvt.rn.satfinite.e4m3x2.f32) and read as e4m3(x / scale) · scale; scale = 2^-6 for Q, K and V alike
// (2^-2 with outliers; a power of two, so both ways are exact in fp32). The output of an fp8 case is bf16
// (output_dtype). No CPU implementation takes fp8 (dispatch_storage refuses it); HostTensor stores its codes for
// --save and tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/eigen.hpp"

namespace faprobe {

enum class DType { fp32, fp16, bf16, fp8_e4m3 };

std::string_view to_string(DType dtype);
DType parse_dtype(std::string_view text, std::string_view what);  // throws UsageError naming `what`
std::size_t dtype_bytes(DType dtype);

// The dtype of a case's output O: the input dtype, except fp8_e4m3, whose output is bf16 as FlashAttention-3's
// FP8 forward writes it (attention's output feeds the next layer's fp32/bf16 GEMMs, not an fp8 one).
constexpr DType output_dtype(DType dtype) { return dtype == DType::fp8_e4m3 ? DType::bf16 : dtype; }

// The C++ storage type of each dtype a CPU implementation computes on. fp8_e4m3 has none here: its host
// storage is std::uint8_t codes that only HostTensor reads and writes (through the scale).
template <DType D> struct StorageOf;
template <> struct StorageOf<DType::fp32> { using type = float; };
template <> struct StorageOf<DType::fp16> { using type = Eigen::half; };
template <> struct StorageOf<DType::bf16> { using type = Eigen::bfloat16; };

// Rounds a float to the dtype and back (the "rounded once" input values; the plain-precision check). For
// fp8_e4m3 it is an input's value as a kernel sees it after dequantizing: e4m3(value / scale) · scale with
// the normal inputs' scale fp8_input_scale (fp8.hpp), or with the overload's fp8_scale (a case's
// Case::fp8_descale, which follows its input distribution); an unscaled e4m3 rounding is
// e4m3_to_float(float_to_e4m3(v)).
float round_to(DType dtype, float value);
float round_to(DType dtype, float value, float fp8_scale);

// Calls fn(StorageType{}) for the storage type of a CPU dtype; throws for dtypes without CPU storage.
template <class Fn> decltype(auto) dispatch_storage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::fp16: return fn(Eigen::half{});
    case DType::bf16: return fn(Eigen::bfloat16{});
    case DType::fp32: return fn(float{});
    case DType::fp8_e4m3: break;
  }
  throw std::invalid_argument("dtype fp8_e4m3 has no CPU storage type (CPU implementations take fp32, fp16, bf16)");
}

}  // namespace faprobe
