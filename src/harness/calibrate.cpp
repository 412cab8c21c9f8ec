#include "harness/calibrate.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "model/eigen.hpp"

#include "harness/progress.hpp"
#include "model/memory.hpp"

namespace faprobe {
namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double gemm_gflops(double budget_s) {
  constexpr int kSize = 512;     // large enough for Eigen's blocking to reach its peak, small enough for L2/L3
  constexpr int kProducts = 16;  // per thread and round, so a round lasts tens of milliseconds
  const int threads = omp_get_max_threads();
  double best = 0;
  const auto start = Clock::now();
  Clock::time_point round_start;  // shared: set and read inside `single` blocks
  bool more = true;
#pragma omp parallel num_threads(threads) shared(round_start, more, best)
  {
    // Operands are built before any timing (Eigen's Random() takes a global lock inside std::rand).
    const Eigen::MatrixXf a = Eigen::MatrixXf::Constant(kSize, kSize, 0.5f);
    const Eigen::MatrixXf b = Eigen::MatrixXf::Constant(kSize, kSize, 0.25f);
    Eigen::MatrixXf c(kSize, kSize);
    while (more) {
#pragma omp barrier
#pragma omp single
      round_start = Clock::now();  // the implicit barrier after `single` lines every thread up
      for (int repeat = 0; repeat < kProducts; ++repeat) c.noalias() = a * b;
#pragma omp barrier
#pragma omp single
      {
        const double elapsed = seconds_since(round_start);
        best = std::max(best, kProducts * threads * 2.0 * kSize * kSize * double(kSize) / elapsed * 1e-9);
        more = seconds_since(start) < budget_s && !interrupted();
      }  // the implicit barrier after `single` publishes `more` to every thread
    }
    if (c(0, 0) != 0.5f * 0.25f * kSize) std::abort();  // the products were really computed
  }
  return best;
}

double copy_gbytes_per_s(double budget_s) {
  constexpr std::size_t kBytes = std::size_t(256) << 20;  // well beyond any last-level cache here
  Workspace<char> source(kBytes), destination(kBytes);
  std::memset(source.data(), 1, kBytes);
  std::memset(destination.data(), 0, kBytes);
  double best = 0;
  const auto start = Clock::now();
  while ((seconds_since(start) < budget_s || best == 0) && !interrupted()) {
    const auto round_start = Clock::now();
    const int threads = omp_get_max_threads();
#pragma omp parallel for num_threads(threads)
    for (int part = 0; part < threads; ++part) {
      const std::size_t chunk = kBytes / std::size_t(threads);
      std::memcpy(destination.data() + chunk * std::size_t(part), source.data() + chunk * std::size_t(part), chunk);
    }
    best = std::max(best, 2.0 * double(kBytes) / seconds_since(round_start) * 1e-9);  // read + write
  }
  return best;
}
}  // namespace

MachineRates calibrate_host(double seconds) {
  MachineRates rates;
  rates.gemm_gflops = gemm_gflops(seconds * 0.7);
  rates.memory_gbytes_per_s = copy_gbytes_per_s(seconds * 0.3);
  if (interrupted()) throw Interrupted();
  return rates;
}

std::optional<gpu::GpuRates> calibrate_gpu(double seconds) {
  if (gpu::devices().empty()) return std::nullopt;
  const gpu::GpuRates rates = gpu::measure_gpu_rates(seconds, interrupted);
  if (interrupted()) throw Interrupted();
  return rates;
}

}  // namespace faprobe
