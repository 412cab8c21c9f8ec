// Fuzz target: the .npy readers (harness/io/npy.cpp) on arbitrary file contents: the 4-D float reader of
// --q/--k/--v/--o and the int32 reader of --block-table (2-D) and --cache-seqlens (1-D). The bytes go to an
// anonymous in-memory file (memfd), which the readers open by path as they would a user's file.
#include <sys/mman.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "fuzz_targets.hpp"
#include "harness/io/npy.hpp"
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
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const HostTensor tensor = read_npy(path, "--q");
    // A tensor that was accepted is whole: every element can be read.
    float sum = 0;
    for (std::int64_t i = 0; i < tensor.elements(); ++i) sum += tensor.get(i);
    (void)sum;
  } catch (const UsageError&) {
  }
  for (std::size_t dims : {1, 2}) {
    try {
      const Int32Array array = read_npy_int32(path, "--block-table", dims, dims == 1 ? "(batch,)" : "(batch, pages)");
      std::int64_t elements = 1;
      for (std::int64_t dim : array.shape) elements *= dim;
      if (std::size_t(elements) != array.values.size()) throw std::logic_error("int32 array shape and values disagree");
    } catch (const UsageError&) {
    }
  }
  close(fd);
  return 0;
}

}  // namespace faprobe::fuzz
