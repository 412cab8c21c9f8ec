// The run workflow, verify's check of files and list's support table, called directly (harness/commands/workflow.hpp,
// harness/commands/verify.hpp, harness/commands/listing.hpp) rather than through the binary: the settings a command line gave
// turned into a source, the plan narrowed to this machine and split over --devices' workers, --dry-run's
// table, verify's exit status; files written by an implementation checked, and the ways such a check fails
// or is refused; the support probes, merged reasons and compact rows of `faprobe list`.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/runtime/gpu.hpp"
#include "harness/commands/listing.hpp"
#include "harness/commands/verify.hpp"
#include "harness/commands/workflow.hpp"
#include "harness/io/npy.hpp"
#include "harness/plan/registry.hpp"
#include "model/errors.hpp"
#include "temp_dir_support.hpp"

namespace faprobe {
namespace {

// An environment variable set for one test, restored after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

CommandSettings given(std::vector<std::pair<std::string, std::string>> values) {
  CommandSettings settings;
  for (const auto& [key, text] : values) {
    std::string flag = "--" + key;
    for (char& ch : flag)
      if (ch == '_') ch = '-';
    settings.values[key] = {text, flag};
  }
  return settings;
}

// A tiny plan of cpu.naive: one case, verified quickly.
CommandSettings tiny_settings() {
  return given({{"impl", "cpu.naive"}, {"seq", "17"}, {"heads", "2"}, {"head_dim", "16"}, {"warmup", "0"},
                {"min_samples", "2"}, {"min_time", "0"}, {"max_noise", "100"}, {"max_time", "1"}});
}

TEST(Workflow, GivenValuesReplaceTheDefaultConfigAndSwitchesBecomeSettings) {
  const char* config = R"({"seq": 1024, "heads": 4})";
  // An axis given: the default config is not read at all.
  CommandSettings settings = given({{"seq", "17"}});
  settings.no_verify = true;
  settings.interleave = true;
  const SettingsSource source = settings_source(settings, config, "default");
  EXPECT_EQ(source.values().at("seq").text, "17");
  EXPECT_EQ(source.values().at("seq").origin, "--seq");
  EXPECT_EQ(source.values().count("heads"), 0u);
  EXPECT_EQ(source.values().at("verify").text, "false");
  EXPECT_EQ(source.values().at("verify").origin, "--no-verify");
  EXPECT_EQ(source.values().at("interleave").text, "true");
  // --impl alone narrows the default config instead of replacing it.
  const SettingsSource narrowed = settings_source(given({{"impl", "cpu.naive"}}), config, "default");
  EXPECT_EQ(narrowed.values().at("heads").text, "4");
  EXPECT_EQ(narrowed.values().at("impl").text, "cpu.naive");
}

TEST(Workflow, RepeatSettingIsOneWhenAbsentAndRefusesZero) {
  EXPECT_EQ(repeat_setting(SettingsSource{}), 1);
  SettingsSource source;
  source.set("repeat", "3", "--repeat");
  EXPECT_EQ(repeat_setting(source), 3);
  source.set("repeat", "0", "--repeat");
  EXPECT_THROW(repeat_setting(source), UsageError);
}

TEST(Workflow, NarrowsAPlanToWhatThisMachineRuns) {
  Plan plan;
  plan.impls = {"cpu.naive", "cuda.naive", "emu.naive"};
  plan.parts.push_back({plan.impls, {Case{}}});
  const bool has_gpu = !gpu::devices().empty();
  Plan sweep = plan;
  narrow_to_this_machine(sweep, /*verify=*/false);
  const std::vector<std::string> sweep_expected =
      has_gpu ? std::vector<std::string>{"cpu.naive", "cuda.naive"} : std::vector<std::string>{"cpu.naive"};
  EXPECT_EQ(sweep.impls, sweep_expected);
  EXPECT_EQ(sweep.parts.front().impls, sweep_expected);
  Plan verify = plan;
  narrow_to_this_machine(verify, /*verify=*/true);
  EXPECT_EQ(verify.impls, (has_gpu ? std::vector<std::string>{"cpu.naive", "cuda.naive"}
                                   : std::vector<std::string>{"cpu.naive", "emu.naive"}));
  // --impl keeps whatever it names.
  Plan named = plan;
  named.impls_named = true;
  narrow_to_this_machine(named, /*verify=*/false);
  EXPECT_EQ(named.impls, plan.impls);
}

TEST(Workflow, DeviceWorkersSplitThePlanAndDropTheParentsOutputs) {
  const ScopedEnv devices("FAPROBE_TEST_DEVICE_COUNT", "2");
  const char* argv[] = {"faprobe", "verify", "--devices", "all", "--out", "x.jsonl", "--resume", "--seq=17",
                        "--json=doc.json"};
  set_command_line(int(std::size(argv)), const_cast<char**>(argv));
  const SettingsSource source = settings_source(tiny_settings(), nullptr, nullptr);
  const Plan plan = make_plan(source);
  CommandSettings settings;
  EXPECT_TRUE(plan_device_workers(plan, settings, /*timing=*/false).empty());  // no --devices: no workers
  settings.devices = "all";
  const std::vector<DeviceWorker> workers = plan_device_workers(plan, settings, /*timing=*/false);
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].device, 0);
  EXPECT_EQ(workers[1].device, 1);
  EXPECT_EQ(workers[0].shard.index, 1);
  EXPECT_EQ(workers[1].shard.index, 2);
  EXPECT_EQ(workers[1].shard.count, 2);
  EXPECT_EQ(workers[0].argv, (std::vector<std::string>{"/proc/self/exe", "verify", "--seq=17"}));
  // Timed CPU implementations side by side would disturb each other: refused.
  EXPECT_THROW(plan_device_workers(plan, settings, /*timing=*/true), UsageError);
  settings.devices = "0,5";  // no device 5
  EXPECT_THROW(plan_device_workers(plan, settings, /*timing=*/false), UsageError);
  set_command_line(0, nullptr);
}

