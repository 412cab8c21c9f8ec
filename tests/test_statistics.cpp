// The statistics of `faprobe compare`: the Mann–Whitney U test against values scipy.stats.mannwhitneyu
// gives for the same samples (scipy 1.x, alternative "two-sided", the method named in each test), and the
// bootstrap interval of a ratio of medians; the Wilcoxon signed-rank test against scipy.stats.wilcoxon
// (scipy 1.17.1, its defaults: two-sided, zero_method "wilcox", correction False, method "auto").
#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "harness/records/statistics.hpp"

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

// Values from scipy 1.17.1: `wilcoxon(x, y)`, statistic and pvalue as printed; "auto" picks the method named.
TEST(Statistics, SignedRankExactWithoutTies) {
  // wilcoxon([1.1, 2.3, 0.7, 4.5, 3.3], [1.5, 2.0, 1.9, 4.0, 3.5]): T 6, p 0.8125 (exact; asymptotic 0.686)
  const RankTest five = wilcoxon_signed_rank({1.1, 2.3, 0.7, 4.5, 3.3}, {1.5, 2.0, 1.9, 4.0, 3.5});
  EXPECT_TRUE(five.exact);
  EXPECT_DOUBLE_EQ(five.u, 6.0);
  EXPECT_NEAR(five.p, 0.8125, 1e-15);
  // Eight differences, all positive: T 0, p 2 / 2^8 = 0.0078125.
  const RankTest eight = wilcoxon_signed_rank({2.0, 3.5, 1.25, 4.0, 5.5, 2.75, 6.0, 3.0},
                                              {1.0, 3.0, 1.0, 2.5, 5.0, 2.5, 3.0, 1.0});
  EXPECT_TRUE(eight.exact);
  EXPECT_DOUBLE_EQ(eight.u, 0.0);
  EXPECT_NEAR(eight.p, 0.0078125, 1e-15);
  // Ten, mixed signs: T 8, p 0.046875.
  const std::vector<double> x = {10.2, 9.8, 11.5, 10.9, 12.3, 9.1, 10.0, 11.1, 10.6, 9.9};
  const std::vector<double> y = {9.9, 10.4, 10.1, 10.0, 11.0, 9.6, 9.3, 10.2, 10.8, 9.2};
  const RankTest ten = wilcoxon_signed_rank(x, y);
  EXPECT_TRUE(ten.exact);
  EXPECT_DOUBLE_EQ(ten.u, 8.0);
  EXPECT_NEAR(ten.p, 0.046875, 1e-15);
  // Swapping the sides negates every difference: the same T and two-sided p (wilcoxon(y, x): T 8, p 0.046875).
  const RankTest swapped = wilcoxon_signed_rank(y, x);
  EXPECT_TRUE(swapped.exact);
  EXPECT_DOUBLE_EQ(swapped.u, 8.0);
  EXPECT_EQ(swapped.p, ten.p);
  // One difference: T 0, p 1.
  EXPECT_EQ(wilcoxon_signed_rank({2.0}, {1.0}).p, 1.0);
}

// The planted defect `faprobe ab` must see: NEW slower in every one of 10 rounds. The smallest two-sided p
// ten pairs can give, 2 / 2^10 (scipy: T 0, p 0.001953125), whatever the sizes of the shifts.
TEST(Statistics, SignedRankTenOfTenRoundsSlower) {
  std::vector<double> base, slower;
  for (int i = 0; i < 10; ++i) {
    base.push_back(1.0 + 0.01 * i);
    slower.push_back(0.5 + 0.003 * i);
  }
  const RankTest test = wilcoxon_signed_rank(base, slower);
  EXPECT_TRUE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 0.0);
  EXPECT_EQ(test.p, 2.0 / 1024);
  EXPECT_EQ(wilcoxon_signed_rank(slower, base).p, 2.0 / 1024);
}

TEST(Statistics, SignedRankExactAtTheSizeLimit) {
  std::vector<double> x, y;
  for (int i = 0; i < 50; ++i) {
    x.push_back(1.0 + 0.01 * i);
    y.push_back(1.0 + 0.01 * i + (i % 3 != 0 ? 0.001 * (i + 1) : -0.001 * (i + 1)));  // |d| all distinct
  }
  // T 425, p 0.03996834652842374 (exact; method="asymptotic" gives 0.0402356268160887)
  const RankTest test = wilcoxon_signed_rank(x, y);
  EXPECT_TRUE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 425.0);
  EXPECT_NEAR(test.p / 0.03996834652842374, 1.0, 1e-12);
}

