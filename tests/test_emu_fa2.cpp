// The cuda.fa2 kernel (kernels/cuda/fa2/fa2.cuh) under the CPU emulator, no GPU needed: inputs from
// make_inputs (identical to the device generator's), the output checked by the project's checker against
// the float64 reference over odd shapes (lengths 1, 17, 127, 129, 1000; head_dim 64, 128, 256; causal with
// seq_q < seq_k and seq_q > seq_k, whose first rows see no key; GQA 8:1 and MQA; fp16 and bf16), the LSE
// against a host computation, what the kernel refuses, and planted defects (a dropped rescale, an
// off-by-one causal mask, a missing barrier) that must be caught while the production kernel passes the
// same case. Defects that leave outputs unwritten (nothing written, the last query block skipped) pass over
// an earlier correct output and are caught by the NaN poison, directly and through the harness (run_one
// over emu.fa2's shell), whose output() and lse() follow every run; an LSE in log2 units is caught by the LSE
// check with O right. One timing test reports what an emulated verify costs.
#include <cmath>
#include <cstdint>
#include <optional>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "case_support.hpp"
#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa2/fa2_emulated.hpp"
#include "cuda/fa2/fa2_launch.hpp"
#include "cuda/kernel_implementation.hpp"
#include "cuda/launchers.hpp"
#include "emulator_test_support.hpp"
#include "flash_kernel_support.hpp"
#include "harness/plan/registry.hpp"
#include "harness/run/pair_run.hpp"
#include "model/case.hpp"

