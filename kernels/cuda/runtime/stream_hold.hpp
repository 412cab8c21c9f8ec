// Holding faprobe's stream while a sample is enqueued (nvbench's "blocking kernel"): the flag protocol that
// the host (gpu.cpp) and the blocking kernel (stream_hold.cu) share.
//
// Why: a CUDA event records when the stream reaches it, not when the host called cudaEventRecord. With the
// stream idle, the start event fires at once, and every launch after it runs when the host gets round to
// it: a split-K decode and its combine, or the fp8 V transpose and the attention kernel, would be charged
// the host's launch latency between them (a few microseconds each, more on a loaded host), and the first
// launch's too. So each sample first enqueues one single-thread kernel that spins until the host releases
// it, then the L2 flush, the start event, every kernel of the work and the stop event; only then does the
// host release the flag. The stream runs them back to back, as the GPU would run a steady stream of calls.
//
// The flag lives in pinned host memory mapped into the device's address space (cudaHostAlloc with
// cudaHostAllocMapped): the kernel reads it through a volatile pointer, so each read goes over the bus and
// sees the host's store. The kernel gives up after kHoldTimeoutNs of GPU time (%globaltimer), so a host
// that fails to release it (an exception is released on the way out, but a debugger stop or a work() that
// waits for the stream itself would not be) cannot hang the GPU; it then sets `timed_out`, which the host
// reads after the sample: the sample stands (the same events timed the same work), but its launches may
// have been paced by the host, and the record counts it (details.hold_timeouts).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FAPROBE_HOLD_HOST_DEVICE __host__ __device__
#else
#define FAPROBE_HOLD_HOST_DEVICE
#endif

namespace faprobe::gpu {

// One word written by each side: `release` by the host, `timed_out` by the kernel. 32-bit words: a
// naturally aligned 4-byte access over the bus is never torn.
struct HoldFlags {
  std::uint32_t release = 0;    // the host sets 1 once the sample is enqueued
  std::uint32_t timed_out = 0;  // the kernel sets 1 when it stopped waiting before that
};

// A healthy host enqueues a sample (a memset, two events and a few launches) in tens of microseconds; a
// second is four orders of magnitude more, and short enough that a hold nobody releases costs one second
// per sample rather than a hang.
constexpr std::uint64_t kHoldTimeoutNs = 1'000'000'000;

enum class HoldOutcome { released, timed_out };

// Host, before enqueueing the hold: both words cleared (the previous sample's kernel has finished).
inline void arm(volatile HoldFlags& flags) {
  flags.release = 0;
  flags.timed_out = 0;
}

// Host, after the whole sample is enqueued: the kernel's next read of the flag lets it return.
inline void release(volatile HoldFlags& flags) { flags.release = 1; }

// The blocking kernel's loop (one thread), also run by a host thread in the tests: spins until the host
// releases it, or until now_ns() says that timeout_ns have passed, then sets timed_out.
template <class Clock>
FAPROBE_HOLD_HOST_DEVICE HoldOutcome wait_for_release(volatile HoldFlags* flags, Clock now_ns,
                                                      std::uint64_t timeout_ns) {
  const std::uint64_t began = now_ns();
  while (flags->release == 0) {
    if (now_ns() - began >= timeout_ns) {
      flags->timed_out = 1;
      return HoldOutcome::timed_out;
    }
  }
  return HoldOutcome::released;
}

// Enqueues the blocking kernel on `stream` (a cudaStream_t), waiting on `device_flags` (the device's
// address of the mapped HoldFlags); checks the launch. CUDA builds only (stream_hold.cu).
void launch_hold_kernel(HoldFlags* device_flags, std::uint64_t timeout_ns, void* stream);

}  // namespace faprobe::gpu