TEST(Statistics, SignedRankNormalApproximationOverFiftyPairs) {
  std::vector<double> x, y;
  for (int i = 0; i < 60; ++i) {
    x.push_back(1.0 + ((i * 37) % 101) / 1000.0);
    y.push_back(1.003 + ((i * 53) % 103) / 1000.0 + i * 1e-6);  // no ties, no zeros, but 60 pairs
  }
  const RankTest test = wilcoxon_signed_rank(x, y);  // T 886, p 0.8309475279594561
  EXPECT_FALSE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 886.0);
  EXPECT_NEAR(test.p, 0.8309475279594561, 1e-12);
}

TEST(Statistics, SignedRankNormalApproximationWithTies) {
  // 20 pairs whose |d| tie (0.5 and 1.0 many times): the variance's tie correction. T 46, p 0.021568741219488895
  const RankTest test = wilcoxon_signed_rank(
      {1.5, 2.0, 3.0, 2.5, 4.0, 1.0, 2.0, 3.5, 5.0, 2.0, 3.0, 1.5, 4.5, 2.0, 3.0, 2.5, 1.0, 6.0, 3.0, 2.0},
      {1.0, 3.0, 2.0, 2.0, 3.0, 2.0, 1.0, 2.5, 4.0, 3.0, 1.0, 1.0, 3.5, 1.0, 2.0, 1.5, 2.0, 4.0, 2.0, 1.5});
  EXPECT_FALSE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 46.0);
  EXPECT_NEAR(test.p, 0.021568741219488895, 1e-12);
}

TEST(Statistics, SignedRankSignFlipsWithTiesInSmallSamples) {
  // 8 pairs with tied |d|: scipy's "auto" runs an exact permutation test (2^8 sign flips), not the normal
  // approximation. T 11, p 0.3359375 (method="asymptotic" gives 0.30464192203660967)
  const RankTest test = wilcoxon_signed_rank({1.5, 2.0, 3.0, 2.5, 4.0, 1.0, 2.0, 3.5},
                                             {1.0, 3.0, 2.0, 2.0, 3.0, 2.0, 1.0, 2.5});
  EXPECT_TRUE(test.exact);
  EXPECT_DOUBLE_EQ(test.u, 11.0);
  EXPECT_NEAR(test.p, 0.3359375, 1e-15);
}

TEST(Statistics, SignedRankDropsZeroDifferences) {
  // 16 pairs, 3 of them equal: over 13 pairs with zeros, the normal approximation on the 13 others.
  // T 1, p 0.0018654246143055666, the same as wilcoxon(x', y', method="asymptotic") on the non-zero pairs alone.
  const RankTest sixteen = wilcoxon_signed_rank(
      {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0},
      {0.7, 2.0, 2.6, 4.2, 4.1, 6.0, 6.35, 7.05, 9.0, 9.15, 10.55, 11.4, 12.2, 13.25, 14.45, 15.1});
  EXPECT_FALSE(sixteen.exact);
  EXPECT_DOUBLE_EQ(sixteen.u, 1.0);
  EXPECT_NEAR(sixteen.p, 0.0018654246143055666, 1e-12);
  // 6 pairs, 2 equal: the sign flips of the 4 others, T 0, p 2 / 2^4 = 0.125.
  const RankTest six = wilcoxon_signed_rank({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {0.5, 2.0, 2.25, 4.0, 4.0, 5.5});
  EXPECT_TRUE(six.exact);
  EXPECT_DOUBLE_EQ(six.u, 0.0);
  EXPECT_NEAR(six.p, 0.125, 1e-15);
  // No difference left: no evidence either way.
  EXPECT_EQ(wilcoxon_signed_rank({1, 2, 3}, {1, 2, 3}).p, 1.0);
  EXPECT_EQ(wilcoxon_signed_rank({}, {}).p, 1.0);
}

TEST(Statistics, SignedRankRefusesUnpairedSamples) {
  EXPECT_THROW(wilcoxon_signed_rank({1, 2, 3}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(wilcoxon_signed_rank({1, NAN}, {1, 2}), std::invalid_argument);
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
