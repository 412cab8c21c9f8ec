#include "model/dtype.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "model/errors.hpp"
#include "model/fp8.hpp"

namespace faprobe {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::fp32: return "fp32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
  }
  return "?";
}

DType parse_dtype(std::string_view text, std::string_view what) {
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    if (text == to_string(dtype)) return dtype;
  }
  // PyTorch's names (torch.bfloat16 or bfloat16), so that a dtype copied from a model's code is taken as is.
  std::string_view name = text;
  if (name.rfind("torch.", 0) == 0) name.remove_prefix(6);
  static constexpr std::pair<std::string_view, DType> kAliases[] = {
      {"float32", DType::fp32},  {"float", DType::fp32},      {"float16", DType::fp16},
      {"half", DType::fp16},     {"bfloat16", DType::bf16},  {"float8_e4m3fn", DType::fp8_e4m3}};
  for (const auto& [alias, dtype] : kAliases) {
    if (name == alias) return dtype;
  }
  throw UsageError(fmt::format("{}: unknown dtype '{}' (allowed: fp32, fp16, bf16, fp8_e4m3, or PyTorch's float32, "
                               "float16, bfloat16, float8_e4m3fn)",
                               what, text));
}

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::fp32: return 4;
    case DType::fp16: return 2;
    case DType::bf16: return 2;
    case DType::fp8_e4m3: return 1;
  }
  return 0;
}

float round_to(DType dtype, float value) { return round_to(dtype, value, fp8_input_scale); }

float round_to(DType dtype, float value, float fp8_scale) {
  switch (dtype) {
    case DType::fp32: return value;
    case DType::fp16: return static_cast<float>(Eigen::half(value));
    case DType::bf16: return static_cast<float>(Eigen::bfloat16(value));
    case DType::fp8_e4m3: return dequantize_e4m3(quantize_e4m3(value, fp8_scale), fp8_scale);
  }
  throw std::invalid_argument("round_to: unknown dtype");
}

}  // namespace faprobe
