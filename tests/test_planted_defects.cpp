// The checker must see the bugs people actually write: each planted defect (kernels/cpu/planted.hpp) is
// reported as a mismatch on a case where it matters, while the undamaged implementation passes the same
// case, and the damaged one still passes a case where the defect cannot show (so the test is not merely
// detecting "a different build"). Defects that leave outputs unwritten pass over an earlier correct output
// and are caught by the NaN poison of a checked run, directly and through the harness (run_one).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cpu/cpu_implementation.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/planted.hpp"
#include "cpu_isa_support.hpp"
#include "harness/run/pair_run.hpp"
#include "model/case.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

using cpu::PlantedDefect;

Case planted_case(std::int64_t seq_q, std::int64_t seq_k, Mask mask, Mode mode = Mode::prefill,
                  DType dtype = DType::fp32) {
  Case c;
  c.batch = 1;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = 64;
  c.dtype = dtype;
  c.mask = mask;
  c.mode = mode;
  c.seed = 3;
  c.validate();
  return c;
}

// Forced split count (--splits): the heuristic would not split 2 heads on 2 threads at all.
Case with_splits(Case c, std::int64_t splits) {
  c.splits = splits;
  c.validate();
  return c;
}

Case mqa(Case c) {
  c.kv_heads = 1;
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
  std::optional<cpu::CpuIsa> level = std::nullopt;  // FAPROBE_MAX_CPU_ISA for the run (none: the CPU's best)
};

