// faprobe run: one implementation on one case, measured and verified like a sweep; --save DIR also writes
// the inputs and the output as q.npy k.npy v.npy o.npy (plus case.json) so another program can check them;
// for a paged or variable-length case K and V as the KV cache flash-attention takes instead (k_cache.npy,
// v_cache.npy, block_table.npy when paged, cache_seqlens.npy; kv_cache_files.hpp).
// The hidden `run --isolated-child JOB` is the child process of --isolate (runner.hpp): it runs the one
// pair JOB describes and prints its record; nothing else on the command line is read.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/io/kv_cache_files.hpp"
#include "harness/io/npy.hpp"
#include "harness/io/output_files.hpp"
#include "harness/records/record.hpp"
#include "harness/run/isolation.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

struct RunCommandOptions {
  SettingsOptions settings;
  OutputOptions output;
  std::string save_dir;
  std::string isolated_child_job;  // hidden: this process is an --isolate child
};

// K and V as tensors (a contiguous case) or as a KV cache (paged or variable-length: kv_cache_files.hpp).
const std::vector<std::string> kKvFiles = {"k.npy", "v.npy", "k_cache.npy", "v_cache.npy", "block_table.npy",
                                           "cache_seqlens.npy"};
// Every file --save writes or replaces, checked before anything is measured.
std::vector<std::string> saved_files() {
  std::vector<std::string> names = {"q.npy", "o.npy", "case.json"};
  names.insert(names.end(), kKvFiles.begin(), kKvFiles.end());
  return names;
}

void save_case(const Implementation& impl, const Case& c, const std::string& directory) {
  std::filesystem::create_directories(directory);
  auto prepared = impl.prepare(c);
  prepared->poison_outputs();  // as before a checked run: what the run does not write is NaN in o.npy
  prepared->timed_run();
  const AttentionInputs* inputs = prepared->host_inputs();
  if (!inputs) throw UsageError(fmt::format("--save: {} does not expose its inputs on the host", impl.name()));
  std::vector<std::string> names{"q.npy"};
  write_npy(directory + "/q.npy", inputs->q);
  // K/V files of another layout left by an earlier --save into the same directory would be read with these
  // (scripts/check_npy.py takes k.npy when it is there, a pool when block_table.npy is), so they go first.
  for (const std::string& stale : kKvFiles) std::filesystem::remove(directory + "/" + stale);
  if (c.paged() || c.varlen()) {  // no (batch, seq_k, ...) K and V: the cache flash_attn_with_kvcache takes
    for (std::string& name : save_kv_cache(directory, c, *inputs)) names.push_back(std::move(name));
  } else {
    write_npy(directory + "/k.npy", inputs->k);
    write_npy(directory + "/v.npy", inputs->v);
    names.insert(names.end(), {"k.npy", "v.npy"});
  }
  write_npy(directory + "/o.npy", prepared->output());
  write_document(check_output("--save", directory + "/case.json", OutputUse::document),
                 json_text(nlohmann::json{{"impl", impl.name()}, {"case", c}}, 2) + "\n");
  names.insert(names.end(), {"o.npy", "case.json"});
  fmt::print(stderr, "saved {} to {}\n", fmt::join(names, " "), directory);
}

int run_run(RunCommandOptions& options) {
  if (!options.isolated_child_job.empty()) return run_isolated_child(options.isolated_child_job, std::cout);
  const CommandSettings settings = command_settings(options.settings);
  const SettingsSource source = settings_source(settings, nullptr, nullptr);
  Plan plan = make_plan(source);
  if (!settings.given("impl") || plan.impls.size() != 1) {
    throw UsageError("run needs exactly one --impl NAME (see `faprobe list`)");
  }
  if (plan.cases.size() != 1) {
    throw UsageError(fmt::format("run takes one case, the axes give {}; use `faprobe sweep` for several",
                                 plan.cases.size()));
  }
  const Case& c = plan.cases.front();
  // One implementation has no others to take turns with: its samples are taken as without --interleave.
  if (options.settings.interleave) fmt::print(stderr, "run: --interleave has no effect (run measures one implementation)\n");
  plan.measure.interleave = false;
  check_save_directory(options.save_dir, saved_files());  // with the other outputs: before anything is measured
  RunOptions run = make_run_options(plan, source, settings, options.output, /*timing=*/true);
  run.show_unsupported = true;
  const RunSummary summary = run_and_report(plan, run);
  if (!options.save_dir.empty() && !summary.records.empty()) {
    const Record& record = summary.records.back();
    if (record.status == Status::ok || record.status == Status::mismatch) {
      save_case(*find_implementation(plan.impls.front()), c, options.save_dir);
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
  sub->add_option("--save", options->save_dir,
                  "directory for q.npy k.npy v.npy o.npy and case.json (paged or variable-length: k_cache.npy "
                  "v_cache.npy [block_table.npy] cache_seqlens.npy instead of k.npy v.npy)");
  sub->add_option("--isolated-child", options->isolated_child_job)->group("");  // hidden: see the top
  sub->callback([options, &exit_status] { exit_status = run_run(*options); });
}

}  // namespace faprobe::cli
