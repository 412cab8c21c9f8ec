// Small CUDA kernels on the instruction layer, run under the emulator: the device input generator
// (cuda/common/fill_inputs.cuh) must reproduce the host's inputs bit for bit in every dtype and input
// distribution (fp8_e4m3's codes, paged pools' NaN padding and incoherent processing's rotated rows included),
// and cuda.naive's softmax (cuda/naive/softmax.cuh) must match
// a float64 softmax over odd shapes, causal or not, in every output dtype, while its planted defects (a
// missing barrier, a causal off-by-one) are caught on the same cases.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/launchers.hpp"
#include "cuda/naive/softmax.cuh"
#include "cuda/naive/softmax_launch.hpp"
#include "case_support.hpp"
#include "emulator_test_support.hpp"
#include "model/case.hpp"
#include "model/dtype.hpp"
#include "model/fp8.hpp"
#include "model/incoherent.hpp"
#include "model/inputs.hpp"
#include "model/kv_layout.hpp"
#include "model/tensor.hpp"

namespace faprobe::cuda {
namespace {

using emu::testing::within_deadline;

const Launch emulator{Target::emulator, nullptr};

// ---------------------------------------------------------------------------------------------------------
// The device input generator.

// Element counts around the emulated grid (4 CTAs of 256 threads): one, less than a warp, one past a whole
// CTA, and several grid strides with odd remainders.
const std::int64_t fill_counts[] = {1, 31, 257, 1023, 4099, 5003};

TEST(EmuFillInput, BitIdenticalToHostInputs) {
  // In both input distributions: the outliers' extra draw and their fp8 scale (2^-2) on both sides.
  for (const InputDistribution distribution : {InputDistribution::normal, InputDistribution::outliers}) {
    for (const DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
      for (const std::int64_t count : fill_counts) {
        for (const TensorId tensor : {TensorId::q, TensorId::v}) {
          SCOPED_TRACE(std::string(to_string(dtype)) + " count " + std::to_string(count) + " tensor " +
                       std::to_string(int(tensor)) + " inputs " + std::string(to_string(distribution)));
          const std::uint64_t seed = 11;
          HostTensor host(dtype, 1, count, 1, 1, fp8_tensor_scale(tensor, distribution));
          faprobe::fill_input(host, seed, tensor, distribution);
          const std::size_t bytes = std::size_t(count) * dtype_bytes(dtype);
          // 0xA5 everywhere first, so an element the kernel skips cannot match by accident of a zero.
          std::vector<unsigned char> device(bytes, 0xA5);
          within_deadline([&] {
            fill_input(emulator, device.data(), dtype, std::size_t(count), tensor_key(seed, tensor), distribution);
          });
          const auto* expected = host.data<unsigned char>();
          const std::size_t element = dtype_bytes(dtype);
          std::size_t mismatches = 0;
          for (std::size_t i = 0; i < std::size_t(count); ++i) {
            if (std::memcmp(device.data() + i * element, expected + i * element, element) != 0) {
              if (mismatches++ < 3) ADD_FAILURE() << "element " << i << " differs from the host's bits";
            }
          }
          EXPECT_EQ(mismatches, 0u);
        }
      }
    }
  }
}

TEST(EmuFillInput, OutliersDifferFromNormalOnlyWhereTheGeneratorSaysSo) {
  // Guards the test above against a fill that ignores the distribution (both sides would still agree): among
  // 5003 fp32 elements about 5 are outliers, exactly those the generator marks, each 10 times its normal value.
  const std::size_t count = 5003;
  std::vector<float> normal(count), outliers(count);
  within_deadline([&] {
    fill_input(emulator, normal.data(), DType::fp32, count, tensor_key(3, TensorId::k), InputDistribution::normal);
    fill_input(emulator, outliers.data(), DType::fp32, count, tensor_key(3, TensorId::k), InputDistribution::outliers);
  });
  std::size_t marked = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const bool outlier = is_outlier(tensor_key(3, TensorId::k), i);
    marked += outlier ? 1 : 0;
    ASSERT_EQ(outliers[i], outlier ? 10.0f * normal[i] : normal[i]) << "element " << i;
  }
  EXPECT_GE(marked, 1u);
}

TEST(EmuFillInput, RotatedRowsBitIdenticalToHostInputs) {
  // Incoherent processing's fill of Q and K (Walsh–Hadamard with random signs, one rounding to e4m3) against
  // make_inputs(c, QkTransform::incoherent), which the checker's rows share: every head_dim it takes, both
  // distributions.
  for (const InputDistribution distribution : {InputDistribution::normal, InputDistribution::outliers}) {
    for (const std::int64_t head_dim : {32, 64, 128, 256}) {
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " inputs " + std::string(to_string(distribution)));
      Case c = test_support::make_case(1, 3, 1, 5, 7, head_dim, DType::fp8_e4m3, Mask::none);
      c.seed = 9;
      c.inputs = distribution;
      const AttentionInputs host = make_inputs(c, QkTransform::incoherent);
      for (const auto& [tensor, id] : {std::pair{&host.q, TensorId::q}, std::pair{&host.k, TensorId::k}}) {
        std::vector<unsigned char> device(std::size_t(tensor->elements()), 0xA5);
        within_deadline([&] {
          fill_rotated_input(emulator, device.data(), device.size(), int(head_dim), tensor_key(c.seed, id),
                             distribution, incoherent_signs_key(c.seed));
        });
        EXPECT_EQ(std::memcmp(device.data(), tensor->data<unsigned char>(), device.size()), 0);
      }
    }
  }
  std::vector<unsigned char> buffer(96);
  EXPECT_THROW(fill_rotated_input(emulator, buffer.data(), buffer.size(), 96, 1, InputDistribution::normal, 2),
               std::invalid_argument);  // not a power of two
}

