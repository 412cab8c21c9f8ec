// The command line's test fixture: each test gets its own directory and runs the faprobe binary there
// through the shell, its stdout and stderr captured (tests/test_cli*.cpp).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "temp_dir_support.hpp"

namespace faprobe {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
};

inline std::string read_file(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class Cli : public test_support::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // The host's rates in 0.05 s rather than a second before each of the suite's many runs (workflow.cpp);
    // every faprobe a test starts inherits it. A value set outside the tests wins.
    ::setenv("FAPROBE_CALIBRATION_SECONDS", "0.05", /*overwrite=*/0);
  }
  fs::path path(const std::string& name) const { return directory_ / name; }

  // Runs `ENV faprobe ARGS` in the test's directory through the shell; captures stdout and stderr.
  Result faprobe(const std::string& args, const std::string& env = "") const {
    return shell(env + " '" FAPROBE_BINARY "' " + args);
  }

  // Runs a shell command line in the test's directory; captures stdout and stderr.
  Result shell(const std::string& command_line) const {
    const std::string command = "cd '" + directory_.string() + "' && " + command_line + " >stdout.txt 2>stderr.txt";
    const int raw = std::system(command.c_str());
    Result result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    result.out = read_file(path("stdout.txt"));
    result.err = read_file(path("stderr.txt"));
    return result;
  }

  // Starts `faprobe ARGS` in the test's directory without waiting for it (stdout and stderr to /dev/null);
  // returns its pid, for a test that signals it.
  pid_t start_in_background(const std::string& args) const {
    const pid_t child = fork();
    if (child == 0) {
      if (chdir(directory_.c_str()) != 0) _exit(99);
      if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
      execl("/bin/sh", "sh", "-c", ("exec '" FAPROBE_BINARY "' " + args).c_str(), static_cast<char*>(nullptr));
      _exit(98);
    }
    return child;
  }

  // Ctrl-C to a process start_in_background started, and its exit status once it has ended (-1: killed by a
  // signal).
  static int interrupt_and_wait(pid_t child) {
    kill(child, SIGINT);
    int raw = 0;
    waitpid(child, &raw, 0);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }
};

}  // namespace faprobe
