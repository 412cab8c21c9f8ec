// The statistics `faprobe compare` judges a change with, written here (no Debian-packaged C++ library
// offers a rank test): the Mann–Whitney U test on two sets of raw samples, and a bootstrap confidence
// interval for the ratio of their medians.
//
// Why these: timing samples are not normal (a floor set by the hardware, a long right tail from the OS and
// other tenants), so a t-test's p-value means little; the U test asks only whether a sample of NEW tends to
// be larger than one of BASE (P(X > Y) ≠ 1/2), which is the question "did it get slower". The ratio of
// medians is what the tables show; its interval comes from resampling each side (percentile bootstrap), which
// assumes nothing about the shape either.
//
// U is computed from mid-ranks (ties share the mean of their ranks). The two-sided p-value is exact when
// there are no ties and both sides have at most kExactLimit samples (the null distribution of U by the
// usual recurrence, Mann & Whitney 1947: scipy.stats.mannwhitneyu's method "exact"); otherwise it is the
// normal approximation with the tie correction of the variance and a continuity correction of 1/2 (its
// method "asymptotic"). tests/test_statistics.cpp checks known values that scipy gives for both.
//
// `faprobe ab` runs the two sides in interleaved rounds, so its samples come in pairs (round i of A with round
// i of B) and a drift of the machine moves both alike; the Wilcoxon signed-rank test judges the per-round
// differences and leaves that drift out. It follows scipy.stats.wilcoxon's defaults (scipy 1.17.1: alternative
// "two-sided", zero_method "wilcox", correction False, method "auto"): d = x − y; zero differences are dropped;
// the n non-zero |d| get mid-ranks; W+ and W− are the sums of the ranks of the positive and the negative d.
// The two-sided p-value is 2·min(P(W ≤ W+), P(W ≥ W+)) under the null distribution of W+ (every d equally
// likely positive or negative), capped at 1, and that distribution is
//   - exact, enumerated, when there are at most kSignedRankExactLimit pairs and neither ties among the |d| nor
//     zeros (scipy's method "exact");
//   - enumerated over the 2^n sign flips of the observed ranks, with their ties, when there are ties or zeros
//     and at most kSignedRankPermutationLimit pairs (scipy's fallback there: an exact permutation_test, since
//     2^13 sign patterns are fewer than its 9999 resamples);
//   - otherwise the normal approximation, mean n(n+1)/4 and variance (n(n+1)(2n+1) − Σ(t³ − t)/2)/24 over
//     groups of t tied |d|, without a continuity correction (its method "asymptotic").
// Both limits count the pairs, zeros included, as scipy does.
#pragma once
#include <cstdint>
#include <vector>

namespace faprobe {

struct RankTest {
  // The statistic scipy reports. mann_whitney_u: U of the first sample, the number of pairs (x, y) with x > y,
  // ties counted 1/2. wilcoxon_signed_rank: T = min(W+, W−), a multiple of 1/2.
  double u = 0;
  double p = 1;       // two-sided p-value
  bool exact = false;  // p from an enumerated null distribution (small samples), else the normal approximation
};

inline constexpr std::size_t kExactLimit = 50;
inline constexpr std::size_t kSignedRankExactLimit = 50;        // pairs, for the exact W+ without ties or zeros
inline constexpr std::size_t kSignedRankPermutationLimit = 13;  // pairs, for the sign flips with ties or zeros

// Two-sided Mann–Whitney U test of x against y; p = 1 when either is empty.
RankTest mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y);

// Two-sided Wilcoxon signed-rank test of the pairs (x[i], y[i]) on d = x − y (see above); p = 1 when no
// difference is non-zero. Throws std::invalid_argument when x and y differ in size or a difference is NaN.
RankTest wilcoxon_signed_rank(const std::vector<double>& x, const std::vector<double>& y);

double median(std::vector<double> values);  // the mean of the two middle values for an even count; 0 if empty

// (q3 − q1) / median of `values` (quartiles by linear interpolation): the spread of single samples; 0 if empty.
double relative_iqr(std::vector<double> values);

// The medians of `blocks` consecutive, equal (±1) runs of `values` in their order, or of each value when there
// are fewer. Samples taken one after another are not independent draws (a machine's load and clocks drift
// through a run), so a test on every raw sample reports p = 1e-100 for a drift no one could reproduce; block
// medians turn that drift into the spread the test sees.
std::vector<double> block_medians(const std::vector<double>& values, std::size_t blocks);

struct RatioInterval {
  double ratio = 0;        // median(next) / median(base)
  double low = 0, high = 0;  // the central `confidence` interval of the bootstrapped ratio
};

// The ratio of medians with a percentile-bootstrap interval: `resamples` times, each side is resampled with
// replacement to its own size and the ratio of the resampled medians taken. The generator is seeded with
// `seed` (and its stream is fixed: SplitMix64), so the same samples give the same interval everywhere.
// Both sides must be non-empty with positive medians.
RatioInterval median_ratio_interval(const std::vector<double>& base, const std::vector<double>& next,
                                    double confidence, int resamples = 2000, std::uint64_t seed = 0x5eedf00d);

}  // namespace faprobe
