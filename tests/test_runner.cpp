// The runner's bandwidth fraction: run_plan sets it on a timed record from the copy bandwidth of the device
// the implementation runs on (the host's for cpu.*), and leaves it absent when the record was not timed
// (verify, emulated implementations) or that bandwidth is unknown. --interleave (interleave.hpp), on fake
// implementations that log their runs: the rounds' order, the stopping rule, a failing implementation
// among others, each one's own peak memory, groups by memory, Ctrl-C, and the records' order fields; then on
// cpu.naive and cpu.tiled through run_plan.
// The checked run: run_one poisons the outputs right before it and never before a timed sample (nor at all
// with --no-verify), reads them after it, and every kernel that writes an LSE has it checked.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/runtime/gpu.hpp"
#include "harness/io/progress.hpp"
#include "harness/plan/registry.hpp"
#include "harness/run/interleave.hpp"
#include "harness/run/measure.hpp"
#include "harness/run/pair_run.hpp"
#include "harness/run/runner.hpp"
#include "model/memory.hpp"

namespace faprobe {
namespace {

// One tiny case of `impl`, measured quickly: two samples, no noise target.
Plan tiny_plan(const std::string& impl) {
  SettingsSource source;
  source.load_config_text(R"({"impl": ")" + impl + R"(", "seq": 17, "heads": 2, "head_dim": 16, "warmup": 0,
    "min_samples": 2, "min_time": 0, "max_noise": 100, "max_time": 1})",
                          "tiny");
  return make_plan(source);
}

// The one record of a tiny plan run in this process (RunOptions without a child executable never isolates).
Record run_tiny(const std::string& impl, const RunOptions& options, std::string* table = nullptr) {
  std::ostringstream table_out;
  const RunSummary summary = run_plan(tiny_plan(impl), options, table_out);
  if (table != nullptr) *table = table_out.str();
  EXPECT_EQ(summary.records.size(), 1u);
  return summary.records.empty() ? Record{} : summary.records.front();
}

TEST(Runner, TimedCpuRecordIsReadAgainstTheHostCopyBandwidth) {
  RunOptions options;
  options.rates.memory_gbytes_per_s = 3.5;
  options.rates.gpu_copy_gbytes_per_s = 4000.0;  // the GPU's: not for a CPU implementation
  std::string table;
  const Record record = run_tiny("cpu.naive", options, &table);
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  ASSERT_TRUE(record.gbytes_per_s().has_value());
  ASSERT_TRUE(record.bandwidth_fraction.has_value());
  EXPECT_NEAR(*record.bandwidth_fraction, *record.gbytes_per_s() / 3.5, 1e-12);
  EXPECT_NE(table.find("BW %"), std::string::npos) << table;
}

TEST(Runner, UntimedRecordHasNoBandwidthFraction) {
  RunOptions options;
  options.timing = false;  // what `verify` runs
  options.rates.memory_gbytes_per_s = 3.5;
  const Record record = run_tiny("cpu.naive", options);
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  EXPECT_FALSE(record.time.has_value());
  EXPECT_FALSE(record.bandwidth_fraction.has_value());
}

// A timed implementation on the GPU, for bandwidth_fraction's choice of rate; never prepared.
class GpuStandIn final : public Implementation {
 public:
  std::string name() const override { return "test.gpu"; }
  std::string device() const override { return "test GPU"; }
  std::string supports(const Case&) const override { return ""; }
  std::uint64_t predicted_bytes(const Case&) const override { return 0; }
  double predicted_seconds(const Case&, const MachineRates&) const override { return 0; }
  bool runs_on_gpu() const override { return true; }
  std::unique_ptr<PreparedCase> prepare(const Case&) const override { return nullptr; }
};

TEST(Runner, GpuRecordIsReadAgainstTheGpuCopyBandwidthAndHasNoneWhenItIsUnknown) {
  Record record;
  record.time = TimeStats{1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 0, 10, {}};
  MachineRates rates;
  rates.memory_gbytes_per_s = 3.5;
  rates.gpu_copy_gbytes_per_s = 4000.0;
  const GpuStandIn gpu;
  ASSERT_TRUE(bandwidth_fraction(gpu, record, rates).has_value());
  EXPECT_NEAR(*bandwidth_fraction(gpu, record, rates), *record.gbytes_per_s() / 4000.0, 1e-12);
  rates.gpu_copy_gbytes_per_s = 0;  // not measured: no fraction, not one against the host's bandwidth
  EXPECT_FALSE(bandwidth_fraction(gpu, record, rates).has_value());
}

