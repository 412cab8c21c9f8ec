#include "harness/run/calibrate.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "model/eigen.hpp"

#include "harness/io/progress.hpp"
#include "harness/records/statistics.hpp"
#include "model/memory.hpp"

namespace faprobe {
namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

RateSpread spread_of(std::vector<double> rates) {
  RateSpread spread;
  if (rates.empty()) return spread;
  spread.median = median(rates);
  spread.low = *std::min_element(rates.begin(), rates.end());
  spread.high = *std::max_element(rates.begin(), rates.end());
  spread.repetitions = int(rates.size());
  return spread;
}

// One rate per round, each round every thread's products.
std::vector<double> gemm_gflops(double budget_s, bool quick, int threads) {
  constexpr int kSize = 512;  // large enough for Eigen's blocking to reach its peak, small enough for L2/L3
  // Per thread and round: about 10 ms on a core that multiplies at 100 GFLOP/s, so that a second's
  // calibration has tens of rounds for its median and range (16 products, as before, left 2 rounds on a
  // loaded 2-core VM), and the last round overruns the budget by little.
  const int products = quick ? 2 : 4;
  std::vector<double> rates;
  const auto start = Clock::now();
  Clock::time_point round_start;  // shared: set and read inside `single` blocks
  bool more = true;
#pragma omp parallel num_threads(threads) shared(round_start, more, rates)
  {
    // Operands are built before any timing (Eigen's Random() takes a global lock inside std::rand).
    const Eigen::MatrixXf a = Eigen::MatrixXf::Constant(kSize, kSize, 0.5f);
    const Eigen::MatrixXf b = Eigen::MatrixXf::Constant(kSize, kSize, 0.25f);
    Eigen::MatrixXf c(kSize, kSize);
    while (more) {
#pragma omp barrier
#pragma omp single
      round_start = Clock::now();  // the implicit barrier after `single` lines every thread up
      for (int repeat = 0; repeat < products; ++repeat) c.noalias() = a * b;
#pragma omp barrier
#pragma omp single
      {
        const double elapsed = seconds_since(round_start);
        rates.push_back(products * threads * 2.0 * kSize * kSize * double(kSize) / elapsed * 1e-9);
        more = seconds_since(start) < budget_s && !interrupted();
      }  // the implicit barrier after `single` publishes `more` to every thread
    }
    if (c(0, 0) != 0.5f * 0.25f * kSize) std::abort();  // the products were really computed
  }
  return rates;
}

// One rate per round, each round a copy of the whole buffer split over the threads.
std::vector<double> copy_gbytes_per_s(double budget_s, std::size_t bytes, int threads) {
  Workspace<char> source(bytes), destination(bytes);
  std::memset(source.data(), 1, bytes);
  std::memset(destination.data(), 0, bytes);
  std::vector<double> rates;
  const auto start = Clock::now();
  while ((seconds_since(start) < budget_s || rates.empty()) && !interrupted()) {
    const auto round_start = Clock::now();
#pragma omp parallel for num_threads(threads)
    for (int part = 0; part < threads; ++part) {
      const std::size_t chunk = bytes / std::size_t(threads);
      std::memcpy(destination.data() + chunk * std::size_t(part), source.data() + chunk * std::size_t(part), chunk);
    }
    rates.push_back(2.0 * double(bytes) / seconds_since(round_start) * 1e-9);  // read + write
  }
  return rates;
}
}  // namespace

MachineRates HostCalibration::rates() const {
  MachineRates rates;
  rates.gemm_gflops = gemm_gflops.median;
  rates.memory_gbytes_per_s = copy_gbytes_per_s.median;
  return rates;
}

nlohmann::json HostCalibration::to_json() const {
  return {{"fp32_gemm_gflops", gemm_gflops.median},
          {"fp32_gemm_gflops_range", {gemm_gflops.low, gemm_gflops.high}},
          {"fp32_gemm_repetitions", gemm_gflops.repetitions},
          {"memory_gbytes_per_s", copy_gbytes_per_s.median},
          {"memory_gbytes_per_s_range", {copy_gbytes_per_s.low, copy_gbytes_per_s.high}},
          {"memory_repetitions", copy_gbytes_per_s.repetitions},
          {"threads", threads}};
}

HostCalibration calibrate_host(double seconds, int threads) {
  // Under 0.2 s, a quick calibration (FAPROBE_CALIBRATION_SECONDS, for test suites): shorter GEMM rounds and
  // smaller copy buffers, so that it costs milliseconds rather than a second of page faults and full rounds;
  // its copy rate may then come partly from the last-level cache.
  const bool quick = seconds < 0.2;
  HostCalibration calibration;
  calibration.threads = threads > 0 ? threads : omp_get_max_threads();
  calibration.gemm_gflops = spread_of(gemm_gflops(seconds * 0.7, quick, calibration.threads));
  calibration.copy_bytes = std::size_t(quick ? 32 : 256) << 20;  // well beyond any last-level cache here
  calibration.copy_gbytes_per_s = spread_of(copy_gbytes_per_s(seconds * 0.3, calibration.copy_bytes, calibration.threads));
  if (interrupted()) throw Interrupted();
  return calibration;
}

std::optional<gpu::GpuRates> calibrate_gpu(double seconds) {
  if (gpu::devices().empty()) return std::nullopt;
  const gpu::GpuRates rates = gpu::measure_gpu_rates(seconds, interrupted);
  if (interrupted()) throw Interrupted();
  return rates;
}

}  // namespace faprobe
