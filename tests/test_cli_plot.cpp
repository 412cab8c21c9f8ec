// scripts/plot.py over real sweeps, judged by what it says it drew (--describe: every figure's axes, series,
// ceilings and footer, read back from the figure): prefill and decode in figures of their own; one colour,
// marker and line style per implementation, the same in every figure; axis labels in the unit of their
// ticks; the same scales from a run's JSONL records as from its --json document; a footer naming each pair
// that was not drawn and why; and the host's measured ceilings (the fp32 GEMM rate on the GFLOP/s figure,
// the copy bandwidth on the decode GB/s figure) as a line, or as a band with the thread count when the run
// recorded their spread.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace faprobe {
namespace {

using nlohmann::json;

// Two samples a case, whatever their noise: the figures need records, not precise ones.
const std::string kQuick = "--warmup 0 --min-samples 2 --min-time 0 --max-noise 100 --max-time 2";

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
  json document(const std::string& name) const { return json::parse(read_file(path(name))); }
  double rate(const std::string& name, const char* field) const {
    return document(name).at("rates").at(field).get<double>();
  }
  // Both modes, both written: run.jsonl and run.json. Prefill: cpu.naive and cpu.tiled at 128 and 1024, where
  // cpu.naive's score matrix exceeds the 4 MB limit (skipped, with the memory it would need), and cpu.decode
  // unsupported; decode: all three at both key lengths.
  void sweep_both_modes() const {
    const Result sweep = faprobe(
        "sweep --impl cpu.naive,cpu.tiled,cpu.decode --mode prefill,decode --seq 128,1024 --heads 1 "
        "--mem-limit 4MB " + kQuick + " --out run.jsonl --json run.json");
    ASSERT_EQ(sweep.status, 0) << sweep.err;
  }
  // plot.py ARGS --describe DESCRIBE: what it drew, by file name (without the prefix).
  std::map<std::string, json> described(const std::string& args, const std::string& prefix) const {
    const Result drawn = plot(args + " --prefix " + prefix + " --describe " + prefix + "describe.json");
    EXPECT_EQ(drawn.status, 0) << drawn.err;
    std::map<std::string, json> figures;
    const json description = document(prefix + "describe.json");
    for (const json& figure : description.at("figures")) {
      const std::string file = figure.at("file").get<std::string>();
      EXPECT_TRUE(fs::exists(path(file))) << file;
      EXPECT_NE(drawn.out.find(file + "\n"), std::string::npos) << file << " not named in: " << drawn.out;
      figures[file.substr(prefix.size())] = figure;
    }
    return figures;
  }
  static std::string footer(const json& figure) {
    std::string text;
    for (const json& line : figure.at("footer")) text += line.get<std::string>() + "\n";
    return text;
  }
};

TEST_F(CliPlot, PrefillAndDecodeAreFiguresOfTheirOwn) {
  sweep_both_modes();
  const auto figures = described("run.json", "run-");
  std::set<std::string> files;
  for (const auto& [file, figure] : figures) files.insert(file);
  EXPECT_EQ(files, (std::set<std::string>{"memory-prefill.png", "memory-decode.png", "time-prefill.png",
                                          "time-decode.png", "gflops-prefill.png", "gflops-decode.png"}));
  for (const auto& [file, figure] : figures) {
    const std::string mode = figure.at("mode").get<std::string>();
    EXPECT_NE(file.find("-" + mode + ".png"), std::string::npos) << file << " holds " << mode;
    EXPECT_NE(figure.at("title").get<std::string>().find(mode), std::string::npos) << figure.at("title");
    std::set<std::string> impls;
    for (const json& series : figure.at("series")) impls.insert(series.at("impl").get<std::string>());
    // cpu.decode has no prefill record to draw; in decode it is drawn beside the others.
    EXPECT_EQ(impls.count("cpu.decode"), mode == "decode" ? 1u : 0u) << file;
    EXPECT_EQ(impls.count("cpu.tiled"), 1u) << file;
  }
  // The GEMM ceiling is prefill's; decode, memory-bound, is told where its ceiling is instead.
  EXPECT_EQ(figures.at("gflops-prefill.png").at("ceilings").size(), 1u);
  EXPECT_TRUE(figures.at("gflops-decode.png").at("ceilings").empty());
  EXPECT_NE(footer(figures.at("gflops-decode.png")).find("copy bandwidth"), std::string::npos);

  // cpu.decode alone: its prefill records are all unsupported, so there is one mode to draw, named as before.
  json decode_only = document("run.json");
  json records = json::array();
  for (const json& record : decode_only.at("records"))
    if (record.at("impl") == "cpu.decode") records.push_back(record);
  decode_only["records"] = records;
  write("only.json", decode_only.dump());
  const Result only = plot("only.json --plots memory");
  ASSERT_EQ(only.status, 0) << only.err;
  EXPECT_TRUE(fs::exists(path("only-memory.png")));
  EXPECT_FALSE(fs::exists(path("only-memory-prefill.png")));
  EXPECT_NE(only.err.find("no prefill figures: every prefill record is unsupported (cpu.decode)"), std::string::npos)
      << only.err;
}