TEST(EmuFillInput, DifferentKeysGiveDifferentTensors) {
  // Guards the test above against a generator that ignores its key (both sides would still agree).
  std::vector<float> a(64), b(64);
  within_deadline([&] {
    fill_input(emulator, a.data(), DType::fp32, a.size(), tensor_key(1, TensorId::q), InputDistribution::normal);
    fill_input(emulator, b.data(), DType::fp32, b.size(), tensor_key(1, TensorId::k), InputDistribution::normal);
  });
  EXPECT_NE(a, b);
}

TEST(EmuFillInput, PagedPoolsBitIdenticalToHostInputsPaddingIncluded) {
  // A paged K of 3 entries whose last pages are partly padding (NaN: 0x7F in fp8_e4m3), as the shell fills it.
  Case c;
  c.mode = Mode::decode;
  c.seq_q = 1;
  c.batch = 3;
  c.seqlens = {40, 17, 33};
  c.seq_k = 40;
  c.heads = c.kv_heads = 2;
  c.head_dim = 8;
  c.page_size = 16;
  c.seed = 5;
  const KvLayout layout = make_kv_layout(c);
  const KvLayout::PageContents contents = layout.page_contents();
  PagedFill paged;
  paged.pages = contents.first_row.size();
  paged.row_width = std::size_t(c.kv_heads * c.head_dim);
  paged.page_size = int(layout.page_size);
  paged.page_first_row = contents.first_row.data();
  paged.page_valid_rows = contents.valid_rows.data();
  for (const InputDistribution distribution : {InputDistribution::normal, InputDistribution::outliers}) {
    for (const DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " inputs " + std::string(to_string(distribution)));
      c.dtype = dtype;
      c.inputs = distribution;
      HostTensor host(dtype, 1, layout.rows, c.kv_heads, c.head_dim, c.fp8_descale(TensorId::k));
      faprobe::fill_kv_input(host, layout, c.seed, TensorId::k, distribution);
      const std::size_t bytes = std::size_t(host.elements()) * dtype_bytes(dtype);
      std::vector<unsigned char> device(bytes, 0xA5);
      within_deadline([&] {
        fill_paged_input(emulator, device.data(), dtype, tensor_key(c.seed, TensorId::k), distribution, paged);
      });
      EXPECT_EQ(std::memcmp(device.data(), host.data<unsigned char>(), bytes), 0);
    }
  }
}

TEST(EmuFillInput, ZeroCountIsANoOp) {
  std::vector<unsigned char> buffer(16, 0x5A);
  fill_input(emulator, nullptr, DType::fp32, 0, 1, InputDistribution::normal);
  fill_input(emulator, buffer.data(), DType::fp8_e4m3, 0, 1, InputDistribution::outliers);
  EXPECT_EQ(buffer, std::vector<unsigned char>(16, 0x5A));
}

#if !defined(FAPROBE_WITH_CUDA)
TEST(EmuKernels, GpuTargetWithoutCudaSaysSo) {
  float value = 0;
  EXPECT_THROW(fill_input({Target::gpu, nullptr}, &value, DType::fp32, 1, 1, InputDistribution::normal),
               std::runtime_error);
  SoftmaxArgs args;
  args.scores = &value;
  args.probs = &value;
  EXPECT_THROW(naive_softmax({Target::gpu, nullptr}, args), std::runtime_error);
}
#endif

