// scripts/plot.py over real sweeps: the GFLOP/s figure of CPU records draws the host's fp32 GEMM ceiling
// that faprobe measured for the run, and the decode GB/s figure its copy bandwidth, each as a labelled line
// that the script also names on standard output; without the run's metadata (an --out JSONL file) there is
// no GEMM ceiling to draw, and none is claimed.
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace faprobe {
namespace {


class CliPlot : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    if (std::system("/usr/bin/python3 -c 'import matplotlib, numpy' >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "/usr/bin/python3 with matplotlib and numpy is missing (./scripts/test installs "
                      "python3-matplotlib and python3-numpy)";
  }
  // plot.py ARGS in the test's directory; captures stdout and stderr.
  Result plot(const std::string& args) const {
    return shell("/usr/bin/python3 '" FAPROBE_SOURCE_DIR "/scripts/plot.py' " + args);
  }
  double rate(const std::string& document, const char* field) const {
    return nlohmann::json::parse(read_file(path(document))).at("rates").at(field).get<double>();
  }
};

TEST_F(CliPlot, TheGflopsFigureDrawsTheHostsMeasuredGemmCeiling) {
  const Result sweep = faprobe("sweep --impl cpu.tiled --seq 128,256 --json run.json --out run.jsonl");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  const Result drawn = plot("run.json --plots gflops");
  ASSERT_EQ(drawn.status, 0) << drawn.err;
  EXPECT_TRUE(fs::exists(path("run-gflops.png")));
  const std::string line = fmt::format("run-gflops.png: fp32 GEMM ceiling {:.0f} GFLOP/s", rate("run.json", "fp32_gemm_gflops"));
  EXPECT_NE(drawn.out.find(line), std::string::npos) << line << " not in: " << drawn.out;
  // The JSONL file has the records but not the run's rates: nothing to draw, nothing claimed.
  const Result records_only = plot("run.jsonl --plots gflops --prefix jsonl-");
  ASSERT_EQ(records_only.status, 0) << records_only.err;
  EXPECT_TRUE(fs::exists(path("jsonl-gflops.png")));
  EXPECT_EQ(records_only.out.find("GEMM ceiling"), std::string::npos) << records_only.out;
}

TEST_F(CliPlot, TheDecodeFigureDrawsTheHostsCopyBandwidth) {
  const Result sweep = faprobe("sweep --impl cpu.decode --mode decode --seq 256,512 --json decode.json");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  const Result drawn = plot("decode.json --plots gbps");
  ASSERT_EQ(drawn.status, 0) << drawn.err;
  const std::string line = fmt::format("host copy bandwidth {:.0f} GB/s", rate("decode.json", "memory_gbytes_per_s"));
  EXPECT_NE(drawn.out.find(line), std::string::npos) << line << " not in: " << drawn.out;
}

}  // namespace
}  // namespace faprobe
