// The blocking kernel (stream_hold.hpp): one thread that holds faprobe's stream until the host has enqueued
// a whole sample. Cost once released: one kernel's launch and exit, before the start event, so not timed.
#include <cuda_runtime.h>

#include "cuda/runtime/gpu.hpp"
#include "cuda/runtime/stream_hold.hpp"

namespace faprobe::gpu {
namespace {

// %globaltimer: the GPU's 64-bit nanosecond clock (PTX ISA, "Special Registers"); its updates may be a
// microsecond apart, nothing next to a one-second timeout.
struct GlobalTimer {
  __device__ std::uint64_t operator()() const {
    std::uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
  }
};

__global__ void hold_stream_kernel(volatile HoldFlags* flags, std::uint64_t timeout_ns) {
  (void)wait_for_release(flags, GlobalTimer{}, timeout_ns);
}

}  // namespace

void launch_hold_kernel(HoldFlags* device_flags, std::uint64_t timeout_ns, void* stream) {
  hold_stream_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(device_flags, timeout_ns);
  FAPROBE_CHECK_LAUNCH("hold_stream_kernel");
}

}  // namespace faprobe::gpu