// ---------------------------------------------------------------------------------------------------------
// cuda.naive's softmax.

// Scores like Q·Kᵀ at head_dim 72 with unit-normal inputs (standard deviation sqrt(72)), doubled so that
// rows are peaked: scale·s has a standard deviation of 2, probabilities span ~1e-8 to ~0.5.
std::vector<float> random_scores(std::size_t count, std::uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> score(0.0f, 2.0f * std::sqrt(72.0f));
  std::vector<float> scores(count);
  for (float& s : scores) s = score(random);
  return scores;
}

// Written from docs/DESIGN.md ("A case"), not from the kernel: query row i of a seq_q x seq_k block sees key j
// when j <= i + seq_k - seq_q; a row that sees no key is all zeros.
std::vector<double> reference_softmax(const std::vector<float>& scores, const SoftmaxArgs& args) {
  std::vector<double> probs(scores.size(), 0.0);
  for (std::int64_t row = 0; row < args.batch_heads * args.seq_q; ++row) {
    const std::int64_t query = row % args.seq_q;
    const auto sees = [&](std::int64_t key) { return !args.causal || key <= query + args.seq_k - args.seq_q; };
    const std::size_t start = std::size_t(row * args.seq_k);
    double row_max = -INFINITY;
    for (std::int64_t key = 0; key < args.seq_k; ++key)
      if (sees(key)) row_max = std::max(row_max, double(args.scale) * scores[start + key]);
    if (row_max == -INFINITY) continue;
    double row_sum = 0;
    for (std::int64_t key = 0; key < args.seq_k; ++key)
      if (sees(key)) row_sum += std::exp(double(args.scale) * scores[start + key] - row_max);
    for (std::int64_t key = 0; key < args.seq_k; ++key)
      if (sees(key)) probs[start + key] = std::exp(double(args.scale) * scores[start + key] - row_max) / row_sum;
  }
  return probs;
}

// |got - expected| <= relative·|expected| + absolute, per output dtype.
// fp32: the kernel's own error. Per probability: s·scale_log2 and t − max each round once (relative 2^-24
// of |t| ≤ ~40, i.e. ~2.4e-6 absolute in the exponent, ~1.7e-6 relative after 2^x), ex2.approx adds ~2 ulp
// (2.4e-7), the fp32 row sum ≤ ~25 roundings (16 items per thread sequentially, then two 5-level
// butterflies: 1.5e-6), the final multiply one more: ~4e-6 in all, so 1e-5 relative. The absolute 1e-12
// only covers outputs near fp32's underflow (none expected here).
// fp16 / bf16: that, plus the rounding of the result to the output type, half an ulp: 2^-11 (fp16) and
// 2^-8 (bf16) relative; fp16 results below its normal range (6.1e-5) are spaced 2^-24, so half a spacing,
// 2^-25, absolute.
struct Tolerance {
  double relative, absolute;
};
Tolerance tolerance_for(DType dtype) {
  constexpr double fp32_relative = 1e-5;
  switch (dtype) {
    case DType::fp16: return {fp32_relative + std::ldexp(1.0, -11), std::ldexp(1.0, -25)};
    case DType::bf16: return {fp32_relative + std::ldexp(1.0, -8), 1e-12};
    default: return {fp32_relative, 1e-12};
  }
}

// The emulated output (host memory in the dtype) as doubles.
std::vector<double> output_values(const std::vector<unsigned char>& probs, DType dtype, std::size_t count) {
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t bits = 0;
    float value = 0;
    if (dtype == DType::fp32) {
      std::memcpy(&value, probs.data() + i * sizeof value, sizeof value);
    } else {
      std::memcpy(&bits, probs.data() + i * sizeof bits, sizeof bits);
      value = dtype == DType::fp16 ? float(Eigen::numext::bit_cast<Eigen::half>(bits))
                                   : float(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
    }
    values[i] = value;
  }
  return values;
}

struct Comparison {
  std::size_t mismatches = 0;
  std::size_t nans = 0;
  std::string first;  // where the first mismatch is, and its values
};
Comparison compare(const std::vector<double>& got, const std::vector<double>& expected, const SoftmaxArgs& args) {
  const Tolerance tolerance = tolerance_for(args.dtype);
  Comparison result;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) ++result.nans;
    if (!(std::abs(got[i] - expected[i]) <= tolerance.relative * std::abs(expected[i]) + tolerance.absolute)) {
      if (result.mismatches++ == 0) {
        std::ostringstream where;
        where << "row " << i / std::size_t(args.seq_k) << " key " << i % std::size_t(args.seq_k)
              << std::setprecision(9) << ": got " << got[i] << ", expected " << expected[i];
        result.first = where.str();
      }
    }
  }
  return result;
}

