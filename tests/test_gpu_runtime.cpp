// The GPU harness (kernels/cuda/runtime/gpu.hpp). Everywhere: devices() never throws, and an empty list
// comes with a reason; without CUDA every operation throws "built without CUDA"; with CUDA the error
// messages name the call, the error and file:line (no device needed for that). Where a GPU exists: pool
// allocations raise the high-water mark and reset_peaks() brings it back, the workspace part is counted
// separately, a copy round trip is exact, fill_bytes sets every byte in stream order, time_on_stream times
// work that really ran on the stream, and measure_gpu_rates gives plausible rates and frees what it
// allocated. Without a GPU those tests skip with the reason.
//
// Timing free of the host's launch gaps (gpu.hpp, "Timing"; stream_hold.hpp). Everywhere: the sample plan,
// judged by a model of one stream, charges a sample the device's time alone at any host pace, and planted
// plans (no hold, the hold released before the work is enqueued, the start event before the hold, the flush
// after it) are charged the host's gaps in the same model; the flag protocol, with the blocking kernel's
// loop run by a host thread, returns once released and times out otherwise; the details a case's samples
// write. On a GPU only: a chain of empty kernels costs the GPU's launch per kernel, not the host's, even
// with the host pausing between launches, the same planted plans run for real are charged the pauses, and a
// hold nobody releases times out and is reported.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/runtime/gpu.hpp"
#include "cuda/runtime/stream_hold.hpp"

#if FAPROBE_BUILT_WITH_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "timing_kernels.hpp"
#endif

namespace {

namespace gpu = faprobe::gpu;
using faprobe::AllocKind;

constexpr std::size_t kMiB = std::size_t(1) << 20;

// What was thrown, or "" when nothing was.
template <class F> std::string cuda_error_of(F&& f) {
  try {
    f();
  } catch (const gpu::CudaError& error) {
    return error.what();
  }
  return "";
}

TEST(GpuRuntime, DevicesNeverThrowAndAnEmptyListHasAReason) {
  std::vector<gpu::DeviceInfo> found;
  EXPECT_NO_THROW(found = gpu::devices());
  if (found.empty()) {
    EXPECT_FALSE(gpu::no_device_reason().empty());
    return;
  }
  EXPECT_EQ(gpu::no_device_reason(), "");
  for (const gpu::DeviceInfo& device : found) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_GE(device.compute_major, 1);
    EXPECT_GT(device.sm_count, 0);
    EXPECT_GT(device.memory_total_bytes, 0u);
    EXPECT_LT(gpu::default_memory_limit(), device.memory_total_bytes);
    EXPECT_GT(device.l2_bytes, 0u);
    EXPECT_GT(device.clock_mhz, 0);
    EXPECT_GT(device.driver_version, 0);
    EXPECT_EQ(device.compute_capability(),
              std::to_string(device.compute_major) + "." + std::to_string(device.compute_minor));
  }
}

TEST(GpuRuntime, DeviceInfoJsonHasTheHeaderFields) {
  gpu::DeviceInfo info;
  info.name = "NVIDIA H200";
  info.compute_major = 9;
  info.sm_count = 132;
  info.l2_bytes = 50 * kMiB;
  const nlohmann::json json = info;
  EXPECT_EQ(json.at("name"), "NVIDIA H200");
  EXPECT_EQ(json.at("compute_capability"), "9.0");
  EXPECT_EQ(json.at("sm_count"), 132);
  EXPECT_EQ(json.at("l2_bytes"), 50 * kMiB);
  EXPECT_TRUE(json.contains("memory_total_bytes"));
}

// --- The sample plan, in a model of one stream ---

using gpu::SampleStep;

std::string plan_text(const std::vector<SampleStep>& plan) {
  std::string text;
  for (const SampleStep step : plan) text += std::string(text.empty() ? "" : ", ") + gpu::step_name(step);
  return text;
}

