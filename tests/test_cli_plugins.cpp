// Plugins end to end (the faprobe binary, isolated children included): `verify --plugin` over odd shapes,
// the off-by-one caught (exit 1), the planted slowdown verified under the base name, a crashing plugin turned
// into `failed` records while the sweep goes on, `list` with a plugin's support table, `run --save` checked
// by scripts/check_npy.py, a record's repro run as written, FAPROBE_PLUGIN_PATH and a config's "plugins", the
// CUDA example skipped with its reason, bad libraries refused with exit 2 before anything runs, and the
// README's one-line build command, run as a new user would.
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "npy_support.hpp"

namespace faprobe {
namespace {

const std::string kExamples = FAPROBE_EXAMPLE_PLUGIN_DIR;
// tests/plugins/planted_plugin.c, one defect per library
std::string planted(const std::string& kind) {
  return std::string(FAPROBE_TEST_PLUGIN_DIR) + "/libfaprobe_planted_" + kind + ".so";
}
const std::string kCAttention = kExamples + "/libfaprobe_example_c_attention.so";

std::size_t count_of(const std::string& text, const std::string& word) {
  std::size_t count = 0;
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) ++count;
  return count;
}

// The odd shapes the issue asks every plugin case to pass: GQA, causal with seq_q != seq_k, seq 1, head_dim 80.
const char* kOddShapes = " --seq 1,17,100 --seq-q 1,33 --heads 8 --kv-heads 2 --head-dim 80 --mask none,causal";

class CliPlugins : public Cli {
 protected:
  // `verify` of `library` as plugin.c_attention over the odd shapes: every record ok with its LSE checked, and
  // the one plugin listed with that name. Returns the --json document's records.
  nlohmann::json verified_over_odd_shapes(const std::string& library) const {
    const Result verify = faprobe("verify --plugin '" + library + "' --impl plugin.c_attention" + kOddShapes +
                                  " --json v.json");
    EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
    const nlohmann::json document = nlohmann::json::parse(read_file(path("v.json")));
    EXPECT_EQ(document["records"].size(), 3u * 2 * 2);
    for (const nlohmann::json& record : document["records"]) {
      EXPECT_EQ(record["status"], "ok") << record.dump();
      EXPECT_EQ(record["verify"]["lse_checked"], true);
    }
    EXPECT_EQ(document["plugins"].size(), 1u);
    EXPECT_EQ(document["plugins"][0]["implementations"], nlohmann::json::array({"plugin.c_attention"}));
    return document["records"];
  }
};

TEST_F(CliPlugins, VerifyPassesTheExampleOverOddShapesInIsolatedChildren) {
  for (const nlohmann::json& record : verified_over_odd_shapes(kCAttention)) {
    EXPECT_EQ(record["details"]["isolated"], true);  // plugins run in a child by default
  }
}

TEST_F(CliPlugins, VerifyCatchesTheOffByOneCausalMask) {
  const Result verify = faprobe("verify --plugin '" + kExamples + "/libfaprobe_example_c_attention_off_by_one.so'"
                                " --impl plugin.c_attention_off_by_one" + kOddShapes);
  EXPECT_EQ(verify.status, 1) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("mismatch"), std::string::npos) << verify.out;
  // The explainer names the planted defect under each mismatch, for a real implementation's output too.
  EXPECT_NE(verify.out.find("    why: matches the causal diagonal one key later"), std::string::npos) << verify.out;
}

// The planted regression `faprobe ab`'s power is measured on: the same implementation name as the base library
// (ab loads both under one name), and as correct over the odd shapes.
TEST_F(CliPlugins, ThePlantedSlowdownVerifiesUnderTheBaseName) {
  const std::string slow = kExamples + "/slow/libfaprobe_example_c_attention_slow.so";
  for (const nlohmann::json& record : verified_over_odd_shapes(slow)) {
    EXPECT_EQ(record["details"]["plugin"], fs::canonical(slow).string());
  }
}

