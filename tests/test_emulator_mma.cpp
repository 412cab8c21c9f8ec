// The part-2 instruction probes under the emulator: mma.sync m16n8k16 (f16, bf16 -> f32) against a host
// matrix product computed in double, ldmatrix against the PTX ISA's lane mapping computed on the host from
// a random shared-memory image, both written from the ISA text, not from the emulator's code; planted
// layout bugs that the comparisons must catch; and the misuse the emulator must report (misaligned or
// out-of-bounds ldmatrix rows, partial warps). Also cp.async groups, ex2.approx and 16-byte loads, and
// ex2.approx.ftz (the ex2_ftz probe body) against the ISA's definition of the flush over its special inputs,
// with the flush planted missing or of the wrong sign to show the check catches it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/probes/matrix_probes.cuh"
#include "emulator_test_support.hpp"

namespace {

using faprobe::cuda::GlobalSpan;
using faprobe::cuda::SharedSpan;
using faprobe::emu::EmulationError;
using faprobe::emu::LaunchConfig;
namespace isa = faprobe::cuda::isa;
namespace probes = faprobe::cuda::probes;
using probes::MmaProbeType;

using faprobe::emu::testing::const_span_of;
using faprobe::emu::testing::expect_mentions;
using faprobe::emu::testing::launch_error;
using faprobe::emu::testing::span_of;
using faprobe::emu::testing::within_deadline;

std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// --- Host encodings of IEEE binary16 and bfloat16, by formula (not by bit tricks shared with the emulator). ---
// The value of binary16 bits: (-1)^s · 2^(e-15) · (1 + m/1024), subnormals 2^-14 · m/1024. No inf or NaN here.
double half_value(std::uint16_t bits) {
  const double sign = (bits & 0x8000u) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa / 1024.0, -14);
  return sign * std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
}
// The value of bfloat16 bits: (-1)^s · 2^(e-127) · (1 + m/128). Normal numbers and zero only.
double bfloat16_value(std::uint16_t bits) {
  const double sign = (bits & 0x8000u) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> 7) & 0xff;
  const int mantissa = bits & 0x7f;
  if (exponent == 0 && mantissa == 0) return sign * 0.0;
  return sign * std::ldexp(1.0 + mantissa / 128.0, exponent - 127);
}
// A small integer (|v| < 256) exactly, as binary16 or bfloat16 bits.
std::uint16_t encode_integer(int v, MmaProbeType type) {
  if (v == 0) return 0;
  const std::uint16_t sign = v < 0 ? 0x8000u : 0u;
  const int magnitude = std::abs(v);
  int e = 0;
  while ((magnitude >> (e + 1)) != 0) ++e;  // floor(log2 |v|)
  if (type == MmaProbeType::f16) {
    const int mantissa = (magnitude << (10 - e)) - 1024;
    return static_cast<std::uint16_t>(sign | ((e + 15) << 10) | mantissa);
  }
  const int mantissa = (magnitude << (7 - e)) - 128;
  return static_cast<std::uint16_t>(sign | ((e + 127) << 7) | mantissa);
}
double decode(std::uint16_t bits, MmaProbeType type) {
  return type == MmaProbeType::f16 ? half_value(bits) : bfloat16_value(bits);
}
// Random normal numbers in ±[2^-4, 2): random sign, exponent and mantissa bits.
std::uint16_t random_normal(std::mt19937& random, MmaProbeType type) {
  std::uniform_int_distribution<int> sign(0, 1);
  std::uniform_int_distribution<int> exponent(-4, 0);
  const int s = sign(random) << 15;
  if (type == MmaProbeType::f16)
    return static_cast<std::uint16_t>(s | ((exponent(random) + 15) << 10) | (random() & 0x3ffu));
  return static_cast<std::uint16_t>(s | ((exponent(random) + 127) << 7) | (random() & 0x7fu));
}

struct MmaTiles {
  std::vector<std::uint16_t> a;  // tiles of 16x16, row-major
  std::vector<std::uint16_t> b;  // tiles of 16x8 (k x n), row-major
  std::vector<float> c;          // tiles of 16x8, row-major
};

