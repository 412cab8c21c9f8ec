// faprobe ab: BASE and NEW measured in interleaved rounds of processes on this machine, then compared with
// the rounds paired; exit 1 on a regression, as compare. The design: harness/analysis/ab.hpp; the statistics:
// harness/analysis/compare.hpp.
//
//   faprobe ab --base ./old/faprobe --config configs/ci-gate.json
//   faprobe ab --base-plugin old.so --new-plugin new.so --impl plugin.example --seq 512,2048
//   faprobe ab --base-env FAPROBE_MAX_CPU_ISA=portable --repeat 16 --seq 1024
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/analysis/ab.hpp"
#include "harness/analysis/compare.hpp"
#include "harness/commands/result_documents.hpp"
#include "harness/io/output_files.hpp"
#include "harness/io/range.hpp"
#include "harness/records/record.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

namespace fs = std::filesystem;

struct AbOptions {
  std::string base, next, base_plugin, new_plugin;
  std::vector<std::string> base_env, new_env;
  std::string repeat = "10", out_dir, threshold = "5", alpha = "0.01", md, json;
  bool resume = false;
};

// A faprobe program for a side; default: this one.
std::string side_executable(const std::string& given, const char* flag) {
  if (given.empty()) {
    std::error_code error;
    const fs::path self = fs::read_symlink("/proc/self/exe", error);
    return error ? std::string("/proc/self/exe") : self.string();
  }
  std::error_code error;
  const fs::path path = fs::absolute(given, error);
  if (error || !fs::is_regular_file(path, error) || access(path.c_str(), X_OK) != 0) {
    throw UsageError(fmt::format("{} {}: not an executable file (allowed: a faprobe program, e.g. "
                                 "./old/build/release/faprobe)",
                                 flag, given));
  }
  return path.string();
}

std::string side_plugin(const std::string& given, const char* flag) {
  if (given.empty()) return "";
  std::error_code error;
  const fs::path path = fs::absolute(given, error);
  if (error || !fs::is_regular_file(path, error)) {
    throw UsageError(fmt::format("{} {}: no such file (allowed: a plugin library, include/faprobe/plugin.h)", flag, given));
  }
  return path.string();
}

std::vector<std::pair<std::string, std::string>> side_environment(const std::vector<std::string>& given, const char* flag) {
  std::vector<std::pair<std::string, std::string>> environment;
  for (const std::string& item : given) {
    const std::size_t equals = item.find('=');
    const std::string name = item.substr(0, equals);
    const bool valid_name = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                            name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
                                std::string::npos;
    if (equals == std::string::npos || !valid_name) {
      throw UsageError(fmt::format("{} '{}': expected NAME=VALUE (a variable name of letters, digits and _)", flag, item));
    }
    environment.emplace_back(name, item.substr(equals + 1));
  }
  return environment;
}

