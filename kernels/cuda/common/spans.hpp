// Views of device memory for kernels on the instruction layer: SharedSpan<T> (a CTA's shared memory, from
// isa::shared_array) and GlobalSpan<T> (a device buffer: pointer, element count and a name for errors).
//
// Under nvcc they are a bare pointer and a size, indexed without checks: the GPU build pays nothing.
// In the emulator build every element access checks the index and throws EmulationError naming the kernel,
// block, thread, buffer, index and size; the cost is a compare per access, fine for verification. A shared
// element is then reached through a SharedRef, which tells the emulator whether it is loaded or stored, so
// that its race detector sees every shared-memory access (emu/emulator.hpp); a kernel takes T from it by
// conversion and stores with =, +=, ..., as with a T&.
#pragma once

#include <cstddef>
#include <type_traits>

#if defined(__CUDACC__)
#define FAPROBE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#include "cuda/common/emu/emulator.hpp"
#define FAPROBE_HOST_DEVICE inline
#endif

namespace faprobe::cuda {

namespace detail {
FAPROBE_HOST_DEVICE void check_index(const char* space, const char* name, std::size_t index, std::size_t size) {
#if defined(__CUDACC__)
  (void)space, (void)name, (void)index, (void)size;
#else
  if (index >= size) emu::report_out_of_bounds(space, name, index, size);
#endif
}
}  // namespace detail

#if !defined(__CUDACC__)
// One shared-memory element under emulation: loads and stores are reported to the emulator as they happen.
template <typename T>
class SharedRef {
 public:
  explicit SharedRef(T* element) : element_(element) {}
  operator T() const {  // NOLINT: implicit, as a T& converts
    emu::shared_access(element_, sizeof(T), false);
    return *element_;
  }
  const SharedRef& operator=(const T& value) const {
    emu::shared_access(element_, sizeof(T), true);
    *element_ = value;
    return *this;
  }
  const SharedRef& operator=(const SharedRef& other) const { return *this = static_cast<T>(other); }
  template <typename U>
  const SharedRef& operator+=(const U& value) const { return *this = static_cast<T>(static_cast<T>(*this) + value); }
  template <typename U>
  const SharedRef& operator-=(const U& value) const { return *this = static_cast<T>(static_cast<T>(*this) - value); }
  template <typename U>
  const SharedRef& operator*=(const U& value) const { return *this = static_cast<T>(static_cast<T>(*this) * value); }
  template <typename U>
  const SharedRef& operator|=(const U& value) const { return *this = static_cast<T>(static_cast<T>(*this) | value); }

 private:
  T* element_;
};
#endif

// A typed window of the CTA's dynamic shared memory; build one with isa::shared_array<T>(offset, count).
template <typename T>
class SharedSpan {
 public:
  SharedSpan() = default;
  FAPROBE_HOST_DEVICE SharedSpan(T* data, std::size_t size) : data_(data), size_(size) {}

#if defined(__CUDACC__)
  FAPROBE_HOST_DEVICE T& operator[](std::size_t i) const { return data_[i]; }
#else
  SharedRef<T> operator[](std::size_t i) const {
    detail::check_index("shared", "shared memory", i, size_);
    return SharedRef<T>(data_ + i);
  }
#endif
  FAPROBE_HOST_DEVICE std::size_t size() const { return size_; }
  FAPROBE_HOST_DEVICE T* data() const { return data_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// A device buffer as a kernel parameter. Trivially copyable, so it passes to a __global__ function as is.
template <typename T>
class GlobalSpan {
 public:
  GlobalSpan() = default;
  FAPROBE_HOST_DEVICE GlobalSpan(T* data, std::size_t size, const char* name) : data_(data), size_(size), name_(name) {}
  // A read-only view of a writable buffer.
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  FAPROBE_HOST_DEVICE GlobalSpan(const GlobalSpan<U>& other)  // NOLINT: implicit, like T* to const T*
      : data_(other.data()), size_(other.size()), name_(other.name()) {}

  FAPROBE_HOST_DEVICE T& operator[](std::size_t i) const {
    detail::check_index("global", name_, i, size_);
    return data_[i];
  }
  FAPROBE_HOST_DEVICE std::size_t size() const { return size_; }
  FAPROBE_HOST_DEVICE T* data() const { return data_; }
  FAPROBE_HOST_DEVICE const char* name() const { return name_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  const char* name_ = "global";
};

}  // namespace faprobe::cuda