TEST(Runner, EmulatedRecordHasNoBandwidthFraction) {
  RunOptions options;
  options.rates.memory_gbytes_per_s = 3.5;
  options.rates.gpu_copy_gbytes_per_s = 4000.0;
  const Record record = run_tiny("emu.naive", options);
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  EXPECT_FALSE(record.time.has_value());
  EXPECT_FALSE(record.bandwidth_fraction.has_value());
}

// GPU timing's details (kernels/cuda/runtime/gpu.hpp, "Timing") belong to GPU records alone: an emulated
// implementation is never timed, and its record says nothing of holds or flushes.
TEST(Runner, EmulatedRecordSaysNothingOfGpuTiming) {
  const Record record = run_tiny("emu.naive", RunOptions{});
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  for (const char* key : {"timing", "hold_timeouts", "l2_flushed"})
    EXPECT_FALSE(record.details.contains(key)) << key << " in " << record.details.dump();
}

// On a GPU: a timed cuda.* record says that its samples were held by the blocking kernel, none timed out, and
// whether L2 was flushed; a verify record (nothing timed) says only the flush setting.
TEST(Runner, TimedGpuRecordSaysItsSamplesWereHeldByTheBlockingKernel) {
  if (gpu::devices().empty()) GTEST_SKIP() << "no GPU: " << gpu::no_device_reason();
  for (const bool flush : {true, false}) {
    Plan plan = tiny_plan("cuda.naive");  // cuBLAS's GEMMs and a softmax kernel: several launches per call
    plan.measure.flush_l2 = flush;
    std::ostringstream table;
    const RunSummary summary = run_plan(plan, RunOptions{}, table);
    ASSERT_EQ(summary.records.size(), 1u);
    const Record& record = summary.records.front();
    if (record.status == Status::unsupported) GTEST_SKIP() << record.reason;
    ASSERT_EQ(record.status, Status::ok) << record.reason;
    ASSERT_TRUE(record.time.has_value());
    EXPECT_EQ(record.details.value("timing", ""), "blocking-kernel") << record.details.dump();
    EXPECT_EQ(record.details.value("hold_timeouts", -1), 0) << record.details.dump();
    EXPECT_EQ(record.details.value("l2_flushed", !flush), flush) << record.details.dump();
  }
  RunOptions verify_only;
  verify_only.timing = false;
  const Record checked = run_tiny("cuda.naive", verify_only);
  ASSERT_EQ(checked.status, Status::ok) << checked.reason;
  EXPECT_FALSE(checked.details.contains("timing")) << checked.details.dump();
  EXPECT_TRUE(checked.details.contains("l2_flushed")) << checked.details.dump();
}

// --- --interleave ---

// A timed implementation that only pretends, for the interleaved runner: each run appends its name to a
// shared log and returns the next of its `seconds` (cycling, over every preparation); prepare allocates
// `prepare_bytes` of tensors, each run `run_bytes` of workspace for its duration. The `throw_at_run`-th run
// (counting from 1 over every preparation) throws, or prepare does with `throw_in_prepare`; the
// `interrupt_at_run`-th run presses Ctrl-C.
struct Fake {
  std::string name;
  std::vector<double> seconds = {0.01};
  std::uint64_t predicted_bytes = 0, prepare_bytes = 0, run_bytes = 0;
  int throw_at_run = 0, interrupt_at_run = 0;
  bool throw_in_prepare = false, timed = true;
  double predicted = 0;  // predicted_seconds()
};

class FakeImplementation final : public Implementation {
 public:
  FakeImplementation(Fake fake, std::vector<std::string>& log) : fake_(std::move(fake)), log_(log) {}
  std::string name() const override { return fake_.name; }
  std::string device() const override { return "test CPU"; }
  std::string supports(const Case&) const override { return ""; }
  std::uint64_t predicted_bytes(const Case&) const override { return fake_.predicted_bytes; }
  double predicted_seconds(const Case&, const MachineRates&) const override { return fake_.predicted; }
  bool timed() const override { return fake_.timed; }
  std::unique_ptr<PreparedCase> prepare(const Case&) const override {
    log_.push_back("prepare " + fake_.name);
    if (fake_.throw_in_prepare) throw std::runtime_error("planted: " + fake_.name + " cannot prepare");
    return std::make_unique<Prepared>(*this);
  }

