// Measurement, written once for every implementation (in the spirit of nvbench): warm-up runs, then
// samples until there are at least min_samples, at least min_time seconds were sampled and the noise is
// below max_noise — or until max_time is spent. Summary statistics over samples.
//
// Noise is the relative standard error of the mean, stddev / (mean · √samples): how well the mean is
// known. The relative standard deviation of single samples (nvbench's "noise") does not shrink with more
// samples, so on a shared CPU it would keep every case running until its cap; the standard error does.
#pragma once
#include <functional>
#include <vector>

#include "harness/axes.hpp"
#include "harness/record.hpp"

namespace faprobe {

// The statistics of `samples` (in the order taken), which are also kept, thinned to kMaxKeptSamples.
TimeStats summarize(std::vector<double> samples);
// Which of `count` samples a record keeps: all when count <= kept, else `kept` indices i·count/kept (integer
// division), evenly spaced from the first.
std::vector<std::size_t> kept_sample_indices(std::size_t count, std::size_t kept = kMaxKeptSamples);
double relative_noise_percent(const TimeStats& stats);  // 100 · stddev / (mean · √samples)  // quartiles by linear interpolation

// Calls `sample` (one timed run, returns seconds) as the settings ask; `interrupted` is polled between runs.
// Returns the statistics of the samples taken (at least one unless interrupted before the first).
TimeStats measure(const std::function<double()>& sample, const MeasureSettings& settings,
                  const std::function<bool()>& interrupted);

}  // namespace faprobe
