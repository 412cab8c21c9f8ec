// The instruction probe suite (probe_suite.hpp): each probe's inputs, its launches on either target, and the
// comparison of an emulated output with a GPU one. The kernel bodies are the probes' own (warp_probes.cuh,
// matrix_probes.cuh, conversion_probes.cuh, tma_probes.cuh, hopper_probes.cuh); nothing here computes what an
// instruction should return.
//
// Memory: inputs and outputs live in tracked host memory for the emulator and in gpu::DeviceBuffer (faprobe's
// stream-ordered pool) for the GPU; every output starts filled with 0xAB bytes on both targets, so a word a
// probe leaves unwritten (ldmatrix.x1's registers 1-3) compares equal, and one that only one target writes
// does not. A few kB per probe; the TMA ones about 100 kB (two 40 kB matrices).
#include "cuda/probes/probe_suite.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/tensor_map.hpp"
#include "cuda/probes/conversion_probes.cuh"
#include "cuda/probes/hopper_probes.cuh"
#include "cuda/probes/matrix_probes.cuh"
#include "cuda/probes/tma_probes.cuh"
#include "cuda/probes/warp_probes.cuh"
#include "cuda/runtime/gpu.hpp"
#include "model/fp8.hpp"
#include "model/inputs.hpp"
#include "model/memory.hpp"
#if defined(FAPROBE_WITH_CUDA)
#include "cuda/probes/probe_launch_gpu.hpp"
#endif

namespace faprobe::cuda::probes {
namespace {

using emu::Dim3;
using emu::LaunchConfig;

// Runs probe kernel `kernel` with args: the body of that name under the emulator, or the launcher of the
// same name in probe_launch_gpu.hpp on the GPU. The one place that dispatches on the target; a build without
// CUDA never gets here with Target::gpu (ProbeMemory refuses it first).
#if defined(FAPROBE_WITH_CUDA)
#define FAPROBE_LAUNCH_PROBE(target, config, kernel, ...)   \
  ((target) == Target::gpu ? on_gpu::kernel(config, __VA_ARGS__) \
                           : emu::launch(config, [&] { kernel(__VA_ARGS__); }))
#else
#define FAPROBE_LAUNCH_PROBE(target, config, kernel, ...) emu::launch(config, [&] { kernel(__VA_ARGS__); })
#endif

// What every output word holds before a launch.
constexpr unsigned char unwritten_byte = 0xab;

// Inputs and outputs of one probe run on one target, freed together at the end of the run.
class ProbeMemory {
 public:
  explicit ProbeMemory(Target target) : target_(target) {
#if !defined(FAPROBE_WITH_CUDA)
    if (target == Target::gpu) throw std::logic_error("this faprobe was built without CUDA: no GPU probes");
#endif
  }

  template <typename T>
  GlobalSpan<const T> input(const std::vector<T>& values, const char* name) {
    if (values.empty()) return {};  // an absent optional input (mma's source_lane)
    const std::size_t bytes = values.size() * sizeof(T);
    void* data = allocate(bytes);
    if (target_ == Target::gpu) {
      gpu::copy_to_device(data, values.data(), bytes);
    } else {
      std::memcpy(data, values.data(), bytes);
    }
    return GlobalSpan<const T>(static_cast<const T*>(data), values.size(), name);
  }

  template <typename T>
  GlobalSpan<T> output(std::size_t count, const char* name) {
    const std::size_t bytes = count * sizeof(T);
    void* data = allocate(bytes);
    const std::vector<unsigned char> unwritten(bytes, unwritten_byte);
    if (target_ == Target::gpu) {
      gpu::copy_to_device(data, unwritten.data(), bytes);
    } else {
      std::memcpy(data, unwritten.data(), bytes);
    }
    return GlobalSpan<T>(static_cast<T*>(data), count, name);
  }

  // The words of an output after the launches (on the GPU: after the stream has finished them).
  template <typename T>
  std::vector<std::uint32_t> words(GlobalSpan<T> span) const {
    static_assert(sizeof(T) == 4, "probe outputs are 32-bit words");
    std::vector<std::uint32_t> out(span.size());
    if (target_ == Target::gpu) {
      gpu::synchronize();
      gpu::copy_to_host(out.data(), span.data(), out.size() * 4);
    } else {
      std::memcpy(out.data(), span.data(), out.size() * 4);
    }
    return out;
  }

 private:
  void* allocate(std::size_t bytes) {
    if (target_ == Target::gpu) return device_.emplace_back(bytes, AllocKind::workspace).data();
    return host_.emplace_back(bytes, AllocKind::workspace).data();
  }

  Target target_;
  std::vector<HostAllocation> host_;
  std::vector<gpu::DeviceBuffer> device_;
};

// Deterministic inputs: word n of probe `name` under `seed` is mix64 of a key and n (the counter-based
// scheme of inputs.hpp), so every target and every machine draws the same inputs.
class ProbeRandom {
 public:
  ProbeRandom(std::uint64_t seed, std::string_view name) : key_(mix64(seed)) {
    for (char c : name) key_ = mix64(key_ ^ static_cast<unsigned char>(c));
  }
  std::uint64_t next() { return mix64(key_ + counter_++); }
  std::uint32_t bits() { return static_cast<std::uint32_t>(next() >> 32); }
  // Uniform in lo..hi (both included); the modulo bias (< 2^-50) does not matter here.
  int integer(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
  // Uniform in [lo, hi), 24 random bits.
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }

 private:
  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

std::uint32_t float_bits(float value) { return isa::detail::to_bits(value); }
float bits_float(std::uint32_t bits) { return isa::detail::from_bits<float>(bits); }

template <typename T>
std::vector<std::uint32_t> concatenate(std::vector<std::uint32_t> all, const std::vector<T>& more) {
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

// --- Part 1: CTA and warp collectives. ---

// block_sum over one block shape and grid: random floats, so a wrong pairing in the tree changes the rounding;
// the tree's order is fixed by the code, so both targets add in the same order. One value short of filling
// the grid, so the last CTA sums a padding zero too.
ProbeOutput run_block_sum(Target target, std::uint64_t seed, const std::string& name, Dim3 grid, Dim3 block) {
  ProbeRandom random(seed, name);
  std::vector<float> values(grid.count() * block.count() - 1);
  for (float& v : values) v = random.uniform(-4.0f, 4.0f);
  ProbeMemory memory(target);
  const auto in = memory.input(values, "values");
  const auto out = memory.output<float>(grid.count(), "block_sums");
  const LaunchConfig config{"block_sum", grid, block, block.count() * sizeof(float)};
  FAPROBE_LAUNCH_PROBE(target, config, block_sum, in, out);
  return {memory.words(out), {}};
}

ProbeOutput run_warp_sum(Target target, std::uint64_t seed, const std::string& name) {
  const Dim3 grid{3, 1, 1};
  const Dim3 block{96, 1, 1};
  ProbeRandom random(seed, name);
  std::vector<float> values(grid.count() * block.count());
  for (float& v : values) v = random.uniform(-4.0f, 4.0f);
  ProbeMemory memory(target);
  const auto in = memory.input(values, "values");
  const auto out = memory.output<float>(values.size(), "sums");
  const LaunchConfig config{"warp_sum", grid, block, 0};
  FAPROBE_LAUNCH_PROBE(target, config, warp_sum, in, out);
  return {memory.words(out), {}};
}

// One shuffle mode and width over several operands (source lane, delta or lane mask), one launch each.
ProbeOutput run_shuffle(Target target, std::uint64_t seed, const std::string& name, ShuffleProbe mode,
                        unsigned width) {
  const Dim3 grid{2, 1, 1};
  const Dim3 block{64, 1, 1};
  ProbeRandom random(seed, name);
  std::vector<std::uint32_t> words(grid.count() * block.count());
  for (std::uint32_t& w : words) w = random.bits();
  ProbeMemory memory(target);
  const auto in = memory.input(words, "in");
  std::vector<std::uint32_t> all;
  for (unsigned operand : {0u, 1u, 3u, 5u, 8u, 13u, 16u, 31u}) {
    const auto out = memory.output<std::uint32_t>(words.size(), "out");
    const LaunchConfig config{"shuffle", grid, block, 0};
    FAPROBE_LAUNCH_PROBE(target, config, shuffle, mode, operand, width, in, out);
    all = concatenate(std::move(all), memory.words(out));
  }
  return {all, {}};
}

// Votes over warps whose predicates are all true, all false, random, or a single lane, in turn.
ProbeOutput run_vote(Target target, std::uint64_t seed, const std::string& name) {
  const Dim3 grid{2, 1, 1};
  const Dim3 block{128, 1, 1};
  ProbeRandom random(seed, name);
  std::vector<std::uint32_t> predicates(grid.count() * block.count());
  for (std::size_t warp = 0; warp < predicates.size() / isa::warp_size; ++warp) {
    const unsigned single_lane = static_cast<unsigned>(random.integer(0, 31));
    for (unsigned lane = 0; lane < isa::warp_size; ++lane) {
      const std::uint32_t nonzero = random.bits() | 1u;
      std::uint32_t& p = predicates[warp * isa::warp_size + lane];
      switch (warp % 4) {
        case 0: p = nonzero; break;
        case 1: p = 0; break;
        case 2: p = (random.bits() & 1u) != 0 ? nonzero : 0u; break;
        default: p = lane == single_lane ? nonzero : 0u; break;
      }
    }
  }
  ProbeMemory memory(target);
  const auto in = memory.input(predicates, "predicates");
  const auto out = memory.output<std::uint32_t>(3 * predicates.size(), "votes");
  const LaunchConfig config{"vote", grid, block, 0};
  FAPROBE_LAUNCH_PROBE(target, config, vote, in, out);
  return {memory.words(out), {}};
}

// Where the dynamic shared memory starts, for a small launch and a large one (on the GPU the large one opts
// in above 48 KiB; 99 KiB is the most every GPU from sm_80 up allows, sm_86's and sm_89's limit; under the
// emulator the two sizes may come from different allocators). Random byte offsets, and 0 for thread 0 of
// each CTA, so the output shows byte 0's alignment and a misaligned base at any offset.
ProbeOutput run_shared_alignment(Target target, std::uint64_t seed, const std::string& name) {
  const Dim3 grid{2, 1, 1};
  const Dim3 block{64, 1, 1};
  ProbeRandom random(seed, name);
  ProbeMemory memory(target);
  std::vector<std::uint32_t> all;
  for (std::size_t shared_bytes : {std::size_t{1024}, std::size_t{99} * 1024}) {
    std::vector<std::uint32_t> offsets(grid.count() * block.count());
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      const int last_byte = static_cast<int>(shared_bytes) - 1;
      offsets[i] = i % block.count() == 0 ? 0u : static_cast<std::uint32_t>(random.integer(0, last_byte));
    }
    const auto in = memory.input(offsets, "offsets");
    const auto out = memory.output<std::uint32_t>(2 * offsets.size(), "offsets_and_addresses");
    const LaunchConfig config{"dynamic_shared_alignment", grid, block, shared_bytes};
    FAPROBE_LAUNCH_PROBE(target, config, dynamic_shared_alignment, in, out);
    all = concatenate(std::move(all), memory.words(out));
  }
  return {all, {}};
}

// --- Part 2: mma.sync, ldmatrix, cp.async, 16-byte loads, ex2.approx and ex2.approx.ftz. ---

constexpr unsigned mma_tiles = 8;

std::uint16_t to_storage(MmaProbeType type, float value) {
  return type == MmaProbeType::f16 ? isa::float_to_half(value) : isa::float_to_bfloat16(value);
}

struct MmaInputs {
  std::vector<std::uint16_t> a;  // mma_tiles of 16x16, row-major, raw f16 or bf16
  std::vector<std::uint16_t> b;  // mma_tiles of 16x8 (k x n)
  std::vector<float> c;          // mma_tiles of 16x8
};

// Small integers (A, B in -8..8, C in -64..64: every product and partial sum is an integer below 2^11, exact
// in fp32 in any order), or random values (A, B normal numbers in ±[1/16, 2), C in [-4, 4)).
MmaInputs mma_inputs(MmaProbeType type, bool integer_inputs, std::uint64_t seed, const std::string& name) {
  ProbeRandom random(seed, name);
  MmaInputs in{std::vector<std::uint16_t>(mma_tiles * 256), std::vector<std::uint16_t>(mma_tiles * 128),
               std::vector<float>(mma_tiles * 128)};
  const auto operand = [&] {
    if (integer_inputs) return static_cast<float>(random.integer(-8, 8));
    const float magnitude = std::ldexp(random.uniform(1.0f, 2.0f), random.integer(-4, 0));
    return (random.bits() & 1u) != 0 ? -magnitude : magnitude;
  };
  for (std::uint16_t& v : in.a) v = to_storage(type, operand());
  for (std::uint16_t& v : in.b) v = to_storage(type, operand());
  for (float& v : in.c) v = integer_inputs ? static_cast<float>(random.integer(-64, 64)) : random.uniform(-4.0f, 4.0f);
  return in;
}

std::vector<std::uint32_t> launch_mma(Target target, MmaProbeType type, const MmaInputs& inputs,
                                      const std::vector<std::uint32_t>& source_lane) {
  ProbeMemory memory(target);
  const auto a = memory.input(inputs.a, "a");
  const auto b = memory.input(inputs.b, "b");
  const auto c = memory.input(inputs.c, "c");
  const auto lanes = memory.input(source_lane, "source_lane");
  const auto d = memory.output<float>(inputs.c.size(), "d");
  const LaunchConfig config{"mma_m16n8k16", {mma_tiles, 1, 1}, {isa::warp_size, 1, 1}, 0};
  FAPROBE_LAUNCH_PROBE(target, config, mma_m16n8k16, type, a, b, c, d, lanes);
  return memory.words(d);
}

std::string mma_name(MmaProbeType type, bool integer_inputs) {
  return fmt::format("mma.m16n8k16 {} {}", type == MmaProbeType::f16 ? "f16" : "bf16",
                     integer_inputs ? "small-int" : "random");
}

// Random-input tolerance: the hardware's accumulation order and internal precision are unspecified (PTX ISA,
// mma: "Matrix multiply-accumulate"), so each side may round each of its 16 additions by up to one fp32 ulp of
// the magnitude Σ|a·b| + |c| (round-toward-zero allowed): 32 · 2^-23 = 2^-18 of the magnitude.
constexpr int mma_tolerance_log2 = -18;

ProbeOutput run_mma_probe(MmaProbeType type, bool integer_inputs, Target target, std::uint64_t seed,
                          const std::vector<std::uint32_t>& source_lane) {
  const MmaInputs inputs = mma_inputs(type, integer_inputs, seed, mma_name(type, integer_inputs));
  ProbeOutput output{launch_mma(target, type, inputs, source_lane), {}};
  if (integer_inputs) return output;
  // The magnitude from the probe itself on the emulator, with every sign bit cleared: all terms positive.
  MmaInputs magnitude_inputs = inputs;
  for (std::uint16_t& v : magnitude_inputs.a) v &= 0x7fffu;
  for (std::uint16_t& v : magnitude_inputs.b) v &= 0x7fffu;
  for (float& v : magnitude_inputs.c) v = std::fabs(v);
  const std::vector<std::uint32_t> magnitude = launch_mma(Target::emulator, type, magnitude_inputs, {});
  output.allowed.resize(magnitude.size());
  for (std::size_t i = 0; i < magnitude.size(); ++i)
    output.allowed[i] = std::ldexp(static_cast<double>(bits_float(magnitude[i])), mma_tolerance_log2);
  return output;
}

// The 16-byte rows that lanes 0..31 address in an image of `rows` rows (at least 32): distinct, in random order.
std::vector<std::uint32_t> distinct_row_offsets(ProbeRandom& random, unsigned rows) {
  std::vector<std::uint32_t> order(rows);
  for (unsigned r = 0; r < rows; ++r) order[r] = r;
  for (unsigned r = rows - 1; r > 0; --r)  // Fisher-Yates
    std::swap(order[r], order[static_cast<unsigned>(random.integer(0, static_cast<int>(r)))]);
  std::vector<std::uint32_t> row_offsets(isa::warp_size);
  for (unsigned lane = 0; lane < isa::warp_size; ++lane) row_offsets[lane] = 16 * order[lane];
  return row_offsets;
}

// ldmatrix from a 64-row shared-memory image of random .b16 values; the lanes address distinct rows in random
// order, and the lanes whose addresses the instruction ignores (8·matrices and up) hold valid rows too, so
// the GPU reads nothing out of bounds. Three images, one launch each.
ProbeOutput run_ldmatrix(Target target, std::uint64_t seed, const std::string& name, unsigned matrices,
                         bool transpose) {
  constexpr unsigned rows = 64;
  ProbeRandom random(seed, name);
  ProbeMemory memory(target);
  std::vector<std::uint32_t> all;
  for (unsigned image_index = 0; image_index < 3; ++image_index) {
    std::vector<std::uint16_t> image(rows * 8);
    for (std::uint16_t& v : image) v = static_cast<std::uint16_t>(random.bits());
    const std::vector<std::uint32_t> row_offsets = distinct_row_offsets(random, rows);
    const auto image_span = memory.input(image, "image");
    const auto offsets = memory.input(row_offsets, "row_offsets");
    const auto out = memory.output<std::uint32_t>(4 * isa::warp_size, "out");
    const LaunchConfig config{"ldmatrix", {1, 1, 1}, {isa::warp_size, 1, 1}, image.size() * sizeof(std::uint16_t)};
    FAPROBE_LAUNCH_PROBE(target, config, ldmatrix, matrices, transpose, image_span, offsets, out);
    all = concatenate(std::move(all), memory.words(out));
  }
  return {all, {}};
}

// The async_copy body's three outputs, each a probe: what cp.async copied, what the 16-byte loads read, and
// ex2.approx of word 4i read as a float, which lies in [-32, 32) (an integer for every eighth thread).
enum class AsyncCopyOutput { copied, loaded, exp2 };

ProbeOutput run_async_copy(Target target, std::uint64_t seed, const std::string& name, AsyncCopyOutput which) {
  constexpr unsigned threads = 256;
  ProbeRandom random(seed, name);
  std::vector<std::uint32_t> in(4 * threads);
  for (std::uint32_t& w : in) w = random.bits();
  for (unsigned t = 0; t < threads; ++t)
    in[4 * t] = float_bits(t % 8 == 0 ? static_cast<float>(random.integer(-32, 31)) : random.uniform(-32.0f, 32.0f));
  ProbeMemory memory(target);
  const auto in_span = memory.input(in, "in");
  const auto copied = memory.output<std::uint32_t>(in.size(), "copied");
  const auto loaded = memory.output<std::uint32_t>(in.size(), "loaded");
  const auto exp2 = memory.output<float>(threads, "exp2");
  const LaunchConfig config{"async_copy", {1, 1, 1}, {threads, 1, 1}, 16 * threads};
  FAPROBE_LAUNCH_PROBE(target, config, async_copy, in_span, copied, loaded, exp2);
  switch (which) {
    case AsyncCopyOutput::copied: return {memory.words(copied), {}};
    case AsyncCopyOutput::loaded: return {memory.words(loaded), {}};
    case AsyncCopyOutput::exp2: break;
  }
  return {memory.words(exp2), {}};
}

// PTX ISA, Floating Point Instructions, ex2: ex2.approx.f32 has a maximum relative error of 2 ulp over the
// full range of inputs. The emulator's std::exp2 is within about half an ulp of 2^x, so the two are at most
// 2.5 ulp apart, which for two floats of one binade is at most 2 whole ulps. The same for the .ftz form.
constexpr unsigned ex2_ulps = 2;

constexpr const char* ex2_ftz_name = "ex2.approx.ftz.f32";
constexpr Dim3 ex2_ftz_grid{2, 1, 1};
constexpr Dim3 ex2_ftz_block{128, 1, 1};

// The ex2.approx.ftz.f32 probe's inputs. First, for every seed, the inputs where the ISA fixes the result
// (PTX ISA, ex2: .ftz flushes subnormal inputs and results to sign-preserving zero; 2^±0 = +1, 2^-inf = +0,
// 2^+inf = +inf, NaN gives NaN) and the ends of the range. Each lies well away from the two edges where a
// 2-ulp approximation could land on either side, x = -126 (2^-126, the smallest normal result) and x = 128
// (overflow), so the ISA says which side both targets are on. Then random words: 2^x for x in [-32, 32)
// (an integer in every eighth), random subnormals of either sign, x in [-160, -126.5) (a subnormal result or
// an underflow: +0 after the flush), and x across the normal results, [-125.5, 127.5).
std::vector<std::uint32_t> ex2_ftz_inputs(std::uint64_t seed) {
  std::vector<std::uint32_t> words = {
      0x00000000u, 0x80000000u,  // +0 and -0: +1
      0x00000001u, 0x80000001u,  // ±2^-149 (±1.4e-45), the smallest subnormals: flushed to ±0, so +1
      float_bits(1e-40f), float_bits(-1e-40f),  // subnormals: +1
      0x007fffffu, 0x807fffffu,  // the largest subnormals: +1
      0x00800000u,               // 2^-126, the smallest normal: not flushed (2^x rounds to 1 either way)
      0xff800000u, 0x7f800000u,  // -inf: +0; +inf: +inf
      0x7fc00000u, 0xffc00001u, 0x7f800001u,  // NaNs (quiet, with a payload, signalling): NaN
      float_bits(-126.5f), float_bits(-130.0f), float_bits(-140.0f), float_bits(-148.9f),  // subnormal 2^x: +0
      float_bits(-149.5f), float_bits(-150.5f), float_bits(-200.0f),  // 2^x rounds to 2^-149 or to 0: +0
      float_bits(-125.5f),       // a small normal result, not flushed
      float_bits(127.9f),        // 3.2e38: finite
      float_bits(128.5f),        // beyond the largest float: +inf
      float_bits(-1.0f), float_bits(0.5f), float_bits(1.0f),
  };
  ProbeRandom random(seed, ex2_ftz_name);
  const std::size_t count = ex2_ftz_grid.count() * ex2_ftz_block.count();
  for (std::size_t i = words.size(); i < count; ++i) {
    switch (i % 8) {
      case 4: words.push_back(float_bits(static_cast<float>(random.integer(-32, 31)))); break;
      case 5: words.push_back((random.bits() & 0x80000000u) | (random.bits() & 0x7fffffu) | 1u); break;
      case 6: words.push_back(float_bits(random.uniform(-160.0f, -126.5f))); break;
      case 7: words.push_back(float_bits(random.uniform(-125.5f, 127.5f))); break;
      default: words.push_back(float_bits(random.uniform(-32.0f, 32.0f))); break;
    }
  }
  return words;
}

// The probe's output and, per word, the ulps the GPU may be off: none for the ISA's special inputs (±0,
// subnormal, ±inf, NaN: not normal), whose results are exact; ex2_ulps elsewhere. The flushed results of
// normal inputs (x well below -126) are exact too, by compare()'s rule for zeros and subnormals under an ulp
// tolerance.
ProbeOutput run_ex2_ftz(Target target, std::uint64_t seed, const std::string&) {
  const std::vector<std::uint32_t> in = ex2_ftz_inputs(seed);
  ProbeMemory memory(target);
  const auto in_span = memory.input(in, "in");
  const auto out = memory.output<float>(in.size(), "exp2");
  const LaunchConfig config{"ex2_ftz", ex2_ftz_grid, ex2_ftz_block, 0};
  FAPROBE_LAUNCH_PROBE(target, config, ex2_ftz, in_span, out);
  ProbeOutput output{memory.words(out), std::vector<double>(in.size())};
  for (std::size_t i = 0; i < in.size(); ++i)
    output.allowed[i] = std::isnormal(bits_float(in[i])) ? double{ex2_ulps} : 0.0;
  return output;
}

// --- Part 3: conversions. ---

// Words that exercise rounding to f16 and bf16: random bits (NaNs with payloads, infinities, subnormals),
// values across f16's range and beyond (f16 subnormals, overflow), exact ties at f16's and bf16's rounding
// point (round to nearest even), ties among f16 subnormals, and named special values.
std::vector<std::uint32_t> conversion_inputs(ProbeRandom& random, std::size_t count) {
  static constexpr std::uint32_t specials[] = {
      0x00000000u, 0x80000000u,  // ±0
      0x7f800000u, 0xff800000u,  // ±inf
      0x7fc00000u, 0xffc00001u,  // quiet NaNs, one with a payload
      0x7f800001u, 0x7fa00000u,  // signalling NaNs
      0x477fe000u,               // 65504, f16's largest finite value
      0x477fefffu, 0x477ff000u,  // just below 65520 (rounds to 65504) and 65520 (rounds to inf)
      0x7f7fffffu, 0xff7f8000u,  // fp32's largest value (bf16: inf) and a bf16 tie at the top
      0x00000001u, 0x00800000u,  // fp32's smallest subnormal and smallest normal
      0x33000000u, 0x33000001u,  // 2^-25 (f16 tie between 0 and 2^-24: rounds to 0) and just above
      0x33800000u, 0x387fc000u,  // 2^-24 (f16's smallest subnormal) and a tie at f16's largest subnormal
  };
  std::vector<std::uint32_t> words(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t sign = random.bits() & 0x80000000u;
    const std::uint32_t mantissa = random.bits() & 0x7fffffu;
    std::uint32_t& w = words[i];
    switch (i % 8) {
      case 0:
      case 1: w = random.bits(); break;
      case 2: w = sign | (static_cast<std::uint32_t>(random.integer(127 - 27, 127 + 16)) << 23) | mantissa; break;
      case 3:  // f16 tie: the 13 bits below f16's 10-bit mantissa are exactly one half
        w = sign | (static_cast<std::uint32_t>(random.integer(127 - 14, 127 + 15)) << 23) | (mantissa & ~0x1fffu) |
            0x1000u;
        break;
      case 4:  // bf16 tie: the 16 bits below bf16's 7-bit mantissa are exactly one half
        w = sign | (static_cast<std::uint32_t>(random.integer(1, 254)) << 23) | (mantissa & ~0xffffu) | 0x8000u;
        break;
      case 5:  // a tie between two f16 subnormals: (k + 1/2) · 2^-24
        w = sign | float_bits(std::ldexp(static_cast<float>(random.integer(0, 1023)) + 0.5f, -24));
        break;
      case 6: w = specials[random.integer(0, int(std::size(specials)) - 1)]; break;
      default: w = float_bits(random.uniform(-8.0f, 8.0f)); break;
    }
  }
  return words;
}

ProbeOutput run_conversion(Target target, std::uint64_t seed, const std::string& name, ConversionProbe probe) {
  const Dim3 grid{8, 1, 1};
  const Dim3 block{256, 1, 1};
  ProbeRandom random(seed, name);
  const std::vector<std::uint32_t> in = conversion_inputs(random, grid.count() * block.count());
  ProbeMemory memory(target);
  const auto in_span = memory.input(in, "in");
  const auto out = memory.output<std::uint32_t>(in.size(), "out");
  const LaunchConfig config{"convert", grid, block, 0};
  FAPROBE_LAUNCH_PROBE(target, config, convert, probe, in_span, out);
  return {memory.words(out), {}};
}

// --- Part 4: tensor copies (TMA). ---

// A tensor map of the probe's matrix at `base` (a device pointer on the GPU, a host one under emulation).
isa::TensorMap probe_tensor_map(Target target, const void* base, isa::TmaSwizzle swizzle) {
  const TensorMapShape shape = matrix_shape(tma_probe_rows, tma_probe_cols, 2, tma_probe_box_cols, tma_probe_box_rows, swizzle);
#if defined(FAPROBE_WITH_CUDA)
  if (target == Target::gpu) return gpu_tensor_map(base, shape);
#else
  (void)target;  // ProbeMemory has refused Target::gpu already
#endif
  return emulated_tensor_map(base, shape);
}

// Random 16-bit elements, three boxes loaded and stored (tma_probes.cuh); the output is the shared-memory
// image of the boxes followed by the destination matrix (0xab bytes where nothing may be stored).
ProbeOutput run_tma_copy(Target target, std::uint64_t seed, const std::string& name, isa::TmaSwizzle swizzle) {
  ProbeRandom random(seed, name);
  std::vector<std::uint32_t> matrix(tma_probe_rows * tma_probe_cols / 2);  // two elements per word
  for (std::uint32_t& w : matrix) w = random.bits();
  ProbeMemory memory(target);
  const auto source = memory.input(matrix, "source");
  const auto stored = memory.output<std::uint32_t>(matrix.size(), "stored");
  const auto shared_words = memory.output<std::uint32_t>(tma_probe_boxes * tma_probe_box_bytes / 4, "shared_words");
  const isa::TensorMap load_map = probe_tensor_map(target, source.data(), swizzle);
  const isa::TensorMap store_map = probe_tensor_map(target, stored.data(), swizzle);
  const LaunchConfig config{"tma_copy", {1, 1, 1}, {tma_probe_threads, 1, 1}, tma_probe_shared_bytes};
  FAPROBE_LAUNCH_PROBE(target, config, tma_copy, load_map, store_map, shared_words);
  return {concatenate(memory.words(shared_words), memory.words(stored)), {}};
}

// --- Part 5: Hopper's wgmma, stmatrix, mbarrier and elect.sync (hopper_probes.cuh). ---

// The wgmma probes' names and shapes, in one place: the registry and wgmma_probe_operands() both read them.
struct WgmmaProbeShape {
  std::string_view name;
  unsigned n, k;
  bool random_e4m3 = false;  // operands: random finite e4m3 values of both signs instead of small integers
};
constexpr WgmmaProbeShape wgmma_f16_probe{"wgmma m64n64k16 f16 ss swizzle 128B", wgmma_f16_n, wgmma_f16_k};
constexpr WgmmaProbeShape wgmma_bf16_probe{"wgmma m64n128k16 bf16 rs, B N-major swizzle 128B", wgmma_bf16_n,
                                           wgmma_bf16_k};
constexpr WgmmaProbeShape wgmma_e4m3_probe{"wgmma m64n64k32 e4m3 ss swizzle 64B", wgmma_e4m3_n, wgmma_e4m3_k};
// The same kernel on operands whose products span 2^-18 to 2^17: sums the tensor core's narrow adder truncates
// (model/fp8_accumulation.hpp), so the emulator's model of it meets the GPU bit for bit here, or not.
constexpr WgmmaProbeShape wgmma_e4m3_random_probe{"wgmma m64n64k32 e4m3 ss many binades", wgmma_e4m3_n, wgmma_e4m3_k, true};
constexpr WgmmaProbeShape wgmma_probe_shapes[] = {wgmma_f16_probe, wgmma_bf16_probe, wgmma_e4m3_probe,
                                                  wgmma_e4m3_random_probe};

// Integers in -3..3: exact in f16, bf16 and e4m3, and every sum of at most 64 products (|sum| <= 576) is
// exact in fp32 in any order.
WgmmaOperands draw_wgmma_operands(const WgmmaProbeShape& shape, std::uint64_t seed) {
  ProbeRandom random(seed, shape.name);
  WgmmaOperands operands{shape.n, shape.k, std::vector<float>(std::size_t{wgmma_probe_m} * shape.k),
                         std::vector<float>(std::size_t{shape.k} * shape.n)};
  const auto draw = [&]() {
    if (!shape.random_e4m3) return static_cast<float>(random.integer(-3, 3));
    // Codes below 0x70 (|x| < 2^8): a product stays below 2^17 and a 64-term sum far from fp32's range.
    const float magnitude = e4m3_to_float(static_cast<std::uint8_t>(random.integer(0, 0x6F)));
    return random.integer(0, 1) == 0 ? magnitude : -magnitude;
  };
  for (float& v : operands.a) v = draw();
  for (float& v : operands.b) v = draw();
  return operands;
}

// B as the K-major probes take it: n × k ([n][k]) from the operands' k × n.
std::vector<float> b_k_major(const WgmmaOperands& operands) {
  std::vector<float> b(operands.b.size());
  for (unsigned k = 0; k < operands.k; ++k)
    for (unsigned n = 0; n < operands.n; ++n)
      b[std::size_t{n} * operands.k + k] = operands.b[std::size_t{k} * operands.n + n];
  return b;
}

template <typename Convert>
std::vector<std::uint16_t> to_bits16(const std::vector<float>& values, Convert convert) {
  std::vector<std::uint16_t> bits(values.size());
  std::transform(values.begin(), values.end(), bits.begin(), convert);
  return bits;
}

LaunchConfig wgmma_config(const char* kernel_name, std::size_t shared_bytes) {
  return {kernel_name, {1, 1, 1}, {wgmma_probe_threads, 1, 1}, shared_bytes};
}

ProbeOutput run_wgmma_f16(Target target, std::uint64_t seed, const std::string&) {
  const WgmmaOperands operands = draw_wgmma_operands(wgmma_f16_probe, seed);
  ProbeMemory memory(target);
  const auto a = memory.input(to_bits16(operands.a, isa::float_to_half), "a");
  const auto b = memory.input(to_bits16(b_k_major(operands), isa::float_to_half), "b");
  const auto d = memory.output<float>(wgmma_probe_threads * wgmma_f16_n / 2, "d");
  const LaunchConfig config = wgmma_config("wgmma_f16_ss_swizzle128", wgmma_f16_shared_bytes);
  FAPROBE_LAUNCH_PROBE(target, config, wgmma_f16_ss_swizzle128, a, b, d);
  return {memory.words(d), {}};
}

ProbeOutput run_wgmma_bf16(Target target, std::uint64_t seed, const std::string&) {
  const WgmmaOperands operands = draw_wgmma_operands(wgmma_bf16_probe, seed);
  ProbeMemory memory(target);
  const auto a = memory.input(to_bits16(operands.a, isa::float_to_bfloat16), "a");
  const auto b = memory.input(to_bits16(operands.b, isa::float_to_bfloat16), "b");  // N-major: [k][n] as drawn
  const auto d = memory.output<float>(wgmma_probe_threads * wgmma_bf16_n / 2, "d");
  const LaunchConfig config = wgmma_config("wgmma_bf16_rs_n_major", wgmma_bf16_shared_bytes);
  FAPROBE_LAUNCH_PROBE(target, config, wgmma_bf16_rs_n_major, a, b, d);
  return {memory.words(d), {}};
}

ProbeOutput run_wgmma_e4m3(Target target, std::uint64_t seed, const WgmmaProbeShape& shape) {
  const WgmmaOperands operands = draw_wgmma_operands(shape, seed);
  ProbeMemory memory(target);
  const auto a = memory.input(operands.a, "a");  // floats: the kernel converts them to e4m3
  const auto b = memory.input(b_k_major(operands), "b");
  const auto d = memory.output<float>(wgmma_probe_threads * wgmma_e4m3_n / 2, "d");
  const LaunchConfig config = wgmma_config("wgmma_e4m3_ss_swizzle64", wgmma_e4m3_shared_bytes);
  FAPROBE_LAUNCH_PROBE(target, config, wgmma_e4m3_ss_swizzle64, a, b, d);
  return {memory.words(d), {}};
}

// Random fragments stored to 32 distinct rows, in random order, of a 64-row image (the other 32 rows stay 0).
ProbeOutput run_stmatrix(Target target, std::uint64_t seed, const std::string& name) {
  ProbeRandom random(seed, name);
  std::vector<std::uint32_t> fragments(4 * isa::warp_size);
  for (std::uint32_t& w : fragments) w = random.bits();
  const std::vector<std::uint32_t> row_offsets = distinct_row_offsets(random, stmatrix_probe_image_bytes / 16);
  ProbeMemory memory(target);
  const auto fragment_span = memory.input(fragments, "fragments");
  const auto offsets = memory.input(row_offsets, "row_offsets");
  const auto images = memory.output<std::uint32_t>(stmatrix_probe_shared_bytes / 4, "images");
  const LaunchConfig config{"stmatrix_x4", {1, 1, 1}, {isa::warp_size, 1, 1}, stmatrix_probe_shared_bytes};
  FAPROBE_LAUNCH_PROBE(target, config, stmatrix_x4, fragment_span, offsets, images);
  return {memory.words(images), {}};
}

// Random words to exchange, and per warp a random lane mask with at least one lane.
ProbeOutput run_mbarrier(Target target, std::uint64_t seed, const std::string& name) {
  ProbeRandom random(seed, name);
  std::vector<std::uint32_t> values(mbarrier_probe_values);
  for (std::uint32_t& w : values) w = random.bits();
  std::vector<std::uint32_t> member_masks(mbarrier_probe_threads / isa::warp_size);
  for (std::uint32_t& mask : member_masks) mask = random.bits() | (1u << random.integer(0, 31));
  ProbeMemory memory(target);
  const auto value_span = memory.input(values, "values");
  const auto masks = memory.input(member_masks, "member_masks");
  const auto records = memory.output<std::uint32_t>(mbarrier_probe_threads * mbarrier_probe_words, "records");
  const LaunchConfig config{"mbarrier_phases", {1, 1, 1}, {mbarrier_probe_threads, 1, 1}, mbarrier_probe_shared_bytes};
  FAPROBE_LAUNCH_PROBE(target, config, mbarrier_phases, value_span, masks, records);
  return {memory.words(records), {}};
}

// --- The list. ---

Tolerance bit_for_bit() { return {Tolerance::Kind::bits, 0, "bit for bit"}; }

std::vector<Probe> make_probes() {
  std::vector<Probe> probes;
  const auto add = [&probes](std::string name, Element element, Tolerance tolerance,
                             std::function<ProbeOutput(Target, std::uint64_t, const std::string&)> run,
                             int min_sm = 0) {
    auto run_seeded = [run = std::move(run), name](Target target, std::uint64_t seed) {
      return run(target, seed, name);
    };
    probes.push_back({name, element, std::move(tolerance), std::move(run_seeded), min_sm});
  };

  struct BlockShape {
    Dim3 grid, block;
  };
  for (const BlockShape& shape : {BlockShape{{16, 1, 1}, {33, 1, 1}}, BlockShape{{4, 2, 2}, {4, 3, 5}},
                                  BlockShape{{4, 1, 1}, {1024, 1, 1}}, BlockShape{{2, 1, 1}, {16, 8, 8}}}) {
    const std::string name = fmt::format("bar.sync block_sum {}x{}x{} grid {}x{}x{}", shape.block.x, shape.block.y,
                                         shape.block.z, shape.grid.x, shape.grid.y, shape.grid.z);
    add(name, Element::f32, bit_for_bit(), [shape](Target target, std::uint64_t seed, const std::string& n) {
      return run_block_sum(target, seed, n, shape.grid, shape.block);
    });
  }
  add("shfl.sync.bfly warp_sum", Element::f32, bit_for_bit(), run_warp_sum);
  const std::pair<ShuffleProbe, const char*> modes[] = {
      {ShuffleProbe::idx, "idx"}, {ShuffleProbe::up, "up"}, {ShuffleProbe::down, "down"}, {ShuffleProbe::bfly, "bfly"}};
  for (const auto& [mode, mode_name] : modes)
    for (unsigned width : {32u, 16u, 8u, 4u})
      add(fmt::format("shfl.sync.{} width {}", mode_name, width), Element::u32, bit_for_bit(),
          [mode = mode, width](Target target, std::uint64_t seed, const std::string& n) {
            return run_shuffle(target, seed, n, mode, width);
          });
  add("vote.sync ballot/all/any", Element::u32, bit_for_bit(), run_vote);
  add("dynamic shared memory 1024B-aligned", Element::u32, bit_for_bit(), run_shared_alignment);

  const Tolerance mma_random{Tolerance::Kind::of_magnitude, 0,
                             "2^-18 of sum |a*b| + |c|: 16 fp32 additions each side, one ulp each (PTX ISA leaves "
                             "mma's accumulation order and precision open)"};
  for (MmaProbeType type : {MmaProbeType::f16, MmaProbeType::bf16})
    for (bool integer_inputs : {true, false})
      add(mma_name(type, integer_inputs), Element::f32, integer_inputs ? bit_for_bit() : mma_random,
          [type, integer_inputs](Target target, std::uint64_t seed, const std::string&) {
            return run_mma_probe(type, integer_inputs, target, seed, {});
          });

  for (unsigned matrices : {1u, 2u, 4u})
    for (bool transpose : {false, true})
      add(fmt::format("ldmatrix.x{}{}", matrices, transpose ? ".trans" : ""), Element::u32, bit_for_bit(),
          [matrices, transpose](Target target, std::uint64_t seed, const std::string& n) {
            return run_ldmatrix(target, seed, n, matrices, transpose);
          });

  add("cp.async.cg 16B + groups", Element::u32, bit_for_bit(),
      [](Target target, std::uint64_t seed, const std::string& n) {
        return run_async_copy(target, seed, n, AsyncCopyOutput::copied);
      });
  add("ld.global.v4 16B", Element::u32, bit_for_bit(), [](Target target, std::uint64_t seed, const std::string& n) {
    return run_async_copy(target, seed, n, AsyncCopyOutput::loaded);
  });
  add("ex2.approx.f32", Element::f32,
      {Tolerance::Kind::ulps, ex2_ulps, "2 ulp (PTX ISA, ex2: ex2.approx.f32's maximum relative error)"},
      [](Target target, std::uint64_t seed, const std::string& n) {
        return run_async_copy(target, seed, n, AsyncCopyOutput::exp2);
      });
  // The softmax's form: an approximation within the same bound, but bit for bit wherever .ftz fixes the
  // result (the special inputs by the probe's per-word allowance, the flushed zeros by compare()'s rule).
  add(ex2_ftz_name, Element::f32,
      {Tolerance::Kind::ulps, ex2_ulps,
       "2 ulp as ex2.approx.f32; bit for bit for +-0, subnormal, +-inf and NaN inputs and for zero results "
       "(PTX ISA, ex2: .ftz flushes subnormal inputs and results)"},
      run_ex2_ftz);

  const std::tuple<ConversionProbe, const char*, Element> conversions[] = {
      {ConversionProbe::f32_to_f16, "cvt.rn.f16.f32", Element::f16x2},
      {ConversionProbe::f32_to_bf16, "cvt.rn.bf16.f32", Element::bf16x2},
      {ConversionProbe::f16_to_f32, "cvt.f32.f16", Element::f32},
      {ConversionProbe::bf16_to_f32, "cvt.f32.bf16", Element::f32},
      {ConversionProbe::f32x2_to_f16x2, "cvt.rn.f16x2.f32", Element::f16x2},
      {ConversionProbe::f32x2_to_bf16x2, "cvt.rn.bf16x2.f32", Element::bf16x2},
  };
  for (const auto& [probe, name, element] : conversions)
    add(name, element, bit_for_bit(), [probe = probe](Target target, std::uint64_t seed, const std::string& n) {
      return run_conversion(target, seed, n, probe);
    });

  constexpr int sm90 = 90;  // cp.async.bulk.tensor, wgmma, stmatrix, mbarrier expect_tx and try_wait: sm_90 (PTX ISA)
  const std::pair<isa::TmaSwizzle, const char*> swizzles[] = {{isa::TmaSwizzle::none, "no swizzle"},
                                                              {isa::TmaSwizzle::bytes128, "swizzle 128B"}};
  for (const auto& [swizzle, swizzle_name] : swizzles)
    add(fmt::format("cp.async.bulk.tensor 2d {}", swizzle_name), Element::u32, bit_for_bit(),
        [swizzle = swizzle](Target target, std::uint64_t seed, const std::string& n) {
          return run_tma_copy(target, seed, n, swizzle);
        },
        sm90);

  // wgmma, stmatrix, mbarrier.expect_tx / complete_tx / test_wait and elect.sync: sm_90 (wgmma: sm_90a).
  add(std::string(wgmma_f16_probe.name), Element::f32, bit_for_bit(), run_wgmma_f16, sm90);
  add(std::string(wgmma_bf16_probe.name), Element::f32, bit_for_bit(), run_wgmma_bf16, sm90);
  for (const WgmmaProbeShape& shape : {wgmma_e4m3_probe, wgmma_e4m3_random_probe})
    add(std::string(shape.name), Element::f32, bit_for_bit(),
        [shape](Target target, std::uint64_t seed, const std::string&) { return run_wgmma_e4m3(target, seed, shape); },
        sm90);
  add("stmatrix x4 and x4.trans", Element::u32, bit_for_bit(), run_stmatrix, sm90);
  add("mbarrier phases, expect_tx and elect.sync", Element::u32, bit_for_bit(), run_mbarrier, sm90);
  return probes;
}

// --- Comparison. ---

// Zero or subnormal (and not NaN): where an ulp count no longer stands for a relative error. Between +0 and
// the smallest subnormal the integer distance is 1 ulp but the relative error is total, and a flushed zero
// against an unflushed subnormal is exactly the difference .ftz exists to make.
bool below_normal(float value) { return std::fabs(value) < std::numeric_limits<float>::min(); }

// A float's position on the number line in ulps: consecutive floats differ by one, -0 and +0 coincide.
std::int64_t ordinal(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::int64_t magnitude = bits & 0x7fffffffu;
  return (bits & 0x80000000u) != 0 ? -magnitude : magnitude;
}

// The values a word holds under an element type (one for u32 and f32, two for the 16-bit pairs).
std::vector<float> values_of(Element element, std::uint32_t word) {
  const auto low = static_cast<std::uint16_t>(word & 0xffffu);
  const auto high = static_cast<std::uint16_t>(word >> 16);
  switch (element) {
    case Element::u32: return {};
    case Element::f32: return {bits_float(word)};
    case Element::f16x2: return {isa::half_to_float(low), isa::half_to_float(high)};
    case Element::bf16x2: return {isa::bfloat16_to_float(low), isa::bfloat16_to_float(high)};
  }
  return {};
}

std::string print_word(Element element, std::uint32_t word) {
  const std::vector<float> values = values_of(element, word);
  if (values.empty()) return fmt::format("0x{:08x}", word);
  if (values.size() == 1) return fmt::format("0x{:08x} ({:.9g})", word, values[0]);
  return fmt::format("0x{:08x} ({:.9g}, {:.9g})", word, values[0], values[1]);
}

}  // namespace

std::string to_string(Element element) {
  switch (element) {
    case Element::u32: return "u32";
    case Element::f32: return "f32";
    case Element::f16x2: return "f16x2";
    case Element::bf16x2: return "bf16x2";
  }
  return "?";
}

std::string to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::identical: return "identical";
    case Verdict::within_tolerance: return "within tolerance";
    case Verdict::differs: return "differs";
  }
  return "?";
}

