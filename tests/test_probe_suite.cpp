// The instruction probe suite (kernels/cuda/probes/probe_suite.hpp) and `faprobe probes`: every probe runs
// on the emulator and is deterministic; compare() catches a single flipped bit, accepts differences inside
// the tolerance of the probes that have one and NaN payloads of the float ones; a planted fragment-gathering
// bug in the mma probe makes the comparison fail; the ex2.approx.ftz probe's inputs reach the flush, and its
// comparison is bit for bit where the ISA fixes the result (planted: a GPU that returns a subnormal where the
// emulator flushed to +0, or 1 - 1 ulp for a subnormal input, differs); the emulated wgmma probes equal a
// matrix product computed here, the mbarrier probe records what the ISA says and the dynamic shared memory
// starts 1024-byte aligned (planted: the same words with a base 128 bytes off are caught); where a GPU exists,
// every probe matches it, except those of instructions it lacks (Hopper's below sm_90), which are skipped with
// the reason. `faprobe probes` end to end is test_probes_command.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/common/isa.hpp"
#include "cuda/probes/hopper_probes.cuh"
#include "cuda/probes/probe_suite.hpp"
#include "cuda/runtime/gpu.hpp"
#include "emulator_test_support.hpp"
#include "model/fp8_accumulation.hpp"
#include "probe_support.hpp"