SoftmaxArgs softmax_args(std::int64_t batch_heads, std::int64_t seq_q, std::int64_t seq_k, bool causal, DType dtype) {
  SoftmaxArgs args;
  args.dtype = dtype;
  args.batch_heads = batch_heads;
  args.seq_q = seq_q;
  args.seq_k = seq_k;
  args.causal = causal;
  args.scale = 1.0f / std::sqrt(72.0f);
  return args;
}

std::string describe(const SoftmaxArgs& args) {
  return "batch_heads " + std::to_string(args.batch_heads) + " seq_q " + std::to_string(args.seq_q) + " seq_k " +
         std::to_string(args.seq_k) + (args.causal ? " causal " : " ") + std::string(to_string(args.dtype));
}

// Runs run(args) over fresh scores and a 0xFF-filled output (a NaN in every dtype), compares with the
// float64 softmax.
template <class Run>
Comparison run_and_compare(SoftmaxArgs args, Run run) {
  const std::size_t count = std::size_t(args.batch_heads * args.seq_q * args.seq_k);
  const std::vector<float> scores = random_scores(count, std::uint32_t(args.seq_q * 7919 + args.seq_k));
  std::vector<unsigned char> probs(count * dtype_bytes(args.dtype), 0xFF);
  args.scores = scores.data();
  args.probs = probs.data();
  within_deadline([&] { run(args); });
  return compare(output_values(probs, args.dtype, count), reference_softmax(scores, args), args);
}

Comparison run_production(const SoftmaxArgs& args) {
  return run_and_compare(args, [](const SoftmaxArgs& a) { naive_softmax(emulator, a); });
}
Comparison run_with_defect(const SoftmaxArgs& args, naive::SoftmaxDefect defect) {
  return run_and_compare(args,
                         [defect](const SoftmaxArgs& a) { naive::naive_softmax_emulated_with_defect(a, defect); });
}

const std::int64_t odd_lengths[] = {1, 17, 129, 1000};

// Every (seq_q, seq_k) pair of odd lengths, causal and not: seq_q > seq_k gives causal rows that see no key
// (they must be zeros), seq_k = 1000 needs two warps per row (the block-level reduction). Two heads, so the
// row-to-query mapping restarts (one at seq_q = 1000, to keep the emulation short). fp32 over the whole
// grid; fp16 and bf16 where seq_q ≠ seq_k both ways, with two warps per row and with rows that see no key.
TEST(EmuNaiveSoftmax, MatchesFloat64OverOddShapes) {
  for (const std::int64_t seq_q : odd_lengths) {
    for (const std::int64_t seq_k : odd_lengths) {
      for (const bool causal : {false, true}) {
        std::vector<DType> dtypes = {DType::fp32};
        if ((seq_q == 17 && seq_k == 1000) || (seq_q == 129 && seq_k == 17)) {
          dtypes.push_back(DType::fp16);
          dtypes.push_back(DType::bf16);
        }
        for (const DType dtype : dtypes) {
          const SoftmaxArgs args = softmax_args(seq_q == 1000 ? 1 : 2, seq_q, seq_k, causal, dtype);
          const Comparison result = run_production(args);
          EXPECT_EQ(result.mismatches, 0u) << describe(args) << ": " << result.first;
        }
      }
    }
  }
}

// The launch shape's edges: exactly 16384 keys (the cached variant at 1024 threads) and one more (the
// streamed variant, 512 threads, several unrolled steps with a ragged tail), causal and not.
TEST(EmuNaiveSoftmax, MatchesFloat64AtTheVariantBoundary) {
  EXPECT_TRUE(naive::softmax_launch_shape(4, 16384, 8).cached);
  EXPECT_EQ(naive::softmax_launch_shape(4, 16384, 8).threads, 1024u);
  EXPECT_FALSE(naive::softmax_launch_shape(4, 16385, 8).cached);
  for (const std::int64_t seq_k : {std::int64_t{16384}, std::int64_t{16385 + 4096 + 33}}) {
    for (const bool causal : {false, true}) {
      const SoftmaxArgs args = softmax_args(1, 3, seq_k, causal, causal ? DType::bf16 : DType::fp32);
      const Comparison result = run_production(args);
      EXPECT_EQ(result.mismatches, 0u) << describe(args) << ": " << result.first;
    }
  }
}

