// Kernels for the GPU timing tests (test_gpu_runtime.cpp), CUDA builds only (timing_kernels.cu).
#pragma once

namespace faprobe::timing_test {

// Warms up the empty kernel: its module loaded and one launch finished, outside any timed sample.
void load_empty_kernel(void* stream);
// Launches `count` empty kernels (one warp each, nothing read or written) on `stream` (a cudaStream_t), the
// host spinning for `host_pause_s` before each launch but the first: launch gaps as long as a host makes them.
void launch_empty_kernels(int count, double host_pause_s, void* stream);

}  // namespace faprobe::timing_test