// One sample of a plan in a model of one stream and its host. The host spends host_gap_s on everything it
// enqueues (the memset, an event, each of the work's `kernels` launches, the blocking kernel) and on the
// release; the device runs what is enqueued in order, each thing once it is enqueued and the thing before it
// is done: a kernel of the work in kernel_s, the flush in kFlushS, an event at once, the blocking kernel until
// the host's release (a release before the hold does nothing: the hold arms the flag) or its timeout.
struct ModelSample {
  double seconds = 0;  // between the events
  bool hold_timed_out = false;
};
constexpr double kFlushS = 7e-6;

ModelSample model_sample(const std::vector<SampleStep>& plan, int kernels, double host_gap_s, double kernel_s,
                         double timeout_s = 1.0) {
  struct Enqueued {
    SampleStep step;
    double at;  // host time
  };
  std::vector<Enqueued> stream;
  double host = 0, released_at = std::numeric_limits<double>::infinity();
  bool hold_enqueued = false;
  for (const SampleStep step : plan) {
    if (step == SampleStep::wait) continue;
    if (step == SampleStep::release) {
      if (hold_enqueued) released_at = host;
      host += host_gap_s;
      continue;
    }
    for (int launch = 0; launch < (step == SampleStep::work ? kernels : 1); ++launch) {
      stream.push_back({step, host});
      host += host_gap_s;
    }
    hold_enqueued = hold_enqueued || step == SampleStep::hold;
  }
  ModelSample sample;
  double device = 0, start = 0, stop = 0;
  for (const Enqueued& item : stream) {
    const double begin = std::max(device, item.at);
    switch (item.step) {
      case SampleStep::hold:
        device = std::max(begin, released_at);
        if (device > begin + timeout_s) {
          device = begin + timeout_s;
          sample.hold_timed_out = true;
        }
        break;
      case SampleStep::flush_l2: device = begin + kFlushS; break;
      case SampleStep::start: device = start = begin; break;
      case SampleStep::stop: device = stop = begin; break;
      case SampleStep::work: device = begin + kernel_s; break;
      case SampleStep::release:
      case SampleStep::wait: break;
    }
  }
  sample.seconds = stop - start;
  return sample;
}

TEST(GpuTiming, TheSamplePlanHoldsTheStreamAroundEverythingItTimes) {
  using S = SampleStep;
  EXPECT_EQ(gpu::sample_plan(true, gpu::Hold::blocking_kernel),
            (std::vector<S>{S::hold, S::flush_l2, S::start, S::work, S::stop, S::release, S::wait}));
  EXPECT_EQ(gpu::sample_plan(false, gpu::Hold::blocking_kernel),  // --no-flush-l2
            (std::vector<S>{S::hold, S::start, S::work, S::stop, S::release, S::wait}));
  EXPECT_EQ(gpu::sample_plan(true, gpu::Hold::none), (std::vector<S>{S::flush_l2, S::start, S::work, S::stop, S::wait}));
}

// Whatever the host's pace (a microsecond per launch to a millisecond), a sample of the plan is charged the
// device's time for the work and nothing else: not the flush, not the host's launch gaps.
TEST(GpuTiming, TheSamplePlanChargesTheDevicesTimeAloneAtAnyHostPace) {
  constexpr double kernel_s = 2e-6;
  for (const bool flush : {true, false}) {
    const std::vector<SampleStep> plan = gpu::sample_plan(flush, gpu::Hold::blocking_kernel);
    for (const int kernels : {1, 2, 8, 64}) {
      for (const double host_gap_s : {1e-6, 20e-6, 1e-3}) {
        const ModelSample sample = model_sample(plan, kernels, host_gap_s, kernel_s);
        EXPECT_NEAR(sample.seconds, kernels * kernel_s, 1e-12)
            << plan_text(plan) << ": " << kernels << " kernels, host gap " << host_gap_s << " s";
        EXPECT_FALSE(sample.hold_timed_out);
      }
    }
  }
}

