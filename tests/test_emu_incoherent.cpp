// emu.fa3-incoherent (cuda.fa3's fp8 kernel on Q and K under incoherent processing, src/model/incoherent.hpp)
// and inputs with outliers, under the CPU emulator, no GPU needed: through the harness as `faprobe verify`
// runs it (the device fill of rotated rows, the kernel, the checker's float64 reference on the rotated
// inputs it consumed, the error against the unquantized inputs), over head_dim 64, 128 and 256, both masks and
// both input distributions; what it refuses; and planted defects the strict check must catch: the transform
// applied to Q but not to K, and signs that differ between Q and K.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "case_support.hpp"
#include "cuda/attention_args.hpp"
#include "cuda/fa3/fa3_launch.hpp"
#include "cuda/launchers.hpp"
#include "emulator_test_support.hpp"
#include "harness/plan/registry.hpp"
#include "harness/run/pair_run.hpp"
#include "model/case.hpp"
#include "model/incoherent.hpp"
#include "model/tensor.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

using test_support::make_case;

const Implementation& implementation(const std::string& name) {
  const Implementation* impl = find_implementation(name);
  EXPECT_NE(impl, nullptr) << name;
  return *impl;
}

// One checked run through the harness, as `faprobe verify` makes it (no timing).
Record run_checked(const Implementation& impl, const Case& c) {
  RunOptions options;
  options.timing = false;
  return run_one(impl, c, MeasureSettings{}, options);
}

struct Shape {
  std::int64_t head_dim;
  Mask mask;
  InputDistribution inputs;
};

class Fa3IncoherentVerify : public testing::TestWithParam<Shape> {};

// 17 query rows against 150 keys (two key blocks, the second partial), two heads over one KV head.
TEST_P(Fa3IncoherentVerify, PassesTheStrictCheckOnTheRotatedInputs) {
  const Shape shape = GetParam();
  Case c = make_case(1, 2, 1, 17, 150, shape.head_dim, DType::fp8_e4m3, shape.mask);
  c.inputs = shape.inputs;
  const Record record = run_checked(implementation("emu.fa3-incoherent"), c);
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  ASSERT_TRUE(record.verify.has_value());
  EXPECT_TRUE(record.verify->passed);
  EXPECT_TRUE(record.verify->lse_checked);
  EXPECT_TRUE(record.verify->exact_inputs_checked);
  EXPECT_GT(record.verify->exact_inputs_o_rms, 0.0);  // e4m3 inputs are not the generator's values
  EXPECT_LT(record.verify->exact_inputs_o_max_abs, 1.0);
  EXPECT_EQ(record.c.inputs, shape.inputs);
  EXPECT_NE(record.details.value("qk_transform", std::string()), "");
}

std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (const std::int64_t head_dim : {64, 128, 256})
    for (const Mask mask : {Mask::none, Mask::causal})
      for (const InputDistribution inputs : {InputDistribution::normal, InputDistribution::outliers})
        all.push_back({head_dim, mask, inputs});
  return all;
}

std::string shape_name(const testing::TestParamInfo<Shape>& info) {
  return "d" + std::to_string(info.param.head_dim) + "_" + (info.param.mask == Mask::causal ? "causal" : "none") + "_" +
         std::string(to_string(info.param.inputs));
}

INSTANTIATE_TEST_SUITE_P(Emulated, Fa3IncoherentVerify, testing::ValuesIn(shapes()), shape_name);

TEST(Fa3Outliers, PlainFp8AndBf16PassWithTheDistributionsScale) {
  for (const DType dtype : {DType::fp8_e4m3, DType::bf16}) {
    Case c = make_case(1, 2, 2, 17, 150, 128, dtype, Mask::causal);
    c.inputs = InputDistribution::outliers;
    const Record record = run_checked(implementation("emu.fa3"), c);
    ASSERT_EQ(record.status, Status::ok) << record.reason;
    EXPECT_TRUE(record.verify->passed);
    EXPECT_EQ(record.verify->exact_inputs_checked, dtype == DType::fp8_e4m3);  // fp8 records only
  }
}

