// `faprobe probes` end to end: every probe runs (on a machine without a GPU: exit 0, "emulator only", the
// emulated outputs' checksums; with one: each probe identical or within its tolerance, or skipped with the
// reason), --json writes the results, "-" gives stdout the document alone, and a bad --json path runs
// nothing. The suite itself is test_probe_suite.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/probes/probe_suite.hpp"
#include "cuda/runtime/gpu.hpp"
#include "probe_support.hpp"

namespace {

namespace fs = std::filesystem;
namespace probes = faprobe::cuda::probes;
using faprobe::test_support::emulated;
using faprobe::test_support::probe_named;

std::string read_file(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(ProbesCommand, RunsEveryProbeAndWritesJson) {
  const fs::path directory = fs::temp_directory_path() / ("faprobe-probes-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory);
  const std::string command = "cd '" + directory.string() + "' && '" FAPROBE_BINARY
                              "' probes --seed 3 --json probes.json >stdout.txt 2>stderr.txt";
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  const std::string out = read_file(directory / "stdout.txt");
  const std::string err = read_file(directory / "stderr.txt");
  ASSERT_TRUE(fs::exists(directory / "probes.json")) << out << err;
  const nlohmann::json document = nlohmann::json::parse(read_file(directory / "probes.json"));
  fs::remove_all(directory);

  const std::vector<faprobe::gpu::DeviceInfo> devices = faprobe::gpu::devices();
  const bool with_gpu = !devices.empty();
  EXPECT_EQ(WEXITSTATUS(raw), 0) << out << err;
  EXPECT_EQ(document["seed"], 3);
  ASSERT_EQ(document["probes"].size(), probes::all_probes().size());
  std::set<std::string> names;
  for (const auto& entry : document["probes"]) names.insert(entry["name"].get<std::string>());
  for (const char* expected : {"shfl.sync.bfly warp_sum", "dynamic shared memory 1024B-aligned", "ldmatrix.x4",
                               "ex2.approx.ftz.f32", "cp.async.bulk.tensor 2d swizzle 128B",
                               "wgmma m64n64k16 f16 ss swizzle 128B"})
    EXPECT_EQ(names.count(expected), 1u) << expected << " is not in probes --json";
  for (const auto& entry : document["probes"]) {
    EXPECT_EQ(out.find(entry["name"].get<std::string>()) != std::string::npos, true) << entry["name"];
    EXPECT_GT(entry["elements"].get<std::size_t>(), 0u) << entry["name"];
    const std::string result = entry["result"];
    if (with_gpu) {
      const std::string needs = probe_named(entry["name"]).needs_gpu(devices.front().compute_major,
                                                                     devices.front().compute_minor);
      if (needs.empty()) {
        EXPECT_TRUE(result == "identical" || result == "within_tolerance") << entry.dump();
      } else {
        EXPECT_EQ(result, "skipped") << entry.dump();
        EXPECT_EQ(entry["skip_reason"], needs) << entry.dump();
      }
    } else {
      EXPECT_EQ(result, "emulator_only") << entry.dump();
      // The checksum is the emulated output's, so it is the one the library computes for the same seed.
      const probes::ProbeOutput output = emulated(probe_named(entry["name"]), 3);
      char expected[9];
      std::snprintf(expected, sizeof expected, "%08x", probes::checksum(output));
      EXPECT_EQ(entry["emulator_checksum"], expected) << entry["name"];
    }
  }
  if (with_gpu) {
    EXPECT_TRUE(document["device"].is_object());
    EXPECT_EQ(out.find("DIFFERS"), std::string::npos) << out;
  } else {
    EXPECT_TRUE(document["device"].is_null());
    EXPECT_NE(out.find("no GPU ("), std::string::npos) << out;
    EXPECT_NE(out.find("ran the probes on the emulator only"), std::string::npos) << out;
  }
}

// probes --json is an output like sweep's (harness/io/output_files.hpp): "-" gives stdout the document alone,
// the table on stderr; a path that cannot be written is one line naming the flag, exit 2, before any probe.
TEST(ProbesCommand, JsonToStdoutIsTheDocumentAloneAndABadPathRunsNothing) {
  const fs::path directory = fs::temp_directory_path() / ("faprobe-probes-out-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory / "a-directory");
  const auto run = [&](const std::string& args) {
    const std::string command = "cd '" + directory.string() + "' && '" FAPROBE_BINARY "' probes " + args +
                                " >stdout.txt 2>stderr.txt";
    const int raw = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(raw));
    return WEXITSTATUS(raw);
  };

  EXPECT_EQ(run("--json -"), 0) << read_file(directory / "stderr.txt");
  const nlohmann::json document = nlohmann::json::parse(read_file(directory / "stdout.txt"));  // nothing else
  EXPECT_EQ(document["probes"].size(), probes::all_probes().size());
  EXPECT_NE(read_file(directory / "stderr.txt").find("instruction probes, seed 0"), std::string::npos);

  EXPECT_EQ(run("--json a-directory"), 2);
  const std::string err = read_file(directory / "stderr.txt");
  EXPECT_NE(err.find("--json a-directory"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(read_file(directory / "stdout.txt").find("instruction probes"), std::string::npos);  // nothing ran
  EXPECT_TRUE(fs::is_directory(directory / "a-directory"));

  EXPECT_EQ(run("--json missing-dir/p.json"), 2);
  EXPECT_NE(read_file(directory / "stderr.txt").find("--json missing-dir/p.json"), std::string::npos);
  fs::remove_all(directory);
}

}  // namespace