TEST(Workflow, InterleaveWithAnExplicitIsolateIsRefused) {
  const ScopedEnv calibration("FAPROBE_CALIBRATION_SECONDS", "0.01");
  CommandSettings settings = tiny_settings();
  settings.interleave = true;
  settings.isolate = true;
  const SettingsSource source = settings_source(settings, nullptr, nullptr);
  const Plan plan = make_plan(source);
  try {
    make_run_options(plan, source, settings, OutputOptions{}, /*timing=*/true, /*dry_run=*/true);
    FAIL() << "no UsageError";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("--isolate cannot be combined with --interleave"), std::string::npos)
        << error.what();
  }
  // Untimed (verify), interleaving is not used and isolation stands.
  const RunOptions untimed = make_run_options(plan, source, settings, OutputOptions{}, /*timing=*/false, true);
  EXPECT_EQ(untimed.isolate, std::optional<bool>(true));
}

TEST(Workflow, ResumeNeedsAnOutFile) {
  const ScopedEnv calibration("FAPROBE_CALIBRATION_SECONDS", "0.01");
  const CommandSettings settings = tiny_settings();
  const SettingsSource source = settings_source(settings, nullptr, nullptr);
  OutputOptions output;
  output.resume = true;
  EXPECT_THROW(make_run_options(make_plan(source), source, settings, output, /*timing=*/true), UsageError);
}

TEST(Workflow, DryRunTextHasEachPairTheSettingsAndTheTotal) {
  const ScopedEnv calibration("FAPROBE_CALIBRATION_SECONDS", "0.01");
  CommandSettings settings = tiny_settings();
  settings.values["seq"].text = "17,33";
  const SettingsSource source = settings_source(settings, nullptr, nullptr);
  const Plan plan = make_plan(source);
  const RunOptions options = make_run_options(plan, source, settings, OutputOptions{}, /*timing=*/true, true);
  EXPECT_FALSE(options.files) << "a dry run opens nothing";
  const std::string text = dry_run_text(plan, options, /*repeat=*/3);
  EXPECT_EQ(text.rfind("impl ", 0), 0u) << text;
  EXPECT_NE(text.find("cpu.naive"), std::string::npos) << text;
  EXPECT_NE(text.find("measure: warmup 0 min_samples 2 min_time 0 s max_time 1 s"), std::string::npos) << text;
  EXPECT_NE(text.find("2 pairs: 2 to measure, 0 skipped, 0 unsupported; predicted"), std::string::npos) << text;
  EXPECT_NE(text.find("over 3 processes (--repeat)"), std::string::npos) << text;
  EXPECT_NE(dry_run_text(plan, options).find("nothing was measured"), std::string::npos);
}

