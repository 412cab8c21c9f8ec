// The plugin loader and adapters (harness/plan/plugins.hpp, kernels/plugin/), in this process: the example C
// plugin registered and verified over odd shapes and every K/V layout, its planted off-by-one caught, and
// every planted plugin of tests/plugins/planted_plugin.c refused at load time with one line naming the file,
// or caught when it runs (a failing run, an output or LSE left unwritten, scratch memory counted); and the
// planted regression (c_attention_slow) run through the ABI directly: the same name, the same bits, and the
// rows it repeats really computed.
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "faprobe/plugin.h"
#include "harness/plan/plugins.hpp"
#include "harness/plan/registry.hpp"
#include "harness/run/runner.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;

std::string example(const std::string& name) {
  const std::string folder = name == "c_attention_slow" ? "/slow" : "";  // apart: it shares c_attention's name
  return std::string(FAPROBE_EXAMPLE_PLUGIN_DIR) + folder + "/libfaprobe_example_" + name + ".so";
}
std::string planted(const std::string& kind) {
  return std::string(FAPROBE_TEST_PLUGIN_DIR) + "/libfaprobe_planted_" + kind + ".so";
}

// The UsageError message of loading `path`, or "" when it loaded.
std::string load_error(const std::string& path) {
  try {
    load_plugins({{path, "--plugin"}});
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

// Every record of a verify (or, with `timing`, a quick timed) run of `config` in this process.
std::vector<Record> run_config(const std::string& config, bool timing = false) {
  SettingsSource source;
  source.load_config_text(config, "test");
  RunOptions options;
  options.timing = timing;
  std::ostringstream table;
  return run_plan(make_plan(source), options, table).records;
}

TEST(Plugins, NothingIsLoadedUntilALibraryIsNamed) {
  EXPECT_TRUE(loaded_plugins().empty());
  EXPECT_EQ(plugin_of("cpu.tiled"), nullptr);
  for (const std::string& name : implementation_names()) EXPECT_NE(name.rfind("plugin.", 0), 0u) << name;
}

TEST(Plugins, TheExampleRegistersOnceAndVerifiesOddShapesAndEveryLayout) {
  load_plugins({{example("c_attention"), "--plugin"}, {example("c_attention"), "FAPROBE_PLUGIN_PATH"}});
  ASSERT_EQ(loaded_plugins().size(), 1u);  // the same library twice is loaded once
  const Implementation* impl = find_implementation("plugin.c_attention");
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(impl->device(), "cpu");
  EXPECT_TRUE(impl->isolate_by_default());
  ASSERT_NE(plugin_of("plugin.c_attention"), nullptr);
  EXPECT_EQ(plugin_of("plugin.c_attention")->path, fs::canonical(example("c_attention")).string());
  EXPECT_EQ(plugin_of("plugin.c_attention")->abi_version, 1u);

  Case fp16;
  fp16.dtype = DType::fp16;
  EXPECT_EQ(impl->supports(fp16), "dtype must be fp32 or bf16");

  // GQA, causal with seq_q != seq_k both ways (rows that see no key), seq 1, head_dim 80, bf16; decode with
  // packed variable lengths and a paged cache.
  const std::vector<Record> records = run_config(R"({"impl": "plugin.c_attention", "parts": [
      {"seq": "1,17,100", "seq_q": "1,33", "heads": 8, "kv_heads": "8,2,1", "head_dim": "80,64",
       "mask": "none,causal", "dtype": "fp32,bf16"},
      {"mode": "decode", "seqlens": "1000,17,3", "heads": 4, "kv_heads": 2, "page_size": "0,16"}]})");
  ASSERT_EQ(records.size(), 2u * 2 * 3 * 2 * 2 * 3 + 2);
  for (const Record& record : records) {
    EXPECT_EQ(record.status, Status::ok) << record.c.label() << ": " << record.reason;
    ASSERT_TRUE(record.verify.has_value()) << record.c.label();
    EXPECT_TRUE(record.verify->passed) << record.c.label() << ": " << record.verify->note;
    EXPECT_TRUE(record.verify->lse_checked) << record.c.label();  // the example writes the LSE
    EXPECT_EQ(record.details.value("plugin", ""), plugin_of("plugin.c_attention")->path);
  }
}

