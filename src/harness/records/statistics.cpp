#include "harness/records/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace faprobe {
namespace {

// SplitMix64 (Steele, Lea and Flood 2014): a fixed stream on every platform, unlike the standard
// distributions, whose output the C++ standard leaves to each library.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return std::size_t(next() % n); }  // bias < n / 2^64: none that matters
};

// P(U = u) for every u = 0 .. m·n under the null hypothesis, no ties: with f(m, n) the distribution of U for
// sizes m and n, f(m, n)(u) = m/(m+n) · f(m−1, n)(u − n) + n/(m+n) · f(m, n−1)(u) (is the largest of all m + n
// values an x, which then beats all n y's, or a y). Probabilities rather than counts, so nothing overflows.
std::vector<double> exact_u_distribution(std::size_t m, std::size_t n) {
  // dist[j] = the distribution for sizes (i, j), built up over i; sizes (0, j) and (i, 0): U = 0.
  std::vector<std::vector<double>> dist(n + 1, std::vector<double>{1.0});
  for (std::size_t i = 1; i <= m; ++i) {
    std::vector<std::vector<double>> next(n + 1);
    next[0] = {1.0};
    for (std::size_t j = 1; j <= n; ++j) {
      std::vector<double> f(i * j + 1, 0.0);
      const double x_largest = double(i) / double(i + j);
      for (std::size_t u = 0; u < dist[j].size(); ++u) f[u + j] += x_largest * dist[j][u];          // f(i−1, j)
      for (std::size_t u = 0; u < next[j - 1].size(); ++u) f[u] += (1 - x_largest) * next[j - 1][u];  // f(i, j−1)
      next[j] = std::move(f);
    }
    dist = std::move(next);
  }
  return dist[n];
}

// P(2·W+ = w) for w = 0 .. Σ doubled_ranks under the null hypothesis of the signed-rank test: each rank is
// that of a positive difference with probability 1/2, independently. With f_k the distribution over the first
// k ranks, f_k(w) = (f_{k−1}(w) + f_{k−1}(w − 2·rank_k)) / 2. Doubled ranks are integers also with ties
// (mid-ranks are multiples of 1/2). Every value is a count over 2^k with the count below 2^k ≤ 2^50, so the
// probabilities and their partial sums are exact in a double.
std::vector<double> sign_flip_distribution(const std::vector<std::size_t>& doubled_ranks) {
  std::size_t total = 0;
  for (std::size_t rank : doubled_ranks) total += rank;
  std::vector<double> f(total + 1, 0.0);
  f[0] = 1.0;
  std::size_t reached = 0;  // f[w] = 0 for w > reached
  for (std::size_t rank : doubled_ranks) {
    reached += rank;
    // Downwards in w, so that f[w − rank] still holds f_{k−1} when f[w] is updated.
    for (std::size_t w = reached + 1; w-- > 0;) f[w] = (f[w] + (w >= rank ? f[w - rank] : 0.0)) / 2;
  }
  return f;
}

}  // namespace

RankTest wilcoxon_signed_rank(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) {
    throw std::invalid_argument("wilcoxon_signed_rank: x has " + std::to_string(x.size()) + " values and y " +
                                std::to_string(y.size()) + "; the test pairs x[i] with y[i]");
  }
  const std::size_t pairs = x.size();
  std::vector<double> differences;  // the non-zero ones: zero_method "wilcox" drops the others
  for (std::size_t i = 0; i < pairs; ++i) {
    const double d = x[i] - y[i];
    if (std::isnan(d)) {
      throw std::invalid_argument("wilcoxon_signed_rank: the difference of pair " + std::to_string(i) + " is NaN");
    }
    if (d != 0) differences.push_back(d);
  }
  RankTest test;
  const std::size_t n = differences.size();
  if (n == 0) return test;
  std::sort(differences.begin(), differences.end(), [](double a, double b) { return std::fabs(a) < std::fabs(b); });
  // Doubled mid-ranks of |d| (ranks begin+1 .. end share (begin+1+end)/2), 2·W+, and Σ(t³ − t) over ties.
  std::vector<std::size_t> doubled_ranks(n);
  std::size_t doubled_w_plus = 0;
  double tie_term = 0;
  for (std::size_t begin = 0; begin < n;) {
    std::size_t end = begin + 1;
    while (end < n && std::fabs(differences[end]) == std::fabs(differences[begin])) ++end;
    for (std::size_t i = begin; i < end; ++i) {
      doubled_ranks[i] = begin + 1 + end;
      if (differences[i] > 0) doubled_w_plus += doubled_ranks[i];
    }
    const double t = double(end - begin);
    tie_term += t * t * t - t;
    begin = end;
  }
  const std::size_t doubled_total = n * (n + 1);  // 2·(W+ + W−)
  test.u = double(std::min(doubled_w_plus, doubled_total - doubled_w_plus)) / 2;
  const bool ties_or_zeros = tie_term > 0 || n < pairs;
  if ((!ties_or_zeros && pairs <= kSignedRankExactLimit) || pairs <= kSignedRankPermutationLimit) {
    const std::vector<double> distribution = sign_flip_distribution(doubled_ranks);
    double at_most = 0, at_least = 0;  // P(2·W ≤ 2·W+) and P(2·W ≥ 2·W+), each from its own end
    for (std::size_t w = 0; w <= doubled_w_plus; ++w) at_most += distribution[w];
    for (std::size_t w = distribution.size(); w-- > doubled_w_plus;) at_least += distribution[w];
    test.p = std::min(1.0, 2 * std::min(at_most, at_least));
    test.exact = true;
    return test;
  }
  const double count = double(n);
  const double mean = count * (count + 1) / 4;
  const double variance = (count * (count + 1) * (2 * count + 1) - tie_term / 2) / 24;  // > 0 for n ≥ 1
  const double z = std::fabs(test.u - mean) / std::sqrt(variance);
  test.p = std::min(1.0, std::erfc(z / std::sqrt(2.0)));  // 2 · (1 − Φ(|z|))
  return test;
}

