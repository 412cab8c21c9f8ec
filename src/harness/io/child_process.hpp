// Child processes of this program that run a whole command (a --devices worker, a --repeat round, a side of
// `faprobe ab`) with their output in a log file, and the JSONL file each streams its records to, followed by
// the parent as it grows.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace faprobe {

// fork + execve of argv (argv[0] a path) with this process's environment, `environment` set on top of it
// (NAME, value; a NAME of it already there is replaced), stdout and stderr appended to `log_path`. The child
// has its own process group (Ctrl-C reaches it through the parent, once) and gets SIGTERM when the parent
// dies. Throws std::system_error when the log cannot be opened or fork fails; a failed exec is the child's
// exit status 127 with a line in its log.
pid_t start_logged_child(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& environment,
                         const std::string& log_path);

// "exited with status 2", "was killed by signal 9"
std::string exit_text(int wait_status);

// The last `lines` lines of a text file, joined with newlines ("" when it cannot be read).
std::string tail_of(const std::string& path, std::size_t lines);

// A JSONL file another process appends to: new_lines() returns the complete lines added since the last call.
class FollowedFile {
 public:
  explicit FollowedFile(std::string path) : path_(std::move(path)) {}
  std::vector<std::string> new_lines();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::uint64_t offset_ = 0;  // bytes already read
  std::string partial_;       // a line not yet ended
};

}  // namespace faprobe