std::string Probe::needs_gpu(int compute_major, int compute_minor) const {
  if (compute_major * 10 + compute_minor >= min_sm) return "";
  return fmt::format("needs sm_{}", min_sm);
}

const std::vector<Probe>& all_probes() {
  static const std::vector<Probe> probes = make_probes();
  return probes;
}

std::vector<std::uint32_t> ex2_ftz_probe_inputs(std::uint64_t seed) { return ex2_ftz_inputs(seed); }

WgmmaOperands wgmma_probe_operands(const std::string& probe_name, std::uint64_t seed) {
  for (const WgmmaProbeShape& shape : wgmma_probe_shapes)
    if (shape.name == probe_name) return draw_wgmma_operands(shape, seed);
  throw std::invalid_argument(fmt::format("'{}' is not a wgmma probe", probe_name));
}

ProbeOutput run_mma(MmaProbeType type, bool integer_inputs, Target target, std::uint64_t seed,
                    const std::vector<std::uint32_t>& source_lane) {
  if (!source_lane.empty() && source_lane.size() != isa::warp_size)
    throw std::invalid_argument(fmt::format("source_lane has {} entries, not 32", source_lane.size()));
  return run_mma_probe(type, integer_inputs, target, seed, source_lane);
}

Comparison compare(const Probe& probe, const ProbeOutput& reference, const ProbeOutput& candidate) {
  Comparison result;
  result.elements = std::min(reference.words.size(), candidate.words.size());
  const auto note_difference = [&](std::size_t index) {
    if (result.differing++ == 0) {
      result.first_difference = index;
      result.reference_value =
          index < reference.words.size() ? print_word(probe.element, reference.words[index]) : "(missing)";
      result.candidate_value =
          index < candidate.words.size() ? print_word(probe.element, candidate.words[index]) : "(missing)";
    }
  };
  for (std::size_t i = 0; i < result.elements; ++i) {
    const std::uint32_t want = reference.words[i];
    const std::uint32_t got = candidate.words[i];
    if (want == got) continue;
    // Float words value by value: NaN matches NaN whatever its payload; a finite pair has a distance; an
    // infinity or NaN against anything else is beyond every tolerance.
    const std::vector<float> want_values = values_of(probe.element, want);
    const std::vector<float> got_values = values_of(probe.element, got);
    bool equal = !want_values.empty();
    bool finite = !want_values.empty();
    bool nan_pair = false;
    bool tiny = false;  // a zero or subnormal on either side
    double abs_diff = 0.0;
    double ulps = 0.0;
    for (std::size_t v = 0; v < want_values.size(); ++v) {
      const float a = want_values[v];
      const float b = got_values[v];
      if (float_bits(a) == float_bits(b)) continue;
      if (std::isnan(a) && std::isnan(b)) {
        nan_pair = true;
        continue;
      }
      equal = false;
      tiny = tiny || below_normal(a) || below_normal(b);
      if (std::isfinite(a) && std::isfinite(b)) {
        abs_diff = std::max(abs_diff, std::fabs(static_cast<double>(a) - static_cast<double>(b)));
        ulps = std::max(ulps, static_cast<double>(std::llabs(ordinal(a) - ordinal(b))));
      } else {
        finite = false;
      }
    }
    if (nan_pair) ++result.nan_pairs;
    if (equal) continue;
    if (finite) {
      result.max_abs_diff = std::max(result.max_abs_diff, abs_diff);
      result.max_ulps = std::max(result.max_ulps, ulps);
    }
    bool within = false;
    if (finite) {
      switch (probe.tolerance.kind) {
        case Tolerance::Kind::bits: break;
        case Tolerance::Kind::ulps: {
          // A ulp tolerance is a relative error: it never covers a zero or a subnormal (below_normal), and
          // a probe's per-word allowance, where it has one, replaces the tolerance's (0: bit for bit).
          const double allowed =
              i < reference.allowed.size() ? reference.allowed[i] : static_cast<double>(probe.tolerance.ulps);
          within = !tiny && ulps <= allowed;
          break;
        }
        case Tolerance::Kind::of_magnitude:
          within = i < reference.allowed.size() && abs_diff <= reference.allowed[i];
          break;
      }
    }
    if (within) {
      ++result.inexact;
    } else {
      note_difference(i);
    }
  }
  if (reference.words.size() != candidate.words.size()) note_difference(result.elements);
  result.verdict = result.differing > 0 ? Verdict::differs
                   : result.inexact > 0 ? Verdict::within_tolerance
                                        : Verdict::identical;
  return result;
}

std::string Comparison::summary() const {
  const std::string nans = nan_pairs > 0 ? fmt::format(" ({} NaN pairs matched as NaN)", nan_pairs) : "";
  switch (verdict) {
    case Verdict::identical: return "identical" + nans;
    case Verdict::within_tolerance:
      return fmt::format("max diff {:.3g} ({:g} ulp) within tolerance{}", max_abs_diff, max_ulps, nans);
    case Verdict::differs: break;
  }
  return fmt::format("DIFFERS at {}: emulator {}, GPU {} ({} of {} words differ)", first_difference, reference_value,
                     candidate_value, differing, elements);
}

std::uint32_t checksum(const ProbeOutput& output) {
  std::uint32_t hash = 2166136261u;
  for (std::uint32_t word : output.words)
    for (unsigned byte = 0; byte < 4; ++byte) {
      hash ^= (word >> (8 * byte)) & 0xffu;
      hash *= 16777619u;
    }
  return hash;
}

}  // namespace faprobe::cuda::probes

#undef FAPROBE_LAUNCH_PROBE