TEST(Fa3Incoherent, RefusesWhatItDoesNotTransformWithTheReason) {
  const Implementation& impl = implementation("emu.fa3-incoherent");
  EXPECT_EQ(impl.qk_transform(), QkTransform::incoherent);
  EXPECT_EQ(implementation("emu.fa3").qk_transform(), QkTransform::none);
  const std::string bf16 = impl.supports(make_case(1, 1, 1, 17, 17, 128, DType::bf16, Mask::none));
  EXPECT_NE(bf16.find("fp8_e4m3 only"), std::string::npos) << bf16;
  EXPECT_EQ(impl.supports(make_case(1, 1, 1, 17, 17, 128, DType::fp8_e4m3, Mask::none)), "");
  const std::string odd = impl.supports(make_case(1, 1, 1, 17, 17, 96, DType::fp8_e4m3, Mask::none));
  EXPECT_NE(odd.find("power-of-two head_dim"), std::string::npos) << odd;
  EXPECT_EQ(implementation("cuda.fa3-incoherent").qk_transform(), QkTransform::incoherent);
}

// What goes into the kernel in the planted defects below.
enum class Plant { none, k_not_rotated, k_other_signs };

// fa3 on c's Q and K filled by the device fill as `plant` says (V as always), O and the LSE checked against
// the reference of incoherent processing (the rotated inputs the checker regenerates).
VerifyResult run_planted(const Case& c, Plant plant) {
  const cuda::Launch emulator{cuda::Target::emulator, nullptr};
  std::vector<std::uint8_t> q(std::size_t(c.q_elements())), k(std::size_t(c.kv_elements())),
      v(std::size_t(c.kv_elements()));
  const std::uint64_t signs_key = incoherent_signs_key(c.seed);
  cuda::fill_rotated_input(emulator, q.data(), q.size(), int(c.head_dim), tensor_key(c.seed, TensorId::q), c.inputs,
                           signs_key);
  if (plant == Plant::k_not_rotated) {
    cuda::fill_input(emulator, k.data(), c.dtype, k.size(), tensor_key(c.seed, TensorId::k), c.inputs);
  } else {
    cuda::fill_rotated_input(emulator, k.data(), k.size(), int(c.head_dim), tensor_key(c.seed, TensorId::k), c.inputs,
                             plant == Plant::k_other_signs ? incoherent_signs_key(c.seed + 1) : signs_key);
  }
  cuda::fill_input(emulator, v.data(), c.dtype, v.size(), tensor_key(c.seed, TensorId::v), c.inputs);
  HostTensor output = make_output(c);
  LseTensor lse(c);
  cuda::AttentionArgs args = cuda::attention_args(c, q.data(), k.data(), v.data(), output.data<std::uint16_t>(),
                                                  QkTransform::incoherent);
  if (plant == Plant::k_not_rotated) args.k_scale = c.fp8_descale(TensorId::k);  // K as plain fp8 stores it
  args.lse = lse.data();
  std::vector<std::uint64_t> workspace((cuda::fa3_workspace_bytes(args) + 7) / 8);  // V^T
  args.workspace = workspace.data();
  emu::testing::within_deadline([&] {
    cuda::fa3_forward(emulator, args, *cuda::default_tile(cuda::fa3_instantiations(), c.dtype, c.head_dim, c.mask));
  });
  return check_output(c, GeneratedInputs(c, QkTransform::incoherent), output, &lse);
}

TEST(Fa3IncoherentPlanted, TheTransformOnQButNotOnKIsCaught) {
  Case c = make_case(1, 2, 1, 17, 150, 128, DType::fp8_e4m3, Mask::causal);
  c.inputs = InputDistribution::outliers;
  const VerifyResult good = run_planted(c, Plant::none);
  EXPECT_TRUE(good.passed) << good.note;  // the harness of this test is right
  const VerifyResult planted = run_planted(c, Plant::k_not_rotated);
  EXPECT_FALSE(planted.passed);
  EXPECT_GT(planted.max_abs_diff, 2 * planted.tolerance) << planted.note;
}

TEST(Fa3IncoherentPlanted, SignsThatDifferBetweenQAndKAreCaught) {
  const Case c = make_case(1, 2, 1, 17, 150, 64, DType::fp8_e4m3, Mask::none);
  const VerifyResult planted = run_planted(c, Plant::k_other_signs);
  EXPECT_FALSE(planted.passed);
  EXPECT_GT(planted.max_abs_diff, 2 * planted.tolerance) << planted.note;
}

}  // namespace
}  // namespace faprobe