MmaTiles integer_tiles(std::size_t tiles, MmaProbeType type, std::uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> small(-8, 8);
  std::uniform_int_distribution<int> accumulator(-64, 64);
  MmaTiles t{std::vector<std::uint16_t>(tiles * 256), std::vector<std::uint16_t>(tiles * 128),
             std::vector<float>(tiles * 128)};
  for (auto& v : t.a) v = encode_integer(small(random), type);
  for (auto& v : t.b) v = encode_integer(small(random), type);
  for (auto& v : t.c) v = static_cast<float>(accumulator(random));
  return t;
}

MmaTiles random_tiles(std::size_t tiles, MmaProbeType type, std::uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> accumulator(-4.0f, 4.0f);
  MmaTiles t{std::vector<std::uint16_t>(tiles * 256), std::vector<std::uint16_t>(tiles * 128),
             std::vector<float>(tiles * 128)};
  for (auto& v : t.a) v = random_normal(random, type);
  for (auto& v : t.b) v = random_normal(random, type);
  for (auto& v : t.c) v = accumulator(random);
  return t;
}

// D = A·B + C per tile, in double: the product that mma.sync m16n8k16 computes. With `magnitude`, the sum
// Σ|A·B| + |C| per element instead: the scale of fp32 accumulation error.
std::vector<double> host_product(const MmaTiles& t, MmaProbeType type, bool magnitude = false) {
  const auto term = [magnitude](double value) { return magnitude ? std::fabs(value) : value; };
  const std::size_t tiles = t.c.size() / 128;
  std::vector<double> d(t.c.size());
  for (std::size_t tile = 0; tile < tiles; ++tile)
    for (unsigned m = 0; m < 16; ++m)
      for (unsigned n = 0; n < 8; ++n) {
        double sum = term(t.c[tile * 128 + m * 8 + n]);
        for (unsigned k = 0; k < 16; ++k)
          sum += term(decode(t.a[tile * 256 + m * 16 + k], type) * decode(t.b[tile * 128 + k * 8 + n], type));
        d[tile * 128 + m * 8 + n] = sum;
      }
  return d;
}

// Runs the mma probe over every tile (one CTA each); source_lane, if not empty, plants a layout bug.
std::vector<float> run_mma(const MmaTiles& t, MmaProbeType type, const std::vector<std::uint32_t>& source_lane = {}) {
  const unsigned tiles = static_cast<unsigned>(t.c.size() / 128);
  std::vector<float> d(t.c.size(), std::nanf(""));
  auto a = const_span_of(t.a, "a");
  auto b = const_span_of(t.b, "b");
  auto c = const_span_of(t.c, "c");
  auto out = span_of(d, "d");
  auto lanes = const_span_of(source_lane, "source_lane");
  within_deadline([&] {
    faprobe::emu::launch({"mma_probe", {tiles, 1, 1}, {32, 1, 1}, 0},
                         [&] { probes::mma_m16n8k16(type, a, b, c, out, lanes); });
  });
  return d;
}

class MmaProbe : public ::testing::TestWithParam<MmaProbeType> {};

TEST_P(MmaProbe, SmallIntegersGiveTheHostProductBitForBit) {
  const MmaProbeType type = GetParam();
  const MmaTiles t = integer_tiles(5, type, 11);
  const std::vector<double> expected = host_product(t, type);
  const std::vector<float> d = run_mma(t, type);
  for (std::size_t i = 0; i < d.size(); ++i)
    ASSERT_EQ(float_bits(d[i]), float_bits(static_cast<float>(expected[i])))
        << "tile " << i / 128 << " row " << i % 128 / 8 << " col " << i % 8 << ": " << d[i] << " vs " << expected[i];
}

TEST_P(MmaProbe, RandomInputsWithinTheFp32AccumulationBound) {
  const MmaProbeType type = GetParam();
  const MmaTiles t = random_tiles(5, type, 23);
  const std::vector<double> expected = host_product(t, type);
  const std::vector<double> magnitude = host_product(t, type, /*magnitude=*/true);
  const std::vector<float> d = run_mma(t, type);
  // 16 additions in fp32, each rounding by at most 2^-24 of a partial sum bounded by the magnitude.
  for (std::size_t i = 0; i < d.size(); ++i)
    ASSERT_NEAR(d[i], expected[i], 17.0 * std::ldexp(magnitude[i], -24)) << "element " << i;
}