// Planted defects in the plan, each a way to time the host: the same model charges each the host's gaps or
// the flush, or (released before the hold) leaves the hold to time out, so the tests above would fail for
// any of them.
TEST(GpuTiming, PlantedPlansAreChargedTheHostsLaunchGaps) {
  using S = SampleStep;
  constexpr double kernel_s = 2e-6, host_gap_s = 20e-6;
  constexpr int kernels = 8;
  const std::vector<std::pair<const char*, std::vector<S>>> planted = {
      {"no hold (the timing before the blocking kernel)", gpu::sample_plan(true, gpu::Hold::none)},
      {"released before the work is enqueued", {S::hold, S::release, S::flush_l2, S::start, S::work, S::stop, S::wait}},
      {"start event before the hold", {S::start, S::hold, S::flush_l2, S::work, S::stop, S::release, S::wait}},
      {"flush after the start event", {S::hold, S::start, S::flush_l2, S::work, S::stop, S::release, S::wait}},
      {"released before the hold", {S::release, S::hold, S::flush_l2, S::start, S::work, S::stop, S::wait}},
  };
  for (const auto& [defect, plan] : planted) {
    const ModelSample sample = model_sample(plan, kernels, host_gap_s, kernel_s);
    const bool caught = sample.seconds > kernels * kernel_s + 5e-6 || sample.hold_timed_out;
    EXPECT_TRUE(caught) << defect << ": " << plan_text(plan) << " timed " << sample.seconds * 1e6 << " us";
  }
  // The control: the right plan under the same pace.
  EXPECT_NEAR(model_sample(gpu::sample_plan(true, gpu::Hold::blocking_kernel), kernels, host_gap_s, kernel_s).seconds,
              kernels * kernel_s, 1e-12);
}

// A host slower than the timeout: the blocking kernel gives up, the sample is paced by the host and says so.
TEST(GpuTiming, AHostSlowerThanTheTimeoutIsReportedAsATimedOutHold) {
  const std::vector<SampleStep> plan = gpu::sample_plan(false, gpu::Hold::blocking_kernel);
  const ModelSample slow = model_sample(plan, 64, 0.05, 2e-6, /*timeout_s=*/1.0);  // released after 3.4 s
  EXPECT_TRUE(slow.hold_timed_out);
  EXPECT_GT(slow.seconds, 1.0);
  EXPECT_FALSE(model_sample(plan, 8, 0.05, 2e-6, 1.0).hold_timed_out);  // released after 0.6 s
}

// --- The flag protocol (stream_hold.hpp), the blocking kernel's loop on a host thread ---

