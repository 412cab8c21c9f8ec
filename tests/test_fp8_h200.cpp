// The fp8 LSE tolerance against the GPU it is for: results/h200/2026-12-04/verify/fp8-lse.jsonl holds 600
// fp8_e4m3 records of cuda.fa3 on an H200 (head_dim 64, 128, 256; seq_k 1, 2, 17, 256, 1000; seq_q 1, 17,
// 128, 1000; no mask and causal; seeds 0–4), checked then against the tolerance of the time (plain scores
// summed in exact fp32, floor 1e-3), which 46 of them exceeded. Here each record's case is checked again
// with today's rule (plain scores through Hopper's e4m3 adder, model/fp8_accumulation.hpp; check.hpp's
// floor) and every recorded GPU error must be within it; and at seq_k 1, where the LSE is one score and
// nothing but the dot product's accumulation can err, the model's own error must be within 10 % of the GPU's
// for each head_dim (it is within 1 %), so the model neither hides a GPU defect behind a wide tolerance nor misses the hardware.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/tensor.hpp"
#include "reference/check.hpp"

namespace faprobe {
namespace {

struct GpuRecord {
  Case c;
  double lse_max_abs_diff = 0, lse_tolerance_then = 0;
};

std::vector<GpuRecord> read_records() {
  std::ifstream in(std::string(FAPROBE_SOURCE_DIR) + "/results/h200/2026-12-04/verify/fp8-lse.jsonl");
  std::vector<GpuRecord> records;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line);
    GpuRecord r;
    from_json(record.at("case"), r.c);
    r.lse_max_abs_diff = record.at("verify").at("lse_max_abs_diff").get<double>();
    r.lse_tolerance_then = record.at("verify").at("lse_tolerance").get<double>();
    records.push_back(r);
  }
  return records;
}

// Today's check of a record's case, for its LSE tolerance only: the output and LSE given are zeros (they fail;
// the tolerance does not depend on them) and the explainer is off.
VerifyResult tolerance_check(const Case& c) {
  HostTensor output = make_output(c);
  for (std::int64_t i = 0; i < output.elements(); ++i) output.set(i, 0.0f);
  LseTensor lse(c);
  for (std::int64_t i = 0; i < lse.elements(); ++i) lse.data()[i] = 0.0f;
  return check_output(c, GeneratedInputs(c), output, &lse);
}

TEST(Fp8H200, EveryRecordedLseErrorIsWithinTodaysToleranceAndTheModelTracksTheGpu) {
  ::setenv("FAPROBE_EXPLAIN", "0", 1);
  const std::vector<GpuRecord> records = read_records();
  ASSERT_EQ(records.size(), 600u) << "the recorded H200 run";
  int failed_then = 0, failed_now = 0;
  std::map<std::int64_t, double> gpu_at_one_key, model_at_one_key;  // by head_dim, at seq_k 1
  double worst_fraction = 0;
  for (const GpuRecord& r : records) {
    SCOPED_TRACE(r.c.label());
    if (r.lse_max_abs_diff > r.lse_tolerance_then) ++failed_then;
    const VerifyResult now = tolerance_check(r.c);
    ASSERT_TRUE(now.lse_checked);
    if (r.lse_max_abs_diff > now.lse_tolerance) {
      ++failed_now;
      ADD_FAILURE() << "GPU LSE error " << r.lse_max_abs_diff << " > tolerance " << now.lse_tolerance;
    }
    worst_fraction = std::max(worst_fraction, r.lse_max_abs_diff / now.lse_tolerance);
    if (r.c.seq_k == 1) {
      // tolerance = 2 · plain error + floor: the model's error on the rows the GPU's was measured on.
      const double model = (now.lse_tolerance - lse_tolerance_floor(r.c.dtype)) / 2;
      gpu_at_one_key[r.c.head_dim] = std::max(gpu_at_one_key[r.c.head_dim], r.lse_max_abs_diff);
      model_at_one_key[r.c.head_dim] = std::max(model_at_one_key[r.c.head_dim], model);
    }
  }
  EXPECT_EQ(failed_then, 46) << "the records are the run the issue describes";
  EXPECT_EQ(failed_now, 0);
  std::printf("largest GPU error / today's tolerance: %.2f\n", worst_fraction);
  EXPECT_LE(worst_fraction, 0.75) << "a margin of 4/3 at least: the GPU's error reaches 2× the model's on some rows";
  ASSERT_EQ(gpu_at_one_key.size(), 3u);
  for (const auto& [head_dim, gpu] : gpu_at_one_key) {
    const double model = model_at_one_key[head_dim];
    std::printf("seq_k 1, head_dim %lld: GPU %.2e, model %.2e (ratio %.2f)\n", static_cast<long long>(head_dim),
                gpu, model, gpu / model);
    EXPECT_LE(gpu, 1.1 * model) << "head_dim " << head_dim << ": the GPU errs more than the model";
    EXPECT_GE(gpu, model / 1.1) << "head_dim " << head_dim << ": the model errs more than the GPU";
  }
}

}  // namespace
}  // namespace faprobe