TEST_F(CliPlot, EveryImplementationHasOneStyleOfItsOwnInEveryFigure) {
  sweep_both_modes();
  const auto figures = described("run.json", "run-");
  const json styles = document("run-describe.json").at("styles");
  ASSERT_EQ(styles.size(), 3u);
  std::set<std::string> colors, markers, lines;
  for (const auto& [impl, style] : styles.items()) {
    colors.insert(style.at("color").get<std::string>());
    markers.insert(style.at("marker").get<std::string>());
    lines.insert(style.at("linestyle").get<std::string>());
  }
  EXPECT_EQ(colors.size(), 3u);
  EXPECT_EQ(markers.size(), 3u);
  EXPECT_EQ(lines.size(), 3u);
  for (const auto& [file, figure] : figures) {
    for (const json& series : figure.at("series")) {
      const json& style = styles.at(series.at("impl").get<std::string>());
      for (const char* key : {"color", "marker", "linestyle", "markersize"})
        EXPECT_EQ(series.at(key), style.at(key)) << file << " " << series.at("impl") << " " << key;
      // A line lying on another one's values says so in its legend label.
      if (!series.at("same_values_as").is_null()) {
        EXPECT_NE(series.at("label").get<std::string>(), series.at("impl").get<std::string>());
      }
    }
  }
}

// Each figure of a --json document and of its JSONL records, side by side: the same scales and units.
void expect_same_scales(const std::map<std::string, json>& from_jsonl, const std::map<std::string, json>& from_json) {
  ASSERT_FALSE(from_jsonl.empty());
  ASSERT_EQ(from_jsonl.size(), from_json.size());
  for (const auto& [file, figure] : from_jsonl) {
    ASSERT_EQ(from_json.count(file), 1u) << file;
    const json& a = figure.at("axes").at(0);
    const json& b = from_json.at(file).at("axes").at(0);
    EXPECT_EQ(a.at("x_scale"), b.at("x_scale")) << file;
    EXPECT_EQ(a.at("y_scale"), b.at("y_scale")) << file;
    EXPECT_EQ(a.at("y_label"), b.at("y_label")) << file;
  }
}

TEST_F(CliPlot, JsonlRecordsAndTheJsonDocumentGetTheSameScales) {
  sweep_both_modes();
  expect_same_scales(described("run.jsonl", "jsonl-"), described("run.json", "json-"));

  // Steady rates (10 to 19 GFLOP/s) under a GEMM ceiling 1000 times above them, which only the --json document
  // has: the ceiling is in view but does not choose the scale, so both stay linear.
  json steady = document("run.json");
  std::string lines;
  int index = 0;
  for (json& record : steady.at("records")) {
    if (record.at("status") == "ok") record["gflops"] = 10 + index++ % 10;
    lines += record.dump() + "\n";
  }
  steady["rates"]["fp32_gemm_gflops"] = 19000;
  write("steady.json", steady.dump());
  write("steady.jsonl", lines);
  const auto from_jsonl = described("steady.jsonl --plots gflops", "steady-jsonl-");
  const auto from_json = described("steady.json --plots gflops", "steady-json-");
  expect_same_scales(from_jsonl, from_json);
  ASSERT_EQ(from_json.count("gflops-prefill.png"), 1u);
  EXPECT_EQ(from_json.at("gflops-prefill.png").at("axes").at(0).at("y_scale"), "linear");
  EXPECT_EQ(from_json.at("gflops-prefill.png").at("ceilings").size(), 1u);
  EXPECT_TRUE(from_jsonl.at("gflops-prefill.png").at("ceilings").empty());
}

TEST_F(CliPlot, AxisLabelsNameTheUnitTheTicksAreWrittenIn) {
  sweep_both_modes();
  const auto figures = described("run.json", "run-");
  const std::regex plain_number(R"([0-9][0-9,]*(\.[0-9]+)?)");
  const std::map<std::string, std::regex> labels = {
      {"memory", std::regex(R"(peak memory \((bytes|kB|MB|GB|TB)\))")},
      {"time", std::regex(R"(median time per call \((s|ms|µs|ns)\))")},
      {"gflops", std::regex(R"(GFLOP/s(, log scale)?)")}};
  for (const auto& [file, figure] : figures) {
    const json& axes = figure.at("axes").at(0);
    const std::string label = axes.at("y_label").get<std::string>();
    EXPECT_TRUE(std::regex_match(label, labels.at(figure.at("kind").get<std::string>()))) << file << ": " << label;
    ASSERT_FALSE(axes.at("y_ticks").empty()) << file;
    for (const json& tick : axes.at("y_ticks"))
      EXPECT_TRUE(std::regex_match(tick.get<std::string>(), plain_number)) << file << ": tick " << tick << " under " << label;
    EXPECT_NE(axes.at("x_label").get<std::string>().find("(k = 1024)"), std::string::npos) << file;
  }
}

