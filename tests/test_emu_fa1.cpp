// The cuda.fa1 kernel (kernels/cuda/fa1/fa1.cuh) under the CPU emulator, no GPU needed: inputs from
// make_inputs (identical to the device generator's), the output checked by the project's checker against
// the float64 reference over odd shapes (lengths 1, 17, 129, 300; head_dim 64, 128, 256; causal with
// seq_q < seq_k and seq_q > seq_k, whose first rows see no key; GQA and MQA; fp16 and bf16), the LSE
// against a host computation, what the kernel refuses, and planted defects that must be caught while the
// production kernel passes the same case. One timing test reports what an emulated verify costs.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "case_support.hpp"
#include "cuda/attention_args.hpp"
#include "cuda/fa1/fa1_emulated.hpp"
#include "cuda/common/emu/emulator.hpp"
#include "emulator_test_support.hpp"
#include "cuda/launchers.hpp"
#include "flash_kernel_support.hpp"
#include "model/case.hpp"
#include "model/tensor.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {

namespace {

using cuda::fa1::Defect;

using namespace test_support;  // make_case, run_flash_kernel and the shared checks

// The output of fa1 on case c under the emulator, with kDefect planted; the LSE too when lse is given.
template <Defect kDefect = Defect::none>
HostTensor run_fa1(const Case& c, std::vector<float>* lse = nullptr) {
  return run_flash_kernel(
      c,
      [](cuda::AttentionArgs& args) {
        // NaN-filled, so a read of workspace the kernel never wrote shows in the output.
        std::vector<float> workspace(cuda::fa1_workspace_bytes(args) / sizeof(float),
                                     std::numeric_limits<float>::quiet_NaN());
        args.workspace = workspace.data();
        if constexpr (kDefect == Defect::none) {
          cuda::fa1_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args);
        } else {
          cuda::fa1::forward_emulated<kDefect>(args);
        }
      },
      lse);
}

// --- The kernel against the reference over odd shapes. ---

std::vector<Case> odd_shapes() {
  const Mask none = Mask::none, causal = Mask::causal;
  const DType fp16 = DType::fp16, bf16 = DType::bf16;
  return {
      make_case(1, 1, 1, 1, 1, 64, fp16, none),
      make_case(1, 2, 2, 1, 1, 128, bf16, causal),
      make_case(1, 1, 1, 17, 17, 128, bf16, causal),
      make_case(2, 2, 2, 17, 17, 64, fp16, none),
      make_case(1, 2, 2, 129, 129, 64, fp16, causal),      // 3 query blocks, 2 key blocks
      make_case(1, 1, 1, 129, 129, 128, bf16, none),
      make_case(1, 1, 1, 129, 129, 256, fp16, causal),     // d 256: 3 key blocks of 64
      make_case(1, 1, 1, 17, 129, 64, bf16, causal),       // seq_q < seq_k
      make_case(1, 1, 1, 1, 300, 128, fp16, causal),       // one row, 3 key blocks
      make_case(1, 1, 1, 129, 17, 128, fp16, causal),      // seq_q > seq_k: 112 rows see no key
      make_case(1, 1, 1, 300, 129, 64, bf16, causal),      // seq_q > seq_k across query and key blocks
      make_case(1, 4, 2, 129, 129, 64, fp16, causal),      // GQA 2:1
      make_case(1, 4, 1, 17, 200, 128, bf16, none),        // MQA
      make_case(1, 1, 1, 300, 300, 64, fp16, causal),      // diagonal blocks skipped and masked
  };
}

class Fa1OddShapes : public testing::TestWithParam<Case> {};

TEST_P(Fa1OddShapes, MatchesReference) {
  const Case& c = GetParam();
  ASSERT_EQ(cuda::fa1_supports(c.dtype, c.head_dim), "");
  const HostTensor output = run_fa1(c);
  const VerifyResult result = check_output(c, GeneratedInputs(c), output);
  EXPECT_TRUE(result.passed) << c.label() << ": " << describe(result);
  EXPECT_EQ(result.rows_checked, c.batch * c.heads * c.seq_q) << "small cases are checked on every row";
}

INSTANTIATE_TEST_SUITE_P(Emulated, Fa1OddShapes, testing::ValuesIn(odd_shapes()), case_name);

// Rows that see no key are exactly zero (not merely within tolerance), and never NaN.
TEST(Fa1, RowsWithoutKeysAreZeros) {
  const Case c = make_case(1, 2, 2, 129, 17, 64, DType::fp16, Mask::causal);
  expect_keyless_rows_zero(c, run_fa1(c));
}

