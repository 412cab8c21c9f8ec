// The instruction probe suite: every probe of warp_probes.cuh, matrix_probes.cuh, conversion_probes.cuh,
// tma_probes.cuh and hopper_probes.cuh as a named, seeded run on either target, so that the emulator can be
// checked against the hardware (docs/DESIGN.md, "How the emulator itself is checked": on a GPU, each probe
// against the hardware, bit for bit or within the ISA's error bound). CI checks each probe body under the
// emulator against host computations of the ISA (tests/test_emulator*.cpp, tests/test_probe_suite.cpp);
// this suite checks the emulator against the GPU, so it holds no host model of any instruction: the
// emulator's output is the reference and the GPU's the candidate.
//
// A probe draws deterministic inputs from a counter-based generator keyed by (seed, probe), runs its kernel
// body on Target::emulator (emu::launch) or Target::gpu (the launchers of probe_launch_gpu.hpp, CUDA builds
// only), and returns its output as 32-bit words. compare() says identical, within tolerance or differs. A
// probe of instructions a GPU lacks (TMA, wgmma, stmatrix, mbarrier transactions below sm_90) names the
// compute capability it needs (min_sm), and whoever runs the suite on a GPU skips it there with that reason.
// Tolerances exist only where the ISA leaves the result open: ex2.approx.f32 and ex2.approx.ftz.f32 (2 ulp,
// PTX ISA) and mma.sync on random inputs (accumulation order and precision unspecified); every other probe is
// bit for bit, the MMA and wgmma ones on small integers whose sums are exact in any order. An ulp tolerance
// is a relative error, so it never covers a zero or a subnormal result (between +0 and a subnormal lie only a
// few ulps, yet that is the whole difference .ftz makes): those compare bit for bit, and so do the words a
// probe marks as fixed by the ISA (ex2.approx.ftz of ±0, subnormals, ±inf and NaN). NaN results compare as
// NaN whatever their payload (PTX ISA, Floating-Point Instructions: single-precision instructions return an
// unspecified NaN).
//
// Costs: 50 probes, each a few launches of one to eight CTAs over a few thousand words; the whole suite
// takes well under a second on either target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/launchers.hpp"
#include "cuda/probes/matrix_probes.cuh"

