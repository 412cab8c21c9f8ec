// faprobe report: the table and every output format rebuilt from saved records, without running anything.
// Several files are merged in the order given (the shards of one sweep, a run and its resumption); the same
// (implementation, case) on the same device twice is an error naming both places (harness/record_files.hpp).
// The exit status is the one the runs would have had: 1 when a record is a mismatch or failed.
//
// The --json document keeps where its records came from: with one input that was itself a --json document,
// its metadata (host, devices, rates, command) is kept as it was; with several, each input document's
// metadata goes under "sources", and the top level says only what the inputs agree on (host and devices, the
// first input's, when every input is a document from the same CPU model and the same devices by name).
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/output_files.hpp"
#include "harness/record_files.hpp"
#include "harness/writers.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> files;
  std::string json, csv, md;
};

nlohmann::json report_metadata(const RecordSet& set) {
  nlohmann::json sources = nlohmann::json::array();
  for (const ResultFile& file : set.files) {
    sources.push_back({{"path", file.path},
                       {"format", file.document ? "json" : "jsonl"},
                       {"metadata", file.document ? file.metadata : nlohmann::json()}});
  }
  const nlohmann::json report{{"command", command_line()}, {"time", utc_time_now()}, {"sources", sources}};
  if (set.files.size() == 1 && set.files.front().document) {
    nlohmann::json metadata = set.files.front().metadata;
    metadata["report"] = {{"command", report["command"]}, {"time", report["time"]}};
    return metadata;
  }
  nlohmann::json metadata{{"schema", kSchema}, {"version", FAPROBE_VERSION}, {"report", report}};
  // The inputs agree when each is a document from the same CPU model and the same devices (by name): the
  // per-run readings in them (available memory, clocks) differ from run to run and do not count.
  auto identity = [](const ResultFile& file) {
    nlohmann::json names = nlohmann::json::array();
    for (const nlohmann::json& device : file.metadata.value("devices", nlohmann::json::array()))
      names.push_back(device.is_object() ? device.value("name", nlohmann::json()) : nlohmann::json());
    const nlohmann::json host = file.metadata.value("host", nlohmann::json::object());
    return nlohmann::json{host.is_object() ? host.value("cpu_model", nlohmann::json()) : nlohmann::json(), names};
  };
  const ResultFile& first = set.files.front();
  bool agree = true;
  for (const ResultFile& file : set.files) agree = agree && file.document && identity(file) == identity(first);
  if (agree) {  // the first input's, as the machine the records share
    metadata["host"] = first.metadata.value("host", nlohmann::json());
    metadata["devices"] = first.metadata.value("devices", nlohmann::json());
  }
  return metadata;
}

int run_report(const ReportOptions& options) {
  const OutputTargets targets = check_outputs({"", options.json, options.csv, options.md});
  // A document that is also an input would be replaced by what was read from it: refuse it like any clash.
  for (const OutputTarget* target : targets.documents()) {
    for (const std::string& file : options.files) {
      std::error_code error;
      if (target->kind == OutputKind::regular_file && std::filesystem::equivalent(file, target->file, error)) {
        throw UsageError(fmt::format("{} is also an input (FILE {}): write the report to another file", target->name(), file));
      }
    }
  }
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
  if (targets.json) write_document(*targets.json, json_document(report_metadata(set), records));
  if (targets.csv) write_document(*targets.csv, csv_document(records));
  if (targets.md) write_document(*targets.md, markdown_document(records));
  fmt::print(stderr, "\n{} records from {} file{}: {} ok, {} mismatch, {} failed, {} skipped, {} unsupported\n",
             records.size(), set.files.size(), set.files.size() == 1 ? "" : "s", ok, summary.failed_checks,
             summary.failed_runs, summary.skipped, summary.unsupported);
  for (const OutputTarget* target : targets.documents())
    if (target->kind != OutputKind::standard_output) fmt::print(stderr, "wrote {}\n", target->path);
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