namespace {

namespace fs = std::filesystem;
namespace isa = faprobe::cuda::isa;
namespace probes = faprobe::cuda::probes;
using faprobe::cuda::Target;
using faprobe::emu::testing::within_deadline;
using faprobe::test_support::emulated;
using faprobe::test_support::probe_named;
using probes::MmaProbeType;

constexpr std::uint32_t unwritten_word = 0xabababab;

// True when a value of the word is a NaN under the element type (compare() matches NaNs by class).
bool holds_nan(probes::Element element, std::uint32_t word) {
  const auto low = static_cast<std::uint16_t>(word & 0xffffu);
  const auto high = static_cast<std::uint16_t>(word >> 16);
  switch (element) {
    case probes::Element::u32: return false;
    case probes::Element::f32: return std::isnan(isa::detail::from_bits<float>(word));
    case probes::Element::f16x2: return std::isnan(isa::half_to_float(low)) || std::isnan(isa::half_to_float(high));
    case probes::Element::bf16x2:
      return std::isnan(isa::bfloat16_to_float(low)) || std::isnan(isa::bfloat16_to_float(high));
  }
  return false;
}

// A word in the second half of the output with no NaN in it.
std::size_t plain_word(const probes::Probe& probe, const probes::ProbeOutput& output) {
  for (std::size_t i = output.words.size() / 2; i < output.words.size(); ++i)
    if (!holds_nan(probe.element, output.words[i]) && output.words[i] != unwritten_word) return i;
  ADD_FAILURE() << probe.name << ": no word without a NaN in the second half";
  return 0;
}


TEST(ProbeSuite, ListsEveryInstructionFamilyOnceByName) {
  std::set<std::string> names;
  for (const probes::Probe& probe : probes::all_probes()) EXPECT_TRUE(names.insert(probe.name).second) << probe.name;
  for (const char* expected :
       {"shfl.sync.idx width 32", "shfl.sync.up width 16", "shfl.sync.down width 8", "shfl.sync.bfly width 4",
        "vote.sync ballot/all/any", "shfl.sync.bfly warp_sum", "dynamic shared memory 1024B-aligned",
        "mma.m16n8k16 f16 small-int", "mma.m16n8k16 bf16 random",
        "ldmatrix.x1", "ldmatrix.x2.trans", "ldmatrix.x4", "cp.async.cg 16B + groups", "ld.global.v4 16B",
        "ex2.approx.f32", "ex2.approx.ftz.f32", "cvt.rn.f16.f32", "cvt.rn.bf16.f32", "cvt.f32.f16", "cvt.f32.bf16",
        "cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32", "cp.async.bulk.tensor 2d no swizzle",
        "cp.async.bulk.tensor 2d swizzle 128B",
        "wgmma m64n64k16 f16 ss swizzle 128B", "wgmma m64n128k16 bf16 rs, B N-major swizzle 128B",
        "wgmma m64n64k32 e4m3 ss swizzle 64B", "wgmma m64n64k32 e4m3 ss many binades", "stmatrix x4 and x4.trans", "mbarrier phases, expect_tx and elect.sync"})
    EXPECT_EQ(names.count(expected), 1u) << expected;
  // Tolerances only where the ISA leaves the result open.
  for (const probes::Probe& probe : probes::all_probes()) {
    const bool open = probe.name.rfind("ex2.approx", 0) == 0 || probe.name.find("random") != std::string::npos;
    EXPECT_EQ(probe.tolerance.kind != probes::Tolerance::Kind::bits, open) << probe.name;
  }
}

TEST(ProbeSuite, EveryProbeRunsOnTheEmulatorDeterministically) {
  for (const probes::Probe& probe : probes::all_probes()) {
    SCOPED_TRACE(probe.name);
    const probes::ProbeOutput first = emulated(probe, 1);
    const probes::ProbeOutput again = emulated(probe, 1);
    const probes::ProbeOutput other_seed = emulated(probe, 2);
    ASSERT_FALSE(first.words.empty());
    EXPECT_EQ(first.words, again.words);
    EXPECT_EQ(first.allowed, again.allowed);
    EXPECT_NE(first.words, other_seed.words) << "the seed does not reach the inputs";
    const auto unwritten = std::count(first.words.begin(), first.words.end(), unwritten_word);
    const std::size_t written = first.words.size() - static_cast<std::size_t>(unwritten);
    EXPECT_GE(written, first.words.size() / 4) << "the probe left most of its output unwritten";
    const probes::Comparison same = probes::compare(probe, first, again);
    EXPECT_EQ(same.verdict, probes::Verdict::identical) << same.summary();
    EXPECT_EQ(same.elements, first.words.size());
    EXPECT_EQ(probes::checksum(first), probes::checksum(again));
    if (probe.tolerance.kind == probes::Tolerance::Kind::of_magnitude) {
      ASSERT_EQ(first.allowed.size(), first.words.size());
      for (double allowed : first.allowed) EXPECT_GT(allowed, 0.0);
    }
  }
}

TEST(ProbeSuite, CompareFlagsASingleFlippedBit) {
  for (const probes::Probe& probe : probes::all_probes()) {
    SCOPED_TRACE(probe.name);
    const probes::ProbeOutput reference = emulated(probe, 3);
    const std::size_t index = plain_word(probe, reference);
    probes::ProbeOutput flipped = reference;
    // The lowest bit for bit-for-bit probes; a high exponent bit (a factor of 2^±64 or more) for the others.
    const bool exact = probe.tolerance.kind == probes::Tolerance::Kind::bits;
    flipped.words[index] ^= exact ? 1u : 1u << 30;
    const probes::Comparison comparison = probes::compare(probe, reference, flipped);
    EXPECT_EQ(comparison.verdict, probes::Verdict::differs);
    EXPECT_EQ(comparison.differing, 1u);
    EXPECT_EQ(comparison.first_difference, index);
    EXPECT_NE(comparison.reference_value, comparison.candidate_value);
    EXPECT_NE(comparison.summary().find("DIFFERS at " + std::to_string(index)), std::string::npos)
        << comparison.summary();
  }
}

TEST(ProbeSuite, CompareAcceptsDifferencesWithinTheTolerance) {
  for (const probes::Probe& probe : probes::all_probes()) {
    if (probe.tolerance.kind == probes::Tolerance::Kind::bits) continue;
    SCOPED_TRACE(probe.name);
    const probes::ProbeOutput reference = emulated(probe, 4);
    const std::size_t index = plain_word(probe, reference);
    probes::ProbeOutput nudged = reference;
    nudged.words[index] += 1;  // one ulp
    probes::Comparison comparison = probes::compare(probe, reference, nudged);
    EXPECT_EQ(comparison.verdict, probes::Verdict::within_tolerance) << comparison.summary();
    EXPECT_EQ(comparison.inexact, 1u);
    EXPECT_EQ(comparison.max_ulps, 1.0);
    EXPECT_GT(comparison.max_abs_diff, 0.0);
    if (probe.tolerance.kind == probes::Tolerance::Kind::ulps) {
      nudged.words[index] += 1;  // two ulps: the ISA's bound for ex2.approx.f32, still accepted
      EXPECT_EQ(probes::compare(probe, reference, nudged).verdict, probes::Verdict::within_tolerance);
      nudged.words[index] += 1;  // three: beyond it
      comparison = probes::compare(probe, reference, nudged);
      EXPECT_EQ(comparison.verdict, probes::Verdict::differs) << comparison.summary();
    } else {
      // Just inside and just outside the allowed difference of that word.
      const float value = isa::detail::from_bits<float>(reference.words[index]);
      const double allowed = reference.allowed[index];
      nudged.words[index] = isa::detail::to_bits(static_cast<float>(value + 0.75 * allowed));
      EXPECT_EQ(probes::compare(probe, reference, nudged).verdict, probes::Verdict::within_tolerance);
      nudged.words[index] = isa::detail::to_bits(static_cast<float>(value - 1.5 * allowed));
      EXPECT_EQ(probes::compare(probe, reference, nudged).verdict, probes::Verdict::differs);
    }
  }
}

TEST(ProbeSuite, CompareMatchesNanPayloadsOnlyForFloatElements) {
  // cvt.rn.f16.f32 of a NaN: the emulator and the GPU may give different NaN bits (PTX ISA leaves them open).
  const probes::Probe& to_f16 = probe_named("cvt.rn.f16.f32");
  const probes::ProbeOutput reference = emulated(to_f16, 5);
  std::size_t nan_index = reference.words.size();
  for (std::size_t i = 0; i < reference.words.size(); ++i)
    if (holds_nan(to_f16.element, reference.words[i])) nan_index = i;
  ASSERT_LT(nan_index, reference.words.size()) << "the conversion inputs hold no NaN";
  probes::ProbeOutput other_nan = reference;
  const std::uint32_t low_half = reference.words[nan_index] & 0xffffu;
  const std::uint32_t other_payload = low_half == 0x7fffu ? 0x7e01u : 0x7fffu;  // another f16 NaN
  other_nan.words[nan_index] = (reference.words[nan_index] & 0xffff0000u) | other_payload;
  const probes::Comparison comparison = probes::compare(to_f16, reference, other_nan);
  EXPECT_EQ(comparison.verdict, probes::Verdict::identical) << comparison.summary();
  EXPECT_EQ(comparison.nan_pairs, 1u);
  // A NaN against a number is a difference; so is any bit of a raw u32 word, NaN-looking or not.
  other_nan.words[nan_index] = 0x3c00u;  // 1.0 in f16
  EXPECT_EQ(probes::compare(to_f16, reference, other_nan).verdict, probes::Verdict::differs);
  const probes::Probe& ldmatrix = probe_named("ldmatrix.x4");
  probes::ProbeOutput words = emulated(ldmatrix, 5);
  words.words[0] = 0x7fc00000u;
  probes::ProbeOutput payload = words;
  payload.words[0] = 0x7fc00001u;
  EXPECT_EQ(probes::compare(ldmatrix, words, payload).verdict, probes::Verdict::differs);
  // Outputs of different lengths differ where the shorter one ends.
  payload = words;
  payload.words.pop_back();
  const probes::Comparison shorter = probes::compare(ldmatrix, words, payload);
  EXPECT_EQ(shorter.verdict, probes::Verdict::differs);
  EXPECT_EQ(shorter.first_difference, payload.words.size());
}

TEST(ProbeSuite, PlantedLaneMappingBugMakesTheMmaComparisonDiffer) {
  // Lanes 0 and 1 gather each other's fragments: what a wrong fragment layout in the emulator or a kernel
  // would do. Against the production mapping the output must differ, beyond the random run's tolerance too.
  std::vector<std::uint32_t> swapped(32);
  std::iota(swapped.begin(), swapped.end(), 0u);
  std::swap(swapped[0], swapped[1]);
  for (MmaProbeType type : {MmaProbeType::f16, MmaProbeType::bf16})
    for (bool integer_inputs : {true, false}) {
      const probes::Probe& probe = probe_named(std::string("mma.m16n8k16 ") +
                                               (type == MmaProbeType::f16 ? "f16" : "bf16") +
                                               (integer_inputs ? " small-int" : " random"));
      SCOPED_TRACE(probe.name);
      probes::ProbeOutput production, planted;
      within_deadline([&] {
        production = probes::run_mma(type, integer_inputs, Target::emulator, 6);
        planted = probes::run_mma(type, integer_inputs, Target::emulator, 6, swapped);
      });
      EXPECT_EQ(production.words, emulated(probe, 6).words) << "run_mma is not what the probe runs";
      const probes::Comparison comparison = probes::compare(probe, production, planted);
      EXPECT_EQ(comparison.verdict, probes::Verdict::differs) << comparison.summary();
      EXPECT_GT(comparison.differing, 8u);  // rows 0 and 8 of every tile, at least
    }
  EXPECT_THROW(probes::run_mma(MmaProbeType::f16, true, Target::emulator, 6, {0, 1, 2}), std::invalid_argument);
}

std::uint32_t as_bits(float x) { return isa::detail::to_bits(x); }
float as_float(std::uint32_t word) { return isa::detail::from_bits<float>(word); }

// Where the ex2.approx.ftz probe has input x (its first inputs are the same for every seed).
std::size_t ex2_ftz_index(const std::vector<std::uint32_t>& inputs, std::uint32_t x) {
  const auto at = std::find(inputs.begin(), inputs.end(), x);
  EXPECT_NE(at, inputs.end()) << "no input 0x" << std::hex << x;
  return static_cast<std::size_t>(at - inputs.begin());
}

// The new probe: registered with the 2-ulp tolerance, inputs that reach every case the flush decides, exact
// (allowance 0) for the ISA's special inputs, and an emulated run that equals itself.
TEST(ProbeSuite, Ex2FtzProbeReachesTheFlushWithItsTolerance) {
  const probes::Probe& probe = probe_named("ex2.approx.ftz.f32");
  EXPECT_EQ(probe.element, probes::Element::f32);
  EXPECT_EQ(probe.tolerance.kind, probes::Tolerance::Kind::ulps);
  EXPECT_EQ(probe.tolerance.ulps, probe_named("ex2.approx.f32").tolerance.ulps);
  EXPECT_EQ(probe.tolerance.ulps, 2u);
  EXPECT_NE(probe.tolerance.description.find("bit for bit"), std::string::npos) << probe.tolerance.description;
  EXPECT_EQ(probe.min_sm, 0);

  const std::vector<std::uint32_t> inputs = probes::ex2_ftz_probe_inputs(11);
  const probes::ProbeOutput output = emulated(probe, 11);
  ASSERT_EQ(output.words.size(), inputs.size());
  ASSERT_EQ(output.allowed.size(), inputs.size());
  const probes::Comparison itself = probes::compare(probe, output, output);
  EXPECT_EQ(itself.verdict, probes::Verdict::identical) << itself.summary();

  const float inf = std::numeric_limits<float>::infinity();
  std::size_t subnormal_inputs = 0, negative_subnormal_inputs = 0, flushed_results = 0, nans = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float x = as_float(inputs[i]);
    const bool special = !std::isnormal(x);  // ±0, subnormal, ±inf, NaN
    EXPECT_EQ(output.allowed[i], special ? 0.0 : 2.0) << "input " << x;
    const bool subnormal = std::fpclassify(x) == FP_SUBNORMAL;
    subnormal_inputs += subnormal ? 1 : 0;
    negative_subnormal_inputs += subnormal && std::signbit(x) ? 1 : 0;
    flushed_results += x > -150.0f && x < -126.0f ? 1 : 0;
    nans += std::isnan(x) ? 1 : 0;
    EXPECT_NE(std::fpclassify(as_float(output.words[i])), FP_SUBNORMAL) << "2^" << x << " is not flushed";
  }
  EXPECT_GE(subnormal_inputs, 16u);
  EXPECT_GE(negative_subnormal_inputs, 4u);
  EXPECT_GE(flushed_results, 10u);
  EXPECT_GE(nans, 2u);
  // The named inputs, whatever the seed, and what the emulator gives for them.
  const std::vector<std::uint32_t> other_seed = probes::ex2_ftz_probe_inputs(12);
  EXPECT_TRUE(std::equal(inputs.begin(), inputs.begin() + 20, other_seed.begin()));
  EXPECT_NE(inputs, other_seed);
  const std::pair<float, std::uint32_t> fixed[] = {
      {0.0f, 0x3f800000u},     {-0.0f, 0x3f800000u},    {1e-40f, 0x3f800000u},   {-1e-40f, 0x3f800000u},
      {1.4e-45f, 0x3f800000u}, {-1.4e-45f, 0x3f800000u}, {-126.5f, 0u},          {-130.0f, 0u},
      {-140.0f, 0u},           {-148.9f, 0u},           {-200.0f, 0u},           {-inf, 0u},
      {128.5f, 0x7f800000u},   {inf, 0x7f800000u},
  };
  for (const auto& [x, word] : fixed)
    EXPECT_EQ(output.words[ex2_ftz_index(inputs, as_bits(x))], word) << "2^" << x;
  EXPECT_LT(as_float(output.words[ex2_ftz_index(inputs, as_bits(127.9f))]), inf);
  EXPECT_TRUE(std::isnan(as_float(output.words[ex2_ftz_index(inputs, 0x7fc00000u)])));
}