TEST_P(MmaProbe, PlantedLayoutBugIsCaught) {
  // Lanes 0 and 1 gather each other's fragments: a wrong lane mapping the comparison must catch.
  const MmaProbeType type = GetParam();
  const MmaTiles t = integer_tiles(2, type, 37);
  const std::vector<double> expected = host_product(t, type);
  std::vector<std::uint32_t> swapped(32);
  std::iota(swapped.begin(), swapped.end(), 0u);
  std::swap(swapped[0], swapped[1]);
  const std::vector<float> d = run_mma(t, type, swapped);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < d.size(); ++i) mismatches += d[i] != static_cast<float>(expected[i]) ? 1 : 0;
  EXPECT_GT(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Emulator, MmaProbe, ::testing::Values(MmaProbeType::f16, MmaProbeType::bf16),
                         [](const auto& test_info) { return test_info.param == MmaProbeType::f16 ? "f16" : "bf16"; });

TEST(EmulatorMma, PartialWarpIsReported) {
  const std::string message = launch_error({"mma_partial", {1, 1, 1}, {48, 1, 1}, 0}, [] {
    const std::uint32_t a[4] = {};
    const std::uint32_t b[2] = {};
    const float c[4] = {};
    float d[4];
    isa::mma_m16n8k16_f16(d, a, b, c);
  });
  expect_mentions(message, {"mma_partial", "thread (32,0,0)", "mma.sync", "needs a whole warp", "16 threads"});
}

TEST(EmulatorMma, MixedInstructionsInOneWarpAreReported) {
  const std::string message = launch_error({"mma_mixed", {1, 1, 1}, {32, 1, 1}, 0}, [] {
    const std::uint32_t a[4] = {};
    const std::uint32_t b[2] = {};
    const float c[4] = {};
    float d[4];
    if (isa::lane_id() < 16) {
      isa::mma_m16n8k16_f16(d, a, b, c);
    } else {
      isa::mma_m16n8k16_bf16(d, a, b, c);
    }
  });
  expect_mentions(message, {"mma_mixed", "mismatched warp collective", "bf16", "f16"});
}

// --- ldmatrix ---

struct LdmatrixCase {
  unsigned matrices;
  bool transpose;
};

// The PTX ISA's ldmatrix mapping ("Warp-level matrix load instruction: ldmatrix"), on the host: row r of
// matrix i is the 8 .b16 values at byte offset row_offsets[8i + r]; lane l's register i holds elements
// (row l/4, cols 2(l%4), 2(l%4)+1), or with .trans (rows 2(l%4), 2(l%4)+1, col l/4), first in bits 0-15.
std::uint32_t isa_ldmatrix_word(const std::vector<std::uint16_t>& image, const std::vector<std::uint32_t>& row_offsets,
                                unsigned lane, unsigned matrix, bool transpose) {
  auto element = [&](unsigned row, unsigned col) { return image[row_offsets[8 * matrix + row] / 2 + col]; };
  const unsigned r = lane / 4;
  const unsigned c = 2 * (lane % 4);
  const std::uint16_t low = transpose ? element(c, r) : element(r, c);
  const std::uint16_t high = transpose ? element(c + 1, r) : element(r, c + 1);
  return std::uint32_t{low} | (std::uint32_t{high} << 16);
}

void PrintTo(const LdmatrixCase& p, std::ostream* out) {
  *out << ".x" << p.matrices << (p.transpose ? ".trans" : "");
}

constexpr std::uint32_t untouched = 0xabababab;

struct LdmatrixRun {
  std::vector<std::uint16_t> image;
  std::vector<std::uint32_t> row_offsets;
  std::vector<std::uint32_t> out;
};

