// The GPU harness: what faprobe needs from the CUDA runtime, behind plain C++ (no CUDA header leaks out of
// gpu.cpp, so the rest of the program compiles with or without the toolkit). Built only with
// FAPROBE_ENABLE_CUDA; a CPU-only build compiles gpu_stub.cpp instead, which reports no device.
//
// - Devices: name, compute capability, SMs, memory, L2, driver and runtime versions, PCI bus id, for `faprobe
//   list` and the --json header (what NVML says about their clocks during a run: nvml.hpp).
// - Every CUDA runtime, driver and cuBLAS call and every launch is checked; a failure throws CudaError with
//   the call, the error name and text, and file:line.
// - Memory: one dedicated stream-ordered pool (cudaMemPool) on device 0 with an unlimited release
//   threshold; every faprobe device buffer (inputs, outputs, scores, workspaces, cuBLAS's workspace) comes
//   from it. reset_peaks() sets the pool's used-memory high-water mark to what is allocated now; counters()
//   reads it back, plus the workspace part counted by faprobe itself.
// - Timing: CUDA events around the work on faprobe's stream, the whole sample enqueued behind a blocking
//   kernel that the host releases once it is (no launch gap of the host's is timed), the L2 cache flushed
//   before the start event by writing a buffer twice the L2's size (outside the pool, so it never counts as
//   a case's memory).
// - Rates: the device's copy bandwidth and bf16 GEMM rate (measure_gpu_rates), the ceilings that records
//   are read against.
// - NVTX ranges named after implementation and case, so a profile shows which case a kernel belongs to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // not json.hpp: every kernel .cu includes this header, and nvcc parses it three times

#include "model/memory.hpp"

namespace faprobe::gpu {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceInfo {
  int index = 0;
  std::string name;                   // "NVIDIA H200"
  int compute_major = 0, compute_minor = 0;
  int sm_count = 0;
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t l2_bytes = 0;
  int clock_mhz = 0;                  // SM clock (cudaDevAttrClockRate)
  int memory_clock_mhz = 0;
  int memory_bus_bits = 0;
  int driver_version = 0;             // e.g. 13000 (cudaDriverGetVersion)
  int runtime_version = 0;            // cudaRuntimeGetVersion
  std::string pci_bus_id;             // "0000:01:00.0" (cudaDeviceGetPCIBusId): how NVML finds this device
  std::string compute_capability() const;  // "9.0"
};
void to_json(nlohmann::json& out, const DeviceInfo& info);

// The CUDA devices this process sees; empty (never throws) when there is none or no driver.
std::vector<DeviceInfo> devices();
// Why there is no usable device ("no CUDA driver", "no CUDA device", "built without CUDA"), or "".
std::string no_device_reason();

// Device memory from the pool, freed in stream order on faprobe's stream. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, AllocKind kind);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  AllocKind kind_ = AllocKind::tensor;
};

// faprobe's stream on device 0 (a cudaStream_t), created on first use.
void* stream();
void synchronize();  // waits for the stream; throws CudaError for an asynchronous error
void copy_to_host(void* host, const void* device, std::size_t bytes);    // synchronous
void copy_to_device(void* device, const void* host, std::size_t bytes);  // synchronous
// Sets `bytes` bytes of device memory to `value` (cudaMemsetAsync on faprobe's stream): asynchronous, and
// ordered before any work queued on the stream after it (the outputs' NaN poison before a checked run).
void fill_bytes(void* device, unsigned char value, std::size_t bytes);

// Pool accounting for one case.
void reset_peaks();
MemoryCounters counters();
// Free device memory now less a margin (5 % and 1 GiB): the default --mem-limit for GPU implementations.
std::uint64_t default_memory_limit();

// The cuBLAS handle (a cublasHandle_t, as void*) bound to faprobe's stream, created on first use, with
// cuBLAS's own workspace disabled until set_cublas_workspace gives it one from the pool.
void* cublas_handle();
void set_cublas_workspace(void* data, std::size_t bytes);
// The workspace size cuBLAS is given: 32 MiB on Hopper and newer, 4 MiB before (cuBLAS documentation,
// "cublasSetWorkspace" recommendations).
std::size_t cublas_workspace_bytes();