// Planted GPU outputs against the emulated one: a subnormal where the emulator flushed to +0 is one or a few
// ulps away as integers, yet differs; so do -0 for +0, 1 - 1 ulp for 2^(subnormal) and for 2^0, and the
// largest float for +inf; a normal result 2 ulps off stays within the tolerance, 3 do not.
TEST(ProbeSuite, Ex2FtzComparisonIsExactWhereTheIsaFixesTheResult) {
  const probes::Probe& probe = probe_named("ex2.approx.ftz.f32");
  const std::vector<std::uint32_t> inputs = probes::ex2_ftz_probe_inputs(13);
  const probes::ProbeOutput reference = emulated(probe, 13);
  const auto with = [&](float x, std::uint32_t word) {
    probes::ProbeOutput planted = reference;
    planted.words[ex2_ftz_index(inputs, as_bits(x))] = word;
    return planted;
  };
  const auto verdict = [&](const probes::ProbeOutput& planted) {
    return probes::compare(probe, reference, planted).verdict;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-130.0f, -148.9f, -inf})
    for (std::uint32_t word : {0x00000001u, 0x00000002u, 0x00000200u, 0x80000000u}) {
      const probes::Comparison comparison = probes::compare(probe, reference, with(x, word));
      EXPECT_EQ(comparison.verdict, probes::Verdict::differs) << "2^" << x << " as 0x" << std::hex << word;
      EXPECT_LE(comparison.max_ulps, 512.0) << "a plain ulp tolerance of that size would have passed it";
    }
  for (float x : {1e-40f, -1.4e-45f, 0.0f, -0.0f})
    EXPECT_EQ(verdict(with(x, 0x3f7fffffu)), probes::Verdict::differs) << "2^" << x;
  EXPECT_EQ(verdict(with(128.5f, 0x7f7fffffu)), probes::Verdict::differs);

  const std::size_t top = ex2_ftz_index(inputs, as_bits(127.9f));
  probes::ProbeOutput nudged = reference;
  nudged.words[top] += 2;
  EXPECT_EQ(verdict(nudged), probes::Verdict::within_tolerance);
  nudged.words[top] += 1;
  EXPECT_EQ(verdict(nudged), probes::Verdict::differs);

  // Without the probe's per-word allowance the 1 - 1 ulp would pass: the allowance is what makes it exact.
  probes::ProbeOutput no_allowance = reference;
  no_allowance.allowed.clear();
  EXPECT_EQ(probes::compare(probe, no_allowance, with(0.0f, 0x3f7fffffu)).verdict,
            probes::Verdict::within_tolerance);

  // A GPU without the flush: every word the emulator flushed holds 2^x unflushed (std::exp2), a subnormal.
  probes::ProbeOutput unflushed = reference;
  std::size_t subnormal = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float exact = std::exp2(as_float(inputs[i]));
    if (std::fpclassify(exact) != FP_SUBNORMAL) continue;
    ASSERT_EQ(reference.words[i], 0u) << "2^" << as_float(inputs[i]) << " is flushed on the emulator";
    unflushed.words[i] = as_bits(exact);
    ++subnormal;
  }
  EXPECT_GE(subnormal, 10u);
  const probes::Comparison comparison = probes::compare(probe, reference, unflushed);
  EXPECT_EQ(comparison.verdict, probes::Verdict::differs) << comparison.summary();
  EXPECT_EQ(comparison.differing, subnormal);
  EXPECT_NE(comparison.summary().find("DIFFERS at"), std::string::npos);
}

