// Errors that cross module boundaries. A UsageError is bad input (a flag, a config key, a file): the CLI
// prints its one-line message and exits with status 2. Anything else that escapes is a failure (exit 1).
#pragma once
#include <stdexcept>
#include <string>

namespace faprobe {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit statuses of DESIGN.md's command-line contract.
enum ExitStatus : int { kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitInterrupted = 130 };

}  // namespace faprobe
