// scripts/device-tune.sh and scripts/tune_table.py without a GPU: the tile tuning run end to end under the
// emulator (FAPROBE_TUNE_TARGET=emu: emu.* for cuda.*, tiny cases, nothing timed), and its table over planted
// records. The run must name every FA-3 variant `faprobe list --variants --json` lists, each verified, so that
// a tile added to kernels/cuda/fa3/CMakeLists.txt cannot be left out of the tuning; a variant whose verify
// failed must be marked and never proposed as a default, however fast its records say it is.
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace faprobe {
namespace {

class CliTune : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    if (std::system("command -v python3 >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "python3 is missing (./scripts/test installs it): device-tune.sh and tune_table.py need it";
  }

  // The variants of `kernel` (emu.fa3) that `faprobe list --variants --json` lists, and the listing itself.
  std::vector<std::string> variants_of(const std::string& kernel, nlohmann::json* listing = nullptr) const {
    const Result listed = faprobe("list --variants --json");
    EXPECT_EQ(listed.status, 0) << listed.err;
    const nlohmann::json json = nlohmann::json::parse(listed.out);
    std::vector<std::string> names;
    for (const auto& variant : json.at("variants"))
      if (variant.value("variant_of", "") == kernel) names.push_back(variant.at("name").get<std::string>());
    if (listing != nullptr) *listing = json;
    return names;
  }

  // tune_table.py over a work directory; tune.md's text.
  std::string table(const std::string& work) const {
    const Result made = shell("python3 '" FAPROBE_SOURCE_DIR "/scripts/tune_table.py' " + work + " --out " + work +
                              "/tune.md --summary " + work + "/summary.md");
    EXPECT_EQ(made.status, 0) << made.err;
    return read_file(path(work + "/tune.md"));
  }
};

// The lines of a Markdown text that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  return found;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The section of a Markdown text that starts at the heading `heading`, up to the next heading of its level.
std::string section(const std::string& text, const std::string& heading) {
  const std::size_t begin = text.find(heading + "\n");
  if (begin == std::string::npos) return "";
  const std::size_t end = text.find("\n## ", begin + heading.size());
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST_F(CliTune, TheEmulatedTuneVerifiesEveryListedVariantEndToEnd) {
  const std::vector<std::string> fa3_variants = variants_of("emu.fa3");
  ASSERT_FALSE(fa3_variants.empty()) << "faprobe list --variants --json lists no variant of emu.fa3";

  const Result tuned = shell("FAPROBE_TUNE_TARGET=emu FAPROBE_BIN='" FAPROBE_BINARY "' '" FAPROBE_SOURCE_DIR
                             "/scripts/device-tune.sh' '" + path("out").string() + "'");
  ASSERT_EQ(tuned.status, 0) << tuned.out << tuned.err;
  const std::string tune = read_file(path("out/tune.md"));
  ASSERT_FALSE(tune.empty()) << "no out/tune.md; the run said:\n" << tuned.out;
  const std::string summary = read_file(path("out/summary.md"));
  EXPECT_TRUE(contains(summary, "## Steps")) << summary;
  EXPECT_TRUE(fs::exists(path("out/device-tune.tar.gz")));
  EXPECT_TRUE(fs::exists(path("out/log.txt")));

  // Every FA-3 variant listed, and the plain kernels, in the implementations table, each verified.
  std::vector<std::string> tuned_names = fa3_variants;
  tuned_names.insert(tuned_names.end(), {"emu.fa3", "emu.fa2"});
  for (const std::string& name : variants_of("emu.fa2")) tuned_names.push_back(name);
  const std::string tuned_table = section(tune, "## Implementations tuned");
  for (const std::string& name : tuned_names) {
    const auto rows = lines_starting(tuned_table, "| `" + name + "` |");
    ASSERT_EQ(rows.size(), 1u) << name << " has no row of its own in tune.md:\n" << tune;
    EXPECT_TRUE(contains(rows.front(), "✓ verified")) << rows.front();
  }
  // Each was run on the benchmark cases too: untimed, as faprobe records emulated implementations.
  EXPECT_TRUE(contains(tune, "untimed (emulated)")) << tune;
  EXPECT_TRUE(contains(tune, "## FA-3 cases")) << tune;
  EXPECT_TRUE(contains(tune, "## FA-2 cases")) << tune;
  EXPECT_TRUE(contains(tune, "## Proposed defaults")) << tune;
  EXPECT_TRUE(contains(tune, "no timings (emulated run)")) << tune;
  EXPECT_TRUE(contains(tune, "cuda.cudnn: skipped, it has no emulated twin")) << tune;
  EXPECT_TRUE(contains(tune, "must not be compared")) << tune;
  // Every step ran: nothing failed, timed out or ran out of the budget.
  for (const char* bad : {"FAIL", "TIMEOUT", "out of time", "interrupted"})
    EXPECT_FALSE(contains(summary, bad)) << bad << " in:\n" << summary;

  const Result archive = shell("tar -tzf '" + path("out/device-tune.tar.gz").string() + "'");
  ASSERT_EQ(archive.status, 0) << archive.err;
  for (const char* file : {"device-tune/tune.md", "device-tune/list.json", "device-tune/verify/verify.jsonl",
                           "device-tune/bench/fa3.jsonl", "device-tune/bench/fa2.jsonl", "device-tune/steps.tsv"})
    EXPECT_TRUE(contains(archive.out, file)) << file << " not in the archive:\n" << archive.out;
}

// A planted failure: real records of emu.fa3 and its bf16 head_dim 128 variants, with timings written in (the
// emulator times nothing) that make one variant the fastest. As they are, the table proposes it; with one of
// its verify records flipped to "mismatch" it is marked failed and excluded, and the default stays.
TEST_F(CliTune, AVariantThatFailedVerifyIsMarkedAndNeverProposed) {
  nlohmann::json listing;
  std::vector<std::string> variants;
  for (const std::string& name : variants_of("emu.fa3", &listing)) {
    for (const auto& entry : listing.at("variants"))
      if (entry.at("name") == name)
        for (const auto& probe : entry.at("support"))
          if (probe.at("supported") && probe.at("dtype") == "bf16" && probe.at("head_dim") == 128 &&
              probe.at("mode") == "prefill" && probe.at("mask") == "none" && probe.at("aligned")) {
            variants.push_back(name);
            break;
          }
  }
  if (variants.size() < 2) GTEST_SKIP() << "fewer than two emu.fa3 variants take bf16 head_dim 128";

  fs::create_directories(path("work/verify"));
  fs::create_directories(path("work/bench"));
  write("work/list.json", listing.dump());
  write("work/target.txt", "emu\n");
  std::string impls = "emu.fa3";
  for (const std::string& name : variants) impls += "," + name;
  const std::string axes = " --batch 1 --heads 2 --head-dim 128 --dtype bf16 --mask none ";
  const Result verified = faprobe("verify --impl " + impls + axes + "--seq 129 --seq-q 17 --out work/verify/verify.jsonl");
  ASSERT_EQ(verified.status, 0) << verified.err;
  const Result swept = faprobe("sweep --impl " + impls + axes + "--seq 256 --out bench.jsonl");
  ASSERT_EQ(swept.status, 0) << swept.err;

  // The tile plain emu.fa3 runs (its record's details.tile) and a variant of another tile, to plant.
  std::vector<nlohmann::json> bench;
  std::istringstream lines(read_file(path("bench.jsonl")));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) bench.push_back(nlohmann::json::parse(line));
  std::string current;
  for (const auto& record : bench)
    if (record.at("impl") == "emu.fa3") current = record.at("details").at("tile").get<std::string>();
  ASSERT_FALSE(current.empty()) << "emu.fa3's record names no tile";
  std::string planted;
  for (const std::string& name : variants)
    if (name != "emu.fa3@" + current) planted = name;
  ASSERT_FALSE(planted.empty());
  const std::string planted_tile = planted.substr(planted.find('@') + 1);

  // Timings: the planted variant twice as fast as the default tile (and plain emu.fa3, which runs it).
  std::string timed;
  for (auto record : bench) {
    const double median = record.at("impl") == planted ? 0.5e-3 : 1.0e-3;
    record["time_s"] = {{"median", median}, {"mean", median}, {"min", median}, {"max", median}, {"q1", median},
                        {"q3", median}, {"stddev", 0.0}, {"samples", 10}};
    record["tflops"] = record.at("flops").get<double>() / median / 1e12;
    timed += record.dump() + "\n";
  }
  write("work/bench/fa3.jsonl", timed);

  // Control: as verified, the planted variant is proposed, with the line for the list of instantiations.
  const std::string row_prefix = "| `emu.fa3` | bf16 | 128 | none |";
  {
    const std::string tune = table("work");
    const auto rows = lines_starting(tune, row_prefix);
    ASSERT_EQ(rows.size(), 1u) << tune;
    EXPECT_TRUE(contains(rows.front(), "change to " + planted_tile)) << rows.front();
    EXPECT_TRUE(contains(tune, "```diff")) << tune;
    // The planted tile's line of kernels/cuda/fa3/CMakeLists.txt gains "none": "bf16  128  <block_q>  <block_k>  none".
    const std::string block_q = planted_tile.substr(0, planted_tile.find('x'));
    const std::string block_k = planted_tile.substr(planted_tile.find('x') + 1);
    bool gains_none = false;
    for (const std::string& line : lines_starting(tune, "+"))
      gains_none = gains_none || (contains(line, "\"bf16 ") && contains(line, " 128 ") && contains(line, " " + block_q + " ") &&
                                  contains(line, " " + block_k + " ") && contains(line, "none"));
    EXPECT_TRUE(gains_none) << tune;
  }

  // Planted: one of its verify records flipped to a mismatch.
  std::string flipped;
  bool done = false;
  std::istringstream verify_lines(read_file(path("work/verify/verify.jsonl")));
  for (std::string line; std::getline(verify_lines, line);) {
    if (line.empty()) continue;
    nlohmann::json record = nlohmann::json::parse(line);
    if (!done && record.at("impl") == planted && record.at("status") == "ok") {
      record["status"] = "mismatch";
      record["verify"]["passed"] = false;
      record["reason"] = "planted by test_cli_tune";
      done = true;
    }
    flipped += record.dump() + "\n";
  }
  ASSERT_TRUE(done) << "no ok verify record of " << planted;
  write("work/verify/verify.jsonl", flipped);

  const std::string tune = table("work");
  const auto listed = lines_starting(section(tune, "## Implementations tuned"), "| `" + planted + "` |");
  ASSERT_EQ(listed.size(), 1u) << tune;
  EXPECT_TRUE(contains(listed.front(), "✗ failed verify")) << listed.front();
  EXPECT_FALSE(contains(listed.front(), "✓ verified")) << listed.front();
  const auto rows = lines_starting(tune, row_prefix);
  ASSERT_EQ(rows.size(), 1u) << tune;
  EXPECT_TRUE(contains(rows.front(), "`" + planted + "` ✗ failed verify")) << rows.front();  // the excluded column
  EXPECT_TRUE(contains(rows.front(), "keep " + current)) << rows.front();
  EXPECT_FALSE(contains(rows.front(), "change to")) << rows.front();
  EXPECT_FALSE(contains(tune, "```diff")) << tune;
  // Its timed cell says it failed rather than taking the ★.
  EXPECT_TRUE(contains(tune, "✗ failed verify |")) << tune;
  EXPECT_TRUE(contains(read_file(path("work/summary.md")), "failed (not timed): " + planted));
}

}  // namespace
}  // namespace faprobe
