// Errors that cross module boundaries. A UsageError is bad input (a flag, a config key, a file): the CLI
// prints its one-line message and exits with status 2. An OutputError is a result file that could not be
// written once the run had started (a full disk, an I/O error): its one-line message says what is on disk,
// and the exit status is 1. Anything else that escapes is a failure (exit 1).
#pragma once
#include <stdexcept>
#include <string>

namespace faprobe {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit statuses of DESIGN.md's command-line contract.
enum ExitStatus : int { kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitInterrupted = 130 };

}  // namespace faprobe
