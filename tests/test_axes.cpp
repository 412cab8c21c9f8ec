// Axes and configs: expansion into cases, flags overriding configs, and errors naming file, key, line.
#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "harness/io/progress.hpp"
#include "harness/plan/axes.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

std::string usage_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Axes, DefaultsGiveOneCaseForEveryImplementation) {
  const Plan plan = make_plan(SettingsSource{});
  ASSERT_EQ(plan.cases.size(), 1u);
  EXPECT_EQ(plan.cases[0].seq_q, 1024);
  EXPECT_EQ(plan.cases[0].kv_heads, plan.cases[0].heads);
  EXPECT_GE(plan.impls.size(), 4u);
}

TEST(Axes, ProductInSweepOrderWithDecodeAndGqa) {
  SettingsSource source;
  source.set("seq", "256..1024", "--seq");
  source.set("heads", "8", "--heads");
  source.set("kv_heads", "8,2", "--kv-heads");
  source.set("mode", "prefill,decode", "--mode");
  source.set("impl", "cpu.tiled,cpu.naive", "--impl");
  const Plan plan = make_plan(source);
  ASSERT_EQ(plan.cases.size(), 12u);
  EXPECT_EQ(plan.cases[0].seq_k, 256);  // seq varies fastest
  EXPECT_EQ(plan.cases[1].seq_k, 512);
  EXPECT_EQ(plan.cases[3].kv_heads, 2);
  EXPECT_EQ(plan.cases[6].mode, Mode::decode);
  EXPECT_EQ(plan.cases[6].seq_q, 1);
  EXPECT_EQ(plan.impls, (std::vector<std::string>{"cpu.naive", "cpu.tiled"}));  // registry order
}

TEST(Axes, SeqlensSetOneCaseOfItsLengthsAndPageSizesSweep) {
  SettingsSource source;
  source.set("mode", "decode", "--mode");
  source.set("seqlens", "1000,17,17,32k", "--seqlens");
  source.set("page_size", "0,16..64", "--page-size");
  source.set("impl", "cpu.decode-splitk", "--impl");
  const Plan plan = make_plan(source);
  ASSERT_EQ(plan.cases.size(), 4u);  // page sizes 0, 16, 32, 64
  EXPECT_EQ(plan.cases[0].seqlens, (std::vector<std::int64_t>{1000, 17, 17, 32768})) << "repeats kept";
  EXPECT_EQ(plan.cases[0].batch, 4);
  EXPECT_EQ(plan.cases[0].seq_k, 32768);
  EXPECT_EQ(plan.cases[3].page_size, 64);
  source.set("batch", "2", "--batch");
  EXPECT_NE(usage_error([&] { make_plan(source); }).find("--seqlens and --batch"), std::string::npos);
  SettingsSource bad_page;
  bad_page.set("mode", "decode", "--mode");
  bad_page.set("page_size", "24", "--page-size");
  EXPECT_NE(usage_error([&] { make_plan(bad_page); }).find("--page-size must be 0"), std::string::npos);
}

TEST(Axes, ConfigKeysAcceptNumbersArraysAndStringsAndFlagsOverride) {
  SettingsSource source;
  source.load_config_text(R"({"seq": [17, 129], "head-dim": 80, "dtype": "fp16,bf16", "mask": "causal",
                              "min_samples": 3, "max_time": 2.5, "description": "test"})", "test.json");
  source.set("dtype", "fp32", "--dtype");
  const Plan plan = make_plan(source);
  ASSERT_EQ(plan.cases.size(), 2u);
  EXPECT_EQ(plan.cases[1].seq_k, 129);
  EXPECT_EQ(plan.cases[0].head_dim, 80);
  EXPECT_EQ(plan.cases[0].dtype, DType::fp32);
  EXPECT_EQ(plan.measure.min_samples, 3);
  EXPECT_DOUBLE_EQ(plan.measure.max_time_s, 2.5);
}