TEST(Workflow, AVerifyThatCheckedNothingFails) {
  RunSummary nothing;
  EXPECT_EQ(verify_exit_status(nothing), kExitFailed);
  nothing.interrupted = true;  // Ctrl-C has its own status: not this rule's
  EXPECT_EQ(verify_exit_status(nothing), nothing.exit_status());
  RunSummary checked;
  Record record;
  record.status = Status::ok;
  record.verify = VerifyResult{};
  record.verify->passed = true;
  checked.records.push_back(record);
  EXPECT_EQ(verify_exit_status(checked), kExitOk);
}

TEST(Workflow, RunAndReportVerifiesATinyPlan) {
  const ScopedEnv calibration("FAPROBE_CALIBRATION_SECONDS", "0.01");
  const CommandSettings settings = tiny_settings();
  const SettingsSource source = settings_source(settings, nullptr, nullptr);
  const Plan plan = make_plan(source);
  const RunOptions options = make_run_options(plan, source, settings, OutputOptions{}, /*timing=*/false);
  const RunSummary summary = run_and_report(plan, options);
  ASSERT_EQ(summary.records.size(), 1u);
  EXPECT_EQ(summary.records.front().status, Status::ok) << summary.records.front().reason;
  EXPECT_TRUE(summary.records.front().verify.has_value());
  EXPECT_EQ(verify_exit_status(summary), kExitOk);
}

TEST(Workflow, RunMetadataNamesTheCommandAndTheSchema) {
  const char* argv[] = {"faprobe", "sweep", "--seq", "17"};
  set_command_line(4, const_cast<char**>(argv));
  EXPECT_EQ(command_line(), "faprobe sweep --seq 17");
  const nlohmann::json metadata = run_metadata(nlohmann::json{{"threads", 1}});
  EXPECT_EQ(metadata.at("schema"), "faprobe/1");
  EXPECT_EQ(metadata.at("command"), "faprobe sweep --seq 17");
  EXPECT_EQ(metadata.at("rates").at("threads"), 1);
  EXPECT_EQ(metadata.at("time").get<std::string>().size(), std::string("2026-12-02T05:56:50Z").size());
  EXPECT_EQ(local_time_stamp().size(), std::string("20261207-044608").size());
  set_command_line(0, nullptr);
}

// verify --q --k --v --o on files that cpu.naive wrote for a small case.
class VerifyFilesTest : public test_support::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    c_.seq_q = c_.seq_k = 17;
    c_.heads = c_.kv_heads = 2;
    c_.head_dim = 16;
    const Implementation* impl = find_implementation("cpu.naive");
    ASSERT_NE(impl, nullptr);
    auto prepared = impl->prepare(c_);
    prepared->poison_outputs();
    prepared->timed_run();
    const AttentionInputs* inputs = prepared->host_inputs();
    ASSERT_NE(inputs, nullptr);
    write_npy(path("q.npy"), inputs->q);
    write_npy(path("k.npy"), inputs->k);
    write_npy(path("v.npy"), inputs->v);
    write_npy(path("o.npy"), prepared->output());
    files_ = {path("q.npy"), path("k.npy"), path("v.npy"), path("o.npy"), "", "", "", ""};
  }

  // o.npy with element `index` changed to `value`.
  void plant(std::int64_t index, float value) {
    HostTensor o = read_npy(path("o.npy"), "--o");
    o.set(index, value);
    write_npy(path("o.npy"), o);
  }

  Case c_;
  VerifyFiles files_;
};

