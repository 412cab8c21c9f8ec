// Host memory accounting. Every tensor and workspace of a CPU implementation is allocated through
// HostAllocation, which counts current and peak bytes (and the workspace part separately) in one global
// tracker; the runner resets the high-water marks before each case. Allocation is 64-byte aligned.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace faprobe {

struct MemoryCounters {
  std::uint64_t peak_bytes = 0;       // all tracked allocations at their joint high point
  std::uint64_t workspace_bytes = 0;  // workspace allocations at their own high point
};

class MemoryTracker {
 public:
  void on_alloc(std::uint64_t bytes, bool workspace);
  void on_free(std::uint64_t bytes, bool workspace);
  void reset_peaks();  // high-water marks start again from what is allocated now
  MemoryCounters counters() const;
  std::uint64_t current_bytes() const { return current_.load(); }

 private:
  std::atomic<std::uint64_t> current_{0}, peak_{0}, workspace_current_{0}, workspace_peak_{0};
};

MemoryTracker& host_memory();

enum class AllocKind { tensor, workspace };

// An owning, tracked, aligned, uninitialised byte buffer. Throws std::bad_alloc like new.
class HostAllocation {
 public:
  HostAllocation() = default;
  HostAllocation(std::size_t bytes, AllocKind kind);
  ~HostAllocation();
  HostAllocation(HostAllocation&& other) noexcept;
  HostAllocation& operator=(HostAllocation&& other) noexcept;
  HostAllocation(const HostAllocation&) = delete;
  HostAllocation& operator=(const HostAllocation&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void release();
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  AllocKind kind_ = AllocKind::tensor;
};

// A typed view over a tracked allocation: the workspace vectors of CPU kernels.
template <class T> class Workspace {
 public:
  Workspace() = default;
  explicit Workspace(std::size_t count) : storage_(count * sizeof(T), AllocKind::workspace), count_(count) {}
  T* data() const { return static_cast<T*>(storage_.data()); }
  std::size_t size() const { return count_; }
  T& operator[](std::size_t i) const { return data()[i]; }

 private:
  HostAllocation storage_;
  std::size_t count_ = 0;
};

}  // namespace faprobe
