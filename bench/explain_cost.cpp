// What the mismatch explainer (reference/explain.hpp) costs against the check it follows, on the default
// verify matrix (configs/ci-verify.json, what `faprobe verify` runs without axes): a benchmark, not a test.
// It prints times and ratios and asserts nothing.
//
// For every case of the matrix, three wrong outputs are planted on the rows the check reads (the others
// are never read): K and V swapped and Q scaled by √d (each a mistake one hypothesis explains, so that
// hypothesis runs over all of its rows), and the right output with 0.5 added from the middle row on (a
// corruption no hypothesis explains: each stops at its first row beyond the tolerance). Each output is
// checked with the explainer left out (FAPROBE_EXPLAIN=0) and with it, the two taking turns for ROUNDS
// rounds; the median of each is kept. A case where a mistake does not show (Q scaled when every row sees
// one key) passes its check, so the explainer does not run there; it is counted and left out. The figure
// the explainer is held to is explain / check = (with − without) / without, summed over the matrix and
// per case.
//
//   faprobe_bench_explain [ROUNDS]     default 3
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "default_config.hpp"
#include "harness/plan/axes.hpp"
#include "harness/records/statistics.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

// The inputs of a case with one mistake made in reading them.
class PlantedInputs final : public InputSource {
 public:
  enum class Mistake { kv_swapped, q_scaled };
  PlantedInputs(const InputSource& inputs, Mistake mistake, std::int64_t head_dim)
      : inputs_(inputs), mistake_(mistake), head_dim_(head_dim) {}
  void row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const override {
    if (mistake_ == Mistake::kv_swapped && id != TensorId::q) id = id == TensorId::k ? TensorId::v : TensorId::k;
    inputs_.row(id, b, s, h, out);
    if (mistake_ == Mistake::q_scaled && id == TensorId::q) {
      for (std::int64_t d = 0; d < head_dim_; ++d) out[d] *= std::sqrt(double(head_dim_));  // softmax scale 1
    }
  }

 private:
  const InputSource& inputs_;
  Mistake mistake_;
  std::int64_t head_dim_;
};

// The case's output computed from `inputs` on the rows the check reads.
HostTensor output_on_checked_rows(const Case& c, const InputSource& inputs) {
  HostTensor out(DType::fp32, c.batch, c.seq_q, c.heads, c.head_dim);
  const CheckPlan plan = plan_check(c);
  for (const auto& [b, h] : plan.heads) {
    const HeadReference reference(c, inputs, b, c.kv_head_of(h));
    for (const std::int64_t row : plan.rows) {
      const Eigen::VectorXd values = reference.output_row(inputs, h, row);
      for (std::int64_t d = 0; d < c.head_dim; ++d) out.set(out.offset(b, row, h) + d, float(values(d)));
    }
  }
  return out;
}

struct Timing {
  double without = 0, with = 0;  // seconds, medians
  std::size_t diagnosis_lines = 0;
  bool passed = false;  // the mistake does not show in this case (Q scaled where every row sees one key)
};

Timing time_check(const Case& c, const InputSource& inputs, const HostTensor& output, int rounds) {
  std::vector<double> without, with;
  Timing timing;
  for (int round = 0; round < rounds; ++round) {
    for (const char* explain : {"0", "1"}) {
      ::setenv("FAPROBE_EXPLAIN", explain, 1);
      const auto start = std::chrono::steady_clock::now();
      const VerifyResult result = check_output(c, inputs, output);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      (explain[0] == '0' ? without : with).push_back(seconds);
      if (explain[0] == '1') timing.diagnosis_lines = result.diagnosis.size();
      timing.passed = result.passed;
    }
  }
  timing.without = median(without);
  timing.with = median(with);
  return timing;
}

