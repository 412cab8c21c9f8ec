// The statistics of `faprobe compare`: the Mann–Whitney U test against values scipy.stats.mannwhitneyu
// gives for the same samples (scipy 1.x, alternative "two-sided", the method named in each test), and the
// bootstrap interval of a ratio of medians.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "harness/statistics.hpp"

namespace faprobe {
namespace {

TEST(Statistics, ExactUWithoutTies) {
  // mannwhitneyu([1.1, 2.3, 0.7, 4.5, 3.3], [5.2, 6.1, 3.9, 7.7, 4.8, 6.6], method="exact"): U 1, p 0.008658...
  const RankTest test = mann_whitney_u({1.1, 2.3, 0.7, 4.5, 3.3}, {5.2, 6.1, 3.9, 7.7, 4.8, 6.6});
  EXPECT_TRUE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 1.0);
  EXPECT_NEAR(test.p, 0.008658008658008658, 1e-15);
  // The smallest p two sets of 3 can reach: 2 / C(6, 3) = 0.1.
  const RankTest three = mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_DOUBLE_EQ(three.u, 0.0);
  EXPECT_NEAR(three.p, 0.1, 1e-15);
  // Swapping the sides gives U' = m·n − U and the same p.
  const RankTest swapped = mann_whitney_u({4, 5, 6}, {1, 2, 3});
  EXPECT_DOUBLE_EQ(swapped.u, 9.0);
  EXPECT_NEAR(swapped.p, 0.1, 1e-15);
}

TEST(Statistics, ExactUAtTheSizeLimit) {
  std::vector<double> x, y;
  for (int i = 1; i <= 40; ++i) x.push_back(0.5 * i);
  for (int i = 1; i <= 45; ++i) y.push_back(0.5 * i + 7.25);
  const RankTest test = mann_whitney_u(x, y);  // method="exact": U 325, p 1.113697043091385e-07
  EXPECT_TRUE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 325.0);
  EXPECT_NEAR(test.p / 1.113697043091385e-07, 1.0, 1e-9);
}

TEST(Statistics, NormalApproximationWithTies) {
  // mannwhitneyu([1, 2, 2, 3, 3, 3, 4], [2, 3, 4, 4, 5, 5, 6, 7], method="asymptotic"): U 8.5, p 0.025279...
  const RankTest test = mann_whitney_u({1, 2, 2, 3, 3, 3, 4}, {2, 3, 4, 4, 5, 5, 6, 7});
  EXPECT_FALSE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 8.5);
  EXPECT_NEAR(test.p, 0.025279736885893914, 1e-12);
}

TEST(Statistics, NormalApproximationForLargeSamples) {
  std::vector<double> x, y;
  for (int i = 0; i < 200; ++i) x.push_back(1 + ((i * 37) % 101) / 1000.0);
  for (int i = 0; i < 180; ++i) y.push_back(1.004 + ((i * 53) % 103) / 1000.0);
  const RankTest test = mann_whitney_u(x, y);  // method="asymptotic": U 16604.5, p 0.19193360241049195
  EXPECT_FALSE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 16604.5);
  EXPECT_NEAR(test.p, 0.19193360241049195, 1e-12);
}

TEST(Statistics, NoEvidenceWithoutData) {
  EXPECT_EQ(mann_whitney_u({}, {1, 2}).p, 1.0);
  EXPECT_EQ(mann_whitney_u({2, 2, 2}, {2, 2}).p, 1.0);  // all tied: zero variance
}

TEST(Statistics, Median) {
  EXPECT_EQ(median({3, 1, 2}), 2.0);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({}), 0.0);
}

TEST(Statistics, BlockMediansAndSpread) {
  EXPECT_EQ(block_medians({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5), (std::vector<double>{1.5, 3.5, 5.5, 7.5, 9.5}));
  EXPECT_EQ(block_medians({3, 1, 2}, 10), (std::vector<double>{3, 1, 2}));  // fewer values than blocks
  EXPECT_EQ(block_medians({1, 2, 3, 4, 5, 6, 7}, 2), (std::vector<double>{2, 5.5}));  // 3 and 4 values
  EXPECT_DOUBLE_EQ(relative_iqr({1, 2, 3, 4, 5}), (4.0 - 2.0) / 3.0);
  EXPECT_EQ(relative_iqr({}), 0.0);
}

TEST(Statistics, BootstrapIntervalHoldsTheRatio) {
  std::vector<double> base, slower;
  for (int i = 0; i < 101; ++i) {
    base.push_back(1e-3 * (1 + 0.02 * ((i * 37) % 11 - 5) / 5.0));  // ±2 % around 1 ms
    slower.push_back(1.25 * base.back());
  }
  const RatioInterval interval = median_ratio_interval(base, slower, 0.99);
  EXPECT_NEAR(interval.ratio, 1.25, 1e-12);
  EXPECT_LE(interval.low, interval.ratio);
  EXPECT_GE(interval.high, interval.ratio);
  EXPECT_GT(interval.low, 1.2);  // the spread is ±2 %, so the interval is narrow
  EXPECT_LT(interval.high, 1.3);
  // The same samples give the same interval (a fixed generator), and a wider confidence a wider interval.
  const RatioInterval again = median_ratio_interval(base, slower, 0.99);
  EXPECT_EQ(again.low, interval.low);
  EXPECT_EQ(again.high, interval.high);
  const RatioInterval narrower = median_ratio_interval(base, slower, 0.5);
  EXPECT_GE(narrower.low, interval.low);
  EXPECT_LE(narrower.high, interval.high);
  EXPECT_THROW(median_ratio_interval({}, slower, 0.99), std::invalid_argument);
  EXPECT_THROW(median_ratio_interval(base, slower, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace faprobe