// --- Timing ---
//
// One sample is a plan of steps, run in order by time_plan. sample_plan gives the plan every sample uses
// (nvbench's "cold" measurement): hold the stream with the blocking kernel (stream_hold.hpp), enqueue the L2
// flush, the start event, the work's kernels and the stop event behind it, release it from the host, wait.
// The stream then runs the flush, the events and the kernels back to back, so the time between the events is
// the device's alone, with none of the host's launch latency in it. Without a hold (Hold::none, or launches
// made synchronous by CUDA_LAUNCH_BLOCKING=1, under which a held stream could only time out) the start
// event fires as soon as the stream reaches it and every launch after it is paced by the host.
enum class SampleStep {
  hold,      // launch the blocking kernel (the flag armed first)
  flush_l2,  // cudaMemsetAsync of twice the L2's size, evicting what the previous sample left
  start,     // cudaEventRecord(start)
  work,      // the caller's work(): its kernels, on faprobe's stream
  stop,      // cudaEventRecord(stop)
  release,   // the host sets the flag: the blocking kernel returns
  wait,      // cudaStreamSynchronize
};
enum class Hold { none, blocking_kernel };
std::vector<SampleStep> sample_plan(bool flush_l2, Hold hold);
const char* step_name(SampleStep step);

// One sample's time and how it was taken.
struct GpuSample {
  double seconds = 0;
  bool held = false;            // enqueued behind the blocking kernel
  bool hold_timed_out = false;  // the blocking kernel stopped waiting before the host released it
};

// Runs `plan` (a plan with a hold is always released, also when work() throws) and returns the time between
// its events. The time is only as good as the plan: tests run planted plans through it.
GpuSample time_plan(const std::vector<SampleStep>& plan, const std::function<void()>& work);
// The time that work() takes on faprobe's stream: time_plan(sample_plan(flush_l2, hold)), without the hold
// where launches are synchronous. Checks for launch errors after work(). A kernel's first launch may load
// its module (CUDA_MODULE_LOADING=LAZY, the default), and loading may wait for the device to be idle, which
// a held stream is not until the host releases it: run new work once unheld (or untimed) first. For the
// same reason work() must only enqueue: a call that waits for the device (cudaMalloc, a synchronize) would
// wait for the hold's timeout, and the sample would say so (hold_timed_out).
GpuSample time_on_stream(const std::function<void()>& work, bool flush_l2, Hold hold = Hold::blocking_kernel);

// A case's timed runs (every run after its first: warm-ups and samples), counted for its record:
// details.timing ("blocking-kernel": every one held; "events": none; "mixed"), details.hold_timeouts (held
// runs whose blocking kernel timed out) and details.l2_flushed. Nothing but l2_flushed before the first
// (a verify run times nothing).
struct SampleTally {
  int held = 0, unheld = 0, hold_timeouts = 0;
  void add(const GpuSample& sample);
  void write_details(nlohmann::json& details, bool flush_l2) const;
};

// Device 0's ceilings, against which GPU results are read (faprobe calibrate; a timed run with cuda.*
// measures them once, in the parent process). Each rate is the best of its repetitions (a ceiling).
struct GpuRates {
  double copy_gbytes_per_s = 0;  // device-to-device cudaMemcpyAsync, read + write counted (2 × bytes / time)
  double bf16_gemm_tflops = 0;   // cublasGemmEx, bf16 inputs and output, fp32 compute, 8192 × 8192 × 8192
  std::uint64_t copy_bytes = 0;  // the size of the copy: max(1 GiB, 4 × L2)
};
// Takes about `seconds`: 60 % copying, the rest multiplying. Its buffers and cuBLAS workspace come from
// cudaMalloc, outside the pool, and are freed (and the workspace unset) before it returns, so a process
// that only calibrates keeps no device memory but its CUDA context and faprobe's stream and cuBLAS handle.
// `stop` (Ctrl-C) ends the repetitions early; the rates are then from fewer of them.
GpuRates measure_gpu_rates(double seconds, const std::function<bool()>& stop = {});

// An NVTX range for the lifetime of the object (nvtxRangePushA/Pop).
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Throws CudaError for a failing CUDA runtime status (an int cudaError_t), naming what was called.
void check_status(int status, const char* what, const char* file, int line);
// Throws CudaError for a failing cuBLAS status (an int cublasStatus_t), naming what was called.
void check_cublas_status(int status, const char* what, const char* file, int line);
// Throws CudaError when the last launch failed (cudaGetLastError), naming the kernel.
void check_launch(const char* kernel_name, const char* file, int line);

}  // namespace faprobe::gpu

#define FAPROBE_CUDA_CHECK(call) ::faprobe::gpu::check_status(static_cast<int>(call), #call, __FILE__, __LINE__)
#define FAPROBE_CUBLAS_CHECK(call) ::faprobe::gpu::check_cublas_status(static_cast<int>(call), #call, __FILE__, __LINE__)
#define FAPROBE_CHECK_LAUNCH(kernel_name) ::faprobe::gpu::check_launch(kernel_name, __FILE__, __LINE__)