 private:
  class Prepared final : public PreparedCase {
   public:
    explicit Prepared(const FakeImplementation& impl) : impl_(impl), inputs_(impl.fake_.prepare_bytes, AllocKind::tensor) {}
    double timed_run() override {
      const Fake& fake = impl_.fake_;
      const int run = ++impl_.runs_;
      impl_.log_.push_back(fake.name);
      if (run == fake.interrupt_at_run) request_interrupt();
      if (run == fake.throw_at_run) throw std::runtime_error("planted: " + fake.name + " fails at run " + std::to_string(run));
      const Workspace<char> scratch(fake.run_bytes);
      // A nanosecond more on every other run: samples identical to the nanosecond never satisfy the noise rule.
      return fake.seconds[std::size_t(run - 1) % fake.seconds.size()] + 1e-9 * (run % 2);
    }
    void poison_outputs() override {}  // nothing is checked: the fakes run with verify off
    const HostTensor& output() override { return output_; }

   private:
    const FakeImplementation& impl_;
    HostAllocation inputs_;
    HostTensor output_;
  };

  Fake fake_;
  std::vector<std::string>& log_;
  mutable int runs_ = 0;
};

// Fakes, their log, and run_interleaved over them on one small case.
class Interleave : public ::testing::Test {
 protected:
  void TearDown() override { clear_interrupt(); }

  void add(Fake fake) { impls_.push_back(std::make_unique<FakeImplementation>(std::move(fake), log)); }
  std::vector<Record> run(const MeasureSettings& measure, const RunOptions& options) {
    std::vector<const Implementation*> impls;
    for (const auto& impl : impls_) impls.push_back(impl.get());
    return run_interleaved(impls, Case{}, measure, options);
  }
  std::vector<Record> run(const MeasureSettings& measure) { return run(measure, options()); }
  static RunOptions options() {
    RunOptions options;
    options.mem_limit = std::uint64_t(1) << 40;  // not the host's free memory: the same on every machine
    return options;
  }
  // Fakes return made-up seconds and produce no output worth checking.
  static MeasureSettings settings(int warmup, int min_samples, double max_noise, double max_time) {
    MeasureSettings measure;
    measure.warmup = warmup;
    measure.min_samples = min_samples;
    measure.min_time_s = 0;
    measure.max_noise_percent = max_noise;
    measure.max_time_s = max_time;
    measure.verify = false;
    return measure;
  }
  // The runs of the log (prepares left out) from the `skip`-th on.
  std::vector<std::string> runs(std::size_t skip = 0) const {
    std::vector<std::string> out;
    for (const std::string& entry : log)
      if (entry.rfind("prepare ", 0) != 0) out.push_back(entry);
    return {out.begin() + std::ptrdiff_t(std::min(skip, out.size())), out.end()};
  }

  std::vector<std::string> log;

 private:
  std::vector<std::unique_ptr<FakeImplementation>> impls_;
};

using Names = std::vector<std::string>;

TEST_F(Interleave, SamplesTheImplementationsOfACaseInRounds) {
  for (const char* name : {"A", "B", "C"}) add({name});
  const std::vector<Record> records = run(settings(/*warmup=*/2, /*min_samples=*/3, 100, 100));
  // Each prepared alone, run once and freed; then all prepared, two warm-up rounds and three sample rounds.
  EXPECT_EQ(log, (Names{"prepare A", "A", "prepare B", "B", "prepare C", "C", "prepare A", "prepare B", "prepare C",
                        "A", "B", "C", "A", "B", "C",                       // warm-up
                        "A", "B", "C", "A", "B", "C", "A", "B", "C"}));     // samples
  ASSERT_EQ(records.size(), 3u);
  for (const Record& record : records) {
    ASSERT_EQ(record.status, Status::ok) << record.impl << ": " << record.reason;
    ASSERT_TRUE(record.time.has_value()) << record.impl;
    EXPECT_EQ(record.time->samples, 3) << record.impl;
    EXPECT_EQ(record.time->order, SampleOrder::interleaved);
    EXPECT_EQ(record.time->interleaved_with, (Names{"A", "B", "C"}));
  }
  EXPECT_EQ(records[1].impl, "B");  // one record per implementation, in the order given

  // The same fake measured alone (run_one) is sequential and says so.
  const FakeImplementation alone({"D"}, log);
  const Record sequential = run_one(alone, Case{}, settings(2, 3, 100, 100), options());
  ASSERT_TRUE(sequential.time.has_value());
  EXPECT_EQ(sequential.time->order, SampleOrder::sequential);
  EXPECT_TRUE(sequential.time->interleaved_with.empty());
}

