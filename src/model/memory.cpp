#include "model/memory.hpp"

#include <cstdlib>
#include <new>
#include <utility>

namespace faprobe {
namespace {
void raise_to(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}
}  // namespace

void MemoryTracker::on_alloc(std::uint64_t bytes, bool workspace) {
  raise_to(peak_, current_ += bytes);
  if (workspace) raise_to(workspace_peak_, workspace_current_ += bytes);
}

void MemoryTracker::on_free(std::uint64_t bytes, bool workspace) {
  current_ -= bytes;
  if (workspace) workspace_current_ -= bytes;
}

void MemoryTracker::reset_peaks() {
  peak_ = current_.load();
  workspace_peak_ = workspace_current_.load();
}

MemoryCounters MemoryTracker::counters() const { return {peak_.load(), workspace_peak_.load()}; }

MemoryTracker& host_memory() {
  static MemoryTracker tracker;
  return tracker;
}

HostAllocation::HostAllocation(std::size_t bytes, AllocKind kind) : bytes_(bytes), kind_(kind) {
  constexpr std::size_t kAlign = 64;  // a cache line; also what AVX-512 loads like
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  data_ = rounded == 0 ? nullptr : std::aligned_alloc(kAlign, rounded);
  if (rounded != 0 && data_ == nullptr) throw std::bad_alloc();
  host_memory().on_alloc(bytes_, kind_ == AllocKind::workspace);
}

HostAllocation::~HostAllocation() { release(); }

HostAllocation::HostAllocation(HostAllocation&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), kind_(other.kind_) {}

HostAllocation& HostAllocation::operator=(HostAllocation&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

void HostAllocation::release() {
  if (bytes_ != 0 || data_ != nullptr) {
    std::free(data_);
    host_memory().on_free(bytes_, kind_ == AllocKind::workspace);
  }
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace faprobe