TEST_F(CliPlugins, ACrashingPluginIsAFailedRecordAndTheSweepGoesOn) {
  const Result sweep = faprobe("sweep --plugin '" + kExamples + "/libfaprobe_example_crash.so' --impl "
                               "plugin.crash,cpu.naive --seq 32,64 --heads 2 --warmup 0 --min-samples 2 "
                               "--min-time 0 --max-noise 100 --out s.jsonl");
  EXPECT_EQ(sweep.status, 1) << sweep.out << sweep.err;
  std::ifstream lines(path("s.jsonl"));
  int crashed = 0, ok = 0;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["impl"] == "plugin.crash") {
      EXPECT_EQ(record["status"], "failed");
      EXPECT_NE(record["reason"].get<std::string>().find("signal 11 (SIGSEGV)"), std::string::npos) << line;
      ++crashed;
    } else {
      EXPECT_EQ(record["status"], "ok") << line;
      ++ok;
    }
  }
  EXPECT_EQ(crashed, 2);
  EXPECT_EQ(ok, 2);
}

TEST_F(CliPlugins, ListShowsThePluginsSupportTable) {
  const Result list = faprobe("list --all --plugin '" + kCAttention + "'");
  ASSERT_EQ(list.status, 0) << list.err;
  const std::size_t block = list.out.find("plugin.c_attention (cpu; timed, isolated by default, from ");
  ASSERT_NE(block, std::string::npos) << list.out;
  const std::string rest = list.out.substr(block);
  // The plugin ABI has no top-left causal mask, so the table is split by mask.
  EXPECT_NE(rest.find("fp32 causal                ✓   ✓   ✓   ✓   ✓   ✓   ✓   ✓"), std::string::npos) << rest;
  EXPECT_NE(rest.find("fp32 causal-top-left       ✗   ✗   ✗   ✗   ✗   ✗   ✗   ✗"), std::string::npos) << rest;
  EXPECT_NE(rest.find("fp16 none                  ✗   ✗   ✗   ✗   ✗   ✗   ✗   ✗"), std::string::npos) << rest;
  EXPECT_NE(rest.find("✗ dtype must be fp32 or bf16"), std::string::npos) << rest;
  EXPECT_NE(rest.find("✗ causal-top-left is not in the plugin ABI"), std::string::npos) << rest;

  const Result json = faprobe("list --json --plugin '" + kCAttention + "'");
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json listing = nlohmann::json::parse(json.out);
  bool found = false;
  for (const nlohmann::json& impl : listing["implementations"]) {
    if (impl["name"] != "plugin.c_attention") continue;
    found = true;
    EXPECT_EQ(impl["plugin"], fs::canonical(kCAttention).string());
    EXPECT_EQ(impl["support"].size(), 384u);  // 4 dtypes × 3 masks × 8 head_dims × 2 modes × seq aligned or not
  }
  EXPECT_TRUE(found) << json.out;
}

TEST_F(CliPlugins, RunSaveIsCheckedByCheckNpyAndTheReproRunsAsWritten) {
  const Result run = faprobe("run --plugin '" + kCAttention + "' --impl plugin.c_attention --seq 100 --seq-q 33 "
                             "--heads 4 --kv-heads 2 --head-dim 80 --mask causal --warmup 0 --min-samples 2 "
                             "--min-time 0 --max-noise 100 --save saved --json r.json");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  const nlohmann::json record = nlohmann::json::parse(read_file(path("r.json")))["records"][0];
  const std::string repro = record["repro"];
  EXPECT_EQ(repro.rfind("faprobe run --plugin " + fs::canonical(kCAttention).string() + " --impl plugin.c_attention", 0),
            0u) << repro;
  const Result again = faprobe(repro.substr(std::string("faprobe ").size()) + " --json again.json");
  EXPECT_EQ(again.status, 0) << again.err;

  const std::string python = npy_test::python_with_numpy();
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (Debian: apt-get install python3-numpy)";
  const std::string command = "cd '" + directory_.string() + "' && '" + python + "' '" FAPROBE_SOURCE_DIR
                              "/scripts/check_npy.py' saved > check.txt 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << read_file(path("check.txt"));
  EXPECT_NE(read_file(path("check.txt")).find("plugin.c_attention"), std::string::npos) << read_file(path("check.txt"));
}

