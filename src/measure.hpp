// Measurement, written once for every implementation (in the spirit of nvbench): warm-up runs, then
// samples until there are at least min_samples, at least min_time seconds were sampled and the relative
// standard deviation is below max_noise — or until max_time is spent. Summary statistics over samples.
#pragma once
#include <functional>
#include <vector>

#include "axes.hpp"
#include "record.hpp"

namespace faprobe {

TimeStats summarize(std::vector<double> samples);  // quartiles by linear interpolation

// Calls `sample` (one timed run, returns seconds) as the settings ask; `interrupted` is polled between runs.
// Returns the statistics of the samples taken (at least one unless interrupted before the first).
TimeStats measure(const std::function<double()>& sample, const MeasureSettings& settings,
                  const std::function<bool()>& interrupted);

}  // namespace faprobe
