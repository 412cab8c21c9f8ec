// The GPU harness (kernels/cuda/runtime/gpu.hpp). Everywhere: devices() never throws, and an empty list
// comes with a reason; without CUDA every operation throws "built without CUDA"; with CUDA the error
// messages name the call, the error and file:line (no device needed for that). Where a GPU exists: pool
// allocations raise the high-water mark and reset_peaks() brings it back, the workspace part is counted
// separately, a copy round trip is exact, fill_bytes sets every byte in stream order, time_on_stream times
// work that really ran on the stream, and measure_gpu_rates gives plausible rates and frees what it
// allocated. Without a GPU those tests skip with the reason.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/runtime/gpu.hpp"

#if FAPROBE_BUILT_WITH_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>
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

#if !FAPROBE_BUILT_WITH_CUDA

TEST(GpuRuntime, WithoutCudaEveryOperationSaysSo) {
  EXPECT_TRUE(gpu::devices().empty());
  EXPECT_EQ(gpu::no_device_reason(), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { gpu::DeviceBuffer buffer(16, AllocKind::tensor); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { (void)gpu::stream(); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { gpu::reset_peaks(); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { gpu::fill_bytes(nullptr, 0xFF, 16); }), "built without CUDA");
  EXPECT_EQ(cuda_error_of([] { (void)gpu::time_on_stream([] {}, true); }), "built without CUDA");
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
          FAPROBE_CUDA_CHECK(cudaMemsetAsync(buffer.data(), value, bytes, static_cast<cudaStream_t>(gpu::stream())));
        },
        flush_l2);
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

#endif

}  // namespace
