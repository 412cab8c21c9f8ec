// Measurement: the statistics, and when sampling stops (min samples, min time, noise, cap, interrupt), through
// measure() and through the Sampler that it and the interleaved runner drive.
#include <cmath>

#include <gtest/gtest.h>

#include "harness/run/contention.hpp"
#include "harness/run/measure.hpp"

namespace faprobe {
namespace {

TEST(Measure, SummaryStatistics) {
  const TimeStats stats = summarize({4.0, 1.0, 3.0, 2.0, 5.0});
  EXPECT_DOUBLE_EQ(stats.median, 3.0);
  EXPECT_DOUBLE_EQ(stats.q1, 2.0);
  EXPECT_DOUBLE_EQ(stats.q3, 4.0);
  EXPECT_DOUBLE_EQ(stats.mean, 3.0);
  EXPECT_DOUBLE_EQ(stats.min, 1.0);
  EXPECT_DOUBLE_EQ(stats.max, 5.0);
  EXPECT_NEAR(stats.stddev, std::sqrt(2.5), 1e-12);
  EXPECT_EQ(stats.samples, 5);
  EXPECT_NEAR(relative_noise_percent(stats), 100.0 * std::sqrt(2.5) / 3.0 / std::sqrt(5.0), 1e-9);
}

TEST(Measure, KeepsTheRawSamplesInOrder) {
  const TimeStats stats = summarize({4e-3, 1e-3, 3.0000000004e-3, 2e-3});
  ASSERT_EQ(stats.samples_s.size(), 4u);
  EXPECT_DOUBLE_EQ(stats.samples_s[0], 4e-3);  // the order taken, not sorted
  EXPECT_DOUBLE_EQ(stats.samples_s[1], 1e-3);
  EXPECT_DOUBLE_EQ(stats.samples_s[2], 3e-3);  // rounded to the nanosecond
}

TEST(Measure, ThinsTheKeptSamplesEvenly) {
  EXPECT_EQ(kept_sample_indices(3, 10), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(kept_sample_indices(10, 4), (std::vector<std::size_t>{0, 2, 5, 7}));
  std::vector<double> many;
  for (int i = 0; i < 25000; ++i) many.push_back(1e-3 * (1 + i % 7));
  const TimeStats stats = summarize(many);
  EXPECT_EQ(stats.samples, 25000);  // the statistics are over all of them ...
  ASSERT_EQ(stats.samples_s.size(), kMaxKeptSamples);  // ... the record keeps at most this many
  EXPECT_DOUBLE_EQ(stats.samples_s[0], many[0]);
  EXPECT_DOUBLE_EQ(stats.samples_s[1], many[2]);  // 1 · 25000 / 10000 = 2
  EXPECT_DOUBLE_EQ(stats.samples_s.back(), many[9999 * 25000 / 10000]);
}

MeasureSettings settings(int min_samples, double min_time, double max_noise, double max_time) {
  MeasureSettings s;
  s.warmup = 1;
  s.min_samples = min_samples;
  s.min_time_s = min_time;
  s.max_noise_percent = max_noise;
  s.max_time_s = max_time;
  return s;
}

// 10 ms and a nanosecond's jitter: quiet, and not identical (identical samples never satisfy the rule).
double quiet_sample(int call) { return 0.01 + 1e-9 * (call % 2); }

TEST(Measure, QuietSamplesStopAtTheMinimums) {
  int calls = 0;
  const TimeStats stats =
      measure([&] { return quiet_sample(++calls); }, settings(10, 0.05, 0.5, 100), [] { return false; });
  EXPECT_EQ(stats.samples, 10);  // 10 samples = 0.1 s ≥ min_time, noise ~0
  EXPECT_EQ(calls, 11);          // plus one warm-up
  const TimeStats longer =
      measure([&] { return quiet_sample(++calls); }, settings(3, 0.2, 0.5, 100), [] { return false; });
  EXPECT_EQ(longer.samples, 20);  // min_time decides
}

// The defect seen on a loaded 2-core VM: every sample the scheduler's tick to the nanosecond, noise 0, so
// the minimums ended sampling. Identical samples never satisfy the rule: sampling goes on to the budget.
TEST(Measure, IdenticalSamplesNeverSatisfyTheNoiseRule) {
  Sampler sampler(settings(3, 0.0, 0.5, 1.0));
  for (int i = 0; i < 13; ++i) sampler.add(7.998e-3);
  EXPECT_FALSE(sampler.satisfied());
  EXPECT_TRUE(sampler.wants_more());
  sampler.add(7.998e-3 + 1e-9);  // one nanosecond apart: a real kernel's jitter, the rule applies again
  EXPECT_TRUE(sampler.satisfied());

  const TimeStats stats = measure([] { return 7.998e-3; }, settings(3, 0.0, 0.5, 1.0), [] { return false; });
  EXPECT_EQ(stats.samples, 125);  // 1 s of 8 ms samples (the warm-up's one included): the budget, not 3
  ASSERT_TRUE(stats.contended.has_value());
  EXPECT_TRUE(stats.contended->identical);
}

TEST(Measure, NoisySamplesRunUntilTheNoiseSettlesOrTheCap) {
  int calls = 0;
  auto alternating = [&] { return (++calls % 2) ? 0.01 : 0.03; };  // relative stddev 50 %
  const TimeStats settled = measure(alternating, settings(2, 0.0, 5.0, 1000), [] { return false; });
  // 100·stddev/mean/√n ≤ 5 needs n ≥ ~100 samples
  EXPECT_GE(settled.samples, 90);
  EXPECT_LE(settled.samples, 110);
  calls = 0;
  const TimeStats capped = measure(alternating, settings(2, 0.0, 0.01, 1.0), [] { return false; });
  EXPECT_NEAR(double(capped.samples), 50.0, 2.0);  // 1 s of 20 ms average samples, warm-up included
}

TEST(Measure, InterruptStopsSampling) {
  int calls = 0;
  const TimeStats stats = measure([&] { ++calls; return 0.01; }, settings(1000, 100, 0, 1000), [&] { return calls >= 5; });
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(stats.samples, 4);
}

TEST(Sampler, WarmsUpThenWantsSamplesUntilItsRuleIsMet) {
  Sampler sampler(settings(3, 0.0, 100, 100));
  sampler.add_warmup(0.01);
  EXPECT_FALSE(sampler.warming_up());  // warmup 1
  EXPECT_TRUE(sampler.wants_more());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(sampler.wants_more()) << i;
    sampler.add(quiet_sample(i));
  }
  EXPECT_TRUE(sampler.satisfied());
  EXPECT_FALSE(sampler.wants_more());
  EXPECT_TRUE(sampler.budget_left());  // met its rule, not its cap: the interleaved runner may sample it on
  EXPECT_EQ(sampler.samples(), 3);
  EXPECT_NEAR(sampler.spent_s(), 0.04, 1e-8);  // the warm-up counts against the budget
  EXPECT_EQ(sampler.stats().samples, 3);
}

TEST(Sampler, TheBudgetEndsWarmUpAndSamplingButOneSampleIsAlwaysTaken) {
  MeasureSettings s = settings(100, 0.0, 0.0, 1.0);
  s.warmup = 5;
  Sampler sampler(s);
  sampler.add_warmup(0.6);
  EXPECT_TRUE(sampler.warming_up());
  sampler.add_warmup(0.6);
  EXPECT_FALSE(sampler.warming_up());  // 1.2 s of a 1 s budget: no third warm-up run
  EXPECT_TRUE(sampler.budget_left());  // but one sample, as measure() takes one
  EXPECT_TRUE(sampler.wants_more());
  sampler.add(0.6);
  EXPECT_FALSE(sampler.budget_left());
  EXPECT_FALSE(sampler.wants_more());
  EXPECT_FALSE(sampler.satisfied());  // 1 of 100 samples: it stopped on its cap
}

TEST(Sampler, NoiseKeepsItWanting) {
  Sampler sampler(settings(2, 0.0, 5.0, 1000));
  for (int i = 0; i < 10; ++i) sampler.add(i % 2 ? 0.03 : 0.01);  // relative stddev 50 %: needs ~100
  EXPECT_FALSE(sampler.satisfied());
  EXPECT_TRUE(sampler.wants_more());
  for (int i = 0; i < 200; ++i) sampler.add(i % 2 ? 0.03 : 0.01);
  EXPECT_TRUE(sampler.satisfied());
}

// The contention rules (contention.hpp) over planted sample sets. A CPU record of 2 threads on 2 cores, the
// load average unknown unless a test sets it.
ContentionContext cpu_context() {
  ContentionContext context;
  context.threads = 2;
  context.cores = 2;
  return context;
}

// `seconds` as samples whose threads got `share` of wall × 2 threads and `switches` involuntary switches each.
std::vector<SampleObservation> observed(const std::vector<double>& seconds, double share, std::int64_t switches) {
  std::vector<SampleObservation> samples;
  for (double s : seconds) samples.push_back({s, s + 2e-6, share * (s + 2e-6) * 2, switches});
  return samples;
}

// The first 13 samples of the default sweep's cpu.tiled at s512 on the quiet 2-core VM (95 samples, CPU
// share 1.0, 0.03 switches per sample): jitter of a few percent and a fast tail.
std::vector<double> quiet_seconds() {
  return {1.2484e-3, 1.1117e-3, 1.0771e-3, 1.0556e-3, 1.0703e-3, 1.0749e-3, 1.0674e-3,
          1.0880e-3, 1.0913e-3, 1.1133e-3, 1.1759e-3, 0.9464e-3, 0.7880e-3};
}

bool has_evidence(const Contention& contention, const std::string& words) {
  for (const std::string& line : contention.evidence) {
    if (line.find(words) != std::string::npos) return true;
  }
  return false;
}

TEST(Contention, ARealisticQuietSetIsNotFlagged) {
  EXPECT_FALSE(detect_contention(observed(quiet_seconds(), 0.97, 0), cpu_context()));
  std::vector<SampleObservation> samples = observed(quiet_seconds(), 0.97, 0);
  samples[4].involuntary_switches = 1;  // a kernel thread ran once
  EXPECT_FALSE(detect_contention(samples, cpu_context()));
}

TEST(Contention, TickQuantisedSamplesOfALoadedMachineAreFlagged) {
  // As seen: cpu.tiled s256 (quiet 1 ms) and decode (quiet 13 us) read 7.988-7.999 ms, two switches each.
  const std::vector<double> ticks = {7.998e-3, 7.9985e-3, 7.999e-3, 7.998e-3, 7.9982e-3, 7.9989e-3, 7.9981e-3,
                                     7.9987e-3, 7.998e-3, 7.9991e-3, 7.9984e-3, 7.9983e-3, 7.9986e-3};
  const auto contention = detect_contention(observed(ticks, 0.5, 2), cpu_context());
  ASSERT_TRUE(contention.has_value());
  EXPECT_TRUE(contention->quantised);
  EXPECT_FALSE(contention->identical);
  EXPECT_TRUE(has_evidence(*contention, "of a multiple of 1 ms")) << contention->evidence.front();
  EXPECT_TRUE(has_evidence(*contention, "involuntary context switches per sample"));
  EXPECT_DOUBLE_EQ(contention->involuntary_switches, 2.0);

  // The same samples with the CPU's word missing (no switches, full share): quantised alone is what a quiet
  // kernel whose time sits at 8 ms would show, so it takes a second supporting rule, here the load average.
  EXPECT_FALSE(detect_contention(observed(ticks, 1.0, 0), cpu_context()));
  ContentionContext loaded = cpu_context();
  loaded.load_average = 4.1;
  const auto with_load = detect_contention(observed(ticks, 1.0, 0), loaded);
  ASSERT_TRUE(with_load.has_value());
  EXPECT_TRUE(has_evidence(*with_load, "load average 4.1"));
}

TEST(Contention, AQuietKernelNearAMultipleOfATickIsNotFlaggedOnThatAlone) {
  std::vector<double> near_two_ms;
  for (int i = 0; i < 13; ++i) near_two_ms.push_back(2.0004e-3 + 1e-6 * (i % 5));
  const auto samples = observed(near_two_ms, 0.98, 0);
  EXPECT_FALSE(detect_contention(samples, cpu_context()));
  ContentionContext light_load = cpu_context();
  light_load.load_average = 2.3;  // at most the cores: not above them
  EXPECT_FALSE(detect_contention(samples, light_load));
}

TEST(Contention, IdenticalSamplesAreFlagged) {
  const auto contention = detect_contention(observed(std::vector<double>(13, 7.998e-3), 1.0, 0), cpu_context());
  ASSERT_TRUE(contention.has_value());
  EXPECT_TRUE(contention->identical);
  EXPECT_TRUE(has_evidence(*contention, "all 13 samples identical to the nanosecond"));
  // A GPU record timed by CUDA events (0.5 us resolution) may repeat a 2 us kernel's time: no evidence.
  ContentionContext gpu;
  gpu.cpu_observed = false;
  gpu.timer_resolution_s = 0.5e-6;
  std::vector<SampleObservation> events(13, SampleObservation{2.048e-6, 30e-6, -1, 0});
  EXPECT_FALSE(detect_contention(events, gpu));
  // ... but 13 identical 8 ms GPU samples are no timer's resolution.
  std::vector<SampleObservation> long_events(13, SampleObservation{7.998e-3, 8.1e-3, -1, 0});
  EXPECT_TRUE(detect_contention(long_events, gpu));
}

TEST(Contention, ALowCpuShareIsFlaggedWithASecondRule) {
  std::vector<double> seconds;
  for (int i = 0; i < 20; ++i) seconds.push_back(5.3e-3 + 0.2e-3 * (i % 3));  // off the ticks, no switches
  ContentionContext loaded = cpu_context();
  loaded.load_average = 3.9;
  const auto contention = detect_contention(observed(seconds, 0.3, 0), loaded);
  ASSERT_TRUE(contention.has_value());
  EXPECT_NEAR(contention->cpu_share, 0.3, 1e-9);
  EXPECT_TRUE(has_evidence(*contention, "cpu share 0.30 of 2 threads"));
  // The same load average with the threads busy all along: one supporting rule, not flagged.
  EXPECT_FALSE(detect_contention(observed(seconds, 0.9, 0), loaded));
  // A low share alone is what idle OpenMP threads asleep in imbalanced work give on a quiet machine.
  EXPECT_FALSE(detect_contention(observed(seconds, 0.3, 0), cpu_context()));
  // Over less wall clock than a few ticks the share is not read: threads' runtimes update at ticks.
  EXPECT_FALSE(detect_contention(observed({5.3e-3, 5.5e-3, 5.4e-3}, 0.3, 0), loaded));
}

TEST(Contention, FrequentInvoluntarySwitchesAreFlagged) {
  std::vector<double> seconds;
  for (int i = 0; i < 20; ++i) seconds.push_back(5.3e-3 + 0.2e-3 * (i % 3));
  const auto contention = detect_contention(observed(seconds, 0.9, 2), cpu_context());
  ASSERT_TRUE(contention.has_value());
  EXPECT_TRUE(has_evidence(*contention, "2.0 involuntary context switches per sample"));
  // The same switches over a much longer run: 2 per 0.1 s sample is 10 per CPU-second, a quiet machine's
  // kernel threads, not a neighbour.
  EXPECT_FALSE(detect_contention(observed({0.1013, 0.1034, 0.1027}, 0.98, 2), cpu_context()));
  // One switch per one-second sample, likewise.
  EXPECT_FALSE(detect_contention(observed({1.0137, 1.0291, 1.0218}, 0.98, 1), cpu_context()));
}

TEST(Contention, MoreThreadsThanCoresAreFlagged) {
  ContentionContext oversubscribed = cpu_context();
  oversubscribed.requested_threads = 4;
  const auto contention = detect_contention(observed(quiet_seconds(), 0.97, 0), oversubscribed);
  ASSERT_TRUE(contention.has_value());
  EXPECT_TRUE(has_evidence(*contention, "--threads 4 above the 2 cores"));
}

TEST(Contention, ABimodalSpreadSupportsOtherEvidence) {
  // Preempted samples of a 0.22 ms kernel land on the tick: two groups, 0.22 ms and 8 ms.
  std::vector<double> seconds = {0.2187e-3, 0.2269e-3, 0.2178e-3, 0.2177e-3, 0.2240e-3, 7.9919e-3, 8.0002e-3,
                                 7.9897e-3, 7.9947e-3, 7.9954e-3, 7.9946e-3, 7.9950e-3, 7.9942e-3};
  const auto contention = detect_contention(observed(seconds, 1.0, 0), cpu_context());
  ASSERT_TRUE(contention.has_value());
  EXPECT_TRUE(has_evidence(*contention, "bimodal: 5 samples around"));
  EXPECT_TRUE(contention->quantised);  // 8 of 13 on the tick: the second supporting rule
  // A bimodal set alone (two modes of a quiet machine, off the ticks) is not flagged.
  for (double& s : seconds) s = s > 1e-3 ? s * 0.77 : s;  // ~6.15 ms: not a multiple of 1 ms
  EXPECT_FALSE(detect_contention(observed(seconds, 1.0, 0), cpu_context()));
}

}  // namespace
}  // namespace faprobe
