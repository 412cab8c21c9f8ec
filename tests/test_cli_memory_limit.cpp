// The default --mem-limit end to end: a cgroup limit below the host's free memory (FAPROBE_TEST_CGROUP_DIR
// plants one) makes a case that would not fit `skipped` with the numbers and what bound them, and a cgroup
// or /proc/meminfo that reads 0 skips nothing.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace faprobe {
namespace {

class CliMemoryLimit : public Cli {};

TEST_F(CliMemoryLimit, ACgroupLimitSkipsWhatWouldNotFitAndSaysWhatBoundIt) {
  fs::create_directories(path("cgroup"));
  write("cgroup/memory.max", "1000000000\n");
  write("cgroup/memory.current", "400000000\n");
  const std::string env = "FAPROBE_TEST_CGROUP_DIR='" + path("cgroup").string() + "'";
  // cpu.naive at s16384 holds a 2.1 GB score matrix; the cgroup leaves 600 MB, 300 MB after the margin.
  const Result verify = faprobe("verify --impl cpu.naive --seq 16384 --heads 1 --json v.json", env);
  const nlohmann::json record = nlohmann::json::parse(read_file(path("v.json")))["records"][0];
  EXPECT_EQ(record["status"], "skipped") << record.dump();
  EXPECT_EQ(record["reason"], "needs 2.2 GB, limit 300.0 MB (default, bound by cgroup memory.max)") << record.dump();
}

TEST_F(CliMemoryLimit, ReadingsOfZeroSkipNothing) {
  fs::create_directories(path("cgroup"));
  write("cgroup/memory.max", "0\n");
  write("cgroup/memory.current", "0\n");
  write("meminfo", "MemAvailable: 0 kB\n");
  const std::string env = "FAPROBE_TEST_CGROUP_DIR='" + path("cgroup").string() + "' FAPROBE_TEST_MEMINFO='" +
                          path("meminfo").string() + "'";
  const Result verify = faprobe("verify --impl cpu.naive,cpu.tiled --seq 16,32 --heads 1 --json v.json", env);
  EXPECT_EQ(verify.status, 0) << verify.err;
  for (const nlohmann::json& record : nlohmann::json::parse(read_file(path("v.json")))["records"]) {
    EXPECT_EQ(record["status"], "ok") << record.dump();
  }
}

}  // namespace
}  // namespace faprobe
