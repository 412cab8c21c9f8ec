#include "runner.hpp"

#include <omp.h>

#include <chrono>
#include <filesystem>
#include <new>
#include <set>

#include <fmt/format.h>

#include "errors.hpp"
#include "measure.hpp"
#include "memory.hpp"
#include "progress.hpp"
#include "range.hpp"
#include "reference/check.hpp"
#include "writers.hpp"

namespace faprobe {

int RunSummary::exit_status() const {
  if (interrupted) return kExitInterrupted;
  return failed_checks > 0 || failed_runs > 0 ? kExitFailed : kExitOk;
}

Record run_one(const Implementation& impl, const Case& c, const MeasureSettings& measure,
               const RunOptions& options) {
  Record record;
  record.impl = impl.name();
  record.device = impl.device();
  record.c = c;
  if (std::string why = impl.supports(c); !why.empty()) {
    record.status = Status::unsupported;
    record.reason = why;
    return record;
  }
  record.memory.predicted_bytes = impl.predicted_bytes(c);
  record.predicted_time_s = impl.predicted_seconds(c, options.rates);
  if (options.mem_limit != 0 && record.memory.predicted_bytes > options.mem_limit) {
    record.status = Status::skipped;
    record.reason = fmt::format("needs {}, limit {}", format_bytes(double(record.memory.predicted_bytes)),
                                format_bytes(double(options.mem_limit)));
    return record;
  }
  if (record.predicted_time_s > measure.max_time_s) {
    record.status = Status::skipped;
    record.reason = fmt::format("predicted {} per run, budget {} (--max-time)",
                                format_seconds(record.predicted_time_s), format_seconds(measure.max_time_s));
    return record;
  }

  try {
    host_memory().reset_peaks();
    auto prepared = impl.prepare(c);
    const double first_run = prepared->timed_run();  // also the first warm-up run
    if (measure.verify) {
      // The checker regenerates the inputs itself rather than trusting the implementation's copy.
      record.verify = check_output(c, GeneratedInputs(c), prepared->output());
      if (!record.verify->passed) {
        record.status = Status::mismatch;
        record.reason = record.verify->note;
      }
    }
    if (options.timing && impl.timed() && !interrupted()) {
      MeasureSettings rest = measure;
      rest.warmup = std::max(0, measure.warmup - 1);
      rest.max_time_s = std::max(0.0, measure.max_time_s - first_run);
      record.time = faprobe::measure([&] { return prepared->timed_run(); }, rest, interrupted);
      if (record.time->samples == 0) record.time.reset();
    }
    const MemoryCounters counters = host_memory().counters();
    record.memory.peak_bytes = counters.peak_bytes;
    record.memory.workspace_bytes = counters.workspace_bytes;
    record.details = prepared->details();
    if (!impl.timed()) record.details["timed"] = false;
  } catch (const std::bad_alloc&) {
    record.status = Status::failed;
    record.reason = fmt::format("out of host memory (predicted {})", format_bytes(double(record.memory.predicted_bytes)));
  } catch (const std::exception& error) {
    record.status = Status::failed;
    record.reason = error.what();
  }
  return record;
}

RunSummary run_plan(const Plan& plan, const RunOptions& options, std::ostream& table_out) {
  RunSummary summary;
  std::set<std::string> done;
  if (options.resume && !options.out_jsonl.empty() && std::filesystem::exists(options.out_jsonl)) {
    for (Record& record : read_jsonl(options.out_jsonl)) {
      if (done.insert(record.key()).second) summary.records.push_back(std::move(record));
    }
    summary.resumed = int(summary.records.size());
  }
  std::unique_ptr<JsonlWriter> jsonl;
  if (!options.out_jsonl.empty()) jsonl = std::make_unique<JsonlWriter>(options.out_jsonl);

  if (plan.measure.threads > 0) omp_set_num_threads(plan.measure.threads);
  TableWriter table(table_out);
  const std::size_t total = plan.cases.size() * plan.impls.size();
  Progress progress(total);
  std::size_t position = 0;
  // The documents hold every record, so rewriting them is O(records): at most once a second while the run
  // goes on, and once at the end (JSONL is what streams each record the moment it is finished). Documents
  // sent to stdout ("-") are written once, at the end.
  auto last_rewrite = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto rewrite_documents = [&](bool final) {
    if (!final && std::chrono::steady_clock::now() - last_rewrite < std::chrono::seconds(1)) return;
    last_rewrite = std::chrono::steady_clock::now();
    auto due = [final](const std::string& path) { return !path.empty() && (final || path != "-"); };
    if (due(options.json_path)) write_json(options.json_path, options.metadata, summary.records);
    if (due(options.csv_path)) write_csv(options.csv_path, summary.records);
    if (due(options.md_path)) write_markdown(options.md_path, summary.records);
  };

  for (const Case& c : plan.cases) {
    for (const std::string& name : plan.impls) {
      if (interrupted()) break;
      const Implementation& impl = *find_implementation(name);
      if (done.count(record_key(name, c))) {
        ++position;
        continue;
      }
      progress.starting(position++, fmt::format("{} {}", name, c.label()));
      Record record = run_one(impl, c, plan.measure, options);
      if (record.status == Status::unsupported && options.strict) {
        progress.clear();
        throw UsageError(fmt::format("--strict: {} does not support {}: {}", name, c.label(), record.reason));
      }
      if (interrupted()) break;  // a case cut short is not recorded: --resume runs it again
      switch (record.status) {
        case Status::ok: break;
        case Status::mismatch: ++summary.failed_checks; break;
        case Status::failed: ++summary.failed_runs; break;
        case Status::skipped: ++summary.skipped; break;
        case Status::unsupported: ++summary.unsupported; break;
      }
      ++summary.ran;
      if (jsonl) jsonl->write(record);
      progress.clear();
      if (record.status != Status::unsupported || options.show_unsupported) table.write(record);
      summary.records.push_back(std::move(record));
      rewrite_documents(/*final=*/false);
    }
    if (interrupted()) break;
  }
  progress.clear();
  summary.interrupted = interrupted();
  rewrite_documents(/*final=*/true);
  return summary;
}

}  // namespace faprobe
