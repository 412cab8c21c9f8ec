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

// Text from outside (a plugin's message, a file's name, a child's stderr) as valid UTF-8: every byte that
// does not start a well-formed sequence becomes U+FFFD, so that no writer (JSON, CSV, Markdown) chokes on it.
inline std::string valid_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto byte = [&text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char lead = byte(i);
    std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    bool ok = length != 0 && i + length <= text.size();
    for (std::size_t k = 1; ok && k < length; ++k) ok = (byte(i + k) & 0xC0) == 0x80;
    if (ok && length > 1) {  // no overlong forms, surrogates or code points past U+10FFFF
      const unsigned char next = byte(i + 1);
      ok = !(lead == 0xC0 || lead == 0xC1 || (lead == 0xE0 && next < 0xA0) || (lead == 0xED && next >= 0xA0) ||
             (lead == 0xF0 && next < 0x90) || (lead == 0xF4 && next >= 0x90) || lead > 0xF4);
    }
    if (ok) {
      out.append(text, i, length);
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// Exit statuses of docs/DESIGN.md's command-line contract.
enum ExitStatus : int { kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitInterrupted = 130 };

}  // namespace faprobe
