// Measurement: the statistics, and when sampling stops (min samples, min time, noise, cap, interrupt), through
// measure() and through the Sampler that it and the interleaved runner drive.
#include <cmath>

#include <gtest/gtest.h>

#include "harness/measure.hpp"

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

TEST(Measure, QuietSamplesStopAtTheMinimums) {
  int calls = 0;
  const TimeStats stats = measure([&] { ++calls; return 0.01; }, settings(10, 0.05, 0.5, 100), [] { return false; });
  EXPECT_EQ(stats.samples, 10);  // 10 samples = 0.1 s ≥ min_time, noise 0
  EXPECT_EQ(calls, 11);          // plus one warm-up
  const TimeStats longer = measure([] { return 0.01; }, settings(3, 0.2, 0.5, 100), [] { return false; });
  EXPECT_EQ(longer.samples, 20);  // min_time decides
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
    sampler.add(0.01);
  }
  EXPECT_TRUE(sampler.satisfied());
  EXPECT_FALSE(sampler.wants_more());
  EXPECT_TRUE(sampler.budget_left());  // met its rule, not its cap: the interleaved runner may sample it on
  EXPECT_EQ(sampler.samples(), 3);
  EXPECT_DOUBLE_EQ(sampler.spent_s(), 0.04);  // the warm-up counts against the budget
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

}  // namespace
}  // namespace faprobe
