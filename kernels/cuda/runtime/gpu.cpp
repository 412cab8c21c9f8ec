// The GPU harness on the CUDA runtime API, cuBLAS and NVTX (the interface and its contract: gpu.hpp).
// Plain C++ compiled by the host compiler against the toolkit's headers; no kernels here.
//
// Nothing touches CUDA before it is needed: devices() and no_device_reason() probe the driver when
// called, and the rest (device 0 selected, faprobe's stream, the memory pool) is created on the first call
// that needs it, by Runtime's constructor. So `faprobe list` works on a machine without a driver, and a
// process that never uses the GPU never initializes CUDA. Single-threaded use only.
//
// Memory: one pool created with cudaMemPoolCreate (CUDA Runtime API, "Stream Ordered Memory Allocator"),
// its release threshold at UINT64_MAX so that memory freed in stream order stays reserved instead of going
// back to the driver at each synchronization (allocation after warm-up costs no driver call). The pool's
// cudaMemPoolAttrUsedMemHigh is the high-water mark of memory handed out; setting it to 0 resets it to
// what is in use now. The workspace part is counted here, by DeviceBuffer, in a MemoryTracker.
//
// Timing: cudaEventRecord before and after the work on faprobe's stream and cudaEventElapsedTime between
// them (resolution about 0.5 us, CUDA Runtime API "Event Management"), the whole sample enqueued behind the
// blocking kernel of stream_hold.hpp and released once it is, so that the host's launch gaps are not timed.
// The L2 flush is a cudaMemsetAsync of a buffer twice the L2's size, issued before the start event so that
// it is not timed; the buffer comes from cudaMalloc, outside the pool, so it never counts as a case's
// memory. The hold's flag is pinned host memory mapped into the device (cudaHostAlloc, cudaHostAllocMapped),
// allocated once.
//
// Rates: the same events time a device-to-device cudaMemcpyAsync and a cublasGemmEx on faprobe's stream,
// each the shortest of its repetitions. Their buffers come from cudaMalloc and go back with cudaFree before
// measure_gpu_rates returns: from the pool they would stay reserved (release threshold UINT64_MAX), in a
// sweep's parent process that otherwise holds nothing on the GPU while isolated children run the cases.
#include "cuda/runtime/gpu.hpp"

#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "cuda/runtime/stream_hold.hpp"

namespace faprobe::gpu {
namespace {

constexpr int kDevice = 0;  // faprobe runs on the first device the process sees (CUDA_VISIBLE_DEVICES picks it)

// "gpu.cpp" from a compiler-given path: errors name the file, not the build machine's directories.
const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

int device_attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  FAPROBE_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

// Everything faprobe holds on device 0. Created on first use and never destroyed: the driver releases it
// at process exit, while destroying CUDA objects from a static destructor races the runtime's own
// teardown (cudaErrorCudartUnloading).
struct Runtime {
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  cublasHandle_t cublas = nullptr;  // created by cublas_handle()
  cudaEvent_t start = nullptr, stop = nullptr;  // created by the first time_on_stream()
  void* flush_buffer = nullptr;  // 2x L2, cudaMalloc'ed by the first sample that flushes
  std::size_t flush_bytes = 0;
  HoldFlags* hold_host = nullptr;    // mapped pinned memory, cudaHostAlloc'ed by the first held sample ...
  HoldFlags* hold_device = nullptr;  // ... and its address on the device
  MemoryTracker tracked;  // every DeviceBuffer; only its workspace part is reported (the pool gives the peak)