// A test-name-safe name of a level ("avx512_bf16").
std::string level_label(cpu::CpuIsa level) {
  std::string name(cpu::to_string(level));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// cpu.tiled's defects on each of its code paths (cpu.tiled's path tests name which one a case takes): the
// portable Eigen path, the AVX-512 fp32 step, the AVX512_BF16 step and the AMX step with bf16 cases.
std::vector<Planted> tiled_planted() {
  std::vector<Planted> list;
  for (cpu::CpuIsa level : test_support::all_cpu_isas()) {
    const DType dtype = level >= cpu::CpuIsa::avx512_bf16 ? DType::bf16 : DType::fp32;
    auto at = [&](std::int64_t seq_q, std::int64_t seq_k, Mask mask) {
      return planted_case(seq_q, seq_k, mask, Mode::prefill, dtype);
    };
    // Several key blocks whose maxima grow: the accumulator needs rescaling. One key block: it does not.
    list.push_back({"tiled_no_rescale", cpu::make_planted_tiled, PlantedDefect::no_rescale, at(300, 300, Mask::none),
                    at(50, 50, Mask::none), level});
    list.push_back({"tiled_causal_off_by_one", cpu::make_planted_tiled, PlantedDefect::causal_off_by_one,
                    at(300, 300, Mask::causal), at(300, 300, Mask::none), level});
    list.push_back({"tiled_causal_off_by_one_rectangular", cpu::make_planted_tiled, PlantedDefect::causal_off_by_one,
                    at(129, 17, Mask::causal), at(129, 17, Mask::none), level});
    for (std::size_t i = list.size() - 3; i < list.size(); ++i) list[i].label += "_" + level_label(level);
  }
  return list;
}

std::vector<Planted> planted() {
  std::vector<Planted> list = tiled_planted();
  const std::vector<Planted> others = {
      {"naive_causal_off_by_one", cpu::make_planted_naive, PlantedDefect::causal_off_by_one,
       planted_case(130, 130, Mask::causal), planted_case(130, 130, Mask::none)},
      // Several key ranges with different maxima: the combine must rescale. One range: nothing to combine.
      {"decode_splitk_combine_no_rescale", cpu::make_planted_decode_splitk, PlantedDefect::combine_no_rescale,
       with_splits(planted_case(1, 5000, Mask::none, Mode::decode), 8), planted_case(1, 300, Mask::none, Mode::decode)},
      // The same through the whole-row walk (MQA: one KV head, which that walk serves every head from).
      {"decode_splitk_combine_no_rescale_whole_rows", cpu::make_planted_decode_splitk,
       PlantedDefect::combine_no_rescale, mqa(planted_case(1, 5000, Mask::none, Mode::decode)),
       mqa(planted_case(1, 300, Mask::none, Mode::decode))},
  };
  list.insert(list.end(), others.begin(), others.end());
  return list;
}

void PrintTo(const Planted& param, std::ostream* out) { *out << param.label; }

class PlantedDefects : public testing::TestWithParam<Planted> {};

TEST_P(PlantedDefects, CheckerReportsAMismatchWhereTheDefectMatters) {
  const Planted& p = GetParam();
  if (p.level && !test_support::cannot_run(*p.level).empty()) GTEST_SKIP() << test_support::cannot_run(*p.level);
  std::optional<test_support::ScopedMaxCpuIsa> cap;
  if (p.level) cap.emplace(*p.level);
  // At the bf16 and AMX levels the path is chosen by measurement: forced, so that the level's own path is the
  // one tried.
  std::optional<test_support::ScopedCpuPath> path;
  if (p.level == cpu::CpuIsa::avx512_bf16) path.emplace("avx512-bf16");
  if (p.level == cpu::CpuIsa::amx) path.emplace("amx-bf16");
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

// --- Outputs left unwritten (writes_nothing, skip_last_query_block): wrong only through what the buffer held
// before, so that only the NaN poison of a checked run (PreparedCase::poison_outputs) shows them. Over the
// correct output of an earlier run into the same buffer they pass the check; over the poison they fail it,
// and through the harness's path (run_one) the record is a mismatch naming the NaN and its first row. ---

struct Unwritten {
  std::string label;
  PlantedDefect defect;
};

void PrintTo(const Unwritten& param, std::ostream* out) { *out << param.label; }

class UnwrittenOutputs : public testing::TestWithParam<Unwritten> {
 protected:
  // 300 rows: several query blocks whatever block_q the thread count gives (32, 64 or 128), the last partial.
  const Case c = planted_case(300, 300, Mask::causal);
};

TEST_P(UnwrittenOutputs, PassOverAnEarlierCorrectOutputAndFailOverThePoison) {
  const auto good = cpu::make_planted_tiled(PlantedDefect::none);
  const auto bad = cpu::make_planted_tiled(GetParam().defect);
  const auto& good_cpu = dynamic_cast<const cpu::CpuImplementation&>(*good);
  const auto& bad_cpu = dynamic_cast<const cpu::CpuImplementation&>(*bad);
  const AttentionInputs inputs = make_inputs(c);
  HostTensor output = make_output(c);
  const cpu::ForwardArgs args{c, inputs.q, inputs.k, inputs.v, output, inputs.layout};

  good_cpu.forward(args);
  bad_cpu.forward(args);  // into the buffer that holds the correct output
  const VerifyResult stale = check_output(c, GeneratedInputs(c), output);
  EXPECT_TRUE(stale.passed) << "the earlier output should hide the defect: " << stale.note;

  fill_nan(output);  // what the CPU shell's poison_outputs() does before a checked run
  bad_cpu.forward(args);
  const VerifyResult poisoned = check_output(c, GeneratedInputs(c), output);
  EXPECT_FALSE(poisoned.passed);
  EXPECT_EQ(poisoned.note.rfind("non-finite output (NaN) at batch 0 head 0", 0), 0u) << poisoned.note;
}

TEST_P(UnwrittenOutputs, TheHarnessRecordsAMismatchNamingTheNan) {
  MeasureSettings measure;  // verify on
  RunOptions options;
  options.timing = false;  // what `verify` runs: the one checked run
  const Record good = run_one(*cpu::make_planted_tiled(PlantedDefect::none), c, measure, options);
  EXPECT_EQ(good.status, Status::ok) << good.reason;

  const Record bad = run_one(*cpu::make_planted_tiled(GetParam().defect), c, measure, options);
  ASSERT_EQ(bad.status, Status::mismatch) << bad.reason;
  ASSERT_TRUE(bad.verify.has_value());
  EXPECT_FALSE(bad.verify->passed);
  EXPECT_EQ(bad.reason, bad.verify->note);
  EXPECT_TRUE(std::isnan(bad.verify->max_abs_diff));
  // The first unwritten row of head 0, and how many rows of every head are unwritten.
  const std::int64_t block_q = bad.details.at("block_q").get<std::int64_t>();
  const std::int64_t first = GetParam().defect == PlantedDefect::writes_nothing ? 0 : (c.seq_q - 1) / block_q * block_q;
  const std::int64_t rows = c.batch * c.heads * (c.seq_q - first);
  EXPECT_EQ(bad.reason, fmt::format("non-finite output (NaN) at batch 0 head 0 row {} col 0, in {} of {} rows checked",
                                    first, rows, c.batch * c.heads * c.seq_q));
}

std::string unwritten_name(const testing::TestParamInfo<Unwritten>& param_info) { return param_info.param.label; }

INSTANTIATE_TEST_SUITE_P(Tiled, UnwrittenOutputs,
                         testing::Values(Unwritten{"writes_nothing", PlantedDefect::writes_nothing},
                                         Unwritten{"skip_last_query_block", PlantedDefect::skip_last_query_block}),
                         unwritten_name);

TEST(PlantedDefectsApi, UnknownCombinationsThrow) {
  EXPECT_THROW(cpu::make_planted_tiled(PlantedDefect::combine_no_rescale), std::invalid_argument);
  EXPECT_THROW(cpu::make_planted_naive(PlantedDefect::no_rescale), std::invalid_argument);
  EXPECT_THROW(cpu::make_planted_decode_splitk(PlantedDefect::causal_off_by_one), std::invalid_argument);
  EXPECT_THROW(cpu::make_planted_naive(PlantedDefect::writes_nothing), std::invalid_argument);
  EXPECT_EQ(cpu::make_planted_tiled(PlantedDefect::skip_last_query_block)->name(), "cpu.tiled+skip_last_query_block");
  EXPECT_EQ(cpu::make_planted_tiled(PlantedDefect::none)->name(), "cpu.tiled");
}

}  // namespace
}  // namespace faprobe