TEST_F(Interleave, EveryoneIsSampledUntilTheLastMeetsItsRuleOrSpendsItsBudget) {
  add({"quiet", {0.01}});
  add({"noisy", {0.01, 0.03}});  // relative stddev 50 %: about 100 samples for 5 % noise
  add({"slow", {20.0}});         // 20 s of a 100 s budget per run
  const MeasureSettings measure = settings(/*warmup=*/1, /*min_samples=*/2, /*max_noise=*/5.0, /*max_time=*/100);
  const std::vector<Record> records = run(measure);
  for (const Record& record : records) ASSERT_TRUE(record.time.has_value()) << record.impl << ": " << record.reason;

  // How many samples the noisy one needs on its own: its runs, first run and warm-up included, fed to a
  // sampler of its own.
  MeasureSettings rest = measure;
  rest.max_time_s -= 0.01;  // its first run
  Sampler noisy(rest);
  int run = 2;  // the fake's run r returns seconds[(r - 1) % 2]: 0.01 for odd r
  noisy.add_warmup(run++ % 2 ? 0.01 : 0.03);
  while (noisy.wants_more()) noisy.add(run++ % 2 ? 0.01 : 0.03);
  ASSERT_GT(noisy.samples(), 50);

  // The quiet one met its rule after 2 samples, and was sampled on while the noisy one was not done.
  EXPECT_EQ(records[0].time->samples, noisy.samples());
  EXPECT_EQ(records[1].time->samples, noisy.samples());
  // The slow one ran out of budget: first run 20 s, warm-up 20 s, then samples until 100 s are spent.
  EXPECT_EQ(records[2].time->samples, 3);
  // After the slow one's third sample, the rounds hold the two others alone.
  const std::vector<std::string> samples = runs(/*skip=*/3 + 3);  // first runs, warm-up round
  ASSERT_GE(samples.size(), 14u);
  EXPECT_EQ(Names(samples.begin(), samples.begin() + 9), (Names{"quiet", "noisy", "slow", "quiet", "noisy", "slow",
                                                                "quiet", "noisy", "slow"}));
  EXPECT_EQ(Names(samples.begin() + 9, samples.begin() + 13), (Names{"quiet", "noisy", "quiet", "noisy"}));
  EXPECT_EQ(records[2].time->interleaved_with, (Names{"quiet", "noisy", "slow"}));  // it shared the rounds
}

TEST_F(Interleave, AFailingImplementationFailsAloneAndTheOthersGoOn) {
  add({"A"});
  add({"B", {0.01}, 0, 0, 0, /*throw_at_run=*/5});  // first run, 2 warm-up runs, 1 sample, then it throws
  add({"C"});
  Fake unprepared{"D"};
  unprepared.throw_in_prepare = true;
  add(unprepared);
  const std::vector<Record> records = run(settings(/*warmup=*/2, /*min_samples=*/4, 100, 100));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[1].status, Status::failed);
  EXPECT_EQ(records[1].reason, "planted: B fails at run 5");
  EXPECT_FALSE(records[1].time.has_value());
  EXPECT_EQ(records[3].status, Status::failed);
  EXPECT_EQ(records[3].reason, "planted: D cannot prepare");
  for (const std::size_t i : {std::size_t(0), std::size_t(2)}) {
    ASSERT_EQ(records[i].status, Status::ok) << records[i].reason;
    EXPECT_EQ(records[i].time->samples, 4);
    EXPECT_EQ(records[i].time->interleaved_with, (Names{"A", "B", "C"}));  // D never reached the rounds
  }
  // B's last run is the one that threw; the rounds went on without it.
  EXPECT_EQ(runs(/*skip=*/3), (Names{"A", "B", "C", "A", "B", "C",          // warm-up
                                     "A", "B", "C", "A", "B", "C", "A", "C", "A", "C"}));
}