// 64 rows of 8 random .b16 values; the 32 lanes address distinct rows in random order; the lanes whose
// addresses ldmatrix ignores get a misaligned, out-of-bounds one, which the emulator must not check.
LdmatrixRun run_ldmatrix(const LdmatrixCase& p, std::uint32_t seed) {
  std::mt19937 random(seed);
  LdmatrixRun run{std::vector<std::uint16_t>(64 * 8), std::vector<std::uint32_t>(32),
                  std::vector<std::uint32_t>(32 * 4, untouched)};
  for (auto& v : run.image) v = static_cast<std::uint16_t>(random());
  std::vector<std::uint32_t> rows(64);
  std::iota(rows.begin(), rows.end(), 0u);
  std::shuffle(rows.begin(), rows.end(), random);
  for (unsigned lane = 0; lane < 32; ++lane)
    run.row_offsets[lane] = lane < 8 * p.matrices ? rows[lane] * 16 : 0xfffffff3u;
  auto image = const_span_of(run.image, "image");
  auto offsets = const_span_of(run.row_offsets, "row_offsets");
  auto out = span_of(run.out, "out");
  within_deadline([&] {
    faprobe::emu::launch({"ldmatrix_probe", {1, 1, 1}, {32, 1, 1}, run.image.size() * 2},
                         [&] { probes::ldmatrix(p.matrices, p.transpose, image, offsets, out); });
  });
  return run;
}

class LdmatrixProbe : public ::testing::TestWithParam<LdmatrixCase> {};

TEST_P(LdmatrixProbe, MatchesTheIsaLaneMapping) {
  const LdmatrixCase p = GetParam();
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    const LdmatrixRun run = run_ldmatrix(p, seed);
    for (unsigned lane = 0; lane < 32; ++lane)
      for (unsigned i = 0; i < 4; ++i) {
        const std::uint32_t expected =
            i < p.matrices ? isa_ldmatrix_word(run.image, run.row_offsets, lane, i, p.transpose) : untouched;
        ASSERT_EQ(run.out[4 * lane + i], expected) << "lane " << lane << " register " << i << " seed " << seed;
      }
  }
}

