// Shared by the emulator's tests: a deadline around every launch that could hang, the error message of a
// launch that must fail, and spans over host vectors.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/spans.hpp"

namespace faprobe::emu::testing {

// Runs work on its own thread; if it has not finished after the deadline the emulator hangs, and the
// binary aborts rather than stall the suite.
inline void within_deadline(const std::function<void()>& work) {
  std::packaged_task<void()> task(work);
  std::future<void> done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    std::fprintf(stderr, "emulator launch still running after 30 s: a hang\n");
    std::abort();
  }
  runner.join();
  done.get();
}

// The EmulationError message of a launch that must fail ("" if it succeeded).
inline std::string launch_error(const LaunchConfig& config, const std::function<void()>& body) {
  std::string message;
  within_deadline([&] {
    try {
      launch(config, body);
    } catch (const EmulationError& e) {
      message = e.what();
    }
  });
  return message;
}

// The EmulationError message of work that must fail, launching itself ("" if it succeeded).
inline std::string launch_error(const std::function<void()>& work) {
  std::string message;
  within_deadline([&] {
    try {
      work();
    } catch (const EmulationError& e) {
      message = e.what();
    }
  });
  return message;
}

inline void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  EXPECT_FALSE(message.empty()) << "the launch did not fail";
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
}

template <typename T>
cuda::GlobalSpan<T> span_of(std::vector<T>& buffer, const char* name) {
  return cuda::GlobalSpan<T>(buffer.data(), buffer.size(), name);
}
template <typename T>
cuda::GlobalSpan<const T> const_span_of(const std::vector<T>& buffer, const char* name) {
  return cuda::GlobalSpan<const T>(buffer.data(), buffer.size(), name);
}

}  // namespace faprobe::emu::testing