TEST_F(Interleave, PeakMemoryIsEachImplementationsOwn) {
  constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;
  add({"A", {0.01}, 0, /*prepare_bytes=*/1 * kMiB, /*run_bytes=*/kMiB / 4});
  add({"B", {0.01}, 0, 4 * kMiB, 0});
  add({"C", {0.01}, 0, 0, 2 * kMiB});
  const std::uint64_t before = host_memory().current_bytes();
  const std::vector<Record> records = run(settings(1, 3, 100, 100));
  // What each allocates itself, however many of the others were prepared at the time.
  EXPECT_EQ(records[0].memory.peak_bytes - before, kMiB + kMiB / 4);
  EXPECT_EQ(records[0].memory.workspace_bytes, kMiB / 4);
  EXPECT_EQ(records[1].memory.peak_bytes - before, 4 * kMiB);
  EXPECT_EQ(records[1].memory.workspace_bytes, 0u);
  EXPECT_EQ(records[2].memory.peak_bytes - before, 2 * kMiB);
  EXPECT_EQ(records[2].memory.workspace_bytes, 2 * kMiB);
  // The same as each measured on its own.
  for (std::size_t i = 0; i < records.size(); ++i) {
    const FakeImplementation alone({"alone", {0.01}, 0, i == 0 ? kMiB : i == 1 ? 4 * kMiB : 0,
                                    i == 0 ? kMiB / 4 : i == 2 ? 2 * kMiB : 0},
                                   log);
    const Record sequential = run_one(alone, Case{}, settings(1, 3, 100, 100), options());
    EXPECT_EQ(records[i].memory.peak_bytes, sequential.memory.peak_bytes) << records[i].impl;
    EXPECT_EQ(records[i].memory.workspace_bytes, sequential.memory.workspace_bytes) << records[i].impl;
  }
  EXPECT_EQ(host_memory().current_bytes(), before);  // everything prepared was freed
}

TEST_F(Interleave, ImplementationsThatDoNotFitTogetherAreInterleavedInGroupsThatDo) {
  add({"A", {0.01}, /*predicted_bytes=*/600});
  add({"B", {0.01}, 600});
  add({"C", {0.01}, 300});
  add({"big", {0.01}, 2000});  // over the limit alone: skipped, as without --interleave
  Fake untimed{"E"};
  untimed.timed = false;  // nothing to interleave: run as without --interleave, after the others
  add(untimed);
  RunOptions limited = options();
  limited.mem_limit = 1000;
  const std::vector<Record> records = run(settings(0, 2, 100, 100), limited);
  EXPECT_EQ(records[0].time->interleaved_with, (Names{"A", "C"}));  // B does not fit beside A
  EXPECT_EQ(records[1].time->interleaved_with, (Names{"B"}));
  EXPECT_EQ(records[2].time->interleaved_with, (Names{"A", "C"}));
  EXPECT_EQ(records[3].status, Status::skipped);
  EXPECT_EQ(records[3].reason, "needs 2.0 kB, limit 1.0 kB");
  EXPECT_EQ(records[4].status, Status::ok) << records[4].reason;
  EXPECT_FALSE(records[4].time.has_value());
  EXPECT_EQ(runs(), (Names{"A", "C", "A", "C", "A", "C", "A", "C",  // first runs, warm-up, 2 samples
                           "B", "B", "B", "B", "E"}));
}

TEST_F(Interleave, CtrlCStopsTheCaseBetweenTwoRuns) {
  add({"A"});
  add({"B", {0.01}, 0, 0, 0, 0, /*interrupt_at_run=*/3});  // its first sample
  add({"C"});
  run(settings(1, 1000, 0, 100));
  EXPECT_TRUE(interrupted());
  EXPECT_EQ(runs(/*skip=*/3), (Names{"A", "B", "C", "A", "B"}));  // warm-up, then B's first sample: no more
}

TEST_F(Interleave, RecordsSayTheOrderAndOlderRecordsReadAsSequential) {
  Record record;
  record.impl = "cpu.tiled";
  record.device = "cpu";
  record.time = TimeStats{1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 0, 10, {}, SampleOrder::interleaved, {"cpu.naive", "cpu.tiled"}};
  const nlohmann::json json = record;
  EXPECT_EQ(json["time_s"]["order"], "interleaved");
  EXPECT_EQ(json["time_s"]["interleaved_with"], nlohmann::json({"cpu.naive", "cpu.tiled"}));
  const Record back = json.get<Record>();
  EXPECT_EQ(back.time->order, SampleOrder::interleaved);
  EXPECT_EQ(back.time->interleaved_with, (Names{"cpu.naive", "cpu.tiled"}));

  record.time->order = SampleOrder::sequential;
  record.time->interleaved_with.clear();
  nlohmann::json sequential = record;
  EXPECT_EQ(sequential["time_s"]["order"], "sequential");
  EXPECT_FALSE(sequential["time_s"].contains("interleaved_with"));
  sequential["time_s"].erase("order");  // a record written before --interleave
  EXPECT_EQ(sequential.get<Record>().time->order, SampleOrder::sequential);
  sequential["time_s"]["order"] = "shuffled";
  EXPECT_THROW(sequential.get<Record>(), std::invalid_argument);
}