TEST_P(LdmatrixProbe, PlantedWrongMappingIsCaught) {
  // The comparison must be able to fail: against the mapping of the other .trans setting, and against the
  // right mapping with lanes 4 and 5 exchanged, the emulator's registers must differ somewhere.
  const LdmatrixCase p = GetParam();
  const LdmatrixRun run = run_ldmatrix(p, 5);
  std::size_t wrong_transpose = 0;
  std::size_t swapped_lanes = 0;
  for (unsigned lane = 0; lane < 32; ++lane)
    for (unsigned i = 0; i < p.matrices; ++i) {
      const std::uint32_t got = run.out[4 * lane + i];
      wrong_transpose += got != isa_ldmatrix_word(run.image, run.row_offsets, lane, i, !p.transpose) ? 1 : 0;
      const unsigned planted = lane == 4 ? 5 : lane == 5 ? 4 : lane;
      swapped_lanes += got != isa_ldmatrix_word(run.image, run.row_offsets, planted, i, p.transpose) ? 1 : 0;
    }
  EXPECT_GT(wrong_transpose, 0u);
  EXPECT_GT(swapped_lanes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Emulator, LdmatrixProbe,
                         ::testing::Values(LdmatrixCase{1, false}, LdmatrixCase{1, true}, LdmatrixCase{2, false},
                                           LdmatrixCase{2, true}, LdmatrixCase{4, false}, LdmatrixCase{4, true}),
                         [](const auto& test_info) {
                           const LdmatrixCase& p = test_info.param;
                           return "x" + std::to_string(p.matrices) + (p.transpose ? "_trans" : "");
                         });

TEST(EmulatorLdmatrix, MisalignedRowIsReported) {
  const std::string message = launch_error({"ldmatrix_misaligned", {1, 1, 1}, {32, 1, 1}, 1024}, [] {
    std::uint32_t d[4];
    isa::ldmatrix(d, isa::lane_id() == 3 ? 8 : 16 * isa::lane_id());
  });
  expect_mentions(message, {"kernel 'ldmatrix_misaligned' block (0,0,0) thread (3,0,0)", "ldmatrix", ".x4",
                            "lane 3", "offset 8", "not 16-byte aligned"});
}

TEST(EmulatorLdmatrix, OutOfBoundsRowIsReported) {
  const std::string message = launch_error({"ldmatrix_overrun", {1, 1, 1}, {32, 1, 1}, 256}, [] {
    std::uint32_t d[2];
    isa::ldmatrix<true>(d, 16 * isa::lane_id());  // lanes 0..15 used; lane 15 reads [240, 256), lane 16 ignored
  });
  EXPECT_EQ(message, "");
  const std::string overrun = launch_error({"ldmatrix_overrun", {1, 1, 1}, {32, 1, 1}, 256}, [] {
    std::uint32_t d[4];
    isa::ldmatrix(d, 16 * isa::lane_id());  // lane 16 reads [256, 272)
  });
  expect_mentions(overrun, {"kernel 'ldmatrix_overrun' block (0,0,0) thread (16,0,0)", ".x4", "lane 16",
                            "[256, 272)", "256 bytes"});
}

TEST(EmulatorLdmatrix, PartialWarpIsReported) {
  const std::string message = launch_error({"ldmatrix_partial", {1, 1, 1}, {8, 1, 1}, 1024}, [] {
    std::uint32_t d[1];
    isa::ldmatrix(d, 16 * isa::lane_id());
  });
  expect_mentions(message, {"ldmatrix_partial", "needs a whole warp", "8 threads"});
}

// --- cp.async, ex2.approx, 16-byte loads ---

TEST(EmulatorAsync, CpAsyncCopiesThroughGroups) {
  std::vector<float> source(64 * 4);
  std::iota(source.begin(), source.end(), 0.0f);
  std::vector<float> copied(source.size(), std::nanf(""));
  auto in = const_span_of(source, "source");
  auto out = span_of(copied, "copied");
  within_deadline([&] {
    faprobe::emu::launch({"cp_async", {1, 1, 1}, {64, 1, 1}, source.size() * sizeof(float)}, [&] {
      const unsigned tid = isa::thread_linear_idx();
      isa::cp_async_wait_group<1>();  // nothing committed yet: harmless
      isa::cp_async_16(16 * tid, in, 4 * tid);
      isa::cp_async_commit_group();
      isa::cp_async_commit_group();  // an empty group
      isa::cp_async_wait_group<0>();
      isa::cp_async_wait_group<3>();  // more groups than exist: harmless
      isa::sync_threads();
      SharedSpan<float> tile = isa::shared_array<float>(0, source.size());
      for (unsigned i = 0; i < 4; ++i) out[4 * ((tid + 1) % 64) + i] = tile[4 * ((tid + 1) % 64) + i];
    });
  });
  EXPECT_EQ(copied, source);
}

TEST(EmulatorAsync, AsyncCopyProbeMatchesTheHost) {
  constexpr unsigned threads = 96;
  std::mt19937 random(41);
  std::uniform_real_distribution<float> exponent(-10.0f, 10.0f);
  std::vector<std::uint32_t> in(4 * threads);
  for (std::uint32_t& w : in) w = static_cast<std::uint32_t>(random());
  for (unsigned t = 0; t < threads; ++t) in[4 * t] = float_bits(exponent(random));
  std::vector<std::uint32_t> copied(in.size(), 0);
  std::vector<std::uint32_t> loaded(in.size(), 0);
  std::vector<float> exp2(threads, 0.0f);
  auto in_span = const_span_of(in, "in");
  auto copied_span = span_of(copied, "copied");
  auto loaded_span = span_of(loaded, "loaded");
  auto exp2_span = span_of(exp2, "exp2");
  within_deadline([&] {
    faprobe::emu::launch({"async_copy_probe", {1, 1, 1}, {threads, 1, 1}, 16 * threads},
                         [&] { probes::async_copy(in_span, copied_span, loaded_span, exp2_span); });
  });
  for (unsigned t = 0; t < threads; ++t) {
    const unsigned next = (t + 1) % threads;
    for (unsigned i = 0; i < 4; ++i) {
      ASSERT_EQ(copied[4 * t + i], in[4 * next + i]) << "thread " << t;
      ASSERT_EQ(loaded[4 * t + i], in[4 * next + i]) << "thread " << t;
    }
    float x;
    std::memcpy(&x, &in[4 * t], sizeof x);
    const double exact = std::exp2(static_cast<double>(x));
    EXPECT_NEAR(exp2[t], exact, exact * std::ldexp(1.0, -22)) << x;  // ex2.approx: ~2 ulp on hardware
  }
}

TEST(EmulatorAsync, CpAsyncMisuseIsReported) {
  std::vector<float> source(16, 1.0f);
  auto in = const_span_of(source, "source");
  std::string message = launch_error({"cp_async_misaligned", {1, 1, 1}, {32, 1, 1}, 1024},
                                     [&] { isa::cp_async_16(isa::lane_id() == 2 ? 8 : 16 * isa::lane_id(), in, 0); });
  expect_mentions(message, {"cp_async_misaligned", "thread (2,0,0)", "not aligned to 16 bytes"});
  message = launch_error({"cp_async_overrun", {1, 1, 1}, {32, 1, 1}, 1024},
                         [&] { isa::cp_async_16(16 * isa::lane_id(), in, 4 * isa::lane_id()); });
  expect_mentions(message, {"cp_async_overrun", "thread (4,0,0)", "source[19], size 16"});  // lanes 0..3 fit
}

TEST(EmulatorMath, Ex2ApproxIsWithinTheHardwareBound) {
  std::vector<float> results(7);
  const float inputs[7] = {-20.5f, -1.0f, -0.3f, 0.0f, 0.7f, 3.25f, 17.0f};
  auto out = span_of(results, "results");
  within_deadline([&] {
    faprobe::emu::launch({"ex2", {1, 1, 1}, {32, 1, 1}, 0}, [&] {
      if (isa::lane_id() < 7) out[isa::lane_id()] = isa::ex2_approx(inputs[isa::lane_id()]);
    });
  });
  for (std::size_t i = 0; i < results.size(); ++i) {
    const double exact = std::exp2(static_cast<double>(inputs[i]));
    EXPECT_NEAR(results[i], exact, exact * std::ldexp(1.0, -22)) << inputs[i];
  }
}

// --- ex2.approx.ftz.f32 ---

float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// 2^x as the PTX ISA defines ex2.approx.ftz.f32 ("ex2", written from its text, not from the emulator's code):
// .ftz flushes subnormal inputs and results to sign-preserving zero, so a subnormal input is a zero and
// 2^±0 = +1; 2^-inf = +0, 2^+inf = +inf, NaN gives NaN; a result below 2^-126, the smallest normal float, is
// flushed to +0 (2^x is positive: the sign preserved is +). 2^x itself is computed in double and rounded once;
// at or above FLT_MAX + half an ulp it rounds to +inf. (Where 2^x lies within an ulp of 2^-126 the flush
// could go either way; the inputs below keep away from it.)
float ex2_ftz_by_the_isa(float x) {
  if (std::isnan(x)) return std::numeric_limits<float>::quiet_NaN();
  if (std::fabs(x) < std::numeric_limits<float>::min()) return 1.0f;  // ±0 and the subnormals
  const double y = std::exp2(static_cast<double>(x));                 // 0 for -inf, inf for +inf
  if (y < std::ldexp(1.0, -126)) return 0.0f;
  if (y >= std::ldexp(1.0, 128) - std::ldexp(1.0, 103)) return std::numeric_limits<float>::infinity();
  return static_cast<float>(y);
}

// What results, one per input, get wrong against the ISA's definition, one line each (empty: nothing). Bit for
// bit where the ISA fixes the result: a special input (±0, subnormal, ±inf, NaN: any NaN matches) or a flushed
// +0; elsewhere within 2^-22 relative, ex2.approx's bound on hardware (about 2 ulp).
std::vector<std::string> ex2_ftz_problems(const std::vector<float>& inputs, const std::vector<float>& results) {
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float x = inputs[i];
    const float want = ex2_ftz_by_the_isa(x);
    const float got = results[i];
    bool right = false;
    if (std::isnan(want)) {
      right = std::isnan(got);
    } else if (!std::isnormal(x) || want == 0.0f || std::isinf(want)) {
      right = float_bits(got) == float_bits(want);
    } else {
      right = std::isnormal(got) && std::fabs(double{got} - double{want}) <= double{want} * std::ldexp(1.0, -22);
    }
    if (!right) {
      char line[160];
      std::snprintf(line, sizeof line, "2^%.9g (0x%08x): 0x%08x (%.9g), the ISA's 0x%08x (%.9g)", double{x},
                    float_bits(x), float_bits(got), double{got}, float_bits(want), double{want});
      problems.emplace_back(line);
    }
  }
  return problems;
}