int run_ab_command(const AbOptions& options, const std::vector<std::string>& sweep_args) {
  // The sweep's own outputs are ab's to choose: each side's records go to --out-dir.
  for (const std::string& argument : sweep_args) {
    const std::string flag = argument.substr(0, argument.find('='));
    if (flag == "--out" || flag == "--csv" || flag == "--dry-run") {
      throw UsageError(fmt::format("ab: {} is not a flag ab passes to the sides' sweeps (ab writes each side's records "
                                   "to --out-dir: base.jsonl, new.jsonl; allowed: the axes and measurement flags of "
                                   "sweep)",
                                   flag));
    }
  }
  AbRun run;
  run.base = {"BASE", "base", side_executable(options.base, "--base"), side_plugin(options.base_plugin, "--base-plugin"),
              side_environment(options.base_env, "--base-env")};
  run.next = {"NEW", "new", side_executable(options.next, "--new"), side_plugin(options.new_plugin, "--new-plugin"),
              side_environment(options.new_env, "--new-env")};
  run.sweep_args = sweep_args;
  run.rounds = int(parse_integer(options.repeat, "--repeat", 1, kMaxRepeat));
  run.resume = options.resume;
  run.directory = options.out_dir.empty() ? "faprobe-out/ab-" + local_time_stamp() : options.out_dir;
  CompareSettings settings;
  settings.threshold_percent = parse_number(options.threshold, "--threshold", 0, 1000);
  settings.alpha = parse_number(options.alpha, "--alpha", 1e-12, 0.5);
  settings.paired = true;
  const OutputTargets targets = check_outputs({"", options.json, "", options.md});
  std::ostream& table = targets.uses_stdout() ? std::cerr : std::cout;
  fmt::print(stderr, "ab: BASE = {}\nab: NEW  = {}\n", run.base.describe(), run.next.describe());

  const AbOutcome outcome = run_ab(run);
  if (outcome.interrupted) {
    fmt::print(stderr, "faprobe: ab interrupted; the rounds' records are in {}/ (the same command with --resume "
               "continues)\n", run.directory);
    return kExitInterrupted;
  }
  if (!outcome.failure.empty()) {
    fmt::print(stderr, "faprobe: ab: {}\nfaprobe: the same command with --resume continues\n", outcome.failure);
    return kExitFailed;
  }
  const Comparison comparison = compare_runs(read_record_set({outcome.base_path}, "BASE"),
                                             read_record_set({outcome.new_path}, "NEW"), settings);
  table << compare_table(comparison) << std::flush;
  const std::string json = json_text(compare_json(comparison), 2) + "\n";
  const std::string markdown = compare_markdown(comparison);
  write_document(check_output("--out-dir", run.directory + "/compare.json", OutputUse::document), json);
  write_document(check_output("--out-dir", run.directory + "/compare.md", OutputUse::document), markdown);
  if (targets.json) write_document(*targets.json, json);
  if (targets.md) write_document(*targets.md, markdown);
  fmt::print(stderr, "wrote {0}/base.jsonl, {0}/new.jsonl, {0}/compare.json, {0}/compare.md\n", run.directory);
  return comparison.exit_status();
}

}  // namespace

void setup_ab(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<AbOptions>();
  CLI::App* sub = app.add_subcommand(
      "ab", "measure BASE and NEW in interleaved rounds of processes (ABBA) and compare them; exit 1 on a regression");
  sub->add_option("--base", options->base, "BASE's faprobe program (default: this one)");
  sub->add_option("--new", options->next, "NEW's faprobe program (default: this one)");
  sub->add_option("--base-plugin", options->base_plugin, "a plugin library BASE's sweeps load (--plugin)");
  sub->add_option("--new-plugin", options->new_plugin, "a plugin library NEW's sweeps load, same implementation name");
  sub->add_option("--base-env", options->base_env, "NAME=VALUE set for BASE's processes (repeatable)")->take_all();
  sub->add_option("--new-env", options->new_env, "NAME=VALUE set for NEW's processes (repeatable)")->take_all();
  sub->add_option("--repeat", options->repeat,
                  "rounds: processes per side, each running every pair once (default 10; a paired test at --alpha "
                  "0.01 needs at least 8)");
  sub->add_option("--out-dir", options->out_dir,
                  "where the sides' records and the comparison go (default faprobe-out/ab-<time>/)");
  sub->add_flag("--resume", options->resume, "continue an interrupted ab in --out-dir");
  sub->add_option("--threshold", options->threshold,
                  "smallest change that counts, percent of BASE's median time (default 5)");
  sub->add_option("--alpha", options->alpha, "significance level of the paired test across rounds (default 0.01)");
  sub->add_option("--md", options->md, "also write the comparison as Markdown to FILE ('-' is stdout)");
  sub->add_option("--json", options->json, "also write the comparison as JSON to FILE ('-' is stdout)");
  sub->footer("Every other flag (the axes, --config, --plugin, the measurement settings) goes to both sides' `faprobe "
              "sweep`.");
  sub->allow_extras();
  sub->callback([options, sub, &exit_status] { exit_status = run_ab_command(*options, sub->remaining()); });
}

}  // namespace faprobe::cli
