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
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

struct SweepOptions {
  SettingsOptions settings;
  OutputOptions output;
};

std::string default_out_path() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &local);
  std::error_code error;
  std::filesystem::create_directories("faprobe-out", error);
  if (error) {
    throw UsageError(fmt::format("cannot create faprobe-out/ for the default --out ({}); give --out FILE",
                                 error.message()));
  }
  return fmt::format("faprobe-out/sweep-{}.jsonl", stamp);
}

int run_sweep(SweepOptions& options) {
  const SettingsSource source = settings_source(options.settings, kDefaultSweepConfig, kDefaultSweepConfigName);
  Plan plan = make_plan(source);
  narrow_to_this_machine(plan, /*verify=*/false);
  const std::vector<DeviceWorker> workers = plan_device_workers(plan, options.settings, /*timing=*/true);
  if (options.output.out_jsonl.empty() && !options.output.resume) options.output.out_jsonl = default_out_path();
  RunOptions run = make_run_options(plan, source, options.settings, options.output, /*timing=*/true);
  run.show_unsupported = options.settings.options.at("impl")->count() > 0;
  fmt::print(stderr, "sweep: {} cases × {} implementations{}; records stream to {}\n", plan.cases.size(),
             plan.impls.size(), plan.measure.interleave ? ", each case's sampled in rounds (interleaved)" : "",
             run.out_jsonl);
  const RunSummary summary = run_and_report(plan, run, workers);
  return summary.exit_status();
}

}  // namespace

void setup_sweep(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* sub = app.add_subcommand("sweep", "run every (implementation × case), verifying while measuring");
  add_case_options(*sub, options->settings, options->output);
  add_shard_option(*sub, options->settings);
  sub->callback([options, &exit_status] { exit_status = run_sweep(*options); });
}

}  // namespace faprobe::cli
