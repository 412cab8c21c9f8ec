// Contention: whether the machine was busy while a record's samples were taken, and the evidence.
//
// On a shared machine a sample can be the scheduler's rather than the kernel's: with another job on every
// core, a 13 µs decode sample waits for the next scheduler tick and reads 7.998 ms, thirteen times in a row,
// and the noise rule (standard error of the mean) is met. So around each timed run (outside its timed region)
// a ContentionProbe reads what the kernel says about the process: the CPU time its threads got
// (CLOCK_PROCESS_CPUTIME_ID) against the wall clock × the threads the implementation uses, and the
// involuntary context switches (getrusage's ru_nivcsw). detect_contention() then judges the record's samples
// as a whole with the rules below; each rule that fires adds one line of evidence to Contention.
//
// Strong rules, each enough on its own:
// - frequent involuntary switches: at least kFrequentSwitchesPerSample per sample on average, and at
//   least kFrequentSwitchesPerSecond per second of CPU time the threads got (a long sample may be
//   preempted by a kernel thread now and then on a quiet machine);
// - identical samples: every sample (at least 2) equal to the nanosecond, and above the timer's resolution
//   a thousandfold — a real kernel jitters by more than a nanosecond, a tick does not;
// - --threads above the cores: the threads cannot all run at once.
// Supporting rules, which mark a record only two together or with a strong one:
// - low CPU share: the threads got less than kLowCpuShare of wall × threads over all samples. Not enough
//   alone: OpenMP threads left idle by imbalanced work spin a while and then sleep, so a quiet run of a case
//   with fewer work items than threads reads 0.5 on 2 cores as a loaded one does;
// - quantised: most samples within kTickTolerance of a multiple of 1 ms (HZ 1000; 250 and 100 have
//   multiples of it too). A quiet kernel whose natural time sits near a multiple matches this alone;
// - bimodal: the samples split into two groups, the upper at least twice the lower, each ≥ 20 % of them;
// - the load average (1 min, /proc/loadavg) at the start above the cores. It lags by a minute, so a
//   neighbour's build that just ended still counts.
// CPU time and switches are read only for CPU implementations: a GPU sample is timed by CUDA events, which a
// busy host does not stretch, so a GPU record gets the sample-set rules alone.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/records/record.hpp"

namespace faprobe {

// What the OS says about one timed sample.
struct SampleObservation {
  double seconds = 0;        // the sample, as the implementation timed it
  double wall_s = 0;         // wall clock around the run (it includes the sample)
  double cpu_s = -1;         // CPU time of all the process's threads over the same span; < 0: not read (GPU)
  std::int64_t involuntary_switches = 0;  // ru_nivcsw over the same span (all threads)
};

// What a record's samples are judged against.
struct ContentionContext {
  bool cpu_observed = true;   // CPU time and switches were read (a CPU implementation)
  int threads = 1;            // the threads the implementation runs on (omp_get_max_threads())
  int cores = 1;              // the online cores
  int requested_threads = 0;  // --threads; 0: all cores
  double load_average = -1;   // 1-minute load average at the start; < 0: not known
  double timer_resolution_s = 1e-9;  // of the samples: the steady clock's, or CUDA events' (0.5 µs)
};

// The thresholds, calibrated with the default sweep on a 2-core VM ("Intel(R) Xeon(R) Processor"), quiet and with one or
// two busy processes beside it. Quiet: CPU share 0.95-1.02 (idle OpenMP threads spin between regions),
// 0.01-0.4 involuntary switches per sample, 10-25 per CPU-second, samples not on ticks. Loaded: share
// 0.16-0.50 (each of 2 threads gets half a core or less, and waits at every barrier for the other), 2
// switches per 8 ms sample, 250-310 per CPU-second, 60-100 % of samples within 12 us of 8, 16 or 24 ms.
inline constexpr double kLowCpuShare = 0.75;
inline constexpr double kFrequentSwitchesPerSample = 0.5;
inline constexpr double kFrequentSwitchesPerSecond = 100;
inline constexpr double kTickTolerance_s = 20e-6;
inline constexpr double kQuantisedFraction = 0.6;

// The context of a measurement starting now on this machine: cores and the load average read here.
ContentionContext contention_context(bool runs_on_gpu, int requested_threads);

// Reads the OS's counters around one timed run: start() before it, stop(seconds) after it. About a
// microsecond each for a CPU implementation (two system calls); the wall clock alone for a GPU one.
class ContentionProbe {
 public:
  explicit ContentionProbe(bool cpu_observed) : cpu_observed_(cpu_observed) {}
  void start();
  SampleObservation stop(double seconds) const;

 private:
  bool cpu_observed_;
  double wall_start_ = 0, cpu_start_ = 0;
  std::int64_t switches_start_ = 0;
};

// The rules above over one record's samples (in the order taken); nullopt when none marks it.
std::optional<Contention> detect_contention(const std::vector<SampleObservation>& samples,
                                            const ContentionContext& context);

}  // namespace faprobe
