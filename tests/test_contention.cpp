// Contention end to end (contention.hpp): real measurements, of an OpenMP kernel on every core and of
// cpu.tiled through run_one and the interleaved runner, while this test keeps every core busy with spinning
// child processes, carry time_s.contended with its evidence; the same measurements on a quiet machine do not.
//
// These tests load the machine on purpose and need it otherwise quiet: CTest runs them alone (RUN_SERIAL in
// tests/CMakeLists.txt). The quiet test still shares the machine with whatever else runs there, so it first
// checks that the machine is idle (from /proc/stat, not from the rules it tests) and skips saying why if not.
#include <omp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "harness/plan/registry.hpp"
#include "harness/run/contention.hpp"
#include "harness/run/interleave.hpp"
#include "harness/run/measure.hpp"
#include "harness/run/pair_run.hpp"

namespace faprobe {
namespace {

int cores() { return int(sysconf(_SC_NPROCESSORS_ONLN)); }

// One child process per core, each spinning until it is killed (by its pid) when this goes out of scope, or
// when the test process dies (PR_SET_PDEATHSIG).
class BusyCores {
 public:
  explicit BusyCores(int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (volatile unsigned long spin = 0;; spin = spin + 1) {
        }
      }
      if (pid > 0) children_.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // scheduled and spinning before we measure
  }
  ~BusyCores() {
    for (const pid_t pid : children_) kill(pid, SIGKILL);
    for (const pid_t pid : children_) waitpid(pid, nullptr, 0);
  }
  BusyCores(const BusyCores&) = delete;
  BusyCores& operator=(const BusyCores&) = delete;
  std::size_t size() const { return children_.size(); }

 private:
  std::vector<pid_t> children_;
};

// The fraction of the machine's CPU time that was not idle over `span` (/proc/stat's first line).
double machine_busy_fraction(std::chrono::milliseconds span) {
  auto read = [] {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    std::vector<double> fields(8, 0);
    stat >> cpu;
    for (double& field : fields) stat >> field;
    const double total = std::accumulate(fields.begin(), fields.end(), 0.0);
    return std::pair{total, fields[3] + fields[4]};  // idle + iowait
  };
  const auto [total0, idle0] = read();
  std::this_thread::sleep_for(span);
  const auto [total1, idle1] = read();
  return total1 > total0 ? 1.0 - (idle1 - idle0) / (total1 - total0) : 0.0;
}

// An OpenMP kernel on every thread, about `seconds` long on a quiet machine: one timed sample.
class SpinKernel {
 public:
  SpinKernel() {
    // Sized so that its quiet time sits half-way between two multiples of 1 ms (1.5 ms), away from the
    // scheduler's tick, which the quantised rule looks for.
    const double one = run_iterations(1 << 20);
    iterations_ = std::max<long>(1 << 16, long(double(1 << 20) * 1.5e-3 / one));
  }
  double operator()() const { return run_iterations(iterations_); }

 private:
  static double run_iterations(long iterations) {
    const auto start = std::chrono::steady_clock::now();
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (long i = 0; i < iterations * omp_get_max_threads(); ++i) sum += std::sqrt(double(i));
    sink_ = sum;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  static inline volatile double sink_ = 0;
  long iterations_ = 0;
};

MeasureSettings sampling() {
  MeasureSettings measure;
  measure.warmup = 2;
  measure.min_samples = 20;
  measure.min_time_s = 0.2;
  measure.max_noise_percent = 0.5;
  measure.max_time_s = 1.5;
  measure.verify = false;
  return measure;
}

Case small_case() {
  Case c;
  c.heads = c.kv_heads = 4;
  c.seq_q = c.seq_k = 256;
  c.head_dim = 64;
  c.mask = Mask::causal;
  c.validate();
  return c;
}

std::string evidence_of(const TimeStats& time) {
  return time.contended ? fmt::format("{}", fmt::join(time.contended->evidence, "; ")) : "not contended";
}

TEST(ContentionEndToEnd, AMeasurementBesideBusyCoresIsContended) {
  omp_set_num_threads(cores());
  const SpinKernel kernel;
  const BusyCores busy(cores());
  ASSERT_EQ(busy.size(), std::size_t(cores()));

  const TimeStats spin = measure(kernel, sampling(), [] { return false; }, contention_context(false, 0));
  ASSERT_TRUE(spin.contended.has_value()) << "median " << spin.median << " s over " << spin.samples << " samples";
  EXPECT_FALSE(spin.contended->evidence.empty());
  std::cout << "spin kernel, busy: " << evidence_of(spin) << "\n";

  // Through the runner: run_one and the interleaved runner set record.time->contended.
  const Implementation& tiled = *find_implementation("cpu.tiled");
  const Record alone = run_one(tiled, small_case(), sampling(), RunOptions{});
  ASSERT_TRUE(alone.time.has_value()) << alone.reason;
  EXPECT_TRUE(alone.time->contended.has_value()) << "median " << alone.time->median;
  std::cout << "run_one cpu.tiled, busy: " << evidence_of(*alone.time) << "\n";

  MeasureSettings interleaved = sampling();
  interleaved.interleave = true;
  const std::vector<Record> records =
      run_interleaved({&tiled, find_implementation("cpu.naive")}, small_case(), interleaved, RunOptions{});
  for (const Record& record : records) {
    ASSERT_TRUE(record.time.has_value()) << record.impl << ": " << record.reason;
    EXPECT_TRUE(record.time->contended.has_value()) << record.impl << " median " << record.time->median;
    std::cout << "interleaved " << record.impl << ", busy: " << evidence_of(*record.time) << "\n";
  }
}

TEST(ContentionEndToEnd, TheSameMeasurementOnAQuietMachineIsNot) {
  omp_set_num_threads(cores());
  const double busy = machine_busy_fraction(std::chrono::milliseconds(500));
  if (busy > 0.15) GTEST_SKIP() << fmt::format("the machine is {:.0f} % busy without this test: not quiet", busy * 100);
  const SpinKernel kernel;
  // A quiet machine still runs a kernel thread or a cron job now and then, which may preempt one of the
  // samples; three tries, one of which must come out unflagged, keep that from failing the test, while a
  // rule that flags quiet runs fails all three.
  std::vector<std::string> tries;
  bool quiet_spin = false, quiet_tiled = false;
  for (int attempt = 0; attempt < 3 && !(quiet_spin && quiet_tiled); ++attempt) {
    if (!quiet_spin) {
      const TimeStats spin = measure(kernel, sampling(), [] { return false; }, contention_context(false, 0));
      quiet_spin = !spin.contended;
      tries.push_back("spin kernel: " + evidence_of(spin));
    }
    if (!quiet_tiled) {
      const Record alone = run_one(*find_implementation("cpu.tiled"), small_case(), sampling(), RunOptions{});
      ASSERT_TRUE(alone.time.has_value()) << alone.reason;
      quiet_tiled = !alone.time->contended;
      tries.push_back("run_one cpu.tiled: " + evidence_of(*alone.time));
    }
  }
  EXPECT_TRUE(quiet_spin && quiet_tiled) << fmt::format("{}", fmt::join(tries, "\n"));
}

}  // namespace
}  // namespace faprobe