  Runtime() {
    FAPROBE_CUDA_CHECK(cudaSetDevice(kDevice));
    if (device_attribute(cudaDevAttrMemoryPoolsSupported, kDevice) == 0) {
      throw CudaError("device 0 does not support stream-ordered memory pools (cudaDevAttrMemoryPoolsSupported)");
    }
    // Non-blocking: no implicit synchronization with the legacy default stream, so nothing another
    // library puts there delays or serializes faprobe's timed work.
    FAPROBE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    cudaMemPoolProps props;
    std::memset(&props, 0, sizeof(props));  // reserved fields must be zero
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = kDevice;
    FAPROBE_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
    FAPROBE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  }
};

Runtime& runtime() {
  // If the constructor throws (no device), the next call tries again and throws the same error.
  static Runtime* const instance = new Runtime();
  return *instance;
}

std::string cuda_error_text(cudaError_t status) {
  return fmt::format("{}: {}", cudaGetErrorName(status), cudaGetErrorString(status));
}

// Why cudaGetDeviceCount found nothing usable, or "" with count set.
std::string probe_device_count(int& count) {
  count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count > 0 ? "" : "no CUDA device";
  count = 0;
  (void)cudaGetLastError();  // not sticky; clear it so that it does not surface at a later check
  if (status == cudaErrorNoDevice) return "no CUDA device";
  if (status == cudaErrorInsufficientDriver) {
    int driver = 0, runtime_version = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return "no CUDA driver";
    (void)cudaRuntimeGetVersion(&runtime_version);
    return fmt::format("CUDA driver {} is older than the CUDA runtime {} this binary was built with", driver,
                       runtime_version);
  }
  return fmt::format("CUDA unavailable ({})", cuda_error_text(status));
}

DeviceInfo query_device(int index) {
  DeviceInfo info;
  info.index = index;
  cudaDeviceProp props;
  FAPROBE_CUDA_CHECK(cudaGetDeviceProperties(&props, index));
  info.name = props.name;
  info.compute_major = props.major;
  info.compute_minor = props.minor;
  info.sm_count = props.multiProcessorCount;
  info.memory_total_bytes = props.totalGlobalMem;
  info.l2_bytes = std::uint64_t(props.l2CacheSize);
  info.memory_bus_bits = props.memoryBusWidth;
  // CUDA 13 dropped cudaDeviceProp::clockRate and ::memoryClockRate; the attributes remain (in kHz).
  info.clock_mhz = device_attribute(cudaDevAttrClockRate, index) / 1000;
  info.memory_clock_mhz = device_attribute(cudaDevAttrMemoryClockRate, index) / 1000;
  FAPROBE_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  FAPROBE_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  // Only for finding the device in NVML (nvml.hpp): a device without one is still a device.
  char pci_bus_id[32] = {};  // "domain:bus:device.function", 13 characters
  if (cudaDeviceGetPCIBusId(pci_bus_id, int(sizeof(pci_bus_id)), index) == cudaSuccess) {
    info.pci_bus_id = pci_bus_id;
  } else {
    (void)cudaGetLastError();
  }
  // No free-memory reading here: cudaMemGetInfo would create a context, and `list` or a sweep's parent
  // process (which only runs isolated children on the GPU) must not hold one. default_memory_limit()
  // reads free memory in the process that allocates.
  return info;
}

// Every device, or none and why.
std::vector<DeviceInfo> find_devices(std::string& reason) {
  int count = 0;
  reason = probe_device_count(count);
  if (!reason.empty()) return {};
  try {
    std::vector<DeviceInfo> found;
    for (int index = 0; index < count; ++index) found.push_back(query_device(index));
    return found;
  } catch (const std::exception& error) {
    reason = error.what();  // a device that cannot even be queried is no usable device
    return {};
  }
}

}  // namespace

// The devices and the reason there are none, found once per process: they cannot change while it runs,
// and list, the --json header, the default implementation choice and every cuda.* record ask.
static const std::pair<std::vector<DeviceInfo>, std::string>& device_scan() {
  static const std::pair<std::vector<DeviceInfo>, std::string> scan = [] {
    std::string reason;
    std::vector<DeviceInfo> found = find_devices(reason);
    return std::make_pair(std::move(found), std::move(reason));
  }();
  return scan;
}

std::vector<DeviceInfo> devices() { return device_scan().first; }

std::string no_device_reason() {
  return device_scan().second;
}

// --- Errors ---

void check_status(int status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  // The runtime also records the failure as the "last error"; clear it (unless it is sticky) so that the
  // next check_launch does not blame a kernel for it.
  (void)cudaGetLastError();
  throw CudaError(fmt::format("{} failed: {} ({}:{})", what, cuda_error_text(static_cast<cudaError_t>(status)),
                              base_name(file), line));
}

void check_cublas_status(int status, const char* what, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const auto cublas_status = static_cast<cublasStatus_t>(status);
  throw CudaError(fmt::format("{} failed: {}: {} ({}:{})", what, cublasGetStatusName(cublas_status),
                              cublasGetStatusString(cublas_status), base_name(file), line));
}

void check_launch(const char* kernel_name, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw CudaError(fmt::format("launch of {} failed: {} ({}:{})", kernel_name, cuda_error_text(status),
                              base_name(file), line));
}

// --- Memory ---

DeviceBuffer::DeviceBuffer(std::size_t bytes, AllocKind kind) : kind_(kind) {
  if (bytes == 0) return;  // nothing to allocate: data() stays null
  Runtime& rt = runtime();
  FAPROBE_CUDA_CHECK(cudaMallocFromPoolAsync(&data_, bytes, rt.pool, rt.stream));
  bytes_ = bytes;
  rt.tracked.on_alloc(bytes_, kind_ == AllocKind::workspace);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), kind_(other.kind_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (data_ == nullptr) return;
  Runtime& rt = runtime();  // exists: data_ came from it
  // A destructor cannot throw. cudaFreeAsync fails only for a pointer the pool does not know (impossible
  // here) or once the runtime is unloading at exit, when the driver reclaims everything anyway; an
  // asynchronous error of earlier work surfaces at the next synchronize().
  (void)cudaFreeAsync(data_, rt.stream);
  rt.tracked.on_free(bytes_, kind_ == AllocKind::workspace);
  data_ = nullptr;
  bytes_ = 0;
}

void* stream() { return runtime().stream; }

void synchronize() { FAPROBE_CUDA_CHECK(cudaStreamSynchronize(runtime().stream)); }

// Both copies go through faprobe's stream: a plain cudaMemcpy would run on the legacy default stream,
// which does not wait for a cudaStreamNonBlocking stream's kernels.
void copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (bytes == 0) return;
  Runtime& rt = runtime();
  FAPROBE_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, rt.stream));
  FAPROBE_CUDA_CHECK(cudaStreamSynchronize(rt.stream));
}

