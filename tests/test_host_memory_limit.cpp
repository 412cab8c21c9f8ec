// The default memory limit (model/host_info.hpp): the smallest of MemAvailable, RLIMIT_AS / RLIMIT_DATA and
// the cgroup's limit less its usage, naming which one bound it; a reading that fails or reads 0 never
// becomes a limit of 0 B. The rlimits are planted with setrlimit in a forked child (a limit set here would
// bind the rest of the suite), the cgroup and /proc/meminfo through FAPROBE_TEST_CGROUP_DIR and
// FAPROBE_TEST_MEMINFO.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "model/host_info.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;

// What this process has mapped (VmSize or VmData of /proc/self/status), in bytes.
std::uint64_t mapped_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// host_memory_limit() in a child under `resource` set to what it has mapped plus `room`: 1 when the limit
// names the rlimit and lies within `room`, else 0 (a limit set here would bind the rest of the suite).
int limit_in_child(int resource, const char* field, std::uint64_t room, const char* expected) {
  const pid_t child = fork();
  if (child == 0) {
    const rlimit limit{mapped_bytes(field) + room, RLIM_INFINITY};
    if (setrlimit(resource, &limit) != 0) _exit(3);
    const HostMemoryLimit found = host_memory_limit();
    _exit(found.bound_by == expected && found.bytes > 0 && found.bytes <= room ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class HostMemoryLimitTest : public test_support::TempDirTest {
 protected:
  void TearDown() override {
    ::unsetenv("FAPROBE_TEST_CGROUP_DIR");
    ::unsetenv("FAPROBE_TEST_MEMINFO");
    TempDirTest::TearDown();
  }
  void write_file(const std::string& name, const std::string& text) { std::ofstream(path(name)) << text; }
};

TEST_F(HostMemoryLimitTest, AnRlimitBelowTheFreeMemoryBindsAndIsNamed) {
  EXPECT_EQ(limit_in_child(RLIMIT_AS, "VmSize", 64 * kMiB, "RLIMIT_AS"), 1);
  EXPECT_EQ(limit_in_child(RLIMIT_DATA, "VmData", 64 * kMiB, "RLIMIT_DATA"), 1);
}

TEST_F(HostMemoryLimitTest, ACgroupLimitLessItsUsageBindsAndIsNamed) {
  write_file("memory.max", "1000000000\n");
  write_file("memory.current", "400000000\n");
  ::setenv("FAPROBE_TEST_CGROUP_DIR", path("").c_str(), 1);
  HostMemoryLimit found = host_memory_limit();
  EXPECT_EQ(found.bound_by, "cgroup memory.max");
  EXPECT_EQ(found.bytes, 600000000u);
  EXPECT_EQ(default_host_memory_limit_source(), "cgroup memory.max");
  EXPECT_EQ(default_host_memory_limit(), 300000000u);  // the margin would leave less than half: half

  write_file("memory.max", "max\n");  // no limit: MemAvailable (or an rlimit) binds
  found = host_memory_limit();
  EXPECT_NE(found.bound_by, "cgroup memory.max");
  EXPECT_GT(found.bytes, 0u);
}

TEST_F(HostMemoryLimitTest, ReadingsThatFailOrReadZeroAreNeverALimitOfZero) {
  write_file("meminfo", "MemTotal: 100 kB\nMemAvailable: 0 kB\n");
  write_file("memory.max", "0\n");
  write_file("memory.current", "0\n");
  ::setenv("FAPROBE_TEST_MEMINFO", path("meminfo").c_str(), 1);
  ::setenv("FAPROBE_TEST_CGROUP_DIR", path("").c_str(), 1);
  EXPECT_GT(default_host_memory_limit(), 0u);
  write_file("meminfo", "garbage");
  ::setenv("FAPROBE_TEST_CGROUP_DIR", path("no-such-directory").c_str(), 1);
  EXPECT_GT(default_host_memory_limit(), 0u);
  // Less free memory than the margin (10 % and 512 MiB): half of it, not 0 B.
  write_file("meminfo", "MemAvailable: 204800 kB\n");
  const HostMemoryLimit found = host_memory_limit();
  if (found.bound_by == "MemAvailable") {
    EXPECT_EQ(default_host_memory_limit(), 100 * kMiB);
  }
  EXPECT_GT(default_host_memory_limit(), 0u);
}

}  // namespace
}  // namespace faprobe
