// faprobe run: one implementation on one case, measured and verified like a sweep; --save DIR also writes
// the inputs and the output as q.npy k.npy v.npy o.npy (plus case.json) so another program can check them.
// The hidden `run --isolated-child JOB` is the child process of --isolate (runner.hpp): it runs the one
// pair JOB describes and prints its record; nothing else on the command line is read.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "model/errors.hpp"
#include "harness/npy.hpp"
#include "harness/output_files.hpp"

namespace faprobe::cli {
namespace {

struct RunCommandOptions {
  SettingsOptions settings;
  OutputOptions output;
  std::string save_dir;
  std::string isolated_child_job;  // hidden: this process is an --isolate child
};

const std::vector<std::string> kSavedFiles = {"q.npy", "k.npy", "v.npy", "o.npy", "case.json"};

void save_case(const Implementation& impl, const Case& c, const std::string& directory) {
  std::filesystem::create_directories(directory);
  auto prepared = impl.prepare(c);
  prepared->timed_run();
  const AttentionInputs* inputs = prepared->host_inputs();
  if (!inputs) throw UsageError(fmt::format("--save: {} does not expose its inputs on the host", impl.name()));
  write_npy(directory + "/q.npy", inputs->q);
  write_npy(directory + "/k.npy", inputs->k);
  write_npy(directory + "/v.npy", inputs->v);
  write_npy(directory + "/o.npy", prepared->output());
  std::ofstream(directory + "/case.json") << nlohmann::json{{"impl", impl.name()}, {"case", c}}.dump(2) << "\n";
  fmt::print(stderr, "saved q.npy k.npy v.npy o.npy case.json to {}\n", directory);
}

int run_run(RunCommandOptions& options) {
  if (!options.isolated_child_job.empty()) return run_isolated_child(options.isolated_child_job, std::cout);
  const SettingsSource source = settings_source(options.settings, nullptr, nullptr);
  const Plan plan = make_plan(source);
  if (options.settings.options.at("impl")->count() == 0 || plan.impls.size() != 1) {
    throw UsageError("run needs exactly one --impl NAME (see `faprobe list`)");
  }
  if (plan.cases.size() != 1) {
    throw UsageError(fmt::format("run takes one case, the axes give {}; use `faprobe sweep` for several",
                                 plan.cases.size()));
  }
  const Case& c = plan.cases.front();
  if (!options.save_dir.empty() && (c.paged() || c.varlen())) {
    throw UsageError("--save writes (batch, seq, heads, head_dim) tensors, which a paged or variable-length K/V "
                     "has not; drop --page-size / --seqlens");
  }
  check_save_directory(options.save_dir, kSavedFiles);  // with the other outputs: before anything is measured
  RunOptions run = make_run_options(plan, source, options.settings, options.output, /*timing=*/true);
  run.show_unsupported = true;
  const RunSummary summary = run_and_report(plan, run);
  if (!options.save_dir.empty() && !summary.records.empty()) {
    const Record& record = summary.records.back();
    if (record.status == Status::ok || record.status == Status::mismatch) {
      save_case(*find_implementation(plan.impls.front()), plan.cases.front(), options.save_dir);
    } else {
      fmt::print(stderr, "--save: nothing saved, the case did not run ({})\n", record.reason);
    }
  }
  return summary.exit_status();
}

}  // namespace

void setup_run(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<RunCommandOptions>();
  CLI::App* sub = app.add_subcommand("run", "one implementation on one case; --save DIR writes q/k/v/o as .npy");
  add_case_options(*sub, options->settings, options->output);
  sub->add_option("--save", options->save_dir, "directory for q.npy k.npy v.npy o.npy and case.json");
  sub->add_option("--isolated-child", options->isolated_child_job)->group("");  // hidden: see the top
  sub->callback([options, &exit_status] { exit_status = run_run(*options); });
}

}  // namespace faprobe::cli