void copy_to_device(void* device, const void* host, std::size_t bytes) {
  if (bytes == 0) return;
  Runtime& rt = runtime();
  FAPROBE_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, rt.stream));
  FAPROBE_CUDA_CHECK(cudaStreamSynchronize(rt.stream));
}

void fill_bytes(void* device, unsigned char value, std::size_t bytes) {
  if (bytes == 0) return;
  FAPROBE_CUDA_CHECK(cudaMemsetAsync(device, value, bytes, runtime().stream));
}

void reset_peaks() {
  Runtime& rt = runtime();
  // Frees issued in stream order take effect when the stream reaches them: wait, so that "in use now"
  // no longer counts the previous case's buffers.
  FAPROBE_CUDA_CHECK(cudaStreamSynchronize(rt.stream));
  std::uint64_t zero = 0;  // "resets to the current used memory" (cudaMemPoolAttrUsedMemHigh)
  FAPROBE_CUDA_CHECK(cudaMemPoolSetAttribute(rt.pool, cudaMemPoolAttrUsedMemHigh, &zero));
  rt.tracked.reset_peaks();
}

MemoryCounters counters() {
  Runtime& rt = runtime();
  std::uint64_t used_high = 0;
  FAPROBE_CUDA_CHECK(cudaMemPoolGetAttribute(rt.pool, cudaMemPoolAttrUsedMemHigh, &used_high));
  return {used_high, rt.tracked.counters().workspace_bytes};
}

std::uint64_t default_memory_limit() {
  (void)runtime();  // device 0 current
  std::size_t free_bytes = 0, total_bytes = 0;
  FAPROBE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::uint64_t margin = std::uint64_t(free_bytes) / 20 + (std::uint64_t(1) << 30);
  return free_bytes > margin ? free_bytes - margin : 0;
}

// --- cuBLAS ---

void* cublas_handle() {
  Runtime& rt = runtime();
  if (rt.cublas == nullptr) {
    cublasHandle_t handle = nullptr;
    FAPROBE_CUBLAS_CHECK(cublasCreate(&handle));
    // cublasSetStream also resets the workspace to cuBLAS's default pool, so the workspace is set after it.
    FAPROBE_CUBLAS_CHECK(cublasSetStream(handle, rt.stream));
    FAPROBE_CUBLAS_CHECK(cublasSetWorkspace(handle, nullptr, 0));
    rt.cublas = handle;
  }
  return rt.cublas;
}

void set_cublas_workspace(void* data, std::size_t bytes) {
  FAPROBE_CUBLAS_CHECK(cublasSetWorkspace(static_cast<cublasHandle_t>(cublas_handle()), data, bytes));
}

// cuBLAS's table names Hopper (32 MiB) and "other" (4 MiB); newer architectures get Hopper's size, as
// PyTorch gives them.
std::size_t cublas_workspace_bytes() {
  (void)runtime();
  const int major = device_attribute(cudaDevAttrComputeCapabilityMajor, kDevice);
  return std::size_t(major >= 9 ? 32 : 4) << 20;
}

// --- Timing ---

