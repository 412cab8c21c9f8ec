// What the .npy tests share (test_npy.cpp, test_kv_cache_files.cpp, test_cli_cache.cpp): files as raw bytes,
// .npy files assembled byte by byte from the format specification (independent of faprobe's writer), and a
// Python with NumPy to check against when one is installed.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

namespace faprobe::npy_test {

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  // Unlink first: ext4 flushes a file truncated and rewritten in place on close (auto_da_alloc), which
  // makes the thousands of rewrites of the corruption tests take seconds.
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string le32(std::uint32_t value) {
  std::string out;
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// A .npy file assembled byte by byte, independent of write_npy: preamble for `major`.0, the dict text
// padded with spaces to `align` and ended with '\n' (when `newline`), then `data`.
inline std::string hand_built(const std::string& dict, const std::string& data, int major = 1,
                              std::size_t align = 64, bool newline = true) {
  const std::size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  if (newline) {
    const std::size_t unpadded = preamble + header.size() + 1;
    header.append((align - unpadded % align) % align, ' ');
    header += '\n';
  }
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const auto length = static_cast<std::uint32_t>(header.size());
  out += major == 1 ? le32(length).substr(0, 2) : le32(length);
  return out + header + data;
}

// A Python 3 with NumPy: $FAPROBE_PYTHON, Debian's system python3, or python3 on PATH; "" when none.
inline std::string python_with_numpy() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("FAPROBE_PYTHON"); env != nullptr && *env != '\0') candidates.push_back(env);
  candidates.push_back("/usr/bin/python3");
  candidates.push_back("python3");
  for (const std::string& python : candidates) {
    if (std::system(("'" + python + "' -c 'import numpy' >/dev/null 2>&1").c_str()) == 0) return python;
  }
  return "";
}

}  // namespace faprobe::npy_test