TEST(Plugins, TheOffByOneCausalMaskIsCaughtAndOnlyWhereAMaskApplies) {
  load_plugins({{example("c_attention_off_by_one"), "--plugin"}});
  const std::vector<Record> records = run_config(R"({"impl": "plugin.c_attention_off_by_one", "seq": 64,
      "seq_q": 16, "heads": 2, "mask": "causal,none"})");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].status, Status::mismatch);
  EXPECT_FALSE(records[0].verify->passed);
  EXPECT_EQ(records[1].status, Status::ok) << records[1].verify->note;  // nothing masked, nothing wrong
}

TEST(Plugins, EachPlantedLoadingDefectIsOneLineNamingTheFile) {
  const std::pair<const char*, const char*> defects[] = {
      {"abi_version", "built for plugin ABI version 999, and this faprobe takes version 1"},
      {"no_entry", "not a faprobe plugin: it exports no faprobe_plugin_entry"},
      {"null_entry", "faprobe_plugin_entry returned NULL"},
      {"bad_name", "implementation 0 'has space': a name may hold letters, digits"},
      {"null_run", "implementation null_run: supports and run must both be set"},
      {"bad_device", "implementation bad_device: device 7 is not FAPROBE_DEVICE_CPU (0) or FAPROBE_DEVICE_CUDA (1)"},
      {"twice", "lists plugin.twice twice"},
  };
  const std::size_t loaded_before = loaded_plugins().size(), registered_before = implementations().size();
  for (const auto& [kind, expected] : defects) {
    const std::string message = load_error(planted(kind));
    EXPECT_NE(message.find("--plugin " + planted(kind) + ": "), std::string::npos) << kind << ": " << message;
    EXPECT_NE(message.find(expected), std::string::npos) << kind << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_NE(load_error("no/such/plugin.so").find("--plugin no/such/plugin.so: no such file"), std::string::npos);
  EXPECT_NE(load_error(FAPROBE_TEST_PLUGIN_DIR).find("not a file"), std::string::npos);
  EXPECT_NE(load_error(std::string(FAPROBE_SOURCE_DIR) + "/README.md").find("cannot load the library"),
            std::string::npos);
  // All or nothing: none of them registered anything (not even the first of TWICE's two).
  EXPECT_EQ(loaded_plugins().size(), loaded_before);
  EXPECT_EQ(implementations().size(), registered_before);
}

TEST(Plugins, ANameTakenByAnotherLibraryIsRefusedNamingIt) {
  load_plugins({{example("c_attention"), "--plugin"}});
  const fs::path copy = fs::temp_directory_path() / ("faprobe_plugin_copy_" + std::to_string(::getpid()) + ".so");
  fs::copy_file(example("c_attention"), copy, fs::copy_options::overwrite_existing);
  const std::string message = load_error(copy.string());
  fs::remove(copy);
  EXPECT_NE(message.find("plugin.c_attention is already registered by " + fs::canonical(example("c_attention")).string()),
            std::string::npos) << message;
}

TEST(Plugins, ARunThatFailsIsAFailedRecordWithThePluginsMessage) {
  load_plugins({{planted("run_fails"), "--plugin"}});
  const std::vector<Record> records = run_config(R"({"impl": "plugin.run_fails", "seq": 16, "heads": 1})");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, Status::failed);
  EXPECT_NE(records[0].reason.find("plugin.run_fails: run returned 3: planted: the kernel refused to launch"),
            std::string::npos) << records[0].reason;
}

TEST(Plugins, AnOutputLeftUnwrittenFailsTheCheck) {
  load_plugins({{planted("writes_nothing"), "--plugin"}});
  const std::vector<Record> records = run_config(R"({"impl": "plugin.writes_nothing", "seq": 16, "heads": 1})");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, Status::mismatch);
  EXPECT_NE(records[0].verify->note.find("non-finite output (NaN)"), std::string::npos) << records[0].verify->note;
}

TEST(Plugins, AClaimedLseLeftUnwrittenFailsTheLseCheck) {
  load_plugins({{planted("skips_lse"), "--plugin"}});
  const std::vector<Record> records = run_config(R"({"impl": "plugin.skips_lse", "seq": 16, "heads": 1})");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, Status::mismatch);
  EXPECT_TRUE(records[0].verify->lse_checked);
  EXPECT_TRUE(std::isnan(records[0].verify->lse_max_abs_diff)) << records[0].verify->lse_max_abs_diff;
}