TEST(ProbeSuite, OnlyHopperProbesNeedSm90AndSaySo) {
  int hopper_probes = 0;
  for (const probes::Probe& probe : probes::all_probes()) {
    bool hopper = false;
    for (const char* prefix : {"cp.async.bulk.tensor", "wgmma ", "stmatrix ", "mbarrier "})
      hopper = hopper || probe.name.rfind(prefix, 0) == 0;
    hopper_probes += hopper ? 1 : 0;
    EXPECT_EQ(probe.min_sm, hopper ? 90 : 0) << probe.name;
    EXPECT_EQ(probe.needs_gpu(8, 0), hopper ? "needs sm_90" : "") << probe.name;
    EXPECT_EQ(probe.needs_gpu(9, 0), "") << probe.name;
  }
  EXPECT_EQ(hopper_probes, 8);  // two tensor copies, four wgmma, stmatrix, mbarrier
}

// Where thread t's accumulator i of a wgmma m64nN lands in D (isa_wgmma.hpp): row 16(t/32) + (t%32)/4 +
// 8((i/2)%2), column 8(i/4) + 2(t%4) + i%2.
std::pair<unsigned, unsigned> wgmma_accumulator_element(unsigned t, unsigned i) {
  return {16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * (t % 4) + i % 2};
}

