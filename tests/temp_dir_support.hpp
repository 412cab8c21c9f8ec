// A test fixture with a directory of its own: fresh for each test, named after the test suite, the test and
// this process (so that tests running in parallel never share one), and removed afterwards.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace faprobe::test_support {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("faprobe-") + info->test_suite_name() + "-" + info->name() + "-" +
                       std::to_string(::getpid());
    std::replace(name.begin(), name.end(), '/', '_');  // parameterised tests: "Suite/Test/0"
    directory_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  std::string path(const std::string& name) const { return (directory_ / name).string(); }

  std::filesystem::path directory_;
};

}  // namespace faprobe::test_support