TEST_F(VerifyFilesTest, AnOutputOfTheseInputsPasses) {
  const FileCheck check = check_files(files_, CommandSettings{});
  EXPECT_TRUE(check.result.passed) << check.result.note;
  EXPECT_GT(check.result.rows_checked, 0);
  EXPECT_EQ(check.c.seq_q, 17);
  EXPECT_EQ(check.c.heads, 2);
  EXPECT_EQ(check.c.head_dim, 16);
  EXPECT_EQ(check.c.dtype, DType::fp32);
  EXPECT_EQ(check.c.mask, Mask::none);
}

TEST_F(VerifyFilesTest, ANanInTheOutputIsAMismatchNamingItsElement) {
  plant(2 * 16 + 3, std::numeric_limits<float>::quiet_NaN());  // seq 1, head 0, dim 3
  const FileCheck check = check_files(files_, CommandSettings{});
  EXPECT_FALSE(check.result.passed);
  EXPECT_EQ(check.result.note, "--o " + path("o.npy") + ": NaN at [0, 1, 0, 3] (batch, seq, head, dim)");
}

TEST_F(VerifyFilesTest, TheMaskOfCaseJsonOrOfAFlagIsTheCaseChecked) {
  // The output was computed without a mask: checked as causal, it fails.
  Case causal = c_;
  causal.mask = Mask::causal;
  std::ofstream(path("case.json")) << nlohmann::json{{"impl", "cpu.naive"}, {"case", causal}}.dump();
  const FileCheck saved = check_files(files_, CommandSettings{});
  EXPECT_EQ(saved.c.mask, Mask::causal);
  EXPECT_FALSE(saved.result.passed);
  // --mask overrides case.json.
  const FileCheck flagged = check_files(files_, given({{"mask", "none"}}));
  EXPECT_EQ(flagged.c.mask, Mask::none);
  EXPECT_TRUE(flagged.result.passed) << flagged.result.note;
}

TEST_F(VerifyFilesTest, ShapesFromFlagsAndTensorsBesideACacheAreRefused) {
  EXPECT_THROW(check_files(files_, given({{"seq", "64"}})), UsageError);
  VerifyFiles both = files_;
  both.k_cache = path("k.npy");
  EXPECT_THROW(check_files(both, CommandSettings{}), UsageError);
  VerifyFiles missing = files_;
  missing.v.clear();
  EXPECT_THROW(check_files(missing, CommandSettings{}), UsageError);
}

TEST_F(VerifyFilesTest, RunVerifyWritesTheRecordAndReturnsTheVerdict) {
  VerifyRequest request;
  request.files = files_;
  request.output.out_jsonl = path("out.jsonl");
  EXPECT_EQ(run_verify(request), kExitOk);
  std::ifstream in(path("out.jsonl"));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const nlohmann::json record = nlohmann::json::parse(line);
  EXPECT_EQ(record.at("impl"), "external");
  EXPECT_EQ(record.at("device"), "files");
  EXPECT_EQ(record.at("status"), "ok");
  // A mismatch is exit status 1; --no-verify and --dry-run with files are refused.
  plant(0, read_npy(path("o.npy"), "--o").get(0) + 1.0f);
  request.output = OutputOptions{};
  EXPECT_EQ(run_verify(request), kExitFailed);
  request.settings.no_verify = true;
  EXPECT_THROW(run_verify(request), UsageError);
  request.settings.no_verify = false;
  request.dry_run = true;
  EXPECT_THROW(run_verify(request), UsageError);
}

// An implementation that refuses every case for one reason, and one that refuses some head dims.
class Refusing final : public Implementation {
 public:
  explicit Refusing(bool some) : some_(some) {}
  std::string name() const override { return some_ ? "test.some" : "test.none"; }
  std::string device() const override { return "test CPU"; }
  std::string supports(const Case& c) const override {
    if (!some_) return "no device for it";
    if (c.head_dim == 72 || c.head_dim == 80) return "head_dim " + std::to_string(c.head_dim) + " not built";
    return c.dtype == DType::fp8_e4m3 ? "fp8_e4m3 not built" : "";
  }
  std::uint64_t predicted_bytes(const Case&) const override { return 0; }
  double predicted_seconds(const Case&, const MachineRates&) const override { return 0; }
  std::unique_ptr<PreparedCase> prepare(const Case&) const override { return nullptr; }