// The emulated wgmma probes against D = A·B computed here from the operands they drew, each thread's
// accumulator placed by the layout of isa_wgmma.hpp (thread t = 32w + l, register i: row 16w + l/4 +
// 8((i/2)%2), column 8(i/4) + 2(l%4) + i%2). Small integers: the product is exact, so equality is exact.
TEST(ProbeSuite, EmulatedWgmmaProbesEqualTheHostMatrixProduct) {
  constexpr unsigned threads = 128, rows = 64;
  for (const char* name : {"wgmma m64n64k16 f16 ss swizzle 128B", "wgmma m64n128k16 bf16 rs, B N-major swizzle 128B",
                           "wgmma m64n64k32 e4m3 ss swizzle 64B"}) {
    SCOPED_TRACE(name);
    const probes::WgmmaOperands operands = probes::wgmma_probe_operands(name, 8);
    const unsigned n = operands.n, k_extent = operands.k;
    ASSERT_EQ(operands.a.size(), std::size_t{rows} * k_extent);
    ASSERT_EQ(operands.b.size(), std::size_t{k_extent} * n);
    const probes::ProbeOutput output = emulated(probe_named(name), 8);
    ASSERT_EQ(output.words.size(), std::size_t{threads} * n / 2);
    std::size_t differing = 0, nonzero = 0;
    for (unsigned t = 0; t < threads; ++t)
      for (unsigned i = 0; i < n / 2; ++i) {
        const auto [row, col] = wgmma_accumulator_element(t, i);
        float expected = 0.0f;
        for (unsigned k = 0; k < k_extent; ++k)
          expected += operands.a[std::size_t{row} * k_extent + k] * operands.b[std::size_t{k} * n + col];
        const float got = isa::detail::from_bits<float>(output.words[std::size_t{t} * (n / 2) + i]);
        nonzero += expected != 0.0f ? 1 : 0;
        if (got != expected && differing++ < 5)
          ADD_FAILURE() << "thread " << t << " register " << i << " (D[" << row << "][" << col << "]): " << got
                        << ", host " << expected;
      }
    EXPECT_EQ(differing, 0u);
    EXPECT_GT(nonzero, std::size_t{threads} * n / 4) << "the operands are mostly zero: a weak check";
  }
  EXPECT_THROW(probes::wgmma_probe_operands("ldmatrix.x4", 8), std::invalid_argument);
}

