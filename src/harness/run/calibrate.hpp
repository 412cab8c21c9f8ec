// This machine's ceilings, measured in the same run as the results they qualify, at the run's thread count:
// the fp32 GEMM rate with every thread busy (each OpenMP thread multiplying its own 512×512 matrices with
// Eigen, single-threaded, the way cpu.tiled uses the cores) and the streaming memory bandwidth (a parallel
// copy of 256 MiB); and, where a CUDA device exists, the GPU's copy bandwidth and bf16 GEMM rate
// (gpu::measure_gpu_rates).
#pragma once
#include <cstddef>
#include <optional>

#include <nlohmann/json.hpp>

#include "cuda/runtime/gpu.hpp"
#include "harness/plan/registry.hpp"

namespace faprobe {

// One rate over its repetitions: the median is the ceiling, low and high its spread on this machine now.
struct RateSpread {
  double median = 0, low = 0, high = 0;
  int repetitions = 0;
};

// The host's ceilings and how they were measured.
struct HostCalibration {
  int threads = 0;  // the OpenMP threads both rates were measured with
  RateSpread gemm_gflops;
  RateSpread copy_gbytes_per_s;
  std::size_t copy_bytes = 0;  // the buffer each copy round copied
  // The medians, what time predictions and each record's bandwidth_fraction use.
  MachineRates rates() const;
  // The `rates` object of a run's --json: fp32_gemm_gflops and memory_gbytes_per_s (the medians), threads,
  // fp32_gemm_gflops_range and memory_gbytes_per_s_range ([low, high]) and the repetitions of each.
  nlohmann::json to_json() const;
};

// Takes about `seconds` in all, whatever `threads` is (0: omp_get_max_threads(), every core unless
// OMP_NUM_THREADS says otherwise). Each rate is the median of its repetitions, with their lowest and highest
// kept: on a shared machine the best round is the one that ran alone, and it moved a run's ceiling by more than
// its kernels moved. Under 0.2 s the calibration is quick: GEMM rounds of 2 products instead of 4 and a 32 MiB
// copy, so that a test suite's many short runs do not each pay for 512 MiB of page faults (the copy rate is
// then less exact). Stops at once on Ctrl-C and throws Interrupted (harness/io/progress.hpp).
HostCalibration calibrate_host(double seconds = 0.5, int threads = 0);

// Device 0's copy bandwidth and bf16 GEMM rate, about `seconds`; nullopt when this process sees no CUDA
// device. Throws gpu::CudaError when a measurement fails.
std::optional<gpu::GpuRates> calibrate_gpu(double seconds);

}  // namespace faprobe