TEST(Plugins, ScratchMemoryFromTheAllocatorCountsAsWorkspace) {
  load_plugins({{planted("allocates"), "--plugin"}});
  const std::vector<Record> records = run_config(R"({"impl": "plugin.allocates", "seq": 16, "heads": 1})");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_GE(records[0].memory.workspace_bytes, std::uint64_t(1) << 20);
  EXPECT_GE(records[0].memory.peak_bytes, std::uint64_t(1) << 20);
}

// The implementation of an example library, opened in this process by dlopen (not registered with faprobe, so
// that two libraries with one name can both be run), and the outputs of its run on one small causal GQA case.
struct ExampleRun {
  void* library = nullptr;
  std::string name;
  std::vector<float> o, lse;
};

ExampleRun run_example_directly(const std::string& name) {
  ExampleRun result;
  result.library = dlopen(example(name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (result.library == nullptr) throw std::runtime_error(dlerror());
  const auto entry = reinterpret_cast<faprobe_plugin_entry_fn>(dlsym(result.library, FAPROBE_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) throw std::runtime_error(name + ": no entry point");
  const faprobe_implementation& impl = entry()->implementations[0];
  result.name = impl.name;

  faprobe_case c{};  // fp32 prefill, contiguous K/V
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 33;
  c.seq_k = 100;
  c.head_dim = 16;
  c.mask = FAPROBE_MASK_CAUSAL;
  c.scale = 0.25f;  // 1 / sqrt(head_dim)
  c.fp8_scale = 1.0f;
  std::vector<float> q(std::size_t(c.batch * c.seq_q * c.heads * c.head_dim));
  std::vector<float> k(std::size_t(c.batch * c.seq_k * c.kv_heads * c.head_dim)), v(k.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = float(std::sin(0.37 * double(i)));
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = float(std::cos(0.11 * double(i)));
    v[i] = float(std::sin(0.07 * double(i) + 1));
  }
  const std::vector<std::int32_t> seq_starts = {0, 100, 200};
  std::vector<unsigned char> workspace(std::size_t(impl.workspace_bytes(&impl, &c)));
  result.o.assign(q.size(), NAN);
  result.lse.assign(std::size_t(c.batch * c.heads * c.seq_q), NAN);
  faprobe_tensors tensors{};
  tensors.q = q.data();
  tensors.k = k.data();
  tensors.v = v.data();
  tensors.o = result.o.data();
  tensors.lse = result.lse.data();
  tensors.kv_rows = c.batch * c.seq_k;
  tensors.seq_starts = seq_starts.data();
  tensors.workspace = workspace.data();
  tensors.workspace_bytes = workspace.size();
  char error[256] = "";
  faprobe_run_context context{};
  context.threads = 1;
  context.error = error;
  context.error_size = sizeof error;
  if (impl.supports(&impl, &c) != nullptr || impl.run(&impl, &c, &tensors, &context) != 0) {
    throw std::runtime_error(name + ": " + error);
  }
  return result;
}

TEST(Plugins, ThePlantedSlowdownRepeatsItsShareOfRowsWithTheSameResultsAndName) {
  using RowsRepeated = std::uint64_t (*)();
  const ExampleRun base = run_example_directly("c_attention");
  EXPECT_EQ(dlsym(base.library, "faprobe_example_rows_repeated"), nullptr);  // the normal build exports nothing else
  const ExampleRun slow = run_example_directly("c_attention_slow");
  const auto rows_repeated = reinterpret_cast<RowsRepeated>(dlsym(slow.library, "faprobe_example_rows_repeated"));
  ASSERT_NE(rows_repeated, nullptr);
  // A second run in the same library, counted from here: 2 · 33 · 4 = 264 rows, 15 % of them, floor(39.6).
  const std::uint64_t before = rows_repeated();
  const ExampleRun again = run_example_directly("c_attention_slow");
  EXPECT_EQ(rows_repeated() - before, 39u);
  EXPECT_EQ(slow.name, "c_attention");  // `faprobe ab` loads both under one implementation name
  EXPECT_EQ(slow.name, base.name);
  // Computed twice, written twice, the same bits: as correct as the base (`verify` in test_cli_plugins).
  ASSERT_EQ(slow.o.size(), base.o.size());
  EXPECT_EQ(std::memcmp(slow.o.data(), base.o.data(), base.o.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(slow.lse.data(), base.lse.data(), base.lse.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(again.o.data(), base.o.data(), base.o.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace faprobe