TEST(Axes, ErrorsNameTheFileKeyAndPosition) {
  EXPECT_NE(usage_error([] { SettingsSource().load_config_text("{\"seq\": 512,\n  \"heads\": }", "bad.json"); })
                .find("line 2, column"),
            std::string::npos);
  EXPECT_NE(usage_error([] { SettingsSource().load_config_text(R"({"seq": 1e999})", "big.json"); })
                .find("big.json: invalid JSON: number overflow parsing '1e999'"),
            std::string::npos);  // found by the config fuzzer: it escaped as nlohmann's out_of_range, exit 1
  EXPECT_NE(usage_error([] { SettingsSource().load_config_text(R"({"sequence": 512})", "bad.json"); })
                .find("unknown key \"sequence\""),
            std::string::npos);
  EXPECT_NE(usage_error([] { SettingsSource().load_config_text(R"({"seq": {"a": 1}})", "bad.json"); })
                .find("bad.json: \"seq\""),
            std::string::npos);
  EXPECT_NE(usage_error([] { SettingsSource().load_config_text("[1, 2]", "bad.json"); }).find("JSON object"),
            std::string::npos);
  EXPECT_NE(usage_error([] { SettingsSource().load_config_file("no/such/file.json"); }).find("cannot open"),
            std::string::npos);
  auto plan_error = [](const std::string& key, const std::string& value) {
    SettingsSource source;
    source.set(key, value, "--" + key);
    return usage_error([&] { make_plan(source); });
  };
  EXPECT_NE(plan_error("impl", "cpu.fast").find("unknown implementation 'cpu.fast' (allowed: cpu.naive"),
            std::string::npos);
  EXPECT_NE(plan_error("head_dim", "0").find("below the minimum"), std::string::npos);
  EXPECT_NE(plan_error("kv_heads", "3").find("does not divide"), std::string::npos);
  EXPECT_NE(plan_error("dtype", "fp64").find("allowed: fp32, fp16, bf16"), std::string::npos);
  EXPECT_NE(plan_error("mask", "sliding").find("allowed: none, causal"), std::string::npos);
  EXPECT_NE(plan_error("seq", "512..64").find("empty"), std::string::npos);
  EXPECT_NE(plan_error("verify", "maybe").find("not a boolean"), std::string::npos);
  EXPECT_NE(plan_error("mem_limit", "lots").find("not a size"), std::string::npos);
}

// A config that gives a setting twice is refused, whichever way the key is spelled, in parts too.
TEST(Axes, DuplicateKeysAreAnErrorNamingTheKey) {
  EXPECT_NE(usage_error([] { SettingsSource().load_config_text(R"({"seq": 64, "seq": 128})", "dup.json"); })
                .find("dup.json: duplicate key \"seq\""),
            std::string::npos);
  EXPECT_NE(usage_error([] { SettingsSource().load_config_text(R"({"seq_q": 3, "seq-q": 4})", "dup.json"); })
                .find("duplicate key \"seq-q\" (the same setting as \"seq_q\")"),
            std::string::npos);
  EXPECT_NE(usage_error([] {
              SettingsSource().load_config_text(R"({"parts": [{"heads": 2}, {"heads": 2, "heads": 4}]})", "p.json");
            }).find("duplicate key \"heads\""),
            std::string::npos);
  // The same key in two objects is not a duplicate.
  SettingsSource fine;
  fine.load_config_text(R"({"heads": 2, "parts": [{"heads": 4}, {"heads": 8}]})", "ok.json");
  EXPECT_EQ(make_plan(fine).parts.size(), 2u);
}

