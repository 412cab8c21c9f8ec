// faprobe merge PART... --out FILE.jsonl: the shards of one plan (sweep or verify with --shard) as one result
// (harness/analysis/merge.hpp). Nothing runs. The parts must be of one plan; missing shards, incomplete shards and,
// where the plan is known, missing pairs are named, and the result is written anyway (nothing measured is
// dropped) with exit status 1, so that a merge job in a pipeline fails until every shard is in. The same pair
// twice is an error unless --allow-duplicates keeps the better-measured record.
//
// The plan is known when merge is given the sweep's own --config, axes and --impl (re-expanded here, and
// accepted only when its fingerprint is the parts'; the sweep's measurement and run flags, --threads to
// --shard, are accepted beside them and ignored with a note, so its command line can be pasted whole), or when the parts are shards of the default sweep or
// the default verify matrix, which merge recognises by their fingerprints. A plan made without --impl is
// narrowed to the implementations of the machine it ran on (harness/commands/workflow.hpp), so merge tries it as it is and as
// a sweep and a verify would narrow it here.
//
// --out is a new file, never an existing one: a merge does not overwrite a result. It is written whole
// (beside its target, then linked to its name only if the name is still free: harness/io/output_files.hpp,
// write_new_document), so a crash leaves no half-merged file, and of two merges into one new name exactly
// one succeeds; the other says so in one line (exit 2).
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "default_config.hpp"
#include "harness/analysis/merge.hpp"
#include "harness/commands/result_documents.hpp"
#include "harness/io/progress.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

struct MergeOptions {
  std::vector<std::string> files;
  std::string out, json, csv, md;
  bool allow_duplicates = false;
  SettingsOptions settings;  // the plan's --config, axes, --impl and --plugin
  // The sweep's flags that do not make its plan (--threads, --min-time, --shard ...): taken, so that the sweep's
  // own command line can be given, and ignored with a note.
  SettingsOptions run_only;
  bool resume = false;
  std::vector<CLI::Option*> run_only_options;
};

// One line naming the sweep's run-only flags given, which change nothing here.
void note_ignored_flags(const MergeOptions& options) {
  std::vector<std::string> given;
  for (const CLI::Option* option : options.run_only_options)
    if (option->count() > 0) given.push_back(option->get_name());
  if (given.empty()) return;
  fmt::print(stderr, "merge: note: ignoring {}: the sweep's measurement and run flags do not change its plan, and "
                     "merge measures nothing\n", fmt::join(given, ", "));
}

bool plan_given(const SettingsOptions& settings) {
  if (!settings.config.empty()) return true;
  for (const auto& [key, option] : settings.options)
    if (option->count() > 0) return true;
  return false;
}

// The pairs of the plan these flags (or, with none, a default plan) make, in every narrowing a run could
// have applied, whose fingerprint is `fingerprint`; nullopt when none is.
std::optional<std::vector<PlanPair>> find_plan(const SettingsOptions& settings, const std::string& fingerprint) {
  const std::pair<const char*, const char*> defaults[] = {{kDefaultSweepConfig, kDefaultSweepConfigName},
                                                          {kDefaultVerifyConfig, kDefaultVerifyConfigName}};
  for (const auto& [text, name] : defaults) {
    const SettingsSource source = settings_source(command_settings(settings), text, name);
    const Plan plan = make_plan(source);
    for (int narrowing = 0; narrowing < 3; ++narrowing) {  // as made, as a sweep and as a verify narrow it
      Plan candidate = plan;
      if (narrowing > 0) narrow_to_this_machine(candidate, /*verify=*/narrowing == 2);
      std::vector<PlanPair> pairs = plan_pairs(candidate);
      if (plan_fingerprint(pairs) == fingerprint) return pairs;
    }
  }
  return std::nullopt;
}

// At most `limit` lines of a list, then how many more.
template <typename T, typename Format>
void print_list(const std::vector<T>& items, std::size_t limit, Format format) {
  for (std::size_t i = 0; i < items.size() && i < limit; ++i) fmt::print(stderr, "  {}\n", format(items[i]));
  if (items.size() > limit) fmt::print(stderr, "  ... and {} more\n", items.size() - limit);
}

