// Measurement, written once for every implementation (in the spirit of nvbench): warm-up runs, then
// samples until there are at least min_samples, at least min_time seconds were sampled and the noise is
// below max_noise — or until max_time is spent. Summary statistics over samples.
//
// Noise is the relative standard error of the mean, stddev / (mean · √samples): how well the mean is
// known. The relative standard deviation of single samples (nvbench's "noise") does not shrink with more
// samples, so on a shared CPU it would keep every case running until its cap; the standard error does.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "harness/plan/axes.hpp"
#include "harness/records/record.hpp"
#include "harness/run/contention.hpp"

namespace faprobe {

// The statistics of `samples` (in the order taken), which are also kept, thinned to kMaxKeptSamples.
TimeStats summarize(std::vector<double> samples);
// Which of `count` samples a record keeps: all when count <= kept, else `kept` indices i·count/kept (integer
// division), evenly spaced from the first.
std::vector<std::size_t> kept_sample_indices(std::size_t count, std::size_t kept = kMaxKeptSamples);
double relative_noise_percent(const TimeStats& stats);  // 100 · stddev / (mean · √samples)  // quartiles by linear interpolation

// The stopping rule of one implementation on one case, fed one run at a time: `settings.warmup` warm-up runs
// (fewer when they spend max_time), then samples until satisfied() or the budget is spent. measure() drives
// one; the interleaved runner (interleave.hpp) drives one per implementation of a case, in rounds. Every
// run's seconds, warm-up included, count against max_time_s.
class Sampler {
 public:
  explicit Sampler(const MeasureSettings& settings) : settings_(settings) {}

  bool warming_up() const;        // another warm-up run is due
  void add_warmup(double seconds);
  // One timed sample, and what the OS said about it (contention.hpp; its `seconds` need not be set).
  void add(double seconds, const SampleObservation& observed = {});
  // At least min_samples samples, at least min_time_s of them and noise at most max_noise_percent. Samples
  // all equal to the nanosecond (two or more) never are: no real kernel repeats to the nanosecond, a
  // scheduler tick does, and their noise of 0 would end sampling at the minimums.
  bool satisfied() const;
  // Another sample fits the budget: none taken yet (every sampler gets one), or max_time_s not yet spent.
  bool budget_left() const { return samples_.empty() || spent_s_ < settings_.max_time_s; }
  bool wants_more() const { return budget_left() && !satisfied(); }
  std::int64_t samples() const { return std::int64_t(samples_.size()); }
  double spent_s() const { return spent_s_; }  // warm-up runs and samples
  TimeStats stats() const { return summarize(samples_); }
  // The statistics with the contention rules' verdict over the samples (contention.hpp) in `contended`.
  TimeStats stats(const ContentionContext& context) const;

 private:
  MeasureSettings settings_;
  int warmups_ = 0;
  double spent_s_ = 0, sampled_s_ = 0;
  double running_mean_ = 0, running_m2_ = 0;  // Welford: the noise check is O(1) per sample, no sorting
  std::vector<double> samples_;
  std::vector<SampleObservation> observed_;
  bool identical_ = true;  // every sample so far equal to the first to the nanosecond
};

// Calls `sample` (one timed run, returns seconds) as the settings ask; `interrupted` is polled between runs.
// Returns the statistics of the samples taken (at least one unless interrupted before the first), with
// `contended` set when the contention rules mark them: each sample is observed by a ContentionProbe (CPU time
// and switches when context.cpu_observed).
TimeStats measure(const std::function<double()>& sample, const MeasureSettings& settings,
                  const std::function<bool()>& interrupted, const ContentionContext& context = {});

}  // namespace faprobe