// --- the plan's predictions (plan_run, --dry-run) ---

// predicted_pair_seconds counts the runs run_one takes, for a fake whose runs take what it predicts: the
// checked run, the warm-ups, the samples up to --min-samples and --min-time or the budget; one sample past
// --max-time with --min-samples 1 (one_sample_pair), else a skip that says so.
TEST_F(Interleave, PredictedPairSecondsCountTheRunsTheRunnerTakes) {
  struct Example {
    double seconds;
    int warmup, min_samples;
    double min_time, max_time;
    int runs;  // what run_one takes
  };
  const Example examples[] = {
      {0.125, 2, 3, 1.0, 100, 1 + 1 + 8},  // --min-time: 8 samples of 0.125 s
      {0.125, 1, 12, 0.0, 100, 1 + 12},    // --min-samples
      {0.25, 3, 5, 0.0, 1.0, 1 + 2 + 1},   // the budget: 0.75 s after the first run, two warm-ups, then one sample
      {4.0, 3, 1, 0.0, 1.0, 2},            // one sample past --max-time: the checked run and one sample
  };
  for (const Example& example : examples) {
    log.clear();
    MeasureSettings measure = settings(example.warmup, example.min_samples, /*max_noise=*/100, example.max_time);
    measure.min_time_s = example.min_time;
    Fake fake{"F", {example.seconds}};
    fake.predicted = example.seconds;
    const FakeImplementation impl(fake, log);
    const Record record = run_one(impl, Case{}, measure, options());
    ASSERT_EQ(record.status, Status::ok) << record.reason;
    EXPECT_EQ(int(runs().size()), example.runs) << example.seconds << " s, max_time " << example.max_time;
    EXPECT_NEAR(predicted_pair_seconds(example.seconds, measure, /*timed=*/true), example.runs * example.seconds, 1e-9)
        << example.seconds << " s, max_time " << example.max_time;
    EXPECT_EQ(one_sample_pair(record, measure), example.min_samples == 1 && example.seconds > example.max_time);
    ASSERT_TRUE(record.time.has_value());
    if (one_sample_pair(record, measure)) {
      EXPECT_EQ(record.time->samples, 1);
    }
    // A record of one sample says so, whatever gave it one (the third example's budget does too).
    const nlohmann::json time = nlohmann::json(record).at("time_s");
    EXPECT_EQ(time.contains("one_sample"), record.time->samples == 1) << time.dump();
    if (record.time->samples == 1) {
      EXPECT_EQ(time.at("one_sample"), true);
    }
  }
  EXPECT_DOUBLE_EQ(predicted_pair_seconds(4.0, settings(1, 10, 100, 60), /*timed=*/false), 4.0);  // verify: one run

  // --min-samples above 1: skipped, with the way out.
  log.clear();
  Fake slow{"S", {4.0}};
  slow.predicted = 4.0;
  const Record skipped = run_one(FakeImplementation(slow, log), Case{}, settings(1, 2, 100, 1.0), options());
  EXPECT_EQ(skipped.status, Status::skipped);
  EXPECT_EQ(skipped.reason, "predicted 4.000 s per run, budget 1.000 s (--max-time); --min-samples 1 runs it once");
  EXPECT_TRUE(runs().empty());

  // Interleaved, a pair past --max-time is sampled once too, without the rounds' warm-up.
  log.clear();
  add({"quick", {0.125}});
  Fake long_one{"long", {4.0}};
  long_one.predicted = 4.0;
  add(long_one);
  const std::vector<Record> records = run(settings(/*warmup=*/2, /*min_samples=*/1, /*max_noise=*/100, /*max_time=*/1.0));
  ASSERT_TRUE(records[1].time.has_value()) << records[1].reason;
  EXPECT_EQ(records[1].time->samples, 1);
  EXPECT_EQ(std::count(log.begin(), log.end(), "long"), 2);  // its checked run and its one sample
}

