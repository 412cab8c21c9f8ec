#include "harness/run/measure.hpp"

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

bool Sampler::warming_up() const { return warmups_ < settings_.warmup && spent_s_ < settings_.max_time_s; }

void Sampler::add_warmup(double seconds) {
  ++warmups_;
  spent_s_ += seconds;  // a slow case gets no more warm-up than its budget
}

void Sampler::add(double seconds, const SampleObservation& observed) {
  if (!samples_.empty() && std::llround(seconds * 1e9) != std::llround(samples_.front() * 1e9)) identical_ = false;
  samples_.push_back(seconds);
  observed_.push_back(observed);
  observed_.back().seconds = seconds;
  sampled_s_ += seconds;
  spent_s_ += seconds;
  const double delta = seconds - running_mean_;
  running_mean_ += delta / double(samples_.size());
  running_m2_ += delta * (seconds - running_mean_);
}

bool Sampler::satisfied() const {
  if (samples() < settings_.min_samples || sampled_s_ < settings_.min_time_s) return false;
  if (samples() >= 2 && identical_) return false;
  TimeStats running;
  running.samples = samples();
  running.mean = running_mean_;
  running.stddev = samples_.size() > 1 ? std::sqrt(running_m2_ / double(samples_.size() - 1)) : 0.0;
  return relative_noise_percent(running) <= settings_.max_noise_percent;
}

TimeStats Sampler::stats(const ContentionContext& context) const {
  TimeStats stats = summarize(samples_);
  stats.contended = detect_contention(observed_, context);
  return stats;
}

TimeStats measure(const std::function<double()>& sample, const MeasureSettings& settings,
                  const std::function<bool()>& interrupted, const ContentionContext& context) {
  Sampler sampler(settings);
  while (sampler.warming_up() && !interrupted()) sampler.add_warmup(sample());
  ContentionProbe probe(context.cpu_observed);
  while (!interrupted() && sampler.wants_more()) {
    probe.start();
    const double seconds = sample();
    sampler.add(seconds, probe.stop(seconds));
  }
  return sampler.stats(context);
}

}  // namespace faprobe
