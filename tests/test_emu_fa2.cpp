// The cuda.fa2 kernel (kernels/cuda/fa2/fa2.cuh) under the CPU emulator, no GPU needed: inputs from
// make_inputs (identical to the device generator's), the output checked by the project's checker against
// the float64 reference over odd shapes (lengths 1, 17, 127, 129, 1000; head_dim 64, 128, 256; causal with
// seq_q < seq_k and seq_q > seq_k, whose first rows see no key; GQA 8:1 and MQA; fp16 and bf16), the LSE
// against a host computation, what the kernel refuses, and planted defects (a dropped rescale, an
// off-by-one causal mask, a missing barrier) that must be caught while the production kernel passes the
// same case. One timing test reports what an emulated verify costs.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "case_support.hpp"
#include "cuda/fa2/fa2_emulated.hpp"
#include "cuda/launchers.hpp"
#include "flash_kernel_support.hpp"
#include "model/case.hpp"

namespace faprobe {

namespace {

using cuda::fa2::Defect;
using namespace test_support;  // make_case, run_flash_kernel and the shared checks

// The output of fa2 on case c under the emulator, with kDefect planted; the LSE too when lse is given.
template <Defect kDefect = Defect::none>
HostTensor run_fa2(const Case& c, std::vector<float>* lse = nullptr) {
  return run_flash_kernel(
      c,
      [](cuda::AttentionArgs& args) {
        if constexpr (kDefect == Defect::none) {
          cuda::fa2_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args);
        } else {
          cuda::fa2::forward_emulated<kDefect>(args);
        }
      },
      lse);
}

VerifyResult check(const Case& c, const HostTensor& output) { return check_output(c, GeneratedInputs(c), output); }

// --- The kernel against the reference over odd shapes. Block sizes (Traits): d 64: 128 query rows × 64
// keys; d 128: 128 × 32; d 256: 64 × 32. ---

std::vector<Case> odd_shapes() {
  const Mask none = Mask::none, causal = Mask::causal;
  const DType fp16 = DType::fp16, bf16 = DType::bf16;
  return {
      make_case(1, 1, 1, 1, 1, 64, fp16, none),
      make_case(1, 2, 2, 1, 1, 256, bf16, causal),
      make_case(1, 1, 1, 17, 17, 128, bf16, causal),
      make_case(2, 2, 2, 17, 17, 64, fp16, none),
      make_case(1, 1, 1, 127, 127, 64, bf16, causal),      // one query block, 2 key blocks, masked diagonal
      make_case(1, 2, 2, 129, 129, 64, fp16, causal),      // 2 query blocks, the second with one row
      make_case(1, 1, 1, 127, 129, 128, fp16, none),       // 5 key blocks, the last with one key
      make_case(1, 1, 1, 129, 129, 256, fp16, causal),     // d 256: 3 query blocks of 64, 5 key blocks
      make_case(1, 1, 1, 127, 127, 256, bf16, none),
      make_case(1, 1, 1, 17, 129, 64, bf16, causal),       // seq_q < seq_k: the diagonal shifted right
      make_case(1, 1, 1, 1, 300, 128, fp16, causal),       // one row sees every key
      make_case(1, 1, 1, 129, 17, 128, fp16, causal),      // seq_q > seq_k: 112 rows see no key
      make_case(1, 1, 1, 300, 129, 64, bf16, causal),      // seq_q > seq_k across query and key blocks
      make_case(1, 8, 1, 129, 127, 64, fp16, causal),      // GQA 8:1
      make_case(1, 4, 1, 17, 200, 128, bf16, none),        // MQA
      make_case(1, 1, 1, 1000, 1000, 64, fp16, causal),    // 8 query blocks: whole warps skip key blocks
      make_case(1, 1, 1, 1000, 1000, 128, bf16, none),
  };
}

class Fa2OddShapes : public testing::TestWithParam<Case> {};

TEST_P(Fa2OddShapes, MatchesReference) {
  const Case& c = GetParam();
  ASSERT_EQ(cuda::fa2_supports(c.dtype, c.head_dim), "");
  const VerifyResult result = check(c, run_fa2(c));
  EXPECT_TRUE(result.passed) << c.label() << ": " << describe(result);
  EXPECT_GT(result.rows_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Emulated, Fa2OddShapes, testing::ValuesIn(odd_shapes()), case_name);

TEST(Fa2, RowsWithoutKeysAreZeros) {
  // 129 rows, 17 keys: the first query block (128 rows) has 16 rows that see a key, the second none.
  const Case c = make_case(1, 2, 2, 129, 17, 64, DType::fp16, Mask::causal);
  expect_keyless_rows_zero(c, run_fa2(c));
  // A whole CTA without a key: 300 rows, 100 keys: query block 0 (rows 0-127) sees none.
  const Case empty_block = make_case(1, 1, 1, 300, 100, 128, DType::bf16, Mask::causal);
  expect_keyless_rows_zero(empty_block, run_fa2(empty_block));
}

TEST(Fa2, LogSumExpMatchesHost) {
  const Case c = make_case(2, 2, 1, 150, 140, 64, DType::bf16, Mask::causal);  // 10 keyless rows, 3 key blocks
  std::vector<float> lse;
  run_fa2(c, &lse);
  // As for fa1 (test_emu_fa1.cpp): 1e-4 absolute is ample for fp32 sums and ex2.approx, and far below any
  // real error.
  EXPECT_LT(worst_lse_error(c, lse), 1e-4);
}

// --- Support and shape. ---
TEST(Fa2, RefusesWhatIsNotInstantiatedWithAReason) {
  expect_refuses_with_reasons(cuda::fa2_supports, cuda::fa2_forward, 96);
  EXPECT_NE(cuda::fa2_supports(DType::fp32, 64).find("fa2"), std::string::npos) << "the reason names the kernel";
  cuda::AttentionArgs args;
  args.dtype = DType::fp16;
  args.head_dim = 64;  // supported, but no tensors
  EXPECT_THROW(cuda::fa2_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args), std::invalid_argument);
  args.batch = 70000;  // past the grid's z extent
  EXPECT_THROW(cuda::fa2_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args), std::invalid_argument);
}

