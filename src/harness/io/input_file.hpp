// Files faprobe reads: --config, --q/--k/--v/--o, a saved case.json, a JSONL to --resume. Each is opened
// only if it is a regular file, and without blocking: a FIFO or a device given by mistake is refused at
// once (opening a FIFO for reading would wait for a writer; /dev/zero would stream forever), and reads are
// bounded by the file's size, which the caller checks against a limit before it allocates anything.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace faprobe {

class InputFile {
 public:
  // `what` names where the path came from ("--config", "--q"); every error is a UsageError that starts
  // "<what> <path>: " and says why (missing, a directory, a FIFO, unreadable).
  InputFile(const std::string& path, std::string_view what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const { return size_; }  // bytes, when it was opened
  // Reads exactly `bytes` more bytes; false at the end of the file or on an error.
  bool read(char* out, std::uint64_t bytes);
  [[noreturn]] void fail(std::string_view why) const;  // UsageError "<what> <path>: <why>"
  const std::string& prefix() const { return prefix_; }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string prefix_;
};

// What a file of this st_mode is, for messages: "a regular file", "a directory", "a FIFO", "a character
// device", "a block device", "a socket" (output_files.cpp words its refusals with it too).
const char* file_kind(mode_t mode);

// The whole of a regular file of at most `max_bytes` (a larger one is a UsageError naming the limit).
std::string read_text_file(const std::string& path, std::string_view what, std::uint64_t max_bytes);

}  // namespace faprobe
