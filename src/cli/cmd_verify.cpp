// faprobe verify: correctness only. With axes (or the embedded configs/ci-verify.json) it runs every
// available implementation once per case and checks it; with --q --k --v --o it checks an output that
// another program produced from those inputs. Exit 1 on any mismatch.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "default_config.hpp"
#include "harness/input_file.hpp"
#include "model/errors.hpp"
#include "harness/npy.hpp"
#include "harness/output_files.hpp"
#include "reference/check.hpp"
#include "harness/writers.hpp"

namespace faprobe::cli {
namespace {

struct VerifyOptions {
  SettingsOptions settings;
  OutputOptions output;
  std::string q, k, v, o;  // an output produced elsewhere
  CLI::Option* files_option = nullptr;
};

constexpr std::uint64_t kMaxCaseFileBytes = std::uint64_t(1) << 20;  // case.json is a few hundred bytes

int verify_files(const VerifyOptions& options) {
  for (const auto& [flag, path] : {std::pair{"--q", &options.q}, {"--k", &options.k}, {"--v", &options.v},
                                   {"--o", &options.o}}) {
    if (path->empty()) throw UsageError(fmt::format("verify with files needs --q, --k, --v and --o; {} is missing", flag));
  }
  // The outputs are checked before anything is read or checked (output_files.hpp).
  const OutputTargets targets =
      check_outputs({options.output.out_jsonl, options.output.json, options.output.csv, options.output.md});
  const HostTensor q = read_npy(options.q, "--q"), k = read_npy(options.k, "--k"), v = read_npy(options.v, "--v"),
                   o = read_npy(options.o, "--o");
  check_attention_shapes(q, k, v, o);
  const SettingsSource source = settings_source(options.settings, nullptr, nullptr);
  for (const auto& [key, value] : source.values()) {
    if (key != "mask" && key != "dtype" && key != "verify") {
      throw UsageError(fmt::format("{} cannot be combined with --q/--k/--v/--o (shapes come from the files; "
                                   "allowed: --mask, --dtype)", value.origin));
    }
  }
  Case c;
  c.batch = q.batch();
  c.seq_q = q.seq();
  c.heads = q.heads();
  c.head_dim = q.head_dim();
  c.seq_k = k.seq();
  c.kv_heads = k.heads();
  c.dtype = o.dtype();  // the precision the tolerance assumes; --dtype overrides (bf16 saved as float32)
  // `faprobe run --save` writes case.json beside o.npy: its dtype and mask are the defaults here.
  const std::filesystem::path saved_case = std::filesystem::path(options.o).parent_path() / "case.json";
  if (std::filesystem::exists(saved_case)) {
    try {
      const Case saved =
          nlohmann::json::parse(read_text_file(saved_case.string(), "", kMaxCaseFileBytes)).at("case").get<Case>();
      c.dtype = saved.dtype;
      c.mask = saved.mask;
      fmt::print(stderr, "verify: dtype {} and mask {} from {} (flags override)\n", to_string(c.dtype),
                 to_string(c.mask), saved_case.string());
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& error) {
      throw UsageError(fmt::format("{}: not a faprobe case file: {}", saved_case.string(), error.what()));
    }
  }
  if (const auto it = source.values().find("mask"); it != source.values().end()) {
    c.mask = parse_mask(it->second.text, it->second.origin);
  }
  if (const auto it = source.values().find("dtype"); it != source.values().end()) {
    c.dtype = parse_dtype(it->second.text, it->second.origin);
  }
  c.validate();
  Record record;
  record.impl = "external";
  record.device = "files";
  record.c = c;
  record.verify = check_output(c, TensorInputs(q, k, v), o);
  record.status = record.verify->passed ? Status::ok : Status::mismatch;
  record.reason = record.verify->note;
  TableWriter(targets.uses_stdout() ? std::cerr : std::cout).write(record);
  if (targets.out) JsonlWriter(std::make_unique<AppendFile>(*targets.out)).write(record);
  if (targets.json) write_document(*targets.json, json_document(run_metadata(nullptr), {record}));
  if (targets.csv) write_document(*targets.csv, csv_document({record}));
  if (targets.md) write_document(*targets.md, markdown_document({record}));
  return record.verify->passed ? kExitOk : kExitFailed;
}

int run_verify(VerifyOptions& options) {
  if (!options.q.empty() || !options.k.empty() || !options.v.empty() || !options.o.empty()) {
    return verify_files(options);
  }
  const SettingsSource source = settings_source(options.settings, kDefaultVerifyConfig, kDefaultVerifyConfigName);
  Plan plan = make_plan(source);
  narrow_to_this_machine(plan, /*verify=*/true);
  MeasureSettings measure = plan.measure;
  if (!measure.verify) throw UsageError("--no-verify makes `faprobe verify` check nothing");
  RunOptions run = make_run_options(plan, source, options.settings, options.output, /*timing=*/false);
  run.show_unsupported = options.settings.options.at("impl")->count() > 0;
  Plan verify_plan = plan;
  // verify's per-case budget is a minute unless --max-time says otherwise: nothing is sampled.
  if (!options.settings.options.at("max_time")->count()) verify_plan.measure.max_time_s = 60.0;
  fmt::print(stderr, "verify: {} cases × {} implementations\n", plan.cases.size(), plan.impls.size());
  const RunSummary summary = run_and_report(verify_plan, run);
  return summary.exit_status();
}

}  // namespace

void setup_verify(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<VerifyOptions>();
  CLI::App* sub = app.add_subcommand("verify", "check implementations (or output files) against the float64 reference");
  add_case_options(*sub, options->settings, options->output);
  sub->add_option("--q", options->q, "query .npy (batch, seq_q, heads, head_dim), float32 or float16");
  sub->add_option("--k", options->k, "key .npy (batch, seq_k, kv_heads, head_dim)");
  sub->add_option("--v", options->v, "value .npy, shaped like --k");
  sub->add_option("--o", options->o, "output .npy to check, shaped like --q");
  sub->callback([options, &exit_status] { exit_status = run_verify(*options); });
}

}  // namespace faprobe::cli
