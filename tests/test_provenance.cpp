// Provenance (src/harness/run/provenance.hpp, build_info.hpp, cmake/build_revision.cmake): a record's repro
// command names every axis of its case and the measure settings that are not defaults, survives the shell
// word for word (an implementation name with a quote and a space included), and read back as settings gives
// the same plan of one case; records keep it through JSON (and read records without it); run_plan writes
// it into every record; the --json header gets NVML's summary and each device's report, unavailable with the
// reason when the library is missing; the build object has a compiler and flags; and the revision script
// reports a clean tree clean, an edited tracked file dirty, ignores untracked files, says "unknown" outside
// git, and leaves the header untouched when nothing changed. The same round trip through the faprobe binary
// itself is tests/test_cli_provenance.cpp.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/runtime/nvml.hpp"
#include "harness/io/build_info.hpp"
#include "harness/records/writers.hpp"
#include "harness/run/provenance.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;
using Words = std::vector<std::string>;

// The words a POSIX shell makes of `command` (sh -c "set -- COMMAND; printf '%s\n' ...").
Words shell_words(const std::string& command) {
  const std::string script = "set -- " + command + "; for word in \"$@\"; do printf '%s\\n' \"$word\"; done";
  FILE* pipe = ::popen(("sh -c " + shell_quote(script)).c_str(), "r");
  if (pipe == nullptr) return {};
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) text.append(buffer, n);
  ::pclose(pipe);
  Words words;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) words.push_back(line);
  return words;
}

// The settings a repro command's words give, as the CLI turns flags into settings (harness/commands/workflow.cpp,
// settings_source): "--seq-q 17" is key seq_q, --no-verify and --no-flush-l2 are verify and flush_l2 false.
SettingsSource settings_of(const Words& words) {
  EXPECT_GE(words.size(), 2u);
  EXPECT_EQ(words[0], "faprobe");
  EXPECT_EQ(words[1], "run");
  SettingsSource source;
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string& flag = words[i];
    if (flag == "--no-verify" || flag == "--no-flush-l2") {
      source.set(flag == "--no-verify" ? "verify" : "flush_l2", "false", flag);
      continue;
    }
    EXPECT_EQ(flag.rfind("--", 0), 0u) << flag;
    EXPECT_LT(i + 1, words.size()) << flag << " has no value";
    if (i + 1 >= words.size()) break;
    std::string key = flag.substr(2);
    for (char& ch : key) ch = ch == '-' ? '_' : ch;
    source.set(key, words[++i], flag);
  }
  return source;
}

Case causal_gqa() {
  Case c;
  c.batch = 2;
  c.heads = 8;
  c.kv_heads = 2;
  c.seq_q = 17;
  c.seq_k = 1000;
  c.head_dim = 80;
  c.dtype = DType::bf16;
  c.mask = Mask::causal;
  c.seed = 42;
  return c;
}

Case paged_varlen_decode() {
  Case c;
  c.mode = Mode::decode;
  c.seq_q = 1;
  c.seqlens = {1000, 17, 300, 17};
  c.batch = 4;
  c.seq_k = 1000;
  c.heads = 8;
  c.kv_heads = 1;
  c.page_size = 16;
  c.splits = 3;
  c.dtype = DType::fp16;
  return c;
}

TEST(Provenance, ShellQuotingLeavesPlainWordsAndQuotesTheRest) {
  EXPECT_EQ(shell_quote("cpu.tiled"), "cpu.tiled");
  EXPECT_EQ(shell_quote("1000,17,300"), "1000,17,300");
  EXPECT_EQ(shell_quote("--seq-q"), "--seq-q");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  const Words odd = {"it's", "a b", "$HOME", "*", "\"x\"", "back\\slash", ""};
  std::string command;
  for (const std::string& word : odd) command += (command.empty() ? "" : " ") + shell_quote(word);
  EXPECT_EQ(shell_words(command), odd);
}

TEST(Provenance, ReproNamesEveryAxisAndNoDefaultMeasureSetting) {
  EXPECT_EQ(repro_command("cpu.tiled", causal_gqa(), MeasureSettings{}),
            "faprobe run --impl cpu.tiled --seq 1000 --seq-q 17 --batch 2 --heads 8 --kv-heads 2 --head-dim 80 "
            "--dtype bf16 --mask causal --mode prefill --seed 42");
  // Decode has one query row (no --seq-q); variable lengths replace --batch and --seq.
  EXPECT_EQ(repro_command("cpu.decode-splitk", paged_varlen_decode(), MeasureSettings{}),
            "faprobe run --impl cpu.decode-splitk --heads 8 --kv-heads 1 --head-dim 64 --dtype fp16 --mask none "
            "--mode decode --seed 0 --page-size 16 --seqlens 1000,17,300,17 --splits 3");
  MeasureSettings measure;
  measure.warmup = 0;
  measure.min_samples = 2;
  measure.max_noise_percent = 100;
  measure.min_time_s = 0;
  measure.max_time_s = 0.25;
  measure.mem_limit = 512ull << 20;
  measure.threads = 3;
  measure.verify = false;
  measure.flush_l2 = false;
  const std::string repro = repro_command("cpu.naive", Case{}, measure);
  EXPECT_NE(repro.find(" --warmup 0 --min-samples 2 --max-noise 100 --min-time 0 --max-time 0.25 --mem-limit 536870912 "
                       "--threads 3 --no-verify --no-flush-l2"),
            std::string::npos)
      << repro;
}