// The inputs where .ftz decides the result, and ordinary ones: the ISA's special inputs, results that are
// subnormal before the flush or below the smallest subnormal, the top of the range, then random x in
// [-32, 32), in [-160, -126.5) (flushed), in [-125.5, 127.5) (normal results) and random subnormals.
std::vector<float> ex2_ftz_test_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> inputs = {0.0f, -0.0f, 1e-40f, -1e-40f, 1.4e-45f, -1.4e-45f, bits_float(0x007fffffu),
                               bits_float(0x807fffffu), -inf, inf, std::numeric_limits<float>::quiet_NaN(),
                               bits_float(0xffc00001u), -126.5f, -130.0f, -140.0f, -148.9f, -149.5f, -150.5f,
                               -200.0f, 127.9f, 128.5f, -125.5f, -1.0f, 0.5f, 1.0f, 3.25f};
  std::mt19937 random(43);
  std::uniform_real_distribution<float> ordinary(-32.0f, 32.0f), flushed(-160.0f, -126.5f), normal(-125.5f, 127.5f);
  for (int i = 0; i < 32; ++i) {
    inputs.push_back(ordinary(random));
    inputs.push_back(flushed(random));
    inputs.push_back(normal(random));
    inputs.push_back(bits_float((static_cast<std::uint32_t>(random()) & 0x807fffffu) | 1u));  // a subnormal
  }
  return inputs;
}

