#include "harness/measure.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace faprobe {
namespace {
double quantile(const std::vector<double>& sorted, double q) {
  const double position = q * double(sorted.size() - 1);
  const std::size_t below = std::size_t(position);
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - double(below));
}
}  // namespace

double relative_noise_percent(const TimeStats& stats) {
  if (stats.samples < 2 || stats.mean <= 0) return 100.0;
  return 100.0 * stats.stddev / stats.mean / std::sqrt(double(stats.samples));
}

std::vector<std::size_t> kept_sample_indices(std::size_t count, std::size_t kept) {
  std::vector<std::size_t> indices;
  const std::size_t n = std::min(count, kept);
  indices.reserve(n);
  for (std::size_t i = 0; i < n; ++i) indices.push_back(count <= kept ? i : std::size_t(std::uint64_t(i) * count / kept));
  return indices;
}

TimeStats summarize(std::vector<double> samples) {
  TimeStats stats;
  stats.samples = std::int64_t(samples.size());
  if (samples.empty()) return stats;
  for (std::size_t i : kept_sample_indices(samples.size())) {
    stats.samples_s.push_back(std::round(samples[i] * 1e9) * 1e-9);  // ns: below any timer's resolution
  }
  std::sort(samples.begin(), samples.end());
  const double count = double(samples.size());
  stats.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / count;
  double squares = 0;
  for (double sample : samples) squares += (sample - stats.mean) * (sample - stats.mean);
  stats.stddev = samples.size() > 1 ? std::sqrt(squares / (count - 1)) : 0.0;
  stats.min = samples.front();
  stats.max = samples.back();
  stats.median = quantile(samples, 0.5);
  stats.q1 = quantile(samples, 0.25);
  stats.q3 = quantile(samples, 0.75);
  return stats;
}

TimeStats measure(const std::function<double()>& sample, const MeasureSettings& settings,
                  const std::function<bool()>& interrupted) {
  double spent = 0;
  for (int i = 0; i < settings.warmup && !interrupted(); ++i) {
    spent += sample();
    if (spent >= settings.max_time_s) break;  // a slow case gets no more warm-up than its budget
  }
  std::vector<double> samples;
  double sampled = 0;
  double running_mean = 0, running_m2 = 0;  // Welford: the noise check is O(1) per sample, no sorting
  while (!interrupted()) {
    const double seconds = sample();
    samples.push_back(seconds);
    sampled += seconds;
    spent += seconds;
    const double delta = seconds - running_mean;
    running_mean += delta / double(samples.size());
    running_m2 += delta * (seconds - running_mean);
    if (spent >= settings.max_time_s) break;
    if (int(samples.size()) < settings.min_samples || sampled < settings.min_time_s) continue;
    TimeStats running;
    running.samples = std::int64_t(samples.size());
    running.mean = running_mean;
    running.stddev = std::sqrt(running_m2 / double(samples.size() - 1));
    if (relative_noise_percent(running) <= settings.max_noise_percent) break;
  }
  return summarize(samples);
}

}  // namespace faprobe