// A plan whose size is absurd is refused with its size and the flags that make it, before a case is made.
TEST(Axes, AbsurdPlansAreRefusedWithTheirSizeAndTheirAxes) {
  SettingsSource source;
  source.set("seq", "1..60000:+1", "--seq");
  source.set("heads", "1..64:+1", "--heads");
  const auto start = std::chrono::steady_clock::now();
  const std::string message = usage_error([&] { make_plan(source); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_NE(message.find("the plan has "), std::string::npos) << message;
  EXPECT_NE(message.find("at most 1000000: --seq (60000 values) × --heads (64 values) × "), std::string::npos)
      << message;
  // The limit is the plan's, in pairs: a small limit refuses a small product.
  SettingsSource small;
  small.set("impl", "cpu.naive,cpu.tiled", "--impl");
  small.set("seq", "1..6:+1", "--seq");
  EXPECT_EQ(make_plan(small, PlanLimits{12}).size(), 12u);
  EXPECT_NE(usage_error([&] { make_plan(small, PlanLimits{11}); }).find("12 (implementation, case) pairs"),
            std::string::npos);
}

// A flag that changes no case is noted: --seq-q when every case is a decode case; not when one is prefill.
TEST(Axes, SeqQWithOnlyDecodeCasesIsNoted) {
  SettingsSource decode;
  decode.set("mode", "decode", "--mode");
  decode.set("seq_q", "17", "--seq-q");
  const Plan plan = make_plan(decode);
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_EQ(plan.notes[0], "--seq-q has no effect: a decode case has one query row");
  decode.set("mode", "prefill,decode", "--mode");
  EXPECT_TRUE(make_plan(decode).notes.empty());
}

// Ctrl-C during the expansion of a plan stops it at once.
TEST(Axes, AnInterruptStopsThePlanExpansion) {
  SettingsSource source;
  source.set("seq", "1..1000:+1", "--seq");
  request_interrupt();
  EXPECT_THROW(make_plan(source), Interrupted);
  clear_interrupt();
  EXPECT_EQ(make_plan(source).cases.size(), 1000u);
}

TEST(Axes, ShippedConfigsParse) {
  int configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(FAPROBE_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    ++configs;
    SettingsSource source;
    source.load_config_file(entry.path().string());
    const Plan plan = make_plan(source);
    EXPECT_FALSE(plan.cases.empty()) << entry.path();
    for (const PlanPart& part : plan.parts) EXPECT_FALSE(part.impls.empty()) << entry.path();
  }
  EXPECT_GE(configs, 7);  // cpu-default, ci-verify, seed-table, decode, gpu-verify, h200-quick, seed-table-gpu
}

// "parts": each part is the config's axes overridden by the part's; flags override every part; a part
// names implementations by prefix; a part may not set a measurement setting.
TEST(Axes, ConfigPartsTieAxesTogetherAndFlagsOverrideThem) {
  SettingsSource source;
  source.load_config_text(R"({"heads": 2, "head_dim": 64, "parts": [
      {"impl": "cpu.*", "seq": 256, "batch": 4},
      {"impl": "emu.fa1", "seq": "512,1024", "batch": 1, "dtype": "fp16"}]})", "parts.json");
  Plan plan = make_plan(source);
  ASSERT_EQ(plan.parts.size(), 2u);
  EXPECT_EQ(plan.parts[0].impls, (std::vector<std::string>{"cpu.naive", "cpu.tiled", "cpu.decode", "cpu.decode-splitk"}));
  ASSERT_EQ(plan.parts[0].cases.size(), 1u);
  EXPECT_EQ(plan.parts[0].cases[0].batch, 4);
  EXPECT_EQ(plan.parts[0].cases[0].heads, 2);  // from the config's own axes
  EXPECT_EQ(plan.parts[1].impls, (std::vector<std::string>{"emu.fa1"}));
  ASSERT_EQ(plan.parts[1].cases.size(), 2u);
  EXPECT_EQ(plan.parts[1].cases[1].seq_k, 1024);
  EXPECT_EQ(plan.parts[1].cases[1].dtype, DType::fp16);
  EXPECT_EQ(plan.cases.size(), 3u);
  EXPECT_EQ(plan.size(), 4u + 2u);
  EXPECT_FALSE(plan.impls_named);  // a config's "impl" is not the command line's --impl

  source.set("head_dim", "128", "--head-dim");  // a flag wins over every part
  source.set("impl", "cpu.tiled,emu.fa1", "--impl");
  plan = make_plan(source);
  EXPECT_TRUE(plan.impls_named);
  for (const PlanPart& part : plan.parts) {
    EXPECT_EQ(part.impls.size(), 2u);
    for (const Case& c : part.cases) EXPECT_EQ(c.head_dim, 128);
  }

  SettingsSource bad;
  EXPECT_THROW(bad.load_config_text(R"({"parts": [{"max_time": 3}]})", "bad.json"), UsageError);
  EXPECT_THROW(bad.load_config_text(R"({"parts": []})", "bad.json"), UsageError);
  SettingsSource unknown;
  unknown.load_config_text(R"({"parts": [{"impl": "gpu.*"}]})", "unknown.json");
  EXPECT_THROW(make_plan(unknown), UsageError);
}

}  // namespace
}  // namespace faprobe