namespace faprobe::cuda::probes {

// How a probe's output words are read when compared and printed.
enum class Element {
  u32,     // raw bits (data movement, votes, shuffles)
  f32,     // a float
  f16x2,   // two binary16 values, the first in bits 0-15 (a single one: the high half is 0)
  bf16x2,  // two bfloat16 values, likewise
};
std::string to_string(Element element);

// What difference between the emulator's and the GPU's word is allowed.
struct Tolerance {
  enum class Kind {
    bits,           // identical bits (NaN matches NaN)
    ulps,           // floats at most `ulps` units in the last place apart (ex2.approx), both normal
    of_magnitude,   // |difference| <= allowed[i], which the probe derives from its inputs (mma.sync)
  };
  Kind kind = Kind::bits;
  unsigned ulps = 0;
  std::string description;  // one line, with its source
};

struct ProbeOutput {
  std::vector<std::uint32_t> words;
  // The allowed difference per word, from the inputs alone (the same on both targets): for
  // Tolerance::Kind::of_magnitude the allowed |difference| (required); for Tolerance::Kind::ulps the allowed
  // ulps, 0 where the ISA fixes the result (optional: empty means the tolerance's ulps for every word).
  std::vector<double> allowed;
};

struct Probe {
  std::string name;  // "shfl.sync.idx width 16", "mma.m16n8k16 f16 small-int", ...
  Element element = Element::u32;
  Tolerance tolerance;
  // Runs the probe with inputs drawn from seed. Target::gpu needs a CUDA build and a device (gpu::devices()).
  // Throws emu::EmulationError, gpu::CudaError or std::logic_error (Target::gpu without CUDA).
  std::function<ProbeOutput(Target target, std::uint64_t seed)> run;
  // The lowest compute capability, as major · 10 + minor, whose GPU has the probed instructions (90: TMA,
  // wgmma, stmatrix, mbarrier transactions, elect.sync: sm_90); 0 for every GPU. A GPU below it is not
  // asked: the probe is skipped there with needs_gpu().
  int min_sm = 0;
  // "needs sm_90" when a GPU of compute capability major.minor cannot run the probe, else "".
  std::string needs_gpu(int compute_major, int compute_minor) const;
};

// Every probe, in a fixed order: warp and CTA collectives, where the dynamic shared memory starts, mma.sync,
// ldmatrix, cp.async / 16-byte loads / ex2.approx / ex2.approx.ftz, conversions, tensor copies (TMA), wgmma,
// stmatrix, mbarrier and elect.sync (the last seven min_sm 90).
const std::vector<Probe>& all_probes();

enum class Verdict { identical, within_tolerance, differs };
std::string to_string(Verdict verdict);  // "identical", "within tolerance", "differs"

struct Comparison {
  Verdict verdict = Verdict::identical;
  std::size_t elements = 0;          // words compared
  std::size_t differing = 0;         // words outside the tolerance (for bits: not identical)
  std::size_t inexact = 0;           // words inside the tolerance but not identical
  std::size_t nan_pairs = 0;         // words where both are NaN (matched whatever the payload)
  double max_abs_diff = 0.0;         // over the float words that differ with both values finite
  double max_ulps = 0.0;             // likewise, in ulps (consecutive floats are 1 apart)
  std::size_t first_difference = 0;  // the first differing word (verdict differs)
  std::string reference_value;       // that word as the reference (emulator) has it, printed
  std::string candidate_value;       // and as the candidate (GPU) has it
  std::string summary() const;       // "identical", "max diff 2.4e-07 (1 ulp) within tolerance", "DIFFERS at ..."
};

// The candidate's words against the reference's under the probe's element type and tolerance (with the
// reference's per-word allowance, if any). Outputs of different lengths differ at the shorter length.
Comparison compare(const Probe& probe, const ProbeOutput& reference, const ProbeOutput& candidate);

// The mma.sync probe as the suite runs it (integer_inputs: small integers, exact; otherwise random inputs
// with a tolerance), optionally with a planted fragment-gathering bug: lane l gathers the fragments of lane
// source_lane[l] (32 entries; empty: every lane its own), which must make the output differ.
ProbeOutput run_mma(MmaProbeType type, bool integer_inputs, Target target, std::uint64_t seed,
                    const std::vector<std::uint32_t>& source_lane = {});

// The operands a wgmma probe (named as in all_probes()) draws for seed, as values: a is 64 × k ([m][k]), b is
// k × n ([k][n]). The probe's output is D = A·B in thread order: word t · n/2 + i is thread t's accumulator i,
// which holds D[16(t/32) + (t%32)/4 + 8((i/2)%2)][8(i/4) + 2(t%4) + i%2] (isa_wgmma.hpp), so a test can compare
// it with a product computed on the host. Throws std::invalid_argument for any other name.
struct WgmmaOperands {
  unsigned n = 0;
  unsigned k = 0;
  std::vector<float> a;
  std::vector<float> b;
};
WgmmaOperands wgmma_probe_operands(const std::string& probe_name, std::uint64_t seed);

// The inputs of the ex2.approx.ftz.f32 probe for seed, as float bits: output word i is ex2.approx.ftz of
// input word i. The first ones are the same for every seed: ±0, subnormals of either sign, ±inf, NaNs, x
// whose 2^x is subnormal (-126.5, -130, -140, -148.9) or below the smallest subnormal (-149.5, -150.5, -200),
// 127.9 and 128.5 at the top; random ones follow (2^x in [2^-32, 2^32), subnormals, flushed and normal results).
std::vector<std::uint32_t> ex2_ftz_probe_inputs(std::uint64_t seed);

// FNV-1a over the words: lets two machines without a GPU compare their emulated outputs.
std::uint32_t checksum(const ProbeOutput& output);

}  // namespace faprobe::cuda::probes