int run(int rounds) {
  SettingsSource source;
  source.load_config_text(kDefaultVerifyConfig, kDefaultVerifyConfigName);
  const Plan plan = make_plan(source);
  const char* names[] = {"K and V swapped", "Q scaled by sqrt(d)", "rows from the middle +0.5"};
  double total_without[3] = {}, total_with[3] = {}, worst_ratio[3] = {};
  std::string worst_case[3];
  std::size_t undiagnosed[3] = {}, invisible[3] = {};
  std::vector<double> ratios[3];  // explainer / check, per case
  std::fprintf(stderr, "%zu cases of %s, %d rounds\n", plan.cases.size(), kDefaultVerifyConfigName, rounds);
  for (const Case& c : plan.cases) {
    const GeneratedInputs inputs(c);
    const PlantedInputs swapped(inputs, PlantedInputs::Mistake::kv_swapped, c.head_dim);
    const PlantedInputs scaled(inputs, PlantedInputs::Mistake::q_scaled, c.head_dim);
    HostTensor corrupted = output_on_checked_rows(c, inputs);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t row = c.seq_q / 2; row < c.seq_q; ++row)
        for (std::int64_t h = 0; h < c.heads; ++h)
          for (std::int64_t d = 0; d < c.head_dim; ++d) {
            const std::int64_t at = corrupted.offset(b, row, h) + d;
            corrupted.set(at, corrupted.get(at) + 0.5f);
          }
    const HostTensor outputs[3] = {output_on_checked_rows(c, swapped), output_on_checked_rows(c, scaled),
                                   std::move(corrupted)};
    for (int i = 0; i < 3; ++i) {
      const Timing timing = time_check(c, inputs, outputs[i], rounds);
      if (timing.passed) {  // the explainer does not run
        ++invisible[i];
        continue;
      }
      total_without[i] += timing.without;
      total_with[i] += timing.with;
      undiagnosed[i] += timing.diagnosis_lines == 0;
      const double ratio = (timing.with - timing.without) / timing.without;
      ratios[i].push_back(ratio);
      if (ratio > worst_ratio[i]) {
        worst_ratio[i] = ratio;
        worst_case[i] = fmt::format("{} ({:.3g} ms check, {:.3g} ms with the explainer)", c.label(),
                                    timing.without * 1e3, timing.with * 1e3);
      }
    }
  }
  fmt::print("explainer / check: over the matrix (sums of the medians), and per case (median, cases above 2, "
             "the worst)\n");
  fmt::print("planted mistake            cases  check s  +explainer s  matrix  median  above 2  worst\n");
  for (int i = 0; i < 3; ++i) {
    const std::size_t above = std::size_t(std::count_if(ratios[i].begin(), ratios[i].end(), [](double r) { return r > 2; }));
    fmt::print("{:<26} {:>5}  {:>7.3f}  {:>12.3f}  {:>6.2f}  {:>6.2f}  {:>7}  {:.2f}: {}\n", names[i], ratios[i].size(),
               total_without[i], total_with[i], (total_with[i] - total_without[i]) / total_without[i],
               median(ratios[i]), above, worst_ratio[i], worst_case[i]);
    if (undiagnosed[i] > 0) fmt::print("  {} failed cases without a diagnosis\n", undiagnosed[i]);
    if (invisible[i] > 0) fmt::print("  {} cases where the mistake does not show (they pass; left out)\n", invisible[i]);
  }
  return 0;
}

}  // namespace
}  // namespace faprobe

int main(int argc, char** argv) {
  int rounds = 3;
  if (argc > 2 || (argc == 2 && (std::sscanf(argv[1], "%d", &rounds) != 1 || rounds < 1 ||
                                 std::to_string(rounds) != argv[1]))) {
    std::fprintf(stderr, "faprobe_bench_explain: ROUNDS: '%s' is not a positive whole number (usage: "
                         "faprobe_bench_explain [ROUNDS])\n", argc > 1 ? argv[1] : "");
    return 2;
  }
  return faprobe::run(rounds);
}