namespace {

void create_events(Runtime& rt) {
  if (rt.start != nullptr) return;
  FAPROBE_CUDA_CHECK(cudaEventCreate(&rt.start));
  FAPROBE_CUDA_CHECK(cudaEventCreate(&rt.stop));
}

void create_flush_buffer(Runtime& rt) {
  if (rt.flush_buffer != nullptr) return;
  const int l2_bytes = device_attribute(cudaDevAttrL2CacheSize, kDevice);
  rt.flush_bytes = 2 * std::size_t(l2_bytes > 0 ? l2_bytes : 1 << 20);
  FAPROBE_CUDA_CHECK(cudaMalloc(&rt.flush_buffer, rt.flush_bytes));
}

HoldFlags& hold_flags(Runtime& rt) {
  if (rt.hold_host == nullptr) {
    void* host = nullptr;
    FAPROBE_CUDA_CHECK(cudaHostAlloc(&host, sizeof(HoldFlags), cudaHostAllocMapped));
    void* device = nullptr;
    FAPROBE_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
    rt.hold_host = static_cast<HoldFlags*>(host);
    rt.hold_device = static_cast<HoldFlags*>(device);
  }
  return *rt.hold_host;
}

// A held stream released on every way out of a sample: an exception thrown while the sample is enqueued
// (a failed launch, work() throwing) must not leave the blocking kernel spinning until its timeout.
class HoldGuard {
 public:
  explicit HoldGuard(cudaStream_t stream) : stream_(stream) {}
  ~HoldGuard() {
    if (flags_ == nullptr) return;
    release(*flags_);
    (void)cudaStreamSynchronize(stream_);  // the next sample arms the flags only once this kernel is gone
  }
  HoldGuard(const HoldGuard&) = delete;
  HoldGuard& operator=(const HoldGuard&) = delete;
  void held(HoldFlags& flags) { flags_ = &flags; }
  void released() { flags_ = nullptr; }

 private:
  cudaStream_t stream_;
  HoldFlags* flags_ = nullptr;  // while the stream is held
};

// CUDA_LAUNCH_BLOCKING=1 makes every launch return only once the kernel has finished: the blocking kernel's
// own launch would wait for the release that the host can then never give, and time out each sample.
bool launches_are_synchronous() {
  static const bool synchronous = [] {
    const char* setting = std::getenv("CUDA_LAUNCH_BLOCKING");
    return setting != nullptr && std::strcmp(setting, "1") == 0;
  }();
  return synchronous;
}

}  // namespace

GpuSample time_plan(const std::vector<SampleStep>& plan, const std::function<void()>& work) {
  Runtime& rt = runtime();
  // Everything allocated before the stream is held: cudaMalloc and cudaHostAlloc may wait for the device
  // (CUDA Programming Guide, "Implicit Synchronization"), which a held stream keeps busy.
  create_events(rt);
  if (std::find(plan.begin(), plan.end(), SampleStep::flush_l2) != plan.end()) create_flush_buffer(rt);
  if (std::find(plan.begin(), plan.end(), SampleStep::hold) != plan.end()) (void)hold_flags(rt);
  GpuSample sample;
  HoldGuard guard(rt.stream);
  for (const SampleStep step : plan) {
    switch (step) {
      case SampleStep::hold: {
        HoldFlags& flags = hold_flags(rt);
        arm(flags);
        guard.held(flags);
        launch_hold_kernel(rt.hold_device, kHoldTimeoutNs, rt.stream);
        sample.held = true;
        break;
      }
      case SampleStep::flush_l2:  // writing 2x L2 of other data evicts everything the last sample left there
        FAPROBE_CUDA_CHECK(cudaMemsetAsync(rt.flush_buffer, 0, rt.flush_bytes, rt.stream));
        break;
      case SampleStep::start: FAPROBE_CUDA_CHECK(cudaEventRecord(rt.start, rt.stream)); break;
      case SampleStep::work:
        work();
        check_launch("the timed work", __FILE__, __LINE__);
        break;
      case SampleStep::stop: FAPROBE_CUDA_CHECK(cudaEventRecord(rt.stop, rt.stream)); break;
      case SampleStep::release:
        if (sample.held) release(hold_flags(rt));
        guard.released();
        break;
      case SampleStep::wait: FAPROBE_CUDA_CHECK(cudaStreamSynchronize(rt.stream)); break;
    }
  }
  float milliseconds = 0.0f;
  FAPROBE_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, rt.start, rt.stop));
  sample.seconds = double(milliseconds) * 1e-3;
  // Written by the kernel into mapped memory before it returned, and the stream has been waited for.
  sample.hold_timed_out = sample.held && static_cast<volatile HoldFlags*>(rt.hold_host)->timed_out != 0;
  return sample;
}

GpuSample time_on_stream(const std::function<void()>& work, bool flush_l2, Hold hold) {
  if (launches_are_synchronous()) hold = Hold::none;
  return time_plan(sample_plan(flush_l2, hold), work);
}