namespace faprobe {

namespace {

using cuda::fa2::Defect;
using namespace test_support;  // make_case, run_flash_kernel and the shared checks

// The output of fa2 on case c under the emulator, with kDefect planted; the LSE too when lse is given.
// Defect::none runs the tile plain cuda.fa2 runs for the case, or `tile`; a defect is planted in the default
// tile without a mask.
template <Defect kDefect = Defect::none>
HostTensor run_fa2(const Case& c, std::vector<float>* lse = nullptr, std::optional<cuda::Tile> tile = std::nullopt) {
  return run_flash_kernel(
      c,
      [&](cuda::AttentionArgs& args) {
        if constexpr (kDefect == Defect::none) {
          const cuda::Tile chosen = tile ? *tile : *cuda::default_tile(cuda::fa2_instantiations(), c.dtype, c.head_dim, c.mask);
          cuda::fa2_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args, chosen);
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

// Every odd shape in every tile instantiated for its dtype and head_dim (fa2/CMakeLists.txt's list).
std::vector<TiledCase> odd_shapes_in_every_tile() { return in_every_tile(odd_shapes(), cuda::fa2_instantiations()); }

class Fa2OddShapes : public testing::TestWithParam<TiledCase> {};

TEST_P(Fa2OddShapes, MatchesReference) {
  const Case& c = GetParam().c;
  ASSERT_EQ(cuda::fa2_supports(c, GetParam().tile), "");
  const VerifyResult result = check(c, run_fa2(c, nullptr, GetParam().tile));
  EXPECT_TRUE(result.passed) << c.label() << " tile " << GetParam().tile.name() << ": " << describe(result);
  EXPECT_GT(result.rows_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Emulated, Fa2OddShapes, testing::ValuesIn(odd_shapes_in_every_tile()), tiled_case_name);

TEST(Fa2, EveryInstantiationIsInTheVerifyMatrix) {
  expect_every_instantiation_covered(odd_shapes_in_every_tile(), cuda::fa2_instantiations());
}

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
  const auto supports = [](DType dtype, std::int64_t head_dim) {
    return cuda::fa2_supports(make_case(1, 1, 1, 64, 64, head_dim, dtype, Mask::none), std::nullopt);
  };
  const auto forward = [](const cuda::Launch& launch, const cuda::AttentionArgs& args) {
    cuda::fa2_forward(launch, args, cuda::Tile{128, 64});
  };
  expect_refuses_with_reasons(supports, forward, 96);
  EXPECT_NE(supports(DType::fp32, 64).find("fa2"), std::string::npos) << "the reason names the kernel";
  const std::string elsewhere =
      cuda::fa2_supports(make_case(1, 1, 1, 64, 64, 64, DType::bf16, Mask::none), cuda::Tile{64, 64});
  EXPECT_NE(elsewhere.find("the fa2 tile 64x64 is instantiated for fp16 d128, bf16 d128 only"), std::string::npos) << elsewhere;
  cuda::AttentionArgs args;
  args.dtype = DType::fp16;
  args.head_dim = 64;  // supported, but no tensors
  EXPECT_THROW(cuda::fa2_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args, cuda::Tile{128, 64}),
               std::invalid_argument);
  args.batch = 70000;  // past the grid's z extent
  EXPECT_THROW(cuda::fa2_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args, cuda::Tile{128, 64}),
               std::invalid_argument);
}

TEST(Fa2, ShapeFitsEveryTarget) {
  for (const cuda::TileInstantiation& i : cuda::fa2_instantiations()) {
    const std::int64_t d = i.head_dim;
    const cuda::KernelShape shape = cuda::fa2_shape(i.dtype, d, i.tile);
    EXPECT_EQ(shape.threads, 128) << "4 warps split the query rows";
    EXPECT_EQ(shape.block_q % 64, 0) << "whole 16-row tiles for each of 4 warps";
    EXPECT_EQ(shape.block_k % 32, 0) << "whole 16-key steps, read two 8-key tiles at a time";
    // One Q, one K and one V tile of 16-byte padded rows, within sm_80's per-block limit.
    EXPECT_EQ(shape.shared_bytes, std::size_t(shape.block_q + 2 * shape.block_k) * std::size_t(d + 8) * 2);
    EXPECT_LE(shape.shared_bytes, std::size_t{163} * 1024);
  }
  EXPECT_EQ(cuda::fa2_shape(DType::fp32, 64, cuda::Tile{128, 64}).threads, 0) << "no shape for what is not supported";
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

// Without the barrier between the cp.async tile loads and the ldmatrix reads, a warp reads rows that other
// threads copied with no barrier in between: the race detector reports the ldmatrix and the cp.async with
// both threads and the shared byte. With the checks off, under the default schedule those rows are still
// the 0xFF poison (a copy lands only at its thread's wait_group), NaN as fp16 and bf16, and the checker
// reports a mismatch.
TEST(Fa2Planted, MissingBarrierIsReportedAsARace) {
  const Case c = make_case(1, 1, 1, 129, 129, 64, DType::bf16, Mask::none);
  const std::string message = emu::testing::launch_error([&] { (void)run_fa2<Defect::missing_barrier>(c); });
  for (const char* part : {"kernel 'fa2_bf16_hdim64_128x64'", "race on shared memory byte offset", "ldmatrix by this thread",
                           "cp.async by thread"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  std::printf("missing_barrier: %s\n", message.c_str());
  const emu::ScopedChecks off(false);
  HostTensor bad_output;
  ASSERT_NO_THROW(bad_output = run_fa2<Defect::missing_barrier>(c));
  const VerifyResult bad = check(c, bad_output);
  EXPECT_FALSE(bad.passed) << "missing_barrier not caught with the checks off: " << describe(bad);
}

// Without cp.async.wait_group, the barrier alone does not make the tile's copies land: the first ldmatrix
// reads rows whose copies are still in flight, which the emulator reports naming the copy and its group.
TEST(Fa2Planted, ADroppedCpAsyncWaitIsReported) {
  const Case c = make_case(1, 1, 1, 129, 129, 64, DType::fp16, Mask::none);
  const std::string message = emu::testing::launch_error([&] { (void)run_fa2<Defect::no_cp_async_wait>(c); });
  emu::testing::expect_mentions(message, {"kernel 'fa2_fp16_hdim64_128x64'", "ldmatrix of shared byte offset", "before it has landed",
                                          "a cp.async issued by thread", "in its commit group 0"});
}

// --- Checks that cannot pass by accident: outputs left unwritten, caught by the NaN poison of a checked run
// (KernelImplementation's shell fills O and the LSE with 0xFF bytes before it), and a wrong LSE. ---

// emu.fa2 with kDefect planted: the production shell (kernel_implementation.hpp: buffers, the NaN poison,
// the LSE, the copies back) over the kernel with the defect, for the tests that go through the harness
// (run_one). Named "emu.fa2+<defect>"; not registered.
template <Defect kDefect>
class PlantedFa2 final : public cuda::KernelImplementation {
 public:
  explicit PlantedFa2(std::string defect)
      : KernelImplementation(cuda::Target::emulator), defect_(std::move(defect)) {}
  bool writes_lse() const override { return true; }
  std::uint64_t predicted_bytes(const Case& c) const override { return tensor_bytes(c); }
  double predicted_seconds(const Case&, const MachineRates&) const override { return 0; }
  std::unique_ptr<cuda::KernelRun> make_run(const Case& c, cuda::KernelTensors& tensors) const override {
    return std::make_unique<Run>(c, tensors);
  }

 protected:
  std::string kernel_name() const override { return "fa2+" + defect_; }
  std::string kernel_supports(const Case& c) const override { return cuda::fa2_supports(c, std::nullopt); }

 private:
  class Run final : public cuda::KernelRun {
   public:
    Run(const Case& c, cuda::KernelTensors& tensors) : args_(KernelImplementation::attention_args(c, tensors)) {}
    void forward(const cuda::Launch&) override { cuda::fa2::forward_emulated<kDefect>(args_); }

   private:
    cuda::AttentionArgs args_;
  };
  std::string defect_;
};

// One checked run of impl on c through the harness, as `faprobe verify` makes it (no timing).
Record run_checked(const Implementation& impl, const Case& c) {
  RunOptions options;
  options.timing = false;
  return run_one(impl, c, MeasureSettings{}, options);
}

const Implementation& emu_fa2() {
  const Implementation* impl = find_implementation("emu.fa2");
  EXPECT_NE(impl, nullptr);
  return *impl;
}

// fa2 with kDefect on c's inputs into `output` (whatever it holds), under the emulator.
template <Defect kDefect>
void run_fa2_into(const Case& c, const AttentionInputs& inputs, HostTensor& output) {
  const cuda::AttentionArgs args =
      cuda::attention_args(c, inputs.q.data<std::uint16_t>(), inputs.k.data<std::uint16_t>(),
                           inputs.v.data<std::uint16_t>(), output.data<std::uint16_t>());
  cuda::fa2::forward_emulated<kDefect>(args);
}

// 300 rows at d 64: query blocks of 128 rows, the last (rows 256..299) partial.
const Case kUnwrittenCase = make_case(1, 2, 2, 300, 300, 64, DType::fp16, Mask::causal);

// Over the correct output of an earlier run into the same buffer, a kernel that writes nothing, or skips its
// last query block, passes the check; over the poison it fails, naming the NaN at its first unwritten row.
template <Defect kDefect>
void expect_unwritten_caught_by_poison(std::int64_t first_unwritten_row) {
  const Case& c = kUnwrittenCase;
  const AttentionInputs inputs = make_inputs(c);
  HostTensor output = make_output(c);
  run_fa2_into<Defect::none>(c, inputs, output);
  run_fa2_into<kDefect>(c, inputs, output);
  const VerifyResult stale = check(c, output);
  EXPECT_TRUE(stale.passed) << "the earlier output should hide the defect: " << describe(stale);
  fill_nan(output);  // 0xFF bytes, what the shell writes into the emulated device buffer
  run_fa2_into<kDefect>(c, inputs, output);
  const VerifyResult poisoned = check(c, output);
  EXPECT_FALSE(poisoned.passed);
  const std::string at =
      "non-finite output (NaN) at batch 0 head 0 row " + std::to_string(first_unwritten_row) + " col 0";
  EXPECT_EQ(poisoned.note.rfind(at, 0), 0u) << poisoned.note;
}

TEST(Fa2Poison, UnwrittenOutputsPassOverAnEarlierOutputAndFailOverThePoison) {
  expect_unwritten_caught_by_poison<Defect::writes_nothing>(0);
  expect_unwritten_caught_by_poison<Defect::skip_last_query_block>(256);
}

// Through the harness: run_one poisons emu.fa2's buffers before the checked run, so the records are
// mismatches naming the NaN, how many rows it reached, and the implementation; the production kernel passes.
TEST(Fa2Poison, TheHarnessRecordsAMismatchNamingTheNan) {
  const Case& c = kUnwrittenCase;
  const Record good = run_checked(emu_fa2(), c);
  EXPECT_EQ(good.status, Status::ok) << good.reason;

  const Record nothing = run_checked(PlantedFa2<Defect::writes_nothing>("writes_nothing"), c);
  EXPECT_EQ(nothing.impl, "emu.fa2+writes_nothing");
  EXPECT_EQ(nothing.status, Status::mismatch) << nothing.reason;
  EXPECT_EQ(nothing.reason, "non-finite output (NaN) at batch 0 head 0 row 0 col 0, in 600 of 600 rows checked");

  const Record skipped = run_checked(PlantedFa2<Defect::skip_last_query_block>("skip_last_query_block"), c);
  EXPECT_EQ(skipped.status, Status::mismatch) << skipped.reason;
  // 2 heads × rows 256..299
  EXPECT_EQ(skipped.reason, "non-finite output (NaN) at batch 0 head 0 row 256 col 0, in 88 of 600 rows checked");
  ASSERT_TRUE(skipped.verify.has_value());
  EXPECT_TRUE(std::isnan(skipped.verify->max_abs_diff));
}

// output() and lse() give what the target's buffers hold after the latest run or poisoning, never a host
// copy kept from before.
TEST(Fa2Poison, OutputAndLseAreCopiedBackAfterEveryRunAndPoisoning) {
  const Case c = make_case(1, 2, 1, 129, 100, 64, DType::bf16, Mask::causal);
  const std::unique_ptr<PreparedCase> prepared = emu_fa2().prepare(c);
  prepared->timed_run();
  ASSERT_NE(prepared->lse(), nullptr);
  const VerifyResult first = check_output(c, GeneratedInputs(c), prepared->output(), prepared->lse());
  EXPECT_TRUE(first.passed) << describe(first);
  EXPECT_TRUE(first.lse_checked);

  prepared->poison_outputs();
  const HostTensor& output = prepared->output();
  for (std::int64_t i = 0; i < output.elements(); ++i) ASSERT_TRUE(std::isnan(output.get(i))) << "O element " << i;
  const LseTensor& lse = *prepared->lse();
  for (std::int64_t i = 0; i < lse.elements(); ++i) ASSERT_TRUE(std::isnan(lse.data()[i])) << "LSE element " << i;

  prepared->timed_run();
  const VerifyResult again = check_output(c, GeneratedInputs(c), prepared->output(), prepared->lse());
  EXPECT_TRUE(again.passed) << describe(again);
}

// An LSE in the kernel's log2 units (row_max + log2 row_sum, without the ln 2), while O is right: the output
// check alone passes it; the LSE check fails it, through the harness, and names the row. The production
// kernel passes the same case, its rows without keys (causal, 150 rows over 140 keys) holding -inf.
TEST(Fa2Planted, LseInLog2UnitsIsCaughtThroughTheHarness) {
  const Case c = make_case(2, 2, 1, 150, 140, 64, DType::bf16, Mask::causal);
  ASSERT_EQ(c.visible_keys(0, 9), 0) << "rows without keys are part of the case";
  const Record good = run_checked(emu_fa2(), c);
  ASSERT_EQ(good.status, Status::ok) << good.reason;
  ASSERT_TRUE(good.verify.has_value());
  EXPECT_TRUE(good.verify->lse_checked);
  EXPECT_LE(good.verify->lse_max_abs_diff, good.verify->lse_tolerance);
  std::printf("emu.fa2 %s: LSE max_abs_diff %.2e, tolerance %.2e\n", c.label().c_str(),
              good.verify->lse_max_abs_diff, good.verify->lse_tolerance);

  const Record bad = run_checked(PlantedFa2<Defect::lse_log2>("lse_log2"), c);
  ASSERT_EQ(bad.status, Status::mismatch) << bad.reason;
  ASSERT_TRUE(bad.verify.has_value());
  EXPECT_LE(bad.verify->max_abs_diff, bad.verify->tolerance) << "O itself is right";
  EXPECT_TRUE(bad.verify->lse_checked);
  EXPECT_GT(bad.verify->lse_max_abs_diff, 0.1);
  EXPECT_EQ(bad.reason.rfind("LSE off by ", 0), 0u) << bad.reason;
  EXPECT_NE(bad.reason.find(" at batch "), std::string::npos) << bad.reason;
  std::printf("lse_log2: %s\n", bad.reason.c_str());
}

// --- What an emulated verify costs (reported, not asserted): seq 1024, d 128, batch 1, heads 2, fp16. ---
// Seeded schedules (shuffled fibers, random switches, shuffled CTAs) give the same output, bit for bit.
TEST(Fa2Schedules, VariedSchedulesDoNotChangeTheOutput) {
  expect_same_output_under_schedules(make_case(2, 4, 2, 77, 130, 64, DType::bf16, Mask::causal), [](const Case& c) { return run_fa2(c); });
}

TEST(Fa2Timing, EmulatedVerifySeq1024) {
  report_emulated_cost("fa2", make_case(1, 2, 2, 1024, 1024, 128, DType::fp16, Mask::none),
                       [](const Case& c) { return run_fa2(c); });
}

}  // namespace
}  // namespace faprobe