// The ex2_ftz probe body under the emulator: one thread per input.
std::vector<float> emulated_ex2_ftz(const std::vector<float>& inputs) {
  std::vector<std::uint32_t> words(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) words[i] = float_bits(inputs[i]);
  std::vector<float> results(inputs.size(), std::nanf(""));
  auto in = const_span_of(words, "in");
  auto out = span_of(results, "out");
  const unsigned blocks = static_cast<unsigned>((inputs.size() + 63) / 64);
  within_deadline([&] {
    faprobe::emu::launch({"ex2_ftz", {blocks, 1, 1}, {64, 1, 1}, 0}, [&] { probes::ex2_ftz(in, out); });
  });
  return results;
}

TEST(EmulatorMath, Ex2ApproxFtzFlushesSubnormalInputsAndResults) {
  const std::vector<float> inputs = ex2_ftz_test_inputs();
  const std::vector<float> results = emulated_ex2_ftz(inputs);
  const std::vector<std::string> problems = ex2_ftz_problems(inputs, results);
  for (std::size_t i = 0; i < problems.size() && i < 8; ++i) ADD_FAILURE() << problems[i];
  EXPECT_TRUE(problems.empty()) << problems.size() << " results differ from the ISA's";

  // The flush itself, word by word: a subnormal or underflowing result is +0 with its sign bit clear, a
  // subnormal input (either sign) or -0 gives exactly 1, -inf gives +0.
  const auto ex2 = [&](float x) { return emulated_ex2_ftz({x})[0]; };
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-126.5f, -130.0f, -140.0f, -148.9f, -149.5f, -150.5f, -200.0f, -inf})
    EXPECT_EQ(float_bits(ex2(x)), 0x00000000u) << "2^" << x << " is +0 after the flush";
  for (float x : {1e-40f, -1e-40f, 1.4e-45f, -1.4e-45f, 0.0f, -0.0f})
    EXPECT_EQ(float_bits(ex2(x)), 0x3f800000u) << "2^" << x << " is exactly 1";
  EXPECT_TRUE(std::isnormal(ex2(-125.5f))) << "a normal result is not flushed";
  EXPECT_GT(ex2(127.9f), 3e38f);
  EXPECT_LT(ex2(127.9f), inf);
  EXPECT_EQ(ex2(128.5f), inf);
  EXPECT_EQ(ex2(inf), inf);
  EXPECT_TRUE(std::isnan(ex2(std::numeric_limits<float>::quiet_NaN())));
  for (float r : results) EXPECT_NE(std::fpclassify(r), FP_SUBNORMAL) << r;
}

