// faprobe report: the table and every output format rebuilt from saved records, without running anything.
// Several files are merged in the order given (the shards of one sweep, a run and its resumption); the same
// (implementation, case) on the same device twice is an error naming both places (harness/analysis/record_files.hpp).
// The exit status is the one the runs would have had: 1 when a record is a mismatch or failed, and 1 too
// when the records are shards of a plan (--shard I/N) and a shard is missing or short of its pairs
// (harness/analysis/merge.hpp: shard_gaps), so that `report shard-*.jsonl` gates a split sweep.
// The --json document keeps where its records came from (harness/commands/result_documents.hpp).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/analysis/merge.hpp"
#include "harness/analysis/record_files.hpp"
#include "harness/commands/result_documents.hpp"
#include "harness/io/output_files.hpp"
#include "harness/io/progress.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> files;
  std::string json, csv, md;
};

int run_report(const ReportOptions& options) {
  exit_on_first_interrupt();  // nothing to finish: Ctrl-C or SIGTERM ends it at once, with 130
  const OutputTargets targets = check_outputs({"", options.json, options.csv, options.md});
  refuse_inputs_as_outputs(targets, options.files, "the report");
  RecordSet set = read_record_set(options.files, "FILE");
  std::vector<Record> records;
  for (SourcedRecord& sourced : set.records) records.push_back(std::move(sourced.record));

  std::ostream& out = targets.uses_stdout() ? std::cerr : std::cout;
  TableWriter table(out);
  RunSummary summary;
  int ok = 0;
  for (const Record& record : records) {
    table.write(record);
    summary.count(record);
    ok += record.status == Status::ok;
  }
  if (targets.json) write_document(*targets.json, json_document(result_files_metadata(set.files, "report"), records));
  if (targets.csv) write_document(*targets.csv, csv_document(records));
  if (targets.md) write_document(*targets.md, markdown_document(records));
  fmt::print(stderr, "\n{} records from {} file{}: {} ok, {} mismatch, {} failed, {} skipped, {} unsupported\n",
             records.size(), set.files.size(), set.files.size() == 1 ? "" : "s", ok, summary.failed_checks,
             summary.failed_runs, summary.skipped, summary.unsupported);
  for (const OutputTarget* target : targets.documents())
    if (target->kind != OutputKind::standard_output) fmt::print(stderr, "wrote {}\n", target->path);
  const std::vector<std::string> gaps = shard_gaps(records);
  for (const std::string& gap : gaps) fmt::print(stderr, "incomplete: {}\n", gap);
  if (!gaps.empty()) {
    fmt::print(stderr, "report: the shards are not all in; run the missing ones (--resume continues a shard's own --out)\n");
    return std::max(summary.exit_status(), int(kExitFailed));
  }
  return summary.exit_status();
}

}  // namespace

void setup_report(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* sub = app.add_subcommand("report", "rebuild the table and the --json/--csv/--md files from saved records");
  sub->add_option("files", options->files, "result files (--out JSONL or --json), merged in order")->required();
  sub->add_option("--json", options->json, "write the records as a JSON document to FILE ('-' is stdout)");
  sub->add_option("--csv", options->csv, "write the records as CSV to FILE ('-' is stdout)");
  sub->add_option("--md", options->md, "write the records as a Markdown table to FILE ('-' is stdout)");
  sub->callback([options, &exit_status] { exit_status = run_report(*options); });
}

}  // namespace faprobe::cli