// The progress line's ETA: from the predictions before anything finished, scaled by how the finished part
// compared with its prediction; without predictions, from the pairs finished.
TEST(Progress, EtaComesFromThePredictionsFromTheFirstPairOn) {
  EXPECT_EQ(eta_text(0, 10, 0.0, 0.0, 125.0), "2:05");
  EXPECT_EQ(eta_text(0, 10, 0.0, 0.0, 0.0), "--:--");         // nothing predicted, nothing finished
  EXPECT_EQ(eta_text(5, 10, 20.0, 0.0, 0.0), "0:20");         // 4 s a pair, 5 left
  EXPECT_EQ(eta_text(1, 10, 20.0, 10.0, 70.0), "2:00");       // twice as slow as predicted: 60 s left → 120
  EXPECT_EQ(eta_text(1, 10, 1000.0, 10.0, 70.0), "4:00");     // the scale held at 4
  EXPECT_EQ(eta_text(1, 10, 5.0, 0.5, 70.0), "1:10");         // under a second predicted done: not scaled yet
  EXPECT_EQ(eta_text(0, 10, 0.0, 0.0, 3725.0), "1:02:05");
}

TEST(Runner, InterleavedSweepOfRealImplementationsIsCheckedAndKeepsEachPeak) {
  SettingsSource source;
  source.load_config_text(R"({"impl": "cpu.naive,cpu.tiled", "seq": "17,64", "heads": 2, "head_dim": 16,
    "mask": "causal", "warmup": 0, "min_samples": 3, "min_time": 0, "max_noise": 100, "max_time": 1})",
                          "tiny");
  std::ostringstream table;
  const RunSummary sequential = run_plan(make_plan(source), RunOptions{}, table);
  source.set("interleave", "true", "--interleave");
  const Plan plan = make_plan(source);
  ASSERT_TRUE(plan.measure.interleave);
  const RunSummary interleaved = run_plan(plan, RunOptions{}, table);
  ASSERT_EQ(interleaved.records.size(), 4u);
  ASSERT_EQ(sequential.records.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    const Record& record = interleaved.records[i];
    ASSERT_EQ(record.status, Status::ok) << record.impl << ": " << record.reason;
    ASSERT_TRUE(record.verify.has_value());
    EXPECT_TRUE(record.verify->passed);
    ASSERT_TRUE(record.time.has_value());
    EXPECT_EQ(record.time->samples, 3);
    EXPECT_EQ(record.time->order, SampleOrder::interleaved);
    EXPECT_EQ(record.time->interleaved_with, (Names{"cpu.naive", "cpu.tiled"}));
    EXPECT_EQ(record.key(), sequential.records[i].key());  // the same order of records as a sequential run
    EXPECT_EQ(sequential.records[i].time->order, SampleOrder::sequential);
    // Measured alone, whatever else the rounds held.
    EXPECT_EQ(record.memory.peak_bytes, sequential.records[i].memory.peak_bytes) << record.key();
  }
}

// --- The checked run: outputs poisoned right before it and only then; the LSE checked where there is one. ---

// Wraps a registered implementation and logs the calls the runner makes on its prepared case, in order.
class Logged final : public Implementation {
 public:
  Logged(const Implementation& inner, std::vector<std::string>& log) : inner_(inner), log_(log) {}
  std::string name() const override { return inner_.name(); }
  std::string device() const override { return inner_.device(); }
  std::string supports(const Case& c) const override { return inner_.supports(c); }
  std::uint64_t predicted_bytes(const Case& c) const override { return inner_.predicted_bytes(c); }
  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    return inner_.predicted_seconds(c, rates);
  }
  std::unique_ptr<PreparedCase> prepare(const Case& c) const override {
    return std::make_unique<LoggedCase>(inner_.prepare(c), log_);
  }

 private:
  class LoggedCase final : public PreparedCase {
   public:
    LoggedCase(std::unique_ptr<PreparedCase> inner, std::vector<std::string>& log)
        : inner_(std::move(inner)), log_(log) {}
    void poison_outputs() override {
      log_.push_back("poison");
      inner_->poison_outputs();
    }
    double timed_run() override {
      log_.push_back("run");
      return inner_->timed_run();
    }
    const HostTensor& output() override {
      log_.push_back("output");
      return inner_->output();
    }
    const LseTensor* lse() override {
      log_.push_back("lse");
      return inner_->lse();
    }

   private:
    std::unique_ptr<PreparedCase> inner_;
    std::vector<std::string>& log_;
  };
  const Implementation& inner_;
  std::vector<std::string>& log_;
};

Case small_case(std::int64_t seq_q, std::int64_t seq_k, Mode mode = Mode::prefill) {
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = 64;
  c.dtype = DType::fp16;
  c.mask = Mask::causal;
  c.mode = mode;
  c.validate();
  return c;
}