TEST_F(CliPlot, TheFooterNamesWhatWasNotPlottedAndWhy) {
  sweep_both_modes();
  std::string skipped_reason, unsupported_reason;
  const json run = document("run.json");
  for (const json& record : run.at("records")) {
    if (record.at("status") == "skipped") skipped_reason = record.at("reason").get<std::string>();
    if (record.at("status") == "unsupported") unsupported_reason = record.at("reason").get<std::string>();
  }
  ASSERT_NE(skipped_reason.find("limit"), std::string::npos) << "cpu.naive at 1024 should exceed --mem-limit 4MB";
  const auto figures = described("run.json", "run-");
  for (const char* file : {"memory-prefill.png", "time-prefill.png", "gflops-prefill.png"}) {
    const json& figure = figures.at(file);
    const std::string text = footer(figure);
    EXPECT_NE(text.find("cpu.naive: skipped at 1k"), std::string::npos) << file << ":\n" << text;
    EXPECT_NE(text.find(skipped_reason), std::string::npos) << file << ":\n" << text;
    EXPECT_NE(text.find("cpu.decode: unsupported at every length"), std::string::npos) << file << ":\n" << text;
    EXPECT_NE(text.find(unsupported_reason), std::string::npos) << file << ":\n" << text;
    bool found = false;
    for (const json& entry : figure.at("not_plotted")) {
      if (entry.at("status") != "skipped") continue;
      found = true;
      EXPECT_EQ(entry.at("impls"), json::array({"cpu.naive"}));
      EXPECT_EQ(entry.at("at"), json::array({1024}));
      // Memory and time draw the prediction of the skipped case, faded; GFLOP/s has none to draw.
      EXPECT_EQ(entry.at("drawn_as").is_null(), std::string(file) == "gflops-prefill.png") << file;
    }
    EXPECT_TRUE(found) << file;
  }
  EXPECT_NE(footer(figures.at("time-decode.png")).find("not plotted: nothing"), std::string::npos);
}

TEST_F(CliPlot, TheGflopsFigureDrawsTheHostsMeasuredGemmCeiling) {
  const Result sweep = faprobe("sweep --impl cpu.tiled --seq 128,256 " + kQuick + " --json run.json --out run.jsonl");
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

  // With the spread over the calibration's repetitions and its thread count (a newer run's rates): a band.
  json banded = document("run.json");
  banded["rates"]["fp32_gemm_gflops_range"] = {80.4, 120.4};
  banded["rates"]["threads"] = 1;
  write("banded.json", banded.dump());
  const Result band = plot("banded.json --plots gflops --describe band.json");
  ASSERT_EQ(band.status, 0) << band.err;
  const std::string band_line = fmt::format("banded-gflops.png: fp32 GEMM ceiling {:.0f} GFLOP/s, 1 thread (range 80–120 over its repetitions)",
                                            rate("run.json", "fp32_gemm_gflops"));
  EXPECT_NE(band.out.find(band_line), std::string::npos) << band_line << " not in: " << band.out;
  const json ceiling = document("band.json").at("figures").at(0).at("ceilings").at(0);
  EXPECT_EQ(ceiling.at("low"), 80.4);
  EXPECT_EQ(ceiling.at("high"), 120.4);
  EXPECT_EQ(ceiling.at("threads"), "1 thread");
}

TEST_F(CliPlot, TheDecodeFigureDrawsTheHostsCopyBandwidth) {
  const Result sweep = faprobe("sweep --impl cpu.decode --mode decode --seq 256,512 " + kQuick + " --json decode.json");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  const Result drawn = plot("decode.json --plots gbps");
  ASSERT_EQ(drawn.status, 0) << drawn.err;
  const std::string line = fmt::format("host copy bandwidth {:.0f} GB/s", rate("decode.json", "memory_gbytes_per_s"));
  EXPECT_NE(drawn.out.find(line), std::string::npos) << line << " not in: " << drawn.out;

  // A band from the spread, labelled with the threads it was measured with, and with what a point above it
  // is (data that stayed in cache), so that one is not read as a bug.
  json banded = document("decode.json");
  banded["rates"]["memory_gbytes_per_s_range"] = {16.8, 40.4};
  banded["rates"]["threads"] = 2;
  write("banded.json", banded.dump());
  const Result band = plot("banded.json --plots gbps --describe band.json");
  ASSERT_EQ(band.status, 0) << band.err;
  EXPECT_NE(band.out.find(line + ", 2 threads (range 17–40 over its repetitions)"), std::string::npos) << band.out;
  const json ceiling = document("band.json").at("figures").at(0).at("ceilings").at(0);
  EXPECT_EQ(ceiling.at("low"), 16.8);
  EXPECT_EQ(ceiling.at("high"), 40.4);
  EXPECT_NE(ceiling.at("context").get<std::string>().find("points above: cache-resident"), std::string::npos)
      << ceiling.at("context");
}

}  // namespace
}  // namespace faprobe