TEST(Fa2, ShapeFitsEveryTarget) {
  for (const std::int64_t d : {64, 128, 256}) {
    const cuda::KernelShape shape = cuda::fa2_shape(DType::bf16, d);
    EXPECT_EQ(shape.threads, 128) << "4 warps split the query rows";
    EXPECT_EQ(shape.block_q % 64, 0) << "whole 16-row tiles for each of 4 warps";
    EXPECT_EQ(shape.block_k % 32, 0) << "whole 16-key steps, read two 8-key tiles at a time";
    // One Q, one K and one V tile of 16-byte padded rows, within sm_80's per-block limit.
    EXPECT_EQ(shape.shared_bytes, std::size_t(shape.block_q + 2 * shape.block_k) * std::size_t(d + 8) * 2);
    EXPECT_LE(shape.shared_bytes, std::size_t{163} * 1024);
  }
  EXPECT_EQ(cuda::fa2_shape(DType::fp32, 64).threads, 0) << "no shape for what is not supported";
}

// --- Planted defects: each is caught where it matters, while the production kernel passes the case. ---

// Without the e^{m−m_new} rescale of O, a row is wrong as soon as its max grows in a later key block
// (seq_k 300 is 5 key blocks of 64 at d 64); with one key block (seq_k 60) there is nothing to rescale.
TEST(Fa2Planted, NoRescaleIsCaught) {
  expect_defect_caught("no_rescale", make_case(1, 2, 2, 100, 300, 64, DType::fp16, Mask::none),
                       make_case(1, 2, 2, 100, 60, 64, DType::fp16, Mask::none), "one key block needs no rescale",
                       [](const Case& c) { return run_fa2(c); },
                       [](const Case& c) { return run_fa2<Defect::no_rescale>(c); });
}

// A causal mask one key too generous lets every row see the key right of its diagonal: caught under
// causal (the checker's reference masks exactly), harmless without a mask.
TEST(Fa2Planted, CausalOffByOneIsCaught) {
  expect_defect_caught("causal_off_by_one", make_case(1, 1, 1, 129, 129, 128, DType::bf16, Mask::causal),
                       make_case(1, 1, 1, 129, 129, 128, DType::bf16, Mask::none), "no causal mask, nothing to get wrong",
                       [](const Case& c) { return run_fa2(c); },
                       [](const Case& c) { return run_fa2<Defect::causal_off_by_one>(c); });
}

// Without the barrier after the K tile's copies, warps read K rows (and Q rows) other threads have not
// copied yet: under the emulator's schedule these are still the 0xFF poison of shared memory (NaN as
// fp16 and bf16), so the output is NaN and the checker reports a mismatch.
TEST(Fa2Planted, MissingBarrierIsCaught) {
  const Case c = make_case(1, 1, 1, 129, 129, 64, DType::bf16, Mask::none);
  HostTensor bad_output;
  ASSERT_NO_THROW(bad_output = run_fa2<Defect::missing_barrier>(c));
  const VerifyResult bad = check(c, bad_output);
  EXPECT_FALSE(bad.passed) << "missing_barrier not caught: " << describe(bad);
  EXPECT_FALSE(bad.note.empty());
  std::printf("missing_barrier: %s\n", bad.note.c_str());
}

// --- What an emulated verify costs (reported, not asserted): seq 1024, d 128, batch 1, heads 2, fp16. ---
TEST(Fa2Timing, EmulatedVerifySeq1024) {
  report_emulated_cost("fa2", make_case(1, 2, 2, 1024, 1024, 128, DType::fp16, Mask::none),
                       [](const Case& c) { return run_fa2(c); });
}

}  // namespace
}  // namespace faprobe