// The emulator against the GPU it models, without one: every probe whose every word the H200 run of 2026-12-04
// found identical (results/h200/2026-12-04/probes.json, seed 0) must still give the GPU's checksum emulated,
// the e4m3 wgmma probe (small integers) included now that the emulator models the e4m3 adder.
TEST(ProbeSuite, EmulatedProbesKeepTheRecordedH200Checksums) {
  std::ifstream in(std::string(FAPROBE_SOURCE_DIR) + "/results/h200/2026-12-04/probes.json");
  ASSERT_TRUE(in) << "the recorded probes";
  const nlohmann::json document = nlohmann::json::parse(in);
  const std::uint64_t seed = document.at("seed").get<std::uint64_t>();
  int compared = 0;
  for (const nlohmann::json& recorded : document.at("probes")) {
    // Identical words only: the conversion probes' NaN payloads differ between the GPU and the emulator and
    // are compared as NaNs, so their checksums differ though the probes pass.
    if (recorded.at("result") != "identical" || !recorded.contains("gpu_checksum") ||
        recorded.at("gpu_checksum") != recorded.at("emulator_checksum"))
      continue;
    const std::string name = recorded.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const probes::ProbeOutput output = emulated(probe_named(name), seed);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", probes::checksum(output));
    EXPECT_EQ(std::string(hex), recorded.at("gpu_checksum").get<std::string>());
    ++compared;
  }
  EXPECT_GE(compared, 38);
}

