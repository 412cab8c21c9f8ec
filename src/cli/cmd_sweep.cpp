// faprobe sweep: every (implementation × case), verified while measured. Without axes it runs the default
// sweep (configs/cpu-default.json). Records stream to --out (default: faprobe-out/sweep-<time>.jsonl).
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "default_config.hpp"
#include "harness/plan/shard.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

struct SweepOptions {
  SettingsOptions settings;
  OutputOptions output;
  bool dry_run = false;
};

std::string default_out_path() {
  std::error_code error;
  std::filesystem::create_directories("faprobe-out", error);
  if (error) {
    throw UsageError(fmt::format("cannot create faprobe-out/ for the default --out ({}); give --out FILE",
                                 error.message()));
  }
  return fmt::format("faprobe-out/sweep-{}.jsonl", local_time_stamp());
}

int run_sweep(SweepOptions& options) {
  const CommandSettings settings = command_settings(options.settings);
  const SettingsSource source = settings_source(settings, kDefaultSweepConfig, kDefaultSweepConfigName);
  Plan plan = make_plan(source);
  narrow_to_this_machine(plan, /*verify=*/false);
  const std::vector<DeviceWorker> workers = plan_device_workers(plan, settings, /*timing=*/true);
  const int repeat = repeat_setting(source);
  // --dry-run: the plan (this shard's, with --shard) as harness/commands/workflow.hpp's print_dry_run shows
  // it, from the rates measured now; nothing is measured or written. `faprobe ab` compares its two sides'
  // plans with it.
  if (options.dry_run) {
    print_dry_run(plan, make_run_options(plan, source, settings, options.output, /*timing=*/true,
                                         /*dry_run=*/true),
                  repeat);
    return kExitOk;
  }
  if (options.output.out_jsonl.empty() && !options.output.resume) options.output.out_jsonl = default_out_path();
  RunOptions run = make_run_options(plan, source, settings, options.output, /*timing=*/true);
  run.show_unsupported = settings.given("impl");
  fmt::print(stderr, "sweep: {} cases × {} implementations{}{}; records stream to {}\n", plan.cases.size(),
             plan.impls.size(), plan.measure.interleave ? ", each case's sampled in rounds (interleaved)" : "",
             repeat > 1 ? fmt::format(", each pair in {} processes (--repeat)", repeat) : "", run.out_jsonl);
  // A round is this sweep in a process of its own, once over the plan: outputs and --resume are the round's,
  // and --repeat 1 overrides a config's "repeat".
  std::vector<std::string> round_argv;
  if (repeat > 1) {
    round_argv = this_command_without({"--out", "--json", "--csv", "--md", "--repeat"}, {"--resume"});
    round_argv.insert(round_argv.end(), {"--repeat", "1"});
  }
  const RunSummary summary = run_and_report(plan, run, workers, repeat, round_argv);
  return summary.exit_status();
}

}  // namespace

void setup_sweep(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* sub = app.add_subcommand("sweep", "run every (implementation × case), verifying while measuring");
  add_case_options(*sub, options->settings, options->output);
  add_shard_option(*sub, options->settings);
  sub->add_flag("--dry-run", options->dry_run,
                "print the plan (each pair's predicted time and memory, and whether it is measured, skipped or "
                "unsupported, and why) and the predicted total, then exit without measuring");
  add_value(*sub, options->settings, "repeat",
            "measure every pair in N processes, in rounds over the plan (process 1 runs each pair once, then "
            "process 2, ...); records keep each process's summary in time_s.runs (default 1)");
  sub->callback([options, &exit_status] { exit_status = run_sweep(*options); });
}

}  // namespace faprobe::cli
