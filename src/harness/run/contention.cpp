#include "harness/run/contention.hpp"

#include <omp.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "harness/io/range.hpp"
#include "harness/records/writers.hpp"

namespace faprobe {
namespace {

double clock_seconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

std::int64_t involuntary_switches() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return std::int64_t(usage.ru_nivcsw);
}

std::int64_t nanoseconds(double seconds) { return std::llround(seconds * 1e9); }

constexpr double kTick_s = 1e-3;  // HZ 1000; the ticks of HZ 250 (4 ms) and HZ 100 (10 ms) are multiples of it
// The CPU share is read from the threads' accounted runtime, which for threads other than the caller is
// brought up to date at scheduler ticks: over less than this much wall clock it can be off by a tick or more.
constexpr double kMinWallForCpuShare_s = 0.05;
constexpr std::size_t kMinSamplesForShape = 3;  // quantised and bimodal need at least this many samples

// The sorted samples split at their widest gap (by ratio) into a lower and an upper group, each at least
// 20 % of them and kMinSamplesForShape; returns the size of the lower group when the upper's least is at
// least twice the lower's most, else 0.
std::size_t bimodal_split(const std::vector<double>& sorted) {
  const std::size_t n = sorted.size();
  const std::size_t least_group = std::max(kMinSamplesForShape, (n + 4) / 5);
  std::size_t best = 0;
  double best_ratio = 2.0;
  for (std::size_t lower = least_group; lower + least_group <= n; ++lower) {
    if (sorted[lower - 1] <= 0) continue;
    const double ratio = sorted[lower] / sorted[lower - 1];
    if (ratio >= best_ratio) {
      best_ratio = ratio;
      best = lower;
    }
  }
  return best;
}

double median_of_sorted(const std::vector<double>& values) {
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

ContentionContext contention_context(bool runs_on_gpu, int requested_threads) {
  ContentionContext context;
  context.cpu_observed = !runs_on_gpu;
  context.threads = runs_on_gpu ? 1 : std::max(1, omp_get_max_threads());
  context.cores = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  context.requested_threads = requested_threads;
  double load[1] = {-1};
  if (getloadavg(load, 1) == 1) context.load_average = load[0];
  context.timer_resolution_s = runs_on_gpu ? 0.5e-6 : 1e-9;  // CUDA events: about half a microsecond
  return context;
}

void ContentionProbe::start() {
  if (cpu_observed_) {
    switches_start_ = involuntary_switches();
    cpu_start_ = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  }
  wall_start_ = clock_seconds(CLOCK_MONOTONIC);
}

SampleObservation ContentionProbe::stop(double seconds) const {
  SampleObservation observed;
  observed.seconds = seconds;
  observed.wall_s = clock_seconds(CLOCK_MONOTONIC) - wall_start_;
  if (cpu_observed_) {
    observed.cpu_s = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_start_;
    observed.involuntary_switches = involuntary_switches() - switches_start_;
  }
  return observed;
}

std::optional<Contention> detect_contention(const std::vector<SampleObservation>& samples,
                                            const ContentionContext& context) {
  if (samples.empty()) return std::nullopt;
  const std::size_t n = samples.size();
  Contention contention;
  int strong = 0, supporting = 0;
  auto evidence = [&](int& kind, std::string line) {
    ++kind;
    contention.evidence.push_back(std::move(line));
  };

  if (context.cpu_observed) {
    double cpu = 0, wall = 0;
    std::int64_t switches = 0;
    for (const SampleObservation& sample : samples) {
      cpu += std::max(0.0, sample.cpu_s);
      wall += sample.wall_s;
      switches += sample.involuntary_switches;
    }
    if (wall >= kMinWallForCpuShare_s) {
      contention.cpu_share = cpu / (wall * double(context.threads));
      if (contention.cpu_share < kLowCpuShare) {
        evidence(supporting, fmt::format("cpu share {:.2f} of {} thread{} over {} samples (below {})",
                                         contention.cpu_share, context.threads, context.threads == 1 ? "" : "s", n,
                                         kLowCpuShare));
      }
    }
    contention.involuntary_switches = double(switches) / double(n);
    // Per second of CPU time the threads got: a thread that waits for a core is not preempted while it waits,
    // so per second of wall clock the rate falls as the load grows. Over a short span the CPU time is a
    // tick's guess, and wall × threads stands in for it.
    const double ran = wall >= kMinWallForCpuShare_s ? cpu : wall * double(context.threads);
    const double per_second = ran > 0 ? double(switches) / ran : 0.0;
    if (contention.involuntary_switches >= kFrequentSwitchesPerSample && per_second >= kFrequentSwitchesPerSecond) {
      evidence(strong, fmt::format("{:.1f} involuntary context switches per sample ({:.0f} per CPU-second)",
                                   contention.involuntary_switches, per_second));
    }
  }

  const std::int64_t first_ns = nanoseconds(samples.front().seconds);
  contention.identical = n >= 2 && std::all_of(samples.begin(), samples.end(), [&](const SampleObservation& s) {
                           return nanoseconds(s.seconds) == first_ns;
                         });
  if (contention.identical && samples.front().seconds >= 1000 * context.timer_resolution_s) {
    evidence(strong, fmt::format("all {} samples identical to the nanosecond ({})", n,
                                 format_seconds(samples.front().seconds)));
  }

  if (context.requested_threads > context.cores) {
    evidence(strong, fmt::format("--threads {} above the {} cores", context.requested_threads, context.cores));
  }

  std::vector<double> seconds;
  for (const SampleObservation& sample : samples) seconds.push_back(sample.seconds);
  if (n >= kMinSamplesForShape) {
    const auto on_tick = std::count_if(seconds.begin(), seconds.end(), [](double s) {
      const double ticks = std::round(s / kTick_s);
      return ticks >= 1 && std::abs(s - ticks * kTick_s) <= kTickTolerance_s;
    });
    contention.quantised = double(on_tick) >= kQuantisedFraction * double(n);
    if (contention.quantised) {
      evidence(supporting, fmt::format("{} of {} samples within {:.0f} us of a multiple of 1 ms (a scheduler tick)",
                                       on_tick, n, kTickTolerance_s * 1e6));
    }
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    if (const std::size_t lower = bimodal_split(sorted)) {
      const double low_median = median_of_sorted({sorted.begin(), sorted.begin() + std::ptrdiff_t(lower)});
      const double high_median = median_of_sorted({sorted.begin() + std::ptrdiff_t(lower), sorted.end()});
      evidence(supporting, fmt::format("bimodal: {} samples around {}, {} around {}", lower,
                                       format_seconds(low_median), n - lower, format_seconds(high_median)));
    }
  }

  if (context.cpu_observed && context.load_average > double(context.cores) + 0.5) {
    evidence(supporting, fmt::format("load average {:.1f} at the start, above the {} cores", context.load_average,
                                     context.cores));
  }

  if (strong == 0 && supporting < 2) return std::nullopt;
  return contention;
}

}  // namespace faprobe