TEST_F(CliPlugins, PluginPathAndConfigPluginsLoadLikeTheFlag) {
  // FAPROBE_PLUGIN_PATH: a directory of libraries (every example: c_attention among them) ...
  const Result from_path = faprobe("verify --impl plugin.c_attention --seq 17 --heads 2",
                                   "FAPROBE_PLUGIN_PATH='" + kExamples + "'");
  EXPECT_EQ(from_path.status, 0) << from_path.out << from_path.err;
  // ... and a config's "plugins", relative to the config's folder.
  fs::create_directories(path("configs"));
  fs::copy_file(kCAttention, path("configs/libmine.so"));
  write("configs/mine.json", R"({"plugins": ["libmine.so"], "impl": "plugin.c_attention", "seq": 17, "heads": 2})");
  const Result from_config = faprobe("verify --config configs/mine.json");
  EXPECT_EQ(from_config.status, 0) << from_config.out << from_config.err;
  EXPECT_NE(from_config.out.find("plugin.c_attention"), std::string::npos) << from_config.out;

  const Result missing = faprobe("verify --impl cpu.naive --seq 17", "FAPROBE_PLUGIN_PATH=/no/such/dir");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("FAPROBE_PLUGIN_PATH: /no/such/dir does not exist"), std::string::npos) << missing.err;
}

TEST_F(CliPlugins, TheCudaExampleIsUnsupportedWithAReasonWithoutAGpu) {
  const std::string cuda = kExamples + "/libfaprobe_example_cuda_attention.so";
  if (!fs::exists(cuda)) GTEST_SKIP() << "built without CUDA: no CUDA example plugin";
  const Result verify = faprobe("verify --plugin '" + cuda + "' --impl plugin.cuda_attention --seq 64 --dtype bf16 "
                                "--json v.json");
  const nlohmann::json record = nlohmann::json::parse(read_file(path("v.json")))["records"][0];
  if (record["status"] != "unsupported") GTEST_SKIP() << "a GPU is present: " << record.dump();
  EXPECT_NE(verify.status, 2) << verify.err;  // a record, not a usage error
  EXPECT_NE(record["reason"].get<std::string>().find("no CUDA device"), std::string::npos) << record.dump();
}

TEST_F(CliPlugins, ABadLibraryIsOneLineAndExitTwoBeforeAnythingRuns) {
  write("bad.so", "not a library");
  for (const std::string& args : {std::string("sweep --plugin bad.so --seq 17 --out s.jsonl"),
                                  std::string("verify --plugin nope.so --seq 17"),
                                  std::string("list --plugin bad.so"),
                                  std::string("run --impl plugin.c_attention --seq 17")}) {
    const Result result = faprobe(args);
    EXPECT_EQ(result.status, 2) << args << "\n" << result.err;
    EXPECT_EQ(count_of(result.err, "\n"), 1u) << args << "\n" << result.err;
    EXPECT_EQ(result.out, "") << args;
  }
  EXPECT_FALSE(fs::exists(path("s.jsonl")));
  EXPECT_NE(faprobe("verify --plugin bad.so --seq 17").err.find("--plugin bad.so: cannot load the library"),
            std::string::npos);
}

// The entry points besides run: a crash in supports() or in workspace_bytes() at seq_k 64 costs that pair a
// failed record naming the entry point and the signal; the other pairs run, and --resume from a file that
// holds only the first record finishes the sweep instead of crashing where the sweep would have.
TEST_F(CliPlugins, ACrashInSupportsOrWorkspaceBytesIsOneFailedRecordAndResumeFinishes) {
  const std::string sweep_args = " --seq 32,64 --heads 2 --warmup 0 --min-samples 2 --min-time 0 --max-noise 100 --out s.jsonl";
  for (const auto& [kind, entry] : {std::pair{"supports_crashes", "supports()"},
                                    std::pair{"workspace_crashes", "workspace_bytes()"}}) {
    const std::string plugin = "--plugin '" + planted(kind) + "' --impl plugin." + kind + ",cpu.naive";
    fs::remove(path("s.jsonl"));
    const Result sweep = faprobe("sweep " + plugin + sweep_args);
    EXPECT_EQ(sweep.status, 1) << kind << sweep.out << sweep.err;
    const auto check = [&, kind = std::string(kind), entry = std::string(entry)] {
      std::ifstream lines(path("s.jsonl"));
      std::map<std::string, int> statuses;
      for (std::string line; std::getline(lines, line);) {
        const nlohmann::json record = nlohmann::json::parse(line);
        const std::string status = record["status"];
        ++statuses[status];
        if (status == "failed") {
          EXPECT_EQ(record["case"]["seq_k"], 64) << line;
          EXPECT_NE(record["reason"].get<std::string>().find("plugin." + kind + ": " + entry +
                                                              " crashed (signal 11, SIGSEGV)"),
                    std::string::npos) << line;
        }
      }
      // cpu.naive twice, the plugin's seq_k 32 ran (a mismatch: it writes nothing), its seq_k 64 failed
      EXPECT_EQ(statuses, (std::map<std::string, int>{{"ok", 2}, {"mismatch", 1}, {"failed", 1}})) << kind;
    };
    check();
    const std::string first = read_file(path("s.jsonl")).substr(0, read_file(path("s.jsonl")).find('\n') + 1);
    write("s.jsonl", first);
    const Result resumed = faprobe("sweep " + plugin + sweep_args + " --resume");
    EXPECT_EQ(resumed.status, 1) << kind << resumed.out << resumed.err;
    check();
  }
}