// The random e4m3 probe under emulation equals the model of Hopper's adder (model/fp8_accumulation.hpp: two
// k-groups of 32 chained) computed here, and differs from an fp32 sum in many places: the probe is where the
// GPU, when lent, confirms or refutes the model bit for bit.
TEST(ProbeSuite, EmulatedRandomE4m3WgmmaFollowsTheAdderModel) {
  constexpr unsigned threads = 128;
  const char* name = "wgmma m64n64k32 e4m3 ss many binades";
  const probes::WgmmaOperands operands = probes::wgmma_probe_operands(name, 8);
  const unsigned n = operands.n, k_extent = operands.k;
  ASSERT_EQ(k_extent, 64u);
  const probes::ProbeOutput output = emulated(probe_named(name), 8);
  ASSERT_EQ(output.words.size(), std::size_t{threads} * n / 2);
  std::size_t differing = 0, unlike_fp32 = 0;
  for (unsigned t = 0; t < threads; ++t)
    for (unsigned i = 0; i < n / 2; ++i) {
      const auto [row, col] = wgmma_accumulator_element(t, i);
      const float model = faprobe::hopper_e4m3_dot(&operands.a[std::size_t{row} * k_extent], 1, &operands.b[col], n, k_extent);
      float fp32 = 0.0f;
      for (unsigned k = 0; k < k_extent; ++k) fp32 += operands.a[std::size_t{row} * k_extent + k] * operands.b[std::size_t{k} * n + col];
      const float got = isa::detail::from_bits<float>(output.words[std::size_t{t} * (n / 2) + i]);
      unlike_fp32 += got != fp32 ? 1 : 0;
      if (got != model && differing++ < 5)
        ADD_FAILURE() << "D[" << row << "][" << col << "]: " << got << ", model " << model;
    }
  EXPECT_EQ(differing, 0u);
  EXPECT_GT(unlike_fp32, std::size_t{threads} * n / 8) << "the operands do not exercise the adder's truncation";
}

// Every word of the mbarrier probe that the ISA fixes: test_wait results around init, expect_tx and
// complete_tx, phase flips and the ping-pong, one elected lane per elect.sync; both warps read the same
// handoff words, and every word is written.
TEST(ProbeSuite, EmulatedMbarrierProbeRecordsWhatTheIsaSays) {
  namespace record = probes::mbarrier_record;
  constexpr unsigned words = probes::mbarrier_probe_words;
  const probes::ProbeOutput output = emulated(probe_named("mbarrier phases, expect_tx and elect.sync"), 9);
  ASSERT_EQ(output.words.size(), std::size_t{probes::mbarrier_probe_threads} * words);
  const std::pair<unsigned, std::uint32_t> fixed[] = {
      {record::fresh_parity0, 0},       {record::fresh_parity1, 1},       {record::elected_full_warp, 1},
      {record::elected_in_mask, 1},     {record::elected_outside_mask, 0}, {record::arrived_tx_pending, 0},
      {record::arrived_parity1, 1},     {record::half_tx_completed, 0},   {record::all_tx_completed, 1},
      {record::next_phase_parity1, 0},  {record::after_wait_parity1, 1},  {record::after_wait_parity0, 0},
      {record::final_full_parity0, 0},  {record::final_full_parity1, 1},  {record::final_empty_parity1, 1},
  };
  for (unsigned t = 0; t < probes::mbarrier_probe_threads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    const auto at = [&](unsigned word) { return output.words[std::size_t{t} * words + word]; };
    for (const auto& [word, value] : fixed) EXPECT_EQ(at(word), value) << "record word " << word;
    EXPECT_EQ(at(record::handoff_value), output.words[std::size_t{t % 32} * words + record::handoff_value]);
    for (unsigned round = 0; round < probes::mbarrier_probe_rounds; ++round) {
      if (t < 32) {
        EXPECT_EQ(at(record::ping_pong_round0 + round), 1u) << "the producer's test of the empty barrier";
      } else {
        EXPECT_NE(at(record::ping_pong_round0 + round), unwritten_word) << "round " << round;
      }
    }
    for (unsigned word = 0; word < words; ++word) EXPECT_NE(at(word), unwritten_word) << "record word " << word;
  }
}

