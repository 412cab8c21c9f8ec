// faprobe compare: BASE against NEW pair by pair (faster / slower / same / noise, status and correctness
// changes), exit 1 on a regression; or, with --baseline-impl NAME, every implementation of one run against
// NAME. The statistics and verdicts: harness/analysis/compare.hpp.
//
//   faprobe compare base.jsonl new.jsonl
//   faprobe compare --base a.jsonl --base b.jsonl --new c.jsonl --threshold 3 --md diff.md
//   faprobe compare run.json --baseline-impl cuda.fa2
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "harness/analysis/compare.hpp"
#include "harness/commands/result_documents.hpp"
#include "harness/io/output_files.hpp"
#include "harness/io/progress.hpp"
#include "harness/io/range.hpp"
#include "harness/records/record.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

struct CompareOptions {
  std::vector<std::string> files, base, next;
  std::string threshold = "5", alpha = "0.01", md, json;
  bool ignore_device = false, paired = false;
  std::string baseline_impl;
};

int run_compare(const CompareOptions& options) {
  exit_on_first_interrupt();  // nothing to finish: Ctrl-C or SIGTERM ends it at once, with 130
  CompareSettings settings;
  settings.threshold_percent = parse_number(options.threshold, "--threshold", 0, 1000);
  settings.alpha = parse_number(options.alpha, "--alpha", 1e-12, 0.5);
  settings.ignore_device = options.ignore_device;
  settings.paired = options.paired;
  settings.baseline_impl = options.baseline_impl;
  const bool within = !settings.baseline_impl.empty();
  std::vector<std::string> base = options.base, next = options.next;
  if (within) {
    if (!base.empty() || !next.empty()) {
      throw UsageError("--baseline-impl compares the implementations of one run: give its files as FILE..., "
                       "without --base/--new");
    }
    if (options.files.empty()) throw UsageError("--baseline-impl NAME needs a result file (FILE...)");
    base = options.files;
  } else if (!base.empty() || !next.empty()) {
    if (!options.files.empty() || base.empty() || next.empty()) {
      throw UsageError("give BASE and NEW either as two files (compare BASE NEW) or as --base FILE... --new FILE..., "
                       "not both");
    }
  } else {
    if (options.files.size() != 2) {
      throw UsageError(fmt::format("compare takes two result files, BASE and NEW (got {}); or --base FILE... --new "
                                   "FILE..., or one run with --baseline-impl NAME",
                                   options.files.size()));
    }
    base = {options.files[0]};
    next = {options.files[1]};
  }
  // The outputs are checked before anything is read, and none may be an input (it would be replaced by the
  // comparison of what was read from it); a document on stdout ("-") puts the table on stderr.
  const OutputTargets targets = check_outputs({"", options.json, "", options.md});
  std::vector<std::string> inputs = base;
  inputs.insert(inputs.end(), next.begin(), next.end());
  refuse_inputs_as_outputs(targets, inputs, "the comparison");
  std::ostream& table = targets.uses_stdout() ? std::cerr : std::cout;

  const std::string base_flag = within ? "FILE" : options.base.empty() ? "BASE" : "--base";
  // Several BASE files that hold the same pairs are a history (each file's record one process or more).
  const RecordSet base_set = read_record_set(base, base_flag, /*history=*/!within);
  const Comparison comparison =
      within ? compare_within(base_set, settings)
             : compare_runs(base_set, read_record_set(next, options.next.empty() ? "NEW" : "--new"), settings);
  table << compare_table(comparison) << std::flush;
  if (targets.json) write_document(*targets.json, json_text(compare_json(comparison), 2) + "\n");
  if (targets.md) write_document(*targets.md, compare_markdown(comparison));
  return comparison.exit_status();
}

}  // namespace

void setup_compare(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand(
      "compare", "compare two runs pair by pair (faster / slower / same / noise, status changes); exit 1 on a regression");
  sub->add_option("files", options->files, "BASE NEW: two result files (--out JSONL or --json); with --baseline-impl, "
                                           "the files of one run");
  sub->add_option("--base", options->base,
                  "a BASE result file (repeatable: the files are merged; the same pairs in several files are a "
                  "history of runs, each file's processes judged together)");
  sub->add_option("--new", options->next, "a NEW result file (repeatable)");
  sub->add_option("--threshold", options->threshold,
                  "smallest change that counts, percent of BASE's median time (default 5)");
  sub->add_option("--alpha", options->alpha,
                  "significance level of the Mann-Whitney U test on the raw samples (default 0.01)");
  sub->add_flag("--ignore-device", options->ignore_device,
                "match records across devices and hosts (same kernel, new card)");
  sub->add_flag("--paired", options->paired,
                "the files come from `faprobe ab`: pair BASE's and NEW's processes by round (a signed-rank test)");
  sub->add_option("--baseline-impl", options->baseline_impl,
                  "compare every implementation of one run with this one (its speedup over NAME)");
  sub->add_option("--md", options->md, "write the comparison as Markdown to FILE ('-' is stdout)");
  sub->add_option("--json", options->json, "write the comparison as JSON to FILE ('-' is stdout)");
  sub->callback([options, &exit_status] { exit_status = run_compare(*options); });
}

}  // namespace faprobe::cli
