// Counter-based input generator: value = f(seed, tensor, flat index), no state, so host, device and the
// checker produce identical inputs and any row can be regenerated on its own.
//
// Each value is an Irwin–Hall sum of twelve 16-bit uniforms minus six: mean 0, variance 1, support ±6, a
// close approximation of a standard normal. It is computed with integer arithmetic only and is exact in
// fp32 (a multiple of 2^-16 below 2^3), so a CUDA twin yields the same bits without relying on the
// device's libm. The value is then rounded to the case's dtype once.
#pragma once
#include <cstdint>

namespace faprobe {

enum class TensorId : std::uint32_t { q = 0, k = 1, v = 2 };

// Every input value x satisfies |x| < input_bound (the sum of twelve uniforms in (0, 1) minus six): the
// amax that fp8 cases scale by (fp8.hpp), known without a pass over any tensor.
inline constexpr float input_bound = 6.0f;

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::uint64_t tensor_key(std::uint64_t seed, TensorId tensor) {
  return mix64(mix64(seed) ^ (0x5851f42d4c957f2dULL * (std::uint64_t(tensor) + 1)));
}

// The fp32 value of element `index` of a tensor whose key is tensor_key(seed, tensor).
constexpr float input_value(std::uint64_t key, std::uint64_t index) {
  std::int32_t sum = 0;
  for (std::uint64_t word = 0; word < 3; ++word) {
    const std::uint64_t bits = mix64(key + index * 3 + word);
    sum += std::int32_t(bits & 0xffff) + std::int32_t((bits >> 16) & 0xffff) +
           std::int32_t((bits >> 32) & 0xffff) + std::int32_t(bits >> 48);
  }
  // sum of u_i = (x_i + 0.5) / 65536 over 12 draws, minus 6:  (sum + 6 - 6·65536) / 65536, exact.
  return float(sum + 6 - 6 * 65536) * (1.0f / 65536.0f);
}

}  // namespace faprobe