// Planted: ex2 without the flush (std::exp2 alone, what the emulator's plain ex2.approx does) and one that
// flushes to -0, each over the same inputs: the check must name the inputs whose 2^x is subnormal.
TEST(EmulatorMath, Ex2FtzCheckCatchesAPlantedMissingOrNegativeFlush) {
  const std::vector<float> inputs = ex2_ftz_test_inputs();
  std::vector<float> no_flush(inputs.size()), negative_zero(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    no_flush[i] = std::exp2(inputs[i]);
    negative_zero[i] = std::fpclassify(no_flush[i]) == FP_SUBNORMAL ? -0.0f : no_flush[i];
  }
  std::size_t subnormal_results = 0;
  for (float r : no_flush) subnormal_results += std::fpclassify(r) == FP_SUBNORMAL ? 1 : 0;
  ASSERT_GE(subnormal_results, 10u) << "the inputs hardly reach the subnormal results";
  for (const std::vector<float>* planted : {&no_flush, &negative_zero}) {
    const std::vector<std::string> problems = ex2_ftz_problems(inputs, *planted);
    EXPECT_EQ(problems.size(), subnormal_results);
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(problems.front().rfind("2^-126.5 (0xc2fd0000): ", 0), 0u) << problems.front();
  }
}

TEST(EmulatorMemory, SixteenByteLoads) {
  std::vector<std::uint32_t> words(64);
  std::iota(words.begin(), words.end(), 100u);
  std::vector<std::uint32_t> copied(64, 0);
  auto in = const_span_of(words, "words");
  auto out = span_of(copied, "copied");
  within_deadline([&] {
    faprobe::emu::launch({"load_16", {1, 1, 1}, {16, 1, 1}, 0}, [&] {
      const isa::Words4 v = isa::load_16(in, 4 * isa::thread_linear_idx());
      for (unsigned i = 0; i < 4; ++i) out[4 * isa::thread_linear_idx() + i] = v.word[i];
    });
  });
  EXPECT_EQ(copied, words);
  std::string message =
      launch_error({"load_16_misaligned", {1, 1, 1}, {1, 1, 1}, 0}, [&] { (void)isa::load_16(in, 2); });
  expect_mentions(message, {"load_16_misaligned", "words[2]", "not aligned to 16 bytes"});
  message = launch_error({"load_16_overrun", {1, 1, 1}, {1, 1, 1}, 0}, [&] { (void)isa::load_16(in, 61); });
  expect_mentions(message, {"load_16_overrun", "words[64], size 64"});
}

TEST(EmulatorMemory, SixteenByteStores) {
  std::vector<std::uint32_t> stored(64, 0);
  auto out = span_of(stored, "stored");
  within_deadline([&] {
    faprobe::emu::launch({"store_16", {1, 1, 1}, {16, 1, 1}, 0}, [&] {
      const unsigned t = isa::thread_linear_idx();
      isa::store_16(out, 4 * t, isa::Words4{{4 * t + 100, 4 * t + 101, 4 * t + 102, 4 * t + 103}});
    });
  });
  std::vector<std::uint32_t> expected(64);
  std::iota(expected.begin(), expected.end(), 100u);
  EXPECT_EQ(stored, expected);
  std::string message = launch_error({"store_16_misaligned", {1, 1, 1}, {1, 1, 1}, 0},
                                     [&] { isa::store_16(out, 2, isa::Words4{}); });
  expect_mentions(message, {"store_16_misaligned", "stored[2]", "not aligned to 16 bytes"});
  message = launch_error({"store_16_overrun", {1, 1, 1}, {1, 1, 1}, 0}, [&] { isa::store_16(out, 61, isa::Words4{}); });
  expect_mentions(message, {"store_16_overrun", "stored[64], size 64"});
  EXPECT_EQ(stored, expected) << "a refused store writes nothing";
}

}  // namespace