 private:
  bool some_;
};

TEST(Listing, EveryCombinationIsProbedInOrder) {
  const std::vector<SupportProbe> probes = probe_support(Refusing(true));
  ASSERT_EQ(probes.size(), 4u * 2 * 3 * 2 * 8);  // dtype × mode × mask × aligned × head_dim
  EXPECT_EQ(probes[0].c.dtype, DType::fp32);
  EXPECT_EQ(probes[0].c.head_dim, 64);
  EXPECT_EQ(probes[1].c.head_dim, 72);
  EXPECT_EQ(probes[1].reason, "head_dim 72 not built");
  EXPECT_FALSE(probes[8].aligned);
  EXPECT_EQ(probes[8].c.seq_k, 1000);
  EXPECT_EQ(probes.back().c.dtype, DType::fp8_e4m3);
  EXPECT_EQ(probes.back().c.mode, Mode::decode);
  EXPECT_EQ(probes.back().c.seq_q, 1);
}

TEST(Listing, ReasonsThatDifferInTheHeadDimAreMerged) {
  const std::vector<std::string> reasons = distinct_reasons(probe_support(Refusing(true)));
  EXPECT_EQ(reasons, (std::vector<std::string>{"head_dim 72/80 not built", "fp8_e4m3 not built"}));
}

TEST(Listing, CompactRowsAndBlocksKeepEachRefusal) {
  const Refusing none(false), some(true);
  const CompactRow refused = compact_row(none, probe_support(none));
  EXPECT_EQ(refused.dtypes, "none: no device for it");
  EXPECT_EQ(support_block(none, probe_support(none)), "test.none (test CPU; timed)\n  ✗ every case: no device for it\n\n");
  const CompactRow row = compact_row(some, probe_support(some));
  EXPECT_EQ(row.dtypes, "fp32,fp16,bf16");
  EXPECT_EQ(row.head_dims, "64,96,100,128,192,256");
  EXPECT_EQ(row.masks, "all");
  EXPECT_EQ(row.modes, "prefill,decode");
  EXPECT_FALSE(row.partial);
  const std::string block = support_block(some, probe_support(some));
  EXPECT_NE(block.find("  fp32       ✓   ✗   ✗   ✓   ✓   ✓   ✓   ✓\n"), std::string::npos) << block;
  EXPECT_NE(block.find("  ✗ head_dim 72/80 not built\n"), std::string::npos) << block;
  const std::string table = compact_table({&none, &some}, {probe_support(none), probe_support(some)});
  EXPECT_NE(table.find("test.none"), std::string::npos) << table;
  EXPECT_NE(table.find("none: no device for it"), std::string::npos) << table;
}

TEST(Listing, TheJsonHasEveryProbeOfEveryImplementationAndTheTextNamesThem) {
  const Listing listing = gather_listing(/*variants=*/false);
  const nlohmann::json& entries = listing.json.at("implementations");
  ASSERT_EQ(entries.size(), implementations().size());
  for (const nlohmann::json& entry : entries) EXPECT_EQ(entry.at("support").size(), 4u * 2 * 3 * 2 * 8);
  EXPECT_FALSE(listing.json.contains("variants"));
  const std::string text = listing_text(listing, /*all=*/false, /*variants=*/false);
  EXPECT_EQ(text.rfind("devices:\n  cpu ", 0), 0u) << text;
  for (const auto& impl : implementations()) EXPECT_NE(text.find(impl->name()), std::string::npos) << impl->name();
  const std::string all = listing_text(listing, /*all=*/true, /*variants=*/false);
  EXPECT_NE(all.find("(head_dim)"), std::string::npos);
}

}  // namespace
}  // namespace faprobe
