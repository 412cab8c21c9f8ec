// The GPU harness in a build without CUDA (FAPROBE_ENABLE_CUDA off): no device, and every operation that
// would need one throws CudaError("built without CUDA"). The cuda.* implementations report themselves
// unsupported before they get here; the stub keeps the program linking.
#include "cuda/runtime/gpu.hpp"

namespace faprobe::gpu {
namespace {
constexpr const char* kReason = "built without CUDA";
[[noreturn]] void unavailable() { throw CudaError(kReason); }
}  // namespace

std::vector<DeviceInfo> devices() { return {}; }
std::string no_device_reason() { return kReason; }

DeviceBuffer::DeviceBuffer(std::size_t, AllocKind) { unavailable(); }
DeviceBuffer::~DeviceBuffer() { release(); }
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), kind_(other.kind_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  data_ = other.data_;  // always null: no buffer can be made without CUDA
  bytes_ = other.bytes_;
  kind_ = other.kind_;
  other.data_ = nullptr;
  other.bytes_ = 0;
  return *this;
}
void DeviceBuffer::release() noexcept {}

void* stream() { unavailable(); }
void synchronize() { unavailable(); }
void copy_to_host(void*, const void*, std::size_t) { unavailable(); }
void copy_to_device(void*, const void*, std::size_t) { unavailable(); }
void fill_bytes(void*, unsigned char, std::size_t) { unavailable(); }

void reset_peaks() { unavailable(); }
MemoryCounters counters() { unavailable(); }
std::uint64_t default_memory_limit() { unavailable(); }

void* cublas_handle() { unavailable(); }
void set_cublas_workspace(void*, std::size_t) { unavailable(); }
std::size_t cublas_workspace_bytes() { unavailable(); }

GpuSample time_plan(const std::vector<SampleStep>&, const std::function<void()>&) { unavailable(); }
GpuSample time_on_stream(const std::function<void()>&, bool, Hold) { unavailable(); }
GpuRates measure_gpu_rates(double, const std::function<bool()>&) { unavailable(); }

NvtxRange::NvtxRange(const std::string&) { unavailable(); }
NvtxRange::~NvtxRange() = default;

void check_status(int, const char*, const char*, int) { unavailable(); }
void check_cublas_status(int, const char*, const char*, int) { unavailable(); }
void check_launch(const char*, const char*, int) { unavailable(); }

}  // namespace faprobe::gpu
