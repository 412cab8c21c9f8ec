// Counter-based input generator: value = f(seed, tensor, flat index), no state, so host, device and the
// checker produce identical inputs and any row can be regenerated on its own.
//
// Each value is an Irwin–Hall sum of twelve 16-bit uniforms minus six: mean 0, variance 1, support ±6, a
// close approximation of a standard normal. It is computed with integer arithmetic only and is exact in
// fp32 (a multiple of 2^-16 below 2^3), so a CUDA twin yields the same bits without relying on the
// device's libm. The value is then rounded to the case's dtype once.
//
// Two distributions (the case's `inputs`, --inputs):
//   normal    every element the Irwin–Hall value above: |x| < 6.
//   outliers  FlashAttention-3's test distribution for FP8 (Shah et al. 2024, section 4.3): N(0, 1) entries of
//             which 0.1 % are outliers with a standard deviation of 10. One more SplitMix64 draw per element,
//             from a stream of its own, makes it an outlier with probability 1/1000 (the draw below
//             2^64 / 1000); an outlier is 10 × its Irwin–Hall value, still an integer times 2^-16 below 2^22 ·
//             2^-16, so still exact in fp32: |x| < 60, variance 0.999 + 0.001 · 100 = 1.099. The paper adds
//             an N(0, 100) term to the entry instead (variance 101 for an outlier): replacing it keeps the
//             bound exact, and the two differ by 1 % of the outliers' variance.
#pragma once
#include <cstdint>

namespace faprobe {

enum class TensorId : std::uint32_t { q = 0, k = 1, v = 2 };

// The distribution of a case's inputs (Case::inputs; the top of this file).
enum class InputDistribution : std::uint32_t { normal = 0, outliers = 1 };

// Every normal input value x satisfies |x| < input_bound (the sum of twelve uniforms in (0, 1) minus six): the
// amax that fp8 cases scale by (fp8.hpp), known without a pass over any tensor.
inline constexpr float input_bound = 6.0f;

// An outlier is outlier_factor times its Irwin–Hall value; one element in outlier_one_in is one.
inline constexpr std::int32_t outlier_factor = 10;
inline constexpr std::uint64_t outlier_one_in = 1000;
// A draw below this is an outlier: floor(2^64 / 1000), so the probability is 1/1000 to within 2^-64.
inline constexpr std::uint64_t outlier_threshold = ~std::uint64_t{0} / outlier_one_in;
// The outlier draws' stream: element i draws mix64((key ^ outlier_stream) + i), far from the Irwin–Hall
// draws' counters key + 3i + w for any key.
inline constexpr std::uint64_t outlier_stream = 0xd1b54a32d192ed03ULL;

// |x| < input_bound_of(distribution) for every value of that distribution: 6, or 60 with outliers.
constexpr float input_bound_of(InputDistribution distribution) {
  return distribution == InputDistribution::outliers ? input_bound * float(outlier_factor) : input_bound;
}

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

// Element `index` of a normal tensor whose key is tensor_key(seed, tensor), as an integer number of 2^-16
// steps: |units| < 6 · 65536.
constexpr std::int32_t input_units(std::uint64_t key, std::uint64_t index) {
  std::int32_t sum = 0;
  for (std::uint64_t word = 0; word < 3; ++word) {
    const std::uint64_t bits = mix64(key + index * 3 + word);
    sum += std::int32_t(bits & 0xffff) + std::int32_t((bits >> 16) & 0xffff) +
           std::int32_t((bits >> 32) & 0xffff) + std::int32_t(bits >> 48);
  }
  // sum of u_i = (x_i + 0.5) / 65536 over 12 draws, minus 6:  (sum + 6 - 6·65536) / 65536, exact.
  return sum + 6 - 6 * 65536;
}

// Whether element `index` of a tensor with outliers is one (probability 1/outlier_one_in).
constexpr bool is_outlier(std::uint64_t key, std::uint64_t index) {
  return mix64((key ^ outlier_stream) + index) < outlier_threshold;
}

// Element `index` of a tensor of the distribution, in 2^-16 steps: |units| < input_bound_of(distribution) · 65536,
// below 2^22.
constexpr std::int32_t input_units(std::uint64_t key, std::uint64_t index, InputDistribution distribution) {
  const std::int32_t units = input_units(key, index);
  return distribution == InputDistribution::outliers && is_outlier(key, index) ? units * outlier_factor : units;
}

// The fp32 value of element `index` of a tensor whose key is tensor_key(seed, tensor): exact (|units| < 2^24).
constexpr float input_value(std::uint64_t key, std::uint64_t index,
                            InputDistribution distribution = InputDistribution::normal) {
  return float(input_units(key, index, distribution)) * (1.0f / 65536.0f);
}

}  // namespace faprobe
