// Fuzz target: the .npy reader (harness/npy.cpp) on arbitrary file contents. The bytes go to an anonymous
// in-memory file (memfd), which the reader opens by path as it would a user's file.
#include <sys/mman.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "fuzz_targets.hpp"
#include "harness/npy.hpp"
#include "model/errors.hpp"

namespace faprobe::fuzz {

int npy_reader(const std::uint8_t* data, std::size_t size) {
  const int fd = memfd_create("fuzz.npy", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error("memfd_create failed");
  for (std::size_t written = 0; written < size;) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) {
      close(fd);
      throw std::runtime_error("writing the memfd failed");
    }
    written += std::size_t(n);
  }
  try {
    const HostTensor tensor = read_npy("/proc/self/fd/" + std::to_string(fd), "--q");
    // A tensor that was accepted is whole: every element can be read.
    float sum = 0;
    for (std::int64_t i = 0; i < tensor.elements(); ++i) sum += tensor.get(i);
    (void)sum;
  } catch (const UsageError&) {
  }
  close(fd);
  return 0;
}

}  // namespace faprobe::fuzz