std::uint64_t host_now_ns() {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

TEST(GpuTiming, TheBlockingLoopReturnsOnceReleasedAndLeavesTimedOutClear) {
  gpu::HoldFlags flags;
  flags.release = 1;  // as the previous sample left them
  flags.timed_out = 1;
  gpu::arm(flags);
  EXPECT_EQ(flags.release, 0u);
  EXPECT_EQ(flags.timed_out, 0u);
  std::atomic<bool> returned{false};
  gpu::HoldOutcome outcome = gpu::HoldOutcome::timed_out;
  std::thread holder([&] {
    outcome = gpu::wait_for_release(&flags, host_now_ns, 60'000'000'000ull);  // a minute: only the release ends it
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load()) << "the loop returned before the release";
  gpu::release(flags);
  holder.join();
  EXPECT_EQ(outcome, gpu::HoldOutcome::released);
  EXPECT_EQ(flags.timed_out, 0u);
}

TEST(GpuTiming, TheBlockingLoopTimesOutWhenNobodyReleasesItAndSaysSo) {
  gpu::HoldFlags flags;
  gpu::arm(flags);
  const auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(gpu::wait_for_release(&flags, host_now_ns, 20'000'000), gpu::HoldOutcome::timed_out);  // 20 ms
  EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(20));
  EXPECT_EQ(flags.timed_out, 1u);
  EXPECT_EQ(flags.release, 0u);
}

// --- What a case's samples write into its record ---

TEST(GpuTiming, DetailsSayHowTheSamplesWereTimed) {
  nlohmann::json details = nlohmann::json::object();
  gpu::SampleTally tally;
  tally.write_details(details, true);  // nothing timed yet (verify): the flush setting alone
  EXPECT_EQ(details, (nlohmann::json{{"l2_flushed", true}}));

  gpu::GpuSample held;
  held.held = true;
  for (int sample = 0; sample < 4; ++sample) tally.add(held);
  held.hold_timed_out = true;
  tally.add(held);
  tally.write_details(details, false);
  EXPECT_EQ(details, (nlohmann::json{{"l2_flushed", false}, {"timing", "blocking-kernel"}, {"hold_timeouts", 1}}));

  gpu::SampleTally unheld;  // CUDA_LAUNCH_BLOCKING=1
  unheld.add(gpu::GpuSample{});
  details = nlohmann::json::object();
  unheld.write_details(details, true);
  EXPECT_EQ(details, (nlohmann::json{{"l2_flushed", true}, {"timing", "events"}}));

  tally.add(gpu::GpuSample{});
  tally.write_details(details, true);
  EXPECT_EQ(details.at("timing"), "mixed");
  EXPECT_EQ(details.at("unheld_samples"), 1);
}

#if !FAPROBE_BUILT_WITH_CUDA

TEST(GpuRuntime, WithoutCudaEveryOperationSaysSo) {
  EXPECT_TRUE(gpu::devices().empty());
  EXPECT_EQ(gpu::no_device_reason(), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { gpu::DeviceBuffer buffer(16, AllocKind::tensor); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { (void)gpu::stream(); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { gpu::reset_peaks(); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { gpu::fill_bytes(nullptr, 0xFF, 16); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { (void)gpu::time_on_stream([] {}, true); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { (void)gpu::time_plan(gpu::sample_plan(false, gpu::Hold::none), [] {}); }),
            "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { (void)gpu::measure_gpu_rates(0.1); }), "built without CUDA");
}

#else

TEST(GpuRuntime, ErrorsNameTheCallTheErrorAndTheLine) {
  const std::string message = cuda_error_of(
      [] { gpu::check_status(int(cudaErrorInvalidValue), "cudaMemsetAsync(data, 0, bytes, s)", "dir/x.cpp", 42); });
  EXPECT_NE(message.find("cudaMemsetAsync(data, 0, bytes, s)"), std::string::npos) << message;
  EXPECT_NE(message.find("cudaErrorInvalidValue"), std::string::npos) << message;
  EXPECT_NE(message.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << message;
  EXPECT_NE(message.find("x.cpp:42"), std::string::npos) << message;
  EXPECT_EQ(cuda_error_of([] { FAPROBE_CUDA_CHECK(cudaSuccess); }), "");

  const std::string cublas = cuda_error_of([] { FAPROBE_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED); });
  EXPECT_NE(cublas.find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos) << cublas;
  EXPECT_NE(cublas.find("test_gpu_runtime.cpp:"), std::string::npos) << cublas;
}

TEST(GpuRuntime, NvtxRangesNeedNoDevice) { EXPECT_NO_THROW(gpu::NvtxRange range("faprobe test range")); }

// --- With a device ---

class GpuRuntimeOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::devices().empty()) GTEST_SKIP() << "no GPU: " << gpu::no_device_reason();
  }
};

TEST_F(GpuRuntimeOnDevice, PoolPeaksRiseAndReset) {
  gpu::reset_peaks();
  const faprobe::MemoryCounters before = gpu::counters();
  faprobe::MemoryCounters during;
  {
    gpu::DeviceBuffer tensor(64 * kMiB, AllocKind::tensor);
    gpu::DeviceBuffer workspace(8 * kMiB, AllocKind::workspace);
    ASSERT_NE(tensor.data(), nullptr);
    ASSERT_NE(workspace.data(), nullptr);
    EXPECT_EQ(tensor.bytes(), 64 * kMiB);
    gpu::synchronize();
    during = gpu::counters();
    EXPECT_GE(during.peak_bytes, before.peak_bytes + 72 * kMiB);
    EXPECT_EQ(during.workspace_bytes, before.workspace_bytes + 8 * kMiB);

    gpu::DeviceBuffer moved = std::move(workspace);  // ownership moves, the count does not change
    EXPECT_EQ(workspace.data(), nullptr);
    EXPECT_EQ(gpu::counters().workspace_bytes, during.workspace_bytes);
  }
  // The high-water mark stays until it is reset, then starts again from what is in use now.
  EXPECT_EQ(gpu::counters().peak_bytes, during.peak_bytes);
  gpu::reset_peaks();
  const faprobe::MemoryCounters after = gpu::counters();
  EXPECT_LE(after.peak_bytes + 72 * kMiB, during.peak_bytes);
  EXPECT_EQ(after.workspace_bytes, before.workspace_bytes);

  gpu::DeviceBuffer empty(0, AllocKind::tensor);
  EXPECT_EQ(empty.data(), nullptr);
}

TEST_F(GpuRuntimeOnDevice, CopyRoundTripIsExact) {
  std::vector<std::uint32_t> sent(1 << 20);
  std::iota(sent.begin(), sent.end(), 0x9e3779b9u);
  const std::size_t bytes = sent.size() * sizeof(std::uint32_t);
  gpu::DeviceBuffer buffer(bytes, AllocKind::tensor);
  gpu::copy_to_device(buffer.data(), sent.data(), bytes);
  std::vector<std::uint32_t> received(sent.size(), 0);
  gpu::copy_to_host(received.data(), buffer.data(), bytes);
  EXPECT_EQ(received, sent);
}

// The NaN poison of outputs (kernel_implementation.cpp): every byte set, on the stream, before a later copy.
TEST_F(GpuRuntimeOnDevice, FillBytesSetsEveryByteBeforeLaterWork) {
  const std::size_t bytes = 3 * kMiB + 5;  // not a multiple of a word
  std::vector<unsigned char> sent(bytes, 0x11);
  gpu::DeviceBuffer buffer(bytes, AllocKind::tensor);
  gpu::copy_to_device(buffer.data(), sent.data(), bytes);
  gpu::fill_bytes(buffer.data(), 0xFF, bytes);
  std::vector<unsigned char> received(bytes, 0);
  gpu::copy_to_host(received.data(), buffer.data(), bytes);
  EXPECT_TRUE(std::all_of(received.begin(), received.end(), [](unsigned char b) { return b == 0xFF; }));
}

TEST_F(GpuRuntimeOnDevice, TimesWorkThatRanOnTheStream) {
  const std::size_t large = 512 * kMiB, small = 64 * 1024;
  gpu::DeviceBuffer buffer(large, AllocKind::tensor);
  const auto memset_seconds = [&](std::size_t bytes, int value, bool flush_l2) {
    return gpu::time_on_stream(
               [&] {
                 FAPROBE_CUDA_CHECK(
                     cudaMemsetAsync(buffer.data(), value, bytes, static_cast<cudaStream_t>(gpu::stream())));
               },
               flush_l2)
        .seconds;
  };
  double large_seconds = 1e30, small_seconds = 1e30;
  for (int sample = 0; sample < 3; ++sample) {
    large_seconds = std::min(large_seconds, memset_seconds(large, 0x5a, true));
    small_seconds = std::min(small_seconds, memset_seconds(small, 0x5a, false));
  }
  EXPECT_GT(small_seconds, 0.0);
  EXPECT_LT(large_seconds, 1.0);
  // 512 MiB at a few TB/s is a hundred microseconds or more; 64 KiB is launch overhead.
  EXPECT_GT(large_seconds, 4 * small_seconds) << "large " << large_seconds << " s, small " << small_seconds << " s";

  // The memset ran before time_on_stream returned: the last bytes hold its value.
  std::vector<unsigned char> tail(4096);
  gpu::copy_to_host(tail.data(), static_cast<unsigned char*>(buffer.data()) + large - tail.size(), tail.size());
  EXPECT_TRUE(std::all_of(tail.begin(), tail.end(), [](unsigned char b) { return b == 0x5a; }));
}

TEST_F(GpuRuntimeOnDevice, CublasHandleWorkspaceAndMemoryLimit) {
  EXPECT_NE(gpu::cublas_handle(), nullptr);
  EXPECT_EQ(gpu::cublas_handle(), gpu::cublas_handle());  // one handle, created once
  const std::size_t workspace_bytes = gpu::cublas_workspace_bytes();
  EXPECT_EQ(workspace_bytes, (gpu::devices().front().compute_major >= 9 ? 32 : 4) * kMiB);
  {
    gpu::DeviceBuffer workspace(workspace_bytes, AllocKind::workspace);
    EXPECT_NO_THROW(gpu::set_cublas_workspace(workspace.data(), workspace.bytes()));
    EXPECT_NO_THROW(gpu::set_cublas_workspace(nullptr, 0));
  }
  const std::uint64_t limit = gpu::default_memory_limit();
  EXPECT_GT(limit, 0u);
  EXPECT_LT(limit, gpu::devices().front().memory_total_bytes);
}

TEST_F(GpuRuntimeOnDevice, RatesArePlausibleAndLeaveNoMemoryBehind) {
  (void)gpu::cublas_handle();  // created before the free-memory reading: the handle stays, by design
  gpu::reset_peaks();
  const std::uint64_t pool_peak_before = gpu::counters().peak_bytes;
  std::size_t free_before = 0, free_after = 0, total = 0;
  FAPROBE_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  const gpu::GpuRates rates = gpu::measure_gpu_rates(0.3);
  FAPROBE_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  const gpu::DeviceInfo& device = gpu::devices().front();
  EXPECT_GE(rates.copy_bytes, std::max<std::uint64_t>(std::uint64_t(1) << 30, 4 * device.l2_bytes));
  // Above what a working GPU of the last decade falls below, and below what none reaches yet.
  EXPECT_GT(rates.copy_gbytes_per_s, 50.0);
  EXPECT_LT(rates.copy_gbytes_per_s, 30000.0);
  EXPECT_GT(rates.bf16_gemm_tflops, 5.0);
  EXPECT_LT(rates.bf16_gemm_tflops, 10000.0);
  // Its buffers were outside the pool and are freed: the pool's mark did not move, and the device memory
  // is back but for cuBLAS's kernels, loaded on first use.
  EXPECT_EQ(gpu::counters().peak_bytes, pool_peak_before);
  EXPECT_GE(free_after + 256 * kMiB, free_before) << "free before " << free_before << ", after " << free_after;
}

TEST_F(GpuRuntimeOnDevice, AFailedCallThrowsWithItsName) {
  // An allocation larger than any device fails at once, with cudaErrorMemoryAllocation.
  const std::string message = cuda_error_of([] { gpu::DeviceBuffer buffer(~std::size_t(0) / 2, AllocKind::tensor); });
  EXPECT_NE(message.find("cudaMallocFromPoolAsync"), std::string::npos) << message;
  EXPECT_NE(message.find("gpu.cpp:"), std::string::npos) << message;
  // An allocation failure is not sticky, and the next launch check does not report it again.
  EXPECT_NO_THROW(gpu::synchronize());
  EXPECT_NO_THROW((void)gpu::time_on_stream([] {}, false));
}

// --- Timing free of launch gaps, on the GPU ---

// The least time over `samples` samples of `plan` timing a chain of `count` empty kernels launched
// `host_pause_s` apart; `timed_out` counts the samples whose hold timed out.
double chain_seconds(const std::vector<SampleStep>& plan, int count, double host_pause_s, int& timed_out,
                     int samples = 15) {
  void* stream = gpu::stream();
  double least = std::numeric_limits<double>::infinity();
  for (int sample = 0; sample < samples; ++sample) {
    const gpu::GpuSample timed =
        gpu::time_plan(plan, [&] { faprobe::timing_test::launch_empty_kernels(count, host_pause_s, stream); });
    least = std::min(least, timed.seconds);
    timed_out += timed.hold_timed_out ? 1 : 0;
  }
  return least;
}

// Per kernel: the slope of the chain's time from 1 to 64 kernels (the events' and the flush's fixed costs
// cancel).
double seconds_per_kernel(const std::vector<SampleStep>& plan, double host_pause_s, int& timed_out) {
  const double one = chain_seconds(plan, 1, host_pause_s, timed_out);
  const double many = chain_seconds(plan, 64, host_pause_s, timed_out);
  return (many - one) / 63.0;
}

class GpuTimingOnDevice : public GpuRuntimeOnDevice {
 protected:
  void SetUp() override {
    GpuRuntimeOnDevice::SetUp();
    if (IsSkipped()) return;
    faprobe::timing_test::load_empty_kernel(gpu::stream());  // loaded before any stream is held
  }
};

// The GPU runs empty kernels back to back in a microsecond or two each; a host launches one every few
// microseconds at best, and here pauses 30 us before each. Held, the chain costs the GPU's rate either way.
TEST_F(GpuTimingOnDevice, AChainOfEmptyKernelsCostsTheGpusLaunchNotTheHosts) {
  constexpr double kLimit = 5e-6;  // per kernel
  for (const bool flush : {false, true}) {
    const std::vector<SampleStep> plan = gpu::sample_plan(flush, gpu::Hold::blocking_kernel);
    for (const double pause : {0.0, 30e-6}) {
      int timed_out = 0;
      const double per_kernel = seconds_per_kernel(plan, pause, timed_out);
      EXPECT_GT(per_kernel, 0.0) << plan_text(plan);
      EXPECT_LT(per_kernel, kLimit) << plan_text(plan) << ", host pause " << pause * 1e6 << " us: "
                                    << per_kernel * 1e6 << " us per kernel";
      EXPECT_EQ(timed_out, 0) << plan_text(plan);
    }
  }
  // time_on_stream is that plan: the first sample's time within the same bound.
  const gpu::GpuSample sample = gpu::time_on_stream(
      [] { faprobe::timing_test::launch_empty_kernels(64, 30e-6, gpu::stream()); }, /*flush_l2=*/false);
  EXPECT_TRUE(sample.held);
  EXPECT_FALSE(sample.hold_timed_out);
  EXPECT_LT(sample.seconds, 64 * kLimit) << "64 empty kernels 30 us apart on the host";
}

// The planted plans of the model, run for real: each is charged the host's 30 us pauses, so the bound above
// catches them.
TEST_F(GpuTimingOnDevice, PlantedPlansAreChargedTheHostsPauses) {
  using S = SampleStep;
  const std::vector<std::pair<const char*, std::vector<S>>> planted = {
      {"no hold", gpu::sample_plan(false, gpu::Hold::none)},
      {"released before the work is enqueued", {S::hold, S::release, S::start, S::work, S::stop, S::wait}},
      {"start event before the hold", {S::start, S::hold, S::work, S::stop, S::release, S::wait}},
  };
  for (const auto& [defect, plan] : planted) {
    int timed_out = 0;
    const double per_kernel = seconds_per_kernel(plan, 30e-6, timed_out);
    EXPECT_GT(per_kernel, 20e-6) << defect << ": " << per_kernel * 1e6 << " us per kernel";
  }
}

// A plan that never releases: the blocking kernel gives up after kHoldTimeoutNs, the sample says so, and the
// next sample holds and releases as usual.
TEST_F(GpuTimingOnDevice, AHoldNobodyReleasesTimesOutAndIsReported) {
  using S = SampleStep;
  const auto began = std::chrono::steady_clock::now();
  const gpu::GpuSample stuck =
      gpu::time_plan({S::hold, S::start, S::work, S::stop, S::wait}, [] {
        faprobe::timing_test::launch_empty_kernels(1, 0, gpu::stream());
      });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_TRUE(stuck.held);
  EXPECT_TRUE(stuck.hold_timed_out);
  EXPECT_GE(waited, 0.9 * double(gpu::kHoldTimeoutNs) * 1e-9);
  const gpu::GpuSample next =
      gpu::time_on_stream([] { faprobe::timing_test::launch_empty_kernels(1, 0, gpu::stream()); }, false);
  EXPECT_TRUE(next.held);
  EXPECT_FALSE(next.hold_timed_out);
}

// work() that throws while the stream is held: the hold is released on the way out, at once, not after the
// timeout.
TEST_F(GpuTimingOnDevice, AThrowingWorkReleasesTheHold) {
  const auto began = std::chrono::steady_clock::now();
  EXPECT_THROW((void)gpu::time_on_stream([] { throw std::runtime_error("planted"); }, false), std::runtime_error);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_LT(waited, 0.5 * double(gpu::kHoldTimeoutNs) * 1e-9);
  EXPECT_FALSE(gpu::time_on_stream([] {}, false).hold_timed_out);
}

#endif

}  // namespace
