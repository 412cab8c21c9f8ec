// The empty kernel whose chains test_gpu_runtime times (timing_kernels.hpp): what it costs back to back is
// the GPU's launch cost alone, a microsecond or two, whatever the host's pace was when it enqueued them.
#include <chrono>

#include <cuda_runtime.h>

#include "cuda/runtime/gpu.hpp"
#include "timing_kernels.hpp"

namespace faprobe::timing_test {
namespace {

__global__ void empty_kernel() {}

// A busy wait: sleep_for would give the thread up for at least a scheduler tick, far longer than asked.
void spin_for(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

void load_empty_kernel(void* stream) {
  empty_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>();
  FAPROBE_CHECK_LAUNCH("empty_kernel");
  FAPROBE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void launch_empty_kernels(int count, double host_pause_s, void* stream) {
  for (int launch = 0; launch < count; ++launch) {
    if (launch > 0 && host_pause_s > 0) spin_for(host_pause_s);
    empty_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>();
  }
  FAPROBE_CHECK_LAUNCH("empty_kernel");
}

}  // namespace faprobe::timing_test