// The streamed variant's body over odd shapes with a small CTA (2 warps, so 512 keys per unrolled step
// and seq_k = 1000 takes two steps; seq_q = 129 > seq_k = 17 has causal rows that see no key), launched
// directly: naive_softmax only picks it beyond 16384 keys.
TEST(EmuNaiveSoftmax, StreamedVariantMatchesFloat64OverOddShapes) {
  for (const std::int64_t seq_q : {std::int64_t{1}, std::int64_t{17}, std::int64_t{129}}) {
    for (const std::int64_t seq_k : {std::int64_t{17}, std::int64_t{1000}}) {
      for (const bool causal : {false, true}) {
        const SoftmaxArgs args = softmax_args(2, seq_q, seq_k, causal, DType::fp32);
        const Comparison result = run_and_compare(args, [](const SoftmaxArgs& a) {
          naive::SoftmaxParams params;
          params.rows = a.batch_heads * a.seq_q;
          params.seq_q = a.seq_q;
          params.seq_k = a.seq_k;
          params.causal = a.causal;
          params.scale_log2 = static_cast<float>(double{a.scale} * 1.4426950408889634);
          const std::size_t count = std::size_t(params.rows * a.seq_k);
          const GlobalSpan<const float> scores(a.scores, count, "scores");
          const GlobalSpan<float> probs(static_cast<float*>(a.probs), count, "probs");
          emu::launch({"softmax_streamed", {3}, {64}, naive::softmax_shared_bytes},
                      [&] { naive::softmax_rows_streamed<isa::Float>(params, scores, probs); });
        });
        EXPECT_EQ(result.mismatches, 0u) << describe(args) << " (streamed, 64 threads): " << result.first;
      }
    }
  }
}

TEST(EmuNaiveSoftmax, RejectsBadArguments) {
  std::vector<float> scores(4), probs(4);
  SoftmaxArgs args = softmax_args(1, 2, 2, false, DType::fp8_e4m3);
  args.scores = scores.data();
  args.probs = probs.data();
  EXPECT_THROW(naive_softmax(emulator, args), std::invalid_argument);
  args.dtype = DType::fp32;
  args.seq_k = 0;
  EXPECT_THROW(naive_softmax(emulator, args), std::invalid_argument);
}

// A missing barrier between the warps' partial writes and reads: with two warps per row (seq_k = 1000) a
// warp reads the other's partial with nothing ordering the two, which the race detector reports (both
// threads, the byte). With the checks off, the first warp reads the partial before it is written, i.e. the
// 0xFF fill of shared memory, a NaN; the row sum turns NaN and so does the row.
TEST(EmuNaiveSoftmax, PlantedMissingBarrierIsCaught) {
  const SoftmaxArgs args = softmax_args(2, 17, 1000, false, DType::fp32);
  ASSERT_EQ(run_production(args).mismatches, 0u);
  const std::string message =
      emu::testing::launch_error([&] { (void)run_with_defect(args, naive::SoftmaxDefect::missing_barrier); });
  for (const char* part : {"kernel 'naive_softmax", "race on shared memory byte offset", "a shared-memory store",
                           "a shared-memory load"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  const emu::ScopedChecks off(false);
  const Comparison damaged = run_with_defect(args, naive::SoftmaxDefect::missing_barrier);
  EXPECT_GT(damaged.mismatches, 0u);
  EXPECT_GT(damaged.nans, 0u);
  // With one warp per row there is no cross-warp step, so the same defect cannot show: this is the
  // defect being caught, not a different build.
  EXPECT_EQ(run_with_defect(softmax_args(2, 17, 129, false, DType::fp32), naive::SoftmaxDefect::missing_barrier)
                .mismatches,
            0u);
}

// Seeing one key too many: caught on square and rectangular causal blocks, harmless without the mask.
TEST(EmuNaiveSoftmax, PlantedCausalOffByOneIsCaught) {
  for (const auto& [seq_q, seq_k] : {std::pair<std::int64_t, std::int64_t>{17, 17}, {129, 1000}, {1000, 17}}) {
    const SoftmaxArgs args = softmax_args(2, seq_q, seq_k, true, DType::fp16);
    ASSERT_EQ(run_production(args).mismatches, 0u) << describe(args);
    EXPECT_GT(run_with_defect(args, naive::SoftmaxDefect::causal_off_by_one).mismatches, 0u) << describe(args);
  }
  EXPECT_EQ(run_with_defect(softmax_args(2, 17, 129, false, DType::fp32), naive::SoftmaxDefect::causal_off_by_one)
                .mismatches,
            0u);
}

}  // namespace
}  // namespace faprobe::cuda
