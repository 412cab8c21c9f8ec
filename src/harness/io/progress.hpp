// A one-line progress indicator with an ETA on stderr, drawn only when stderr is a terminal, and the
// interrupt flag that Ctrl-C sets (the runner stops between runs; what finished is already on disk).
#pragma once
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace faprobe {

class Progress {
 public:
  // `predicted_total_s`: the run's predicted seconds (plan_run), 0 when there is no prediction.
  explicit Progress(std::size_t total, double predicted_total_s = 0);
  ~Progress();
  // Redraws "[done/total] what  ETA m:ss"; `predicted_done_s` is the predicted seconds of what is done.
  void starting(std::size_t done, const std::string& what, double predicted_done_s = 0);
  void clear();  // erases the line before a table row is printed

 private:
  std::size_t total_;
  double predicted_total_s_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

// The progress line's ETA, "m:ss" (h:mm:ss from an hour), or "--:--" when nothing can be said yet. With a
// prediction (predicted_total_s > 0) from the first pair on: the predicted seconds left, scaled by how long
// the finished part took against its own prediction once that is a second or more (the scale held within
// 1/4..4, so that a few pairs dominated by their preparation cannot swing it); without one, the elapsed
// time per finished pair times the pairs left.
std::string eta_text(std::size_t done, std::size_t total, double elapsed_s, double predicted_done_s,
                     double predicted_total_s);

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

// Commands that only read result files and write documents (compare, report, merge) have no finished work to
// keep: from this call on, the first SIGINT or SIGTERM ends the process at once with status 130, as a second
// one always does. Throws Interrupted when a signal came before the call.
void exit_on_first_interrupt();

// The temporary file a document is being written to (output_files.cpp): the handler removes it before it
// ends the process, so that an interrupt leaves no half-written file beside the target. One at a time; ""
// forgets it. Set it with the signals held (InterruptsHeld) from the moment the file is created.
void remove_on_interrupt(const std::string& path);

// SIGINT and SIGTERM held for this thread while the object lives, then delivered.
class InterruptsHeld {
 public:
  InterruptsHeld();
  ~InterruptsHeld();
  InterruptsHeld(const InterruptsHeld&) = delete;
  InterruptsHeld& operator=(const InterruptsHeld&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace faprobe
