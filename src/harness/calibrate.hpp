// This machine's ceilings, measured in the same run as the results they qualify: the fp32 GEMM rate with
// every core busy (each OpenMP thread multiplying its own 512×512 matrices with Eigen, single-threaded,
// the way cpu.tiled uses the cores) and the streaming memory bandwidth (a parallel copy of 256 MiB); and,
// where a CUDA device exists, the GPU's copy bandwidth and bf16 GEMM rate (gpu::measure_gpu_rates).
#pragma once
#include <optional>

#include "cuda/runtime/gpu.hpp"
#include "harness/registry.hpp"

namespace faprobe {

// Takes about `seconds` in all. Rates are the best of the repetitions (a ceiling, not a typical value).
// Under 0.2 s the calibration is quick: GEMM rounds of 2 products instead of 16 and a 32 MiB copy, so that a
// test suite's many short runs do not each pay for 512 MiB of page faults (the copy rate is then less exact).
// Both functions stop at once on Ctrl-C and throw Interrupted (harness/progress.hpp).
MachineRates calibrate_host(double seconds = 0.5);

// Device 0's copy bandwidth and bf16 GEMM rate, about `seconds`; nullopt when this process sees no CUDA
// device. Throws gpu::CudaError when a measurement fails.
std::optional<gpu::GpuRates> calibrate_gpu(double seconds);

}  // namespace faprobe
