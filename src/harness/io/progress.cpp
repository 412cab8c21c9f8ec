#include "harness/io/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace faprobe {
namespace {
std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_exit_at_once{false};  // exit_on_first_interrupt()
// remove_on_interrupt's path, for the handler: written with the signals held, read only by the handler.
char g_partial_file[4096];
volatile std::sig_atomic_t g_has_partial_file = 0;

extern "C" void on_interrupt(int) {
  // Second Ctrl-C (the finished records are on disk), or a command with nothing to finish: end now, with
  // async-signal-safe calls only.
  if (g_interrupted.exchange(true) || g_exit_at_once.load()) {
    if (g_has_partial_file) ::unlink(g_partial_file);
    if (g_exit_at_once.load()) {
      constexpr char kMessage[] = "\nfaprobe: interrupted\n";
      [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    }
    _exit(130);
  }
}
}  // namespace

void install_interrupt_handler() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool interrupted() { return g_interrupted.load(); }
void request_interrupt() { g_interrupted = true; }
void clear_interrupt() { g_interrupted = false; }

void exit_on_first_interrupt() {
  g_exit_at_once = true;
  if (interrupted()) throw Interrupted();
}

void remove_on_interrupt(const std::string& path) {
  g_has_partial_file = 0;
  if (path.empty() || path.size() >= sizeof(g_partial_file)) return;  // a longer path cannot have been created
  std::memcpy(g_partial_file, path.c_str(), path.size() + 1);
  g_has_partial_file = 1;
}

InterruptsHeld::InterruptsHeld() {
  sigset_t held;
  sigemptyset(&held);
  sigaddset(&held, SIGINT);
  sigaddset(&held, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &held, &previous_);
}

InterruptsHeld::~InterruptsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

Progress::Progress(std::size_t total, double predicted_total_s)
    : total_(total), predicted_total_s_(predicted_total_s), enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { clear(); }

std::string eta_text(std::size_t done, std::size_t total, double elapsed_s, double predicted_done_s,
                     double predicted_total_s) {
  double remaining = -1;
  if (predicted_total_s > 0) {
    const double scale = predicted_done_s >= 1.0 ? std::clamp(elapsed_s / predicted_done_s, 0.25, 4.0) : 1.0;
    remaining = std::max(0.0, predicted_total_s - predicted_done_s) * scale;
  } else if (done > 0 && done <= total) {
    remaining = elapsed_s / double(done) * double(total - done);
  }
  if (!(remaining >= 0) || !std::isfinite(remaining)) return "--:--";
  const long seconds = std::lround(remaining);
  if (seconds >= 3600) return fmt::format("{}:{:02d}:{:02d}", seconds / 3600, seconds / 60 % 60, seconds % 60);
  return fmt::format("{}:{:02d}", seconds / 60, seconds % 60);
}

void Progress::starting(std::size_t done, const std::string& what, double predicted_done_s) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(stderr, "\r\033[K[{}/{}] {}  ETA {}", done + 1, total_, what,
             eta_text(done, total_, elapsed, predicted_done_s, predicted_total_s_));
  std::fflush(stderr);
}

void Progress::clear() {
  if (!enabled_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace faprobe