// The alignment probe's words are (offset, address of that byte modulo 1024) per thread: for the base to be
// 1024-byte aligned, as every 128-byte swizzle assumes, each address is its offset modulo 1024, and byte 0
// (thread 0 of each CTA) is at 0. Returns what is wrong, one line each (empty: aligned).
std::vector<std::string> shared_alignment_problems(const probes::ProbeOutput& output) {
  std::vector<std::string> problems;
  if (output.words.empty() || output.words.size() % 2 != 0) problems.push_back("not (offset, address) pairs");
  std::size_t byte_zero = 0;
  for (std::size_t pair = 0; pair + 1 < output.words.size(); pair += 2) {
    const std::uint32_t offset = output.words[pair], address = output.words[pair + 1];
    byte_zero += offset == 0 ? 1 : 0;
    if (address != offset % 1024)
      problems.push_back("word " + std::to_string(pair + 1) + ": byte " + std::to_string(offset) + " at " +
                         std::to_string(address) + " modulo 1024, not " + std::to_string(offset % 1024));
  }
  if (byte_zero < 4)
    problems.push_back("byte 0 asked " + std::to_string(byte_zero) + " times, not once per CTA and launch");
  return problems;
}

// Under the emulator, where the shared memory of each launch is allocated (emu/launch.cpp). This fails while
// that allocation is only 128-byte aligned; the GPU's base is checked against it by EveryProbeMatchesTheGpu.
TEST(ProbeSuite, EmulatedDynamicSharedMemoryStartsOn1024Bytes) {
  const probes::ProbeOutput output = emulated(probe_named("dynamic shared memory 1024B-aligned"), 10);
  EXPECT_EQ(output.words.size(), 2u * 2 * 2 * 64) << "two launches of two CTAs of 64 threads, two words each";
  std::vector<std::string> problems = shared_alignment_problems(output);
  std::string lines;
  for (std::size_t i = 0; i < problems.size() && i < 8; ++i) lines += "\n  " + problems[i];
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems:" << lines;

  // Planted: the words a base 128 bytes past a 1024-byte boundary would give (what a 128-byte aligned
  // allocation can be) are caught, byte 0 included.
  probes::ProbeOutput shifted = output;
  for (std::size_t pair = 0; pair + 1 < shifted.words.size(); pair += 2)
    shifted.words[pair + 1] = (shifted.words[pair] + 128) % 1024;
  problems = shared_alignment_problems(shifted);
  EXPECT_EQ(problems.size(), shifted.words.size() / 2);
  const std::string first = problems.empty() ? "" : problems.front();
  EXPECT_EQ(first, "word 1: byte 0 at 128 modulo 1024, not 0");
}

// On the GPU, on its own (whatever the emulator gives): where nvcc and the driver put the dynamic shared
// memory of a kernel without static shared memory, declared __align__(1024) by the instruction layer.
TEST(ProbeSuite, GpuDynamicSharedMemoryStartsOn1024Bytes) {
  if (faprobe::gpu::devices().empty()) GTEST_SKIP() << "no GPU (" << faprobe::gpu::no_device_reason() << ")";
  const probes::ProbeOutput output = probe_named("dynamic shared memory 1024B-aligned").run(Target::gpu, 10);
  const std::vector<std::string> problems = shared_alignment_problems(output);
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems, the first: " << (problems.empty() ? "" : problems[0]);
}

TEST(ProbeSuite, EveryProbeMatchesTheGpu) {
  const std::vector<faprobe::gpu::DeviceInfo> devices = faprobe::gpu::devices();
  if (devices.empty()) GTEST_SKIP() << "no GPU (" << faprobe::gpu::no_device_reason() << ")";
  for (const probes::Probe& probe : probes::all_probes()) {
    SCOPED_TRACE(probe.name);
    if (!probe.needs_gpu(devices.front().compute_major, devices.front().compute_minor).empty()) continue;
    const probes::ProbeOutput reference = emulated(probe, 7);
    const probes::ProbeOutput on_gpu = probe.run(Target::gpu, 7);
    const probes::Comparison comparison = probes::compare(probe, reference, on_gpu);
    EXPECT_NE(comparison.verdict, probes::Verdict::differs) << comparison.summary();
    if (probe.tolerance.kind == probes::Tolerance::Kind::bits) {
      EXPECT_EQ(comparison.verdict, probes::Verdict::identical) << comparison.summary();
    }
  }
}

}  // namespace