TEST(Provenance, ReproReadBackGivesTheSameCaseAndSettings) {
  MeasureSettings measure;
  measure.min_samples = 3;
  measure.max_time_s = 1.0 / 3.0;  // a double whose shortest text must still read back exactly
  measure.threads = 2;
  measure.verify = false;
  for (const Case& c : {Case{}, causal_gqa(), paged_varlen_decode()}) {
    const std::string impl = c.mode == Mode::decode ? "cpu.decode-splitk" : "cpu.tiled";
    const Plan plan = make_plan(settings_of(shell_words(repro_command(impl, c, measure))));
    ASSERT_EQ(plan.cases.size(), 1u) << c.label();
    EXPECT_EQ(plan.cases.front().key(), c.key());
    EXPECT_EQ(plan.impls, Words{impl});
    EXPECT_EQ(plan.measure.min_samples, 3);
    EXPECT_EQ(plan.measure.max_time_s, measure.max_time_s);
    EXPECT_EQ(plan.measure.threads, 2);
    EXPECT_FALSE(plan.measure.verify);
    EXPECT_TRUE(plan.notes.empty()) << plan.notes.front();  // no flag without effect (--seq-q in decode)
  }
  // A planted slip is caught: a repro missing --kv-heads gives another case.
  std::string repro = repro_command("cpu.tiled", causal_gqa(), MeasureSettings{});
  repro.erase(repro.find(" --kv-heads 2"), std::string(" --kv-heads 2").size());
  EXPECT_NE(make_plan(settings_of(shell_words(repro))).cases.front().key(), causal_gqa().key());
}

TEST(Provenance, AnImplementationNameWithAQuoteAndASpaceSurvivesTheShell) {
  const Words words = shell_words(repro_command("plugin.it's odd", Case{}, MeasureSettings{}));
  ASSERT_GE(words.size(), 4u);
  EXPECT_EQ(words[2], "--impl");
  EXPECT_EQ(words[3], "plugin.it's odd");
}

TEST(Provenance, RecordsKeepTheirReproAndOlderRecordsReadWithoutOne) {
  Record record;
  record.impl = "cpu.naive";
  record.device = "cpu";
  record.repro = repro_command("cpu.naive", record.c, MeasureSettings{});
  nlohmann::json json = record;
  EXPECT_EQ(json["repro"], record.repro);
  EXPECT_EQ(json.get<Record>().repro, record.repro);
  json["repro"] = nullptr;
  EXPECT_EQ(json.get<Record>().repro, "");
  json.erase("repro");  // a record written before faprobe kept it
  EXPECT_EQ(json.get<Record>().repro, "");
  record.repro.clear();
  EXPECT_TRUE(nlohmann::json(record)["repro"].is_null());
}

class ProvenanceRun : public test_support::TempDirTest {};

TEST_F(ProvenanceRun, EveryRecordOfARunHasItsReproAndTheHeaderSaysWhyNvmlIsUnavailable) {
  SettingsSource source;
  source.load_config_text(R"({"impl": "cpu.naive,cpu.decode", "seq": "17,33", "heads": 4, "kv_heads": 2,
    "head_dim": 16, "mode": "prefill,decode", "warmup": 0, "min_samples": 2, "min_time": 0, "max_noise": 100,
    "max_time": 1})",
                          "tiny");
  const Plan plan = make_plan(source);
  RunOptions options;
  options.json_path = path("run.json");
  options.metadata = {{"devices", nlohmann::json::array({{{"index", 0}, {"name", "a GPU"}}})}};
  options.nvml = std::make_shared<gpu::NvmlMonitor>("/nonexistent/libnvidia-ml.so.1");
  std::ostringstream table;
  const RunSummary summary = run_plan(plan, options, table);
  ASSERT_EQ(summary.records.size(), 8u);
  for (const Record& record : summary.records) {
    ASSERT_FALSE(record.repro.empty()) << record.key();
    const Plan again = make_plan(settings_of(shell_words(record.repro)));
    ASSERT_EQ(again.cases.size(), 1u) << record.repro;
    EXPECT_EQ(again.cases.front().key(), record.c.key()) << record.repro;
    EXPECT_EQ(again.impls, Words{record.impl});
    EXPECT_NE(record.repro.find("--min-samples 2"), std::string::npos) << record.repro;
  }
  const nlohmann::json document = nlohmann::json::parse(std::ifstream(path("run.json")));
  EXPECT_EQ(document["nvml"]["available"], false);
  EXPECT_NE(document["nvml"]["reason_unavailable"].get<std::string>().find("cannot load /nonexistent/"),
            std::string::npos);
  EXPECT_EQ(document["devices"][0]["nvml"]["available"], false);
  EXPECT_EQ(document["devices"][0]["nvml"]["reason_unavailable"], document["nvml"]["reason_unavailable"]);
  EXPECT_EQ(document["records"][0]["repro"], summary.records[0].repro);
  // Without a monitor the header is the metadata as given.
  options.nvml.reset();
  EXPECT_EQ(document_metadata(options), options.metadata);
}