// --- Rates ---

namespace {

// Device memory for measure_gpu_rates, from cudaMalloc (outside the pool) and freed by cudaFree, which
// waits for the device to finish the work using it.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(std::size_t bytes) { FAPROBE_CUDA_CHECK(cudaMalloc(&data_, bytes)); }
  ~ScratchBuffer() { (void)cudaFree(data_); }  // a destructor cannot throw; at worst the memory leaks
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

// The cuBLAS handle's workspace while it lives, none again (the handle's state between cases) after.
class CublasWorkspaceScope {
 public:
  CublasWorkspaceScope(void* data, std::size_t bytes) { set_cublas_workspace(data, bytes); }
  ~CublasWorkspaceScope() { (void)cublasSetWorkspace(static_cast<cublasHandle_t>(cublas_handle()), nullptr, 0); }
  CublasWorkspaceScope(const CublasWorkspaceScope&) = delete;
  CublasWorkspaceScope& operator=(const CublasWorkspaceScope&) = delete;
};

// The shortest time of `work` on faprobe's stream over repetitions for `budget_s` (at least three), after
// one untimed call (cuBLAS picks and loads its kernel then; clocks ramp up). No L2 flush: the copy is many
// times the L2, and the GEMM is bound by its arithmetic.
double shortest_seconds(const std::function<void()>& work, double budget_s, const std::function<bool()>& stop) {
  work();
  synchronize();
  double shortest = std::numeric_limits<double>::infinity();
  const auto start = std::chrono::steady_clock::now();
  for (int repetition = 0;
       (repetition < 3 || std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < budget_s) &&
       !(stop && stop());
       ++repetition) {
    shortest = std::min(shortest, time_on_stream(work, /*flush_l2=*/false).seconds);
  }
  return shortest;
}

}  // namespace

GpuRates measure_gpu_rates(double seconds, const std::function<bool()>& stop) {
  Runtime& rt = runtime();
  GpuRates rates;
  {
    // Four times the L2 at least, so that the L2 holds a negligible part of what is copied.
    const int l2_bytes = device_attribute(cudaDevAttrL2CacheSize, kDevice);
    const std::size_t bytes = std::max(std::size_t(1) << 30, 4 * std::size_t(std::max(l2_bytes, 0)));
    ScratchBuffer source(bytes), destination(bytes);
    FAPROBE_CUDA_CHECK(cudaMemsetAsync(source.data(), 0, bytes, rt.stream));
    FAPROBE_CUDA_CHECK(cudaMemsetAsync(destination.data(), 0, bytes, rt.stream));
    const double copy_s = shortest_seconds(
        [&] {
          FAPROBE_CUDA_CHECK(
              cudaMemcpyAsync(destination.data(), source.data(), bytes, cudaMemcpyDeviceToDevice, rt.stream));
        },
        0.6 * seconds, stop);
    rates.copy_bytes = bytes;
    rates.copy_gbytes_per_s = 2.0 * double(bytes) / copy_s * 1e-9;  // read + write, as the host's copy
  }
  {
    // 8192³: large enough for cuBLAS's best tiles to fill every SM many times over. Zero operands: the
    // rate is a ceiling, and a power-limited GPU may clock higher on data that flips few bits.
    constexpr int kSize = 8192;
    const std::size_t operand_bytes = std::size_t(kSize) * kSize * 2;  // bf16
    ScratchBuffer a(operand_bytes), b(operand_bytes), c(operand_bytes);
    FAPROBE_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, operand_bytes, rt.stream));
    FAPROBE_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, operand_bytes, rt.stream));
    const std::size_t workspace_bytes = cublas_workspace_bytes();
    ScratchBuffer workspace(workspace_bytes);  // declared before the scope: unset first, then freed
    const CublasWorkspaceScope workspace_scope(workspace.data(), workspace_bytes);
    const auto handle = static_cast<cublasHandle_t>(cublas_handle());
    const float alpha = 1.0f, beta = 0.0f;
    const double gemm_s = shortest_seconds(
        [&] {
          FAPROBE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, kSize, kSize, kSize, &alpha, a.data(),
                                            CUDA_R_16BF, kSize, b.data(), CUDA_R_16BF, kSize, &beta, c.data(),
                                            CUDA_R_16BF, kSize, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        0.4 * seconds, stop);
    rates.bf16_gemm_tflops = 2.0 * double(kSize) * kSize * kSize / gemm_s * 1e-12;
  }
  return rates;
}

// --- NVTX (header-only NVTX3: a no-op unless a profiler is attached) ---

NvtxRange::NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

}  // namespace faprobe::gpu