// A hang in supports() or workspace_bytes() is bounded by the isolate timeout.
TEST_F(CliPlugins, AHangInSupportsOrWorkspaceBytesIsBoundedByTheIsolateTimeout) {
  for (const auto& [kind, entry] : {std::pair{"supports_hangs", "supports()"},
                                    std::pair{"workspace_hangs", "workspace_bytes()"}}) {
    const Result verify = faprobe("verify --plugin '" + planted(kind) + "' --impl plugin." + kind +
                                  " --seq 32,64 --heads 2 --isolate-timeout 1 --json v.json");
    EXPECT_EQ(verify.status, 1) << kind << verify.out << verify.err;
    const nlohmann::json records = nlohmann::json::parse(read_file(path("v.json")))["records"];
    ASSERT_EQ(records.size(), 2u) << kind;
    EXPECT_EQ(records[0]["status"], "mismatch") << records[0].dump();
    EXPECT_EQ(records[1]["status"], "failed") << records[1].dump();
    EXPECT_NE(records[1]["reason"].get<std::string>().find(std::string(entry) + " did not return within 1 s"),
              std::string::npos) << records[1].dump();
  }
}

// A size a plugin reports is checked before it is used: 2^64 - 1 bytes of workspace would wrap the
// predicted memory around to a small number.
TEST_F(CliPlugins, AWorkspaceSizeThatWouldOverflowIsAFailedRecord) {
  const Result verify = faprobe("verify --plugin '" + planted("workspace_huge") +
                                "' --impl plugin.workspace_huge --seq 32 --heads 2 --json v.json");
  EXPECT_EQ(verify.status, 1) << verify.out << verify.err;
  const nlohmann::json record = nlohmann::json::parse(read_file(path("v.json")))["records"][0];
  EXPECT_EQ(record["status"], "failed") << record.dump();
  EXPECT_NE(record["reason"].get<std::string>().find("workspace_bytes() asked for 18446744073709551615 bytes"),
            std::string::npos) << record.dump();
}

// printf("dbg") without a newline, in supports() and in run(): isolated, the record still arrives (on its
// own descriptor); in this process, the JSON document on stdout still parses. The text goes to stderr.
TEST_F(CliPlugins, APluginsStdoutNeverMixesIntoRecordsOrDocuments) {
  for (const std::string isolation : {"--isolate", "--no-isolate"}) {
    const Result verify = faprobe("verify --plugin '" + planted("prints_stdout") +
                                  "' --impl plugin.prints_stdout --seq 16,32 --heads 1 --json - " + isolation);
    EXPECT_EQ(verify.status, 1) << isolation << verify.err;
    nlohmann::json document;
    ASSERT_NO_THROW(document = nlohmann::json::parse(verify.out)) << isolation << verify.out;
    ASSERT_EQ(document["records"].size(), 2u);
    for (const nlohmann::json& record : document["records"]) {
      EXPECT_EQ(record["status"], "mismatch") << isolation << record.dump();  // it ran: it writes nothing
    }
    EXPECT_NE(verify.err.find("dbg"), std::string::npos) << isolation << verify.err;
  }
}

