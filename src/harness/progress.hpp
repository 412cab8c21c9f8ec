// A one-line progress indicator with an ETA on stderr, drawn only when stderr is a terminal, and the
// interrupt flag that Ctrl-C sets (the runner stops between runs; what finished is already on disk).
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace faprobe {

class Progress {
 public:
  explicit Progress(std::size_t total);
  ~Progress();
  void starting(std::size_t done, const std::string& what);  // redraws "[done/total] what  ETA m:ss"
  void clear();  // erases the line before a table row is printed

 private:
  std::size_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

// SIGINT/SIGTERM handling: the first signal sets the flag; a second one exits at once with status 130.
// Work that is not a sweep (expanding a plan, calibrating) throws Interrupted when it sees the flag, and
// main() turns it into exit status 130.
void install_interrupt_handler();
bool interrupted();
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};
void request_interrupt();  // for tests
void clear_interrupt();    // for tests

}  // namespace faprobe