RankTest mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y) {
  RankTest test;
  const std::size_t m = x.size(), n = y.size();
  if (m == 0 || n == 0) return test;
  // Mid-ranks of the pooled samples, and Σ(t³ − t) over groups of t tied values.
  std::vector<std::pair<double, bool>> pooled;  // (value, from x)
  pooled.reserve(m + n);
  for (double v : x) pooled.emplace_back(v, true);
  for (double v : y) pooled.emplace_back(v, false);
  std::sort(pooled.begin(), pooled.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double rank_sum_x = 0, tie_term = 0;
  for (std::size_t begin = 0; begin < pooled.size();) {
    std::size_t end = begin + 1;
    while (end < pooled.size() && pooled[end].first == pooled[begin].first) ++end;
    const double mid_rank = (double(begin + 1) + double(end)) / 2;  // ranks begin+1 .. end
    for (std::size_t i = begin; i < end; ++i)
      if (pooled[i].second) rank_sum_x += mid_rank;
    const double t = double(end - begin);
    tie_term += t * t * t - t;
    begin = end;
  }
  const double mn = double(m) * double(n);
  test.u = rank_sum_x - double(m) * double(m + 1) / 2;
  const double u_high = std::max(test.u, mn - test.u);  // the larger of U_x and U_y: its upper tail, twice
  if (tie_term == 0 && m <= kExactLimit && n <= kExactLimit) {
    const std::vector<double> distribution = exact_u_distribution(m, n);
    const auto at_least = std::size_t(std::llround(u_high));  // no ties: U is an integer
    // P(U ≥ u) summed from the far end, smallest terms first: 1 − P(U < u) would cancel in the tail.
    double upper_tail = 0;
    for (std::size_t u = distribution.size(); u-- > at_least;) upper_tail += distribution[u];
    test.p = std::min(1.0, 2 * upper_tail);
    test.exact = true;
    return test;
  }
  const double total = double(m + n);
  const double variance = mn / 12 * ((total + 1) - tie_term / (total * (total - 1)));
  if (variance <= 0) return test;  // every value tied: no evidence either way
  const double z = (u_high - mn / 2 - 0.5) / std::sqrt(variance);
  test.p = std::min(1.0, std::erfc(z / std::sqrt(2.0)));  // 2 · (1 − Φ(z))
  return test;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t half = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(half), values.end());
  const double upper = values[half];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + std::ptrdiff_t(half));
  return (lower + upper) / 2;
}

double relative_iqr(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    const double position = q * double(values.size() - 1);
    const auto below = std::size_t(position);
    const std::size_t above = std::min(below + 1, values.size() - 1);
    return values[below] + (values[above] - values[below]) * (position - double(below));
  };
  const double middle = at(0.5);
  return middle > 0 ? (at(0.75) - at(0.25)) / middle : 0;
}

std::vector<double> block_medians(const std::vector<double>& values, std::size_t blocks) {
  const std::size_t n = values.size(), count = std::min(blocks, n);
  std::vector<double> medians;
  for (std::size_t i = 0; i < count; ++i) {
    const auto begin = values.begin() + std::ptrdiff_t(i * n / count), end = values.begin() + std::ptrdiff_t((i + 1) * n / count);
    medians.push_back(median(std::vector<double>(begin, end)));
  }
  return medians;
}

RatioInterval median_ratio_interval(const std::vector<double>& base, const std::vector<double>& next,
                                    double confidence, int resamples, std::uint64_t seed) {
  if (base.empty() || next.empty() || resamples < 1 || !(confidence > 0 && confidence < 1)) {
    throw std::invalid_argument("median_ratio_interval: empty samples or a confidence outside (0, 1)");
  }
  RatioInterval interval;
  const double base_median = median(base);
  if (!(base_median > 0)) throw std::invalid_argument("median_ratio_interval: the base median is not positive");
  interval.ratio = median(next) / base_median;
  SplitMix64 random{seed};
  std::vector<double> ratios, draw_base(base.size()), draw_next(next.size());
  ratios.reserve(std::size_t(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (double& v : draw_base) v = base[random.below(base.size())];
    for (double& v : draw_next) v = next[random.below(next.size())];
    const double resampled_base = median(draw_base);
    ratios.push_back(resampled_base > 0 ? median(draw_next) / resampled_base : interval.ratio);
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - confidence) / 2;
  auto at = [&](double q) {  // linear interpolation between order statistics
    const double position = q * double(ratios.size() - 1);
    const auto below = std::size_t(position);
    const std::size_t above = std::min(below + 1, ratios.size() - 1);
    return ratios[below] + (ratios[above] - ratios[below]) * (position - double(below));
  };
  interval.low = at(tail);
  interval.high = at(1 - tail);
  return interval;
}

}  // namespace faprobe
