#include "harness/progress.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <fmt/format.h>

namespace faprobe {
namespace {
std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) {
  if (g_interrupted.exchange(true)) _exit(130);  // second Ctrl-C: the finished records are on disk
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

Progress::Progress(std::size_t total)
    : total_(total), enabled_(isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { clear(); }

void Progress::starting(std::size_t done, const std::string& what) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string eta = "--:--";
  if (done > 0) {
    const int remaining = int(elapsed / double(done) * double(total_ - done));
    eta = fmt::format("{}:{:02d}", remaining / 60, remaining % 60);
  }
  fmt::print(stderr, "\r\033[K[{}/{}] {}  ETA {}", done + 1, total_, what, eta);
  std::fflush(stderr);
}

void Progress::clear() {
  if (!enabled_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace faprobe