// One warm-up run and three samples, whatever their noise.
MeasureSettings three_samples() {
  MeasureSettings measure;
  measure.warmup = 1;
  measure.min_samples = 3;
  measure.min_time_s = 0;
  measure.max_noise_percent = 100;
  return measure;
}

TEST(RunnerPoison, TheCheckedRunAloneIsPoisonedAndItsOutputsAreReadAfterIt) {
  const Case c = small_case(40, 17);
  MeasureSettings measure = three_samples();
  std::vector<std::string> log;
  const Record record = run_one(Logged(*find_implementation("cpu.tiled"), log), c, measure, RunOptions{});
  ASSERT_EQ(record.status, Status::ok) << record.reason;
  ASSERT_GE(log.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(log.begin(), log.begin() + 2), (std::vector<std::string>{"poison", "run"}));
  std::vector<std::string> read(log.begin() + 2, log.begin() + 4);  // both read for the check, in either order
  std::sort(read.begin(), read.end());
  EXPECT_EQ(read, (std::vector<std::string>{"lse", "output"}));
  EXPECT_EQ(std::count(log.begin(), log.end(), "poison"), 1) << "the timed samples are not poisoned";
  EXPECT_GE(std::count(log.begin(), log.end(), "run"), 4);  // the checked run and three samples

  log.clear();
  measure.verify = false;  // --no-verify: nothing checked, nothing poisoned
  const Record unchecked = run_one(Logged(*find_implementation("cpu.tiled"), log), c, measure, RunOptions{});
  ASSERT_EQ(unchecked.status, Status::ok) << unchecked.reason;
  EXPECT_EQ(std::count(log.begin(), log.end(), "poison"), 0);
  EXPECT_FALSE(unchecked.verify.has_value());
}

// --interleave checks each implementation's first run the same way: poisoned once, before it.
TEST(RunnerPoison, InterleavedCheckedRunsArePoisonedToo) {
  const Case c = small_case(40, 17);
  MeasureSettings measure = three_samples();
  std::vector<std::string> tiled_log, naive_log;
  const Logged tiled(*find_implementation("cpu.tiled"), tiled_log), naive(*find_implementation("cpu.naive"), naive_log);
  const std::vector<Record> records = run_interleaved({&tiled, &naive}, c, measure, RunOptions{});
  ASSERT_EQ(records.size(), 2u);
  for (const auto* log : {&tiled_log, &naive_log}) {
    ASSERT_GE(log->size(), 2u);
    EXPECT_EQ(std::vector<std::string>(log->begin(), log->begin() + 2), (std::vector<std::string>{"poison", "run"}));
    EXPECT_EQ(std::count(log->begin(), log->end(), "poison"), 1);
  }
  for (const Record& record : records) {
    ASSERT_EQ(record.status, Status::ok) << record.reason;
    EXPECT_TRUE(record.verify && record.verify->passed);
    EXPECT_EQ(record.time->order, SampleOrder::interleaved);
  }
}

// The CUDA kernels that write an LSE have it checked in every record (under the emulator here; the same
// shell for cuda.*), rows without keys included; the others say they produced none.
TEST(RunnerPoison, EveryKernelThatWritesAnLseHasItChecked) {
  RunOptions options;
  options.timing = false;
  const Case prefill = small_case(40, 17);  // causal: rows 0..22 see no key
  const Case decode = small_case(1, 300, Mode::decode);
  for (const std::string name : {"emu.fa1", "emu.fa2", "emu.fa3", "emu.decode", "emu.decode-splitk", "emu.naive",
                                 "cpu.tiled", "cpu.decode-splitk"}) {
    const Implementation& impl = *find_implementation(name);
    const Case& c = impl.supports(prefill).empty() ? prefill : decode;
    ASSERT_EQ(impl.supports(c), "") << name;
    const Record record = run_one(impl, c, MeasureSettings{}, options);
    ASSERT_EQ(record.status, Status::ok) << name << ": " << record.reason;
    ASSERT_TRUE(record.verify.has_value()) << name;
    const bool writes_lse = name != "emu.naive" && name.rfind("cpu.", 0) != 0;
    EXPECT_EQ(record.verify->lse_checked, writes_lse) << name;
    if (writes_lse) {
      EXPECT_LE(record.verify->lse_max_abs_diff, record.verify->lse_tolerance) << name;
    }
    const nlohmann::json json = record;
    EXPECT_EQ(json.at("verify").at("lse_checked"), writes_lse) << name;
    EXPECT_EQ(json.at("verify").contains("lse_tolerance"), writes_lse) << name;
  }
}

}  // namespace
}  // namespace faprobe