int run_merge(const MergeOptions& options) {
  exit_on_first_interrupt();  // nothing to finish: Ctrl-C or SIGTERM ends it at once, with 130
  note_ignored_flags(options);
  const OutputTargets targets = check_outputs({"", options.json, options.csv, options.md});
  const OutputTarget out = check_output("--out", options.out, OutputUse::document);
  if (out.kind != OutputKind::regular_file) {
    throw UsageError(fmt::format("--out {}: merge writes a new regular file (not stdout or a device)", options.out));
  }
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::symlink_status(options.out, error))) {
    throw UsageError(fmt::format("--out {}: exists; merge never overwrites a result (give a new file)", options.out));
  }
  for (const OutputTarget* target : targets.documents()) {
    if (target->kind == OutputKind::regular_file && target->file == out.file) {
      throw UsageError(fmt::format("{} and --out {} are the same file", target->name(), options.out));
    }
  }
  refuse_inputs_as_outputs(targets, options.files, "the merged result");

  std::vector<ResultFile> files;
  for (const std::string& path : options.files) {
    // An empty part is a task that ended before its first record: its shard is then reported missing.
    if (std::filesystem::is_regular_file(path, error) && std::filesystem::file_size(path, error) == 0 && !error) {
      fmt::print(stderr, "faprobe: warning: PART {}: empty (a shard given no pairs, or one that ended before its "
                         "first record)\n", path);
      continue;
    }
    files.push_back(read_result_file(path, "PART"));
    if (!files.back().warning.empty()) fmt::print(stderr, "faprobe: warning: {}\n", files.back().warning);
  }
  // The parts' plan, from the first record that has one (merge_shards refuses a part without).
  std::string fingerprint;
  for (const ResultFile& file : files)
    for (const Record& record : file.records)
      if (fingerprint.empty() && record.shard) fingerprint = record.shard->plan_fingerprint;

  faprobe::MergeOptions merge;
  merge.allow_duplicates = options.allow_duplicates;
  if (!fingerprint.empty()) merge.plan = find_plan(options.settings, fingerprint);
  if (!merge.plan && plan_given(options.settings) && !fingerprint.empty()) {
    const SettingsSource source = settings_source(command_settings(options.settings), nullptr, nullptr);
    throw UsageError(fmt::format("the plan given (plan {}) is not the plan of these parts (plan {}): give merge the "
                                 "sweep's own --config, axes and --impl",
                                 plan_fingerprint(plan_pairs(make_plan(source))), fingerprint));
  }
  nlohmann::json metadata = result_files_metadata(files, "merge");  // before the records move out of `files`
  const std::size_t file_count = files.size();
  const MergeResult result = merge_shards(std::move(files), merge);

  fmt::print(stderr, "merge: {} records of plan {} ({} shard{}) from {} file{}{}\n", result.records.size(),
             result.fingerprint, result.shard_count, result.shard_count == 1 ? "" : "s", file_count,
             file_count == 1 ? "" : "s",
             result.plan_checked ? ", checked pair by pair against the plan"
                                 : "; give the sweep's --config and axes to check every pair");
  if (!result.duplicates.empty()) {
    fmt::print(stderr, "{} duplicate{} (--allow-duplicates kept the better-measured record):\n",
               result.duplicates.size(), result.duplicates.size() == 1 ? "" : "s");
    print_list(result.duplicates, 20, [](const MergeDuplicate& d) {
      return fmt::format("{}: kept {}, dropped {} ({})", d.label, d.kept, d.dropped, d.reason);
    });
  }
  if (!result.missing_shards.empty()) {
    fmt::print(stderr, "missing shard{} (no records): {}\n", result.missing_shards.size() == 1 ? "" : "s",
               describe_missing_shards(result.missing_shards, result.shard_count));
  }
  if (!result.incomplete_shards.empty()) {
    fmt::print(stderr, "incomplete:\n");
    print_list(result.incomplete_shards, 20, [](const std::string& line) { return line; });
  }
  if (!result.missing_pairs.empty()) {
    fmt::print(stderr, "{} pair{} of the plan missing:\n", result.missing_pairs.size(),
               result.missing_pairs.size() == 1 ? "" : "s");
    print_list(result.missing_pairs, 20, [&](const MissingPair& pair) {
      return fmt::format("{} (shard {}/{})", pair.label, pair.shard, result.shard_count);
    });
  }

  RunSummary summary;
  int ok = 0;
  for (const Record& record : result.records) {
    summary.count(record);
    ok += record.status == Status::ok;
  }
  metadata["merge"]["plan_fingerprint"] = result.fingerprint;
  metadata["merge"]["shards"] = result.shard_count;
  metadata["merge"]["complete"] = result.complete();
  metadata["merge"]["plan_checked"] = result.plan_checked;
  write_new_document(out, jsonl_document(result.records));  // of two merges into one name, one wins
  if (targets.json) write_document(*targets.json, json_document(metadata, result.records));
  if (targets.csv) write_document(*targets.csv, csv_document(result.records));
  if (targets.md) write_document(*targets.md, markdown_document(result.records));
  fmt::print(stderr, "{} ok, {} mismatch, {} failed, {} skipped, {} unsupported\nwrote {}\n", ok,
             summary.failed_checks, summary.failed_runs, summary.skipped, summary.unsupported, out.path);
  for (const OutputTarget* target : targets.documents())
    if (target->kind != OutputKind::standard_output) fmt::print(stderr, "wrote {}\n", target->path);
  if (!result.complete()) {
    fmt::print(stderr, "merge: incomplete; run the missing shards (--resume continues a shard's own --out), then "
                       "merge again into a new file\n");
    return kExitFailed;
  }
  return summary.exit_status();
}

}  // namespace

void setup_merge(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* sub = app.add_subcommand("merge", "merge the shards of one plan (--shard I/N runs) into one result");
  sub->add_option("files", options->files, "the shards' result files (--out JSONL or --json)")->required();
  sub->add_option("--out", options->out, "the merged JSONL, a new file (never overwritten)")->required();
  sub->add_option("--json", options->json, "also write the records as a JSON document to FILE ('-' is stdout)");
  sub->add_option("--csv", options->csv, "also write the records as CSV to FILE ('-' is stdout)");
  sub->add_option("--md", options->md, "also write the records as a Markdown table to FILE ('-' is stdout)");
  sub->add_flag("--allow-duplicates", options->allow_duplicates,
                "keep the better-measured record of a pair given twice, rather than refusing");
  add_axis_options(*sub, options->settings);
  options->run_only_options = add_run_only_options(*sub, options->run_only, options->resume,
                                                   "The sweep's measurement and run flags (accepted and ignored)");
  sub->callback([options, &exit_status] { exit_status = run_merge(*options); });
}

}  // namespace faprobe::cli