// --- The LSE against a host computation in double: ln Σ_j exp(scale · q·k_j) over the keys a row sees;
// -inf for a row that sees none. ---
TEST(Fa1, LogSumExpMatchesHost) {
  const Case c = make_case(2, 2, 1, 150, 140, 64, DType::bf16, Mask::causal);  // 10 keyless rows, 2 key blocks
  std::vector<float> lse;
  run_fa1(c, &lse);
  const double worst = worst_lse_error(c, lse);
  // Scores are exact products of bf16 inputs summed in fp32 (|s| < ~10); ex2.approx and fp32 sums add
  // a few 1e-6 relative: 1e-4 absolute is ample, and far below any real error (a dropped key, a wrong scale).
  EXPECT_LT(worst, 1e-4);
}

// --- Support, shape and workspace. ---
TEST(Fa1, RefusesWhatIsNotInstantiatedWithAReason) {
  expect_refuses_with_reasons(cuda::fa1_supports, cuda::fa1_forward, 80);
  EXPECT_NE(cuda::fa1_supports(DType::fp32, 64).find("fa1"), std::string::npos) << "the reason names the kernel";
}

TEST(Fa1, ShapeAndWorkspace) {
  for (const std::int64_t d : {64, 128, 256}) {
    const cuda::KernelShape shape = cuda::fa1_shape(DType::fp16, d);
    EXPECT_EQ(shape.block_q, 64);
    EXPECT_EQ(shape.threads, 128);
    EXPECT_GT(shape.block_k, 0);
    EXPECT_LE(shape.shared_bytes, std::size_t{163} * 1024) << "over sm_80's per-block limit at d " << d;
    // Q (two buffers), K and V tiles of 16-byte padded rows.
    EXPECT_EQ(shape.shared_bytes, std::size_t(2 * 64 + 2 * shape.block_k) * std::size_t(d + 8) * 2);
  }
  cuda::AttentionArgs args;
  args.batch = 2;
  args.heads = 3;
  args.seq_q = 5;
  args.head_dim = 64;
  EXPECT_EQ(cuda::fa1_workspace_bytes(args), std::size_t{2 * 3 * 5 * (64 + 2) * 4});
}

// --- Planted defects: each is caught where it matters, while the production kernel passes the case. ---

// Without the e^{m−m_new} rescale of O, a row is wrong as soon as its max grows in a later key block:
// seq_k 300 is 3 key blocks of 128. With one key block (seq_k 100) there is nothing to rescale.
TEST(Fa1Planted, NoRescaleIsCaught) {
  expect_defect_caught("no_rescale", make_case(1, 2, 2, 100, 300, 64, DType::fp16, Mask::none),
                       make_case(1, 2, 2, 100, 100, 64, DType::fp16, Mask::none), "one key block needs no rescale",
                       [](const Case& c) { return run_fa1(c); },
                       [](const Case& c) { return run_fa1<Defect::no_rescale>(c); });
}

// Without the barrier between the cp.async tile loads and the ldmatrix reads, a warp reads rows that other
// threads copied with no barrier in between: the race detector reports the ldmatrix and the cp.async with
// both threads and the shared byte. With the checks off, under the default schedule those rows are still
// the 0xFF poison (a copy lands only at its thread's wait_group), NaN as fp16 and bf16, and the checker
// reports a mismatch.
TEST(Fa1Planted, MissingBarrierIsReportedAsARace) {
  const Case c = make_case(1, 1, 1, 129, 129, 64, DType::bf16, Mask::none);
  const std::string message = emu::testing::launch_error([&] { (void)run_fa1<Defect::missing_barrier>(c); });
  for (const char* part : {"kernel 'fa1_bf16_hdim64'", "race on shared memory byte offset", "ldmatrix by this thread",
                           "cp.async by thread"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  std::printf("missing_barrier: %s\n", message.c_str());
  const emu::ScopedChecks off(false);
  HostTensor bad_output;
  ASSERT_NO_THROW(bad_output = run_fa1<Defect::missing_barrier>(c));
  const VerifyResult bad = check_output(c, GeneratedInputs(c), bad_output);
  EXPECT_FALSE(bad.passed) << "missing_barrier not caught with the checks off: " << describe(bad);
}

// --- What an emulated verify costs (reported, not asserted): seq 1024, d 128, batch 1, heads 2, fp16. ---
// Seeded schedules (shuffled fibers, random switches, shuffled CTAs) give the same output, bit for bit.
TEST(Fa1Schedules, VariedSchedulesDoNotChangeTheOutput) {
  expect_same_output_under_schedules(make_case(2, 4, 2, 77, 130, 64, DType::fp16, Mask::causal), [](const Case& c) { return run_fa1(c); });
}

TEST(Fa1Timing, EmulatedVerifySeq1024) {
  report_emulated_cost("fa1", make_case(1, 2, 2, 1024, 1024, 128, DType::fp16, Mask::none),
                       [](const Case& c) { return run_fa1(c); });
}

}  // namespace
}  // namespace faprobe
