// Every committed fuzz input, through its target (tests/fuzz/fuzz_targets.hpp): the seed corpora of
// tests/fuzz/corpus/<target>/ and the regressions of tests/fuzz/regressions/<target>/ (inputs that once
// crashed a target, kept so that the bug stays fixed). A target must return for each; in the debug preset
// this runs under ASan and UBSan, where a memory error or undefined behaviour ends the test.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz/fuzz_targets.hpp"

namespace fs = std::filesystem;

namespace faprobe::fuzz {
namespace {

struct Target {
  const char* name;
  int (*run)(const std::uint8_t*, std::size_t);
};

class FuzzCorpus : public ::testing::TestWithParam<Target> {};

// Runs every file of tests/fuzz/<kind>/<target>/ through the target; returns how many there were.
std::size_t replay(const Target& target, const char* kind) {
  const fs::path directory = fs::path(FAPROBE_SOURCE_DIR) / "tests" / "fuzz" / kind / target.name;
  std::size_t count = 0;
  if (!fs::exists(directory)) return 0;
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (!entry.is_regular_file() || entry.path().filename().string().front() == '.') continue;
    std::ifstream file(entry.path(), std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(target.run(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    ++count;
  }
  return count;
}

TEST_P(FuzzCorpus, EveryCorpusInputAndRegressionReturns) {
  EXPECT_GE(replay(GetParam(), "corpus"), 3u) << "the seed corpus of " << GetParam().name << " is missing";
  replay(GetParam(), "regressions");
}

std::string target_name(const ::testing::TestParamInfo<Target>& target) { return target.param.name; }

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpus,
                         ::testing::Values(Target{"npy", npy_reader}, Target{"config", config_plan},
                                           Target{"range", range_grammar}, Target{"resume", resume_jsonl},
                                           Target{"result", result_file}, Target{"merge", merge_parts}),
                         target_name);

}  // namespace
}  // namespace faprobe::fuzz