TEST(Provenance, TheBuildHasACompilerFlagsAndARevision) {
  const BuildInfo& info = build_info();
  EXPECT_FALSE(info.compiler_id.empty());
  EXPECT_FALSE(info.compiler_version.empty());
  EXPECT_FALSE(info.cxx_flags.empty());  // a Release build has at least -O3 -DNDEBUG, or -march
  EXPECT_FALSE(info.git_revision.empty());
  EXPECT_EQ(info.revision_text(), info.git_dirty ? info.git_revision + "-dirty" : info.git_revision);
  const nlohmann::json json = info;
  EXPECT_EQ(json["compiler"]["id"], info.compiler_id);
  EXPECT_TRUE(json["git_dirty"].is_boolean());
  EXPECT_EQ(json["cuda"].is_null(), !info.cuda);
  if (info.cuda) {
    EXPECT_FALSE(json["cuda"]["compiler"]["version"].get<std::string>().empty());
    EXPECT_FALSE(json["cuda"]["architectures"].empty());
  }
}

// cmake/build_revision.cmake on a git repository of its own.
class BuildRevision : public test_support::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
  }
  int git(const std::string& args) const {
    return std::system(("cd " + shell_quote(path("tree")) + " && git -c user.name=faprobe -c user.email=faprobe@test " +
                        args + " >/dev/null 2>&1")
                           .c_str());
  }
  // Runs the script on `tree` and returns the header it leaves.
  std::string revision_header(const std::string& tree) const {
    const std::string command = shell_quote(FAPROBE_CMAKE_COMMAND) + " -DSOURCE_DIR=" + shell_quote(tree) +
                                " -DOUTPUT=" + shell_quote(path("build_revision.hpp")) + " -P " +
                                shell_quote(std::string(FAPROBE_SOURCE_DIR) + "/cmake/build_revision.cmake");
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::ifstream file(path("build_revision.hpp"));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }
  static bool dirty(const std::string& header) {
    return header.find("#define FAPROBE_BUILD_GIT_DIRTY 1") != std::string::npos;
  }
};

TEST_F(BuildRevision, CleanEditedAndUntrackedTreesAndNoGitAtAll) {
  fs::create_directories(path("tree"));
  ASSERT_EQ(git("init -q"), 0);
  std::ofstream(path("tree") + "/kernel.cpp") << "int main() {}\n";
  ASSERT_EQ(git("add kernel.cpp"), 0);
  ASSERT_EQ(git("commit -q -m first"), 0);
  const std::string clean = revision_header(path("tree"));
  EXPECT_FALSE(dirty(clean)) << clean;
  EXPECT_EQ(clean.find("\"unknown\""), std::string::npos) << clean;

  std::ofstream(path("tree") + "/notes.txt") << "untracked\n";
  EXPECT_FALSE(dirty(revision_header(path("tree"))));  // untracked files do not make it dirty

  std::ofstream(path("tree") + "/kernel.cpp", std::ios::app) << "// an edit\n";  // the planted change
  const std::string edited = revision_header(path("tree"));
  EXPECT_TRUE(dirty(edited)) << edited;

  ASSERT_EQ(git("commit -q -a -m second"), 0);
  const std::string committed = revision_header(path("tree"));
  EXPECT_FALSE(dirty(committed));
  EXPECT_NE(committed, clean);  // a new revision

  fs::create_directories(path("plain"));
  const std::string outside = revision_header(path("plain"));
  EXPECT_NE(outside.find("#define FAPROBE_BUILD_GIT_REVISION \"unknown\""), std::string::npos) << outside;
  EXPECT_FALSE(dirty(outside));
}

TEST_F(BuildRevision, AnUnchangedHeaderIsNotRewritten) {
  fs::create_directories(path("plain"));
  revision_header(path("plain"));
  const auto long_ago = fs::file_time_type::clock::now() - std::chrono::hours(24 * 365);
  fs::last_write_time(path("build_revision.hpp"), long_ago);
  revision_header(path("plain"));
  EXPECT_EQ(fs::last_write_time(path("build_revision.hpp")), long_ago);  // nothing to recompile
  std::ofstream(path("build_revision.hpp"), std::ios::app) << "// stale\n";
  const std::string rewritten = revision_header(path("plain"));
  EXPECT_EQ(rewritten.find("stale"), std::string::npos);
}

}  // namespace
}  // namespace faprobe
