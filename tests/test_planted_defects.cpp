// The checker must see the bugs people actually write: each planted defect (kernels/cpu/planted.hpp) is
// reported as a mismatch on a case where it matters, while the undamaged implementation passes the same
// case, and the damaged one still passes a case where the defect cannot show (so the test is not merely
// detecting "a different build").
#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/planted.hpp"
#include "model/case.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

using cpu::PlantedDefect;

Case planted_case(std::int64_t seq_q, std::int64_t seq_k, Mask mask, Mode mode = Mode::prefill) {
  Case c;
  c.batch = 1;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = 64;
  c.dtype = DType::fp32;
  c.mask = mask;
  c.mode = mode;
  c.seed = 3;
  c.validate();
  return c;
}

VerifyResult run_and_check(const Implementation& impl, const Case& c) {
  EXPECT_EQ(impl.supports(c), "") << impl.name();
  const std::unique_ptr<PreparedCase> prepared = impl.prepare(c);
  prepared->timed_run();
  return check_output(c, GeneratedInputs(c), prepared->output());
}

struct Planted {
  std::string label;
  std::function<std::unique_ptr<Implementation>(PlantedDefect)> make;
  PlantedDefect defect;
  Case matters;   // the defect changes the output here
  Case harmless;  // and cannot change it here
};

std::vector<Planted> planted() {
  return {
      // Several key blocks whose maxima grow: the accumulator needs rescaling. One key block: it does not.
      {"tiled_no_rescale", cpu::make_planted_tiled, PlantedDefect::no_rescale,
       planted_case(300, 300, Mask::none), planted_case(50, 50, Mask::none)},
      {"tiled_causal_off_by_one", cpu::make_planted_tiled, PlantedDefect::causal_off_by_one,
       planted_case(300, 300, Mask::causal), planted_case(300, 300, Mask::none)},
      {"tiled_causal_off_by_one_rectangular", cpu::make_planted_tiled, PlantedDefect::causal_off_by_one,
       planted_case(129, 17, Mask::causal), planted_case(129, 17, Mask::none)},
      {"naive_causal_off_by_one", cpu::make_planted_naive, PlantedDefect::causal_off_by_one,
       planted_case(130, 130, Mask::causal), planted_case(130, 130, Mask::none)},
      // Several key ranges with different maxima: the combine must rescale. One range: nothing to combine.
      {"decode_splitk_combine_no_rescale", cpu::make_planted_decode_splitk, PlantedDefect::combine_no_rescale,
       planted_case(1, 5000, Mask::none, Mode::decode), planted_case(1, 300, Mask::none, Mode::decode)},
  };
}

void PrintTo(const Planted& param, std::ostream* out) { *out << param.label; }

class PlantedDefects : public testing::TestWithParam<Planted> {};

TEST_P(PlantedDefects, CheckerReportsAMismatchWhereTheDefectMatters) {
  const Planted& p = GetParam();
  const std::unique_ptr<Implementation> good = p.make(PlantedDefect::none);
  const std::unique_ptr<Implementation> bad = p.make(p.defect);
  EXPECT_NE(good->name(), bad->name());
  EXPECT_NE(bad->name().find(std::string(cpu::to_string(p.defect))), std::string::npos);

  const VerifyResult good_result = run_and_check(*good, p.matters);
  EXPECT_TRUE(good_result.passed) << good->name() << ": " << good_result.note;

  const VerifyResult bad_result = run_and_check(*bad, p.matters);
  EXPECT_FALSE(bad_result.passed) << bad->name() << " was not caught on " << p.matters.label();
  EXPECT_TRUE(std::isfinite(bad_result.max_abs_diff));  // a wrong value, not a NaN
  EXPECT_GT(bad_result.max_abs_diff, bad_result.tolerance);

  const VerifyResult harmless_result = run_and_check(*bad, p.harmless);
  EXPECT_TRUE(harmless_result.passed) << bad->name() << " on " << p.harmless.label() << ": "
                                      << harmless_result.note;
}

std::string planted_name(const testing::TestParamInfo<Planted>& param_info) { return param_info.param.label; }

INSTANTIATE_TEST_SUITE_P(Cpu, PlantedDefects, testing::ValuesIn(planted()), planted_name);

TEST(PlantedDefectsApi, UnknownCombinationsThrow) {
  EXPECT_THROW(cpu::make_planted_tiled(PlantedDefect::combine_no_rescale), std::invalid_argument);
  EXPECT_THROW(cpu::make_planted_naive(PlantedDefect::no_rescale), std::invalid_argument);
  EXPECT_THROW(cpu::make_planted_decode_splitk(PlantedDefect::causal_off_by_one), std::invalid_argument);
  EXPECT_EQ(cpu::make_planted_tiled(PlantedDefect::none)->name(), "cpu.tiled");
}

}  // namespace
}  // namespace faprobe