// A plugin that writes 1 MiB to stderr per call: the parent keeps the last 64 KiB of each child's output,
// says how much it left out, and passes on no more.
TEST_F(CliPlugins, AChattyChildsOutputIsKeptAsABoundedTail) {
  const Result sweep = faprobe("sweep --plugin '" + planted("chatty_stderr") + "' --impl plugin.chatty_stderr "
                               "--seq 16 --heads 1 --warmup 0 --min-samples 8 --min-time 0 --max-noise 100 "
                               "--no-verify --json s.json");
  EXPECT_EQ(sweep.status, 0) << sweep.out << sweep.err.substr(0, 2000);
  EXPECT_LT(sweep.err.size(), std::size_t(100) << 10);  // 8 MiB written by the child
  EXPECT_NE(sweep.err.find("earlier bytes of the isolated child's stderr left out]"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(read_file(path("s.json")))["records"][0]["status"], "ok");
}

// A run() message that is not UTF-8 is stored with U+FFFD in every format, isolated and not; an input file
// whose name is not UTF-8 does not end `compare --json` with a JSON library error.
TEST_F(CliPlugins, TextThatIsNotUtf8IsStoredReplacedInEveryFormat) {
  const std::string replaced = "planted: bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD";
  for (const std::string isolation : {"--isolate", "--no-isolate"}) {
    const Result verify = faprobe("verify --plugin '" + planted("bad_utf8") + "' --impl plugin.bad_utf8 --seq 16 "
                                  "--heads 1 --out r.jsonl --json r.json --csv r.csv --md r.md " + isolation);
    EXPECT_EQ(verify.status, 1) << isolation << verify.err;
    EXPECT_EQ(verify.err.find("json.exception"), std::string::npos) << verify.err;
    const nlohmann::json record = nlohmann::json::parse(read_file(path("r.json")))["records"][0];
    EXPECT_EQ(record["status"], "failed");
    EXPECT_NE(record["reason"].get<std::string>().find("run returned 3: " + replaced), std::string::npos)
        << isolation << record.dump();
    EXPECT_NE(read_file(path("r.csv")).find(replaced), std::string::npos) << isolation;
    EXPECT_NE(read_file(path("r.md")).find(replaced), std::string::npos) << isolation;
    EXPECT_NE(read_file(path("r.jsonl")).find(replaced), std::string::npos) << isolation;
    fs::remove(path("r.jsonl"));
  }
  faprobe("verify --impl cpu.naive --seq 16 --heads 1 --out 'in\xff.jsonl'");
  fs::copy_file(path("in\xff.jsonl"), path("b.jsonl"));
  const Result compare = faprobe("compare 'in\xff.jsonl' b.jsonl --json c.json");
  EXPECT_EQ(compare.status, 0) << compare.err;
  EXPECT_NO_THROW(nlohmann::json::parse(read_file(path("c.json"))));
}

// A library that crashes the loader (a constructor that segfaults; a file cut short, which SIGBUSes ld.so)
// is one line naming it and exit 2, never a signal.
TEST_F(CliPlugins, ADamagedLibraryIsOneLineAndExitTwo) {
  const std::string example = read_file(kCAttention);
  write("cut.so", example.substr(0, 5000));
  for (const std::string& library : {planted("constructor_crashes"), path("cut.so").string()}) {
    const Result verify = faprobe("verify --plugin '" + library + "' --seq 16");
    EXPECT_EQ(verify.status, 2) << library << verify.err;
    EXPECT_EQ(count_of(verify.err, "\n"), 1u) << verify.err;
    EXPECT_NE(verify.err.find("--plugin " + library + ": "), std::string::npos) << verify.err;
  }
  const Result crashed = faprobe("list --plugin '" + planted("constructor_crashes") + "'");
  EXPECT_NE(crashed.err.find("loading the library crashed (signal 11, SIGSEGV)"), std::string::npos) << crashed.err;
}

// The README's "Benchmarking your own kernel": the one-line cc command, run here on the example's source as
// written, builds a library that verifies.
TEST_F(CliPlugins, TheReadmesOneLineBuildCommandBuildsAPluginThatVerifies) {
  const std::string readme = read_file(FAPROBE_SOURCE_DIR "/README.md");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(readme, match, std::regex(R"(\n(cc -std=c99 [^\n]*-shared[^\n]*)\n)")))
      << "no one-line cc command in the README";
  std::string command = match[1];
  ASSERT_NE(command.find("examples/plugins/c_attention.c"), std::string::npos) << command;
  ASSERT_NE(command.find("-o libc_attention.so"), std::string::npos) << command;
  const std::string build = "cd '" FAPROBE_SOURCE_DIR "' && " +
                            std::regex_replace(command, std::regex("-o libc_attention.so"),
                                               "-o '" + path("libc_attention.so").string() + "'") +
                            " > '" + path("cc.txt").string() + "' 2>&1";
  ASSERT_EQ(std::system(build.c_str()), 0) << build << "\n" << read_file(path("cc.txt"));
  const Result verify = faprobe("verify --plugin ./libc_attention.so --impl plugin.c_attention" + std::string(kOddShapes));
  EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
}

}  // namespace
}  // namespace faprobe
