#include "harness/io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "harness/io/range.hpp"
#include "model/errors.hpp"

namespace faprobe {

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

InputFile::InputFile(const std::string& path, std::string_view what)
    : prefix_(what.empty() ? fmt::format("{}: ", path) : fmt::format("{} {}: ", what, path)) {
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer; fstat then refuses it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(fmt::format("cannot open the file ({})", std::strerror(errno)));
  struct stat status {};
  if (::fstat(fd_, &status) != 0) fail(fmt::format("cannot read the file ({})", std::strerror(errno)));
  if (!S_ISREG(status.st_mode)) {
    fail(fmt::format("is {}, not a regular file", file_kind(status.st_mode)));
  }
  // Back to blocking reads (a no-op for regular files, but reads then never return EAGAIN).
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = std::uint64_t(status.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::fail(std::string_view why) const { throw UsageError(prefix_ + std::string(why)); }

bool InputFile::read(char* out, std::uint64_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::read(fd_, out, std::size_t(std::min<std::uint64_t>(bytes, std::uint64_t(1) << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    bytes -= std::uint64_t(n);
  }
  return true;
}

std::string read_text_file(const std::string& path, std::string_view what, std::uint64_t max_bytes) {
  InputFile file(path, what);
  if (file.size() > max_bytes) {
    file.fail(fmt::format("the file has {}; at most {} is read", format_bytes(double(file.size())),
                          format_bytes(double(max_bytes))));
  }
  std::string text(std::size_t(file.size()), '\0');
  if (!file.read(text.data(), file.size())) file.fail(fmt::format("read error ({})", std::strerror(errno)));
  return text;
}

}  // namespace faprobe
