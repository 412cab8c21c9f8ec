#include "harness/run/runner.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/progress.hpp"
#include "harness/io/range.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"
#include "harness/run/interleave.hpp"
#include "harness/run/isolation.hpp"
#include "harness/run/pair_run.hpp"
#include "harness/run/provenance.hpp"
#include "model/errors.hpp"
#include "model/host_info.hpp"

namespace faprobe {

std::optional<double> bandwidth_fraction(const Implementation& impl, const Record& record,
                                         const MachineRates& rates) {
  const double copy_gbytes_per_s = impl.runs_on_gpu() ? rates.gpu_copy_gbytes_per_s : rates.memory_gbytes_per_s;
  const std::optional<double> gbytes_per_s = record.gbytes_per_s();
  if (!impl.timed() || !gbytes_per_s || copy_gbytes_per_s <= 0) return std::nullopt;
  return *gbytes_per_s / copy_gbytes_per_s;
}

void RunSummary::count(const Record& record) {
  switch (record.status) {
    case Status::ok: break;
    case Status::mismatch: ++failed_checks; break;
    case Status::failed: ++failed_runs; break;
    case Status::skipped: ++skipped; break;
    case Status::unsupported: ++unsupported; break;
  }
}

RunSummary resumed_summary(const std::vector<Record>& resumed, std::set<std::string>& done) {
  RunSummary summary;
  for (const Record& record : resumed) {
    if (!done.insert(record.key()).second) continue;
    summary.count(record);  // a resumed failure is still a failure of this run's results
    summary.records.push_back(record);
  }
  summary.resumed = int(summary.records.size());
  return summary;
}

int RunSummary::exit_status() const {
  if (!output_error.empty()) return kExitFailed;  // what the run promised to write is not all on disk
  if (interrupted) return kExitInterrupted;
  if (!incomplete.empty()) return kExitFailed;
  return failed_checks > 0 || failed_runs > 0 ? kExitFailed : kExitOk;
}

std::vector<PlannedPair> plan_run(const Plan& plan, const RunOptions& options, const std::set<std::string>& done) {
  std::vector<PlannedPair> pairs;
  std::set<std::string> seen = done;
  double planned_s = 0;  // the predicted seconds of the pairs that run, so far
  for (const PlanPart& part : plan.parts) {
    for (const Case& c : part.cases) {
      for (const std::string& name : part.impls) {
        const std::string key = record_key(name, c);
        if (options.shard && options.shard->keys.count(key) == 0) continue;  // another shard's
        if (!seen.insert(key).second) continue;                              // resumed, or another part's
        const Implementation& impl = *find_implementation(name);
        PlannedPair pair;
        // As run_pair screens: an isolated pair leaves the device's own memory limit to its child.
        pair.runs = screen(impl, c, plan.measure, options, /*device_limit=*/!runs_isolated(impl, options), pair.screened);
        if (pair.runs) {
          pair.one_sample = one_sample_pair(pair.screened, plan.measure);
          const double seconds =
              predicted_pair_seconds(pair.screened.predicted_time_s, plan.measure, options.timing && impl.timed());
          if (options.max_total_s > 0 && planned_s + seconds > options.max_total_s) {
            pair.runs = pair.one_sample = false;
            pair.over_total = true;
            pair.screened.status = Status::skipped;
            pair.screened.reason = fmt::format(
                "predicted {} for the pair ({} per run), {} of the budget {} (--max-total) already planned",
                format_seconds(seconds), format_seconds(pair.screened.predicted_time_s), format_seconds(planned_s),
                format_seconds(options.max_total_s));
          } else {
            pair.predicted_pair_s = seconds;
            planned_s += seconds;
          }
        }
        pairs.push_back(std::move(pair));
      }
    }
  }
  return pairs;
}

void require_supported(const Plan& plan) {
  for (const PlanPart& part : plan.parts)
    for (const Case& c : part.cases)
      for (const std::string& name : part.impls)
        try {
          if (const std::string why = find_implementation(name)->supports(c); !why.empty()) {
            throw UsageError(fmt::format("--strict: {} does not support {}: {}", name, c.label(), why));
          }
        } catch (const UsageError&) {
          throw;
        } catch (const std::exception&) {  // a plugin's supports() that crashed: a failed record, when run
        }
}

namespace {

// A run without --resume onto records of an earlier one would measure those pairs again beside them: two
// records of a pair, which report, compare and merge then refuse. So an --out that holds a record of one of
// this run's pairs (or a torn last line, which appending would bury) is either continued (--resume) or left
// alone, and the message gives both ways out. Records of other pairs only (another implementation's verify
// into one file, as scripts/device-check.sh does) are added to, with a note.
void check_earlier_records(AppendFile& file, const OutputTarget& out, const RunOptions& options) {
  std::error_code error;
  const std::uintmax_t bytes = std::filesystem::file_size(out.file, error);
  if (error || bytes == 0) return;
  const ResumeFile earlier = parse_resume_jsonl(file.read_all(kMaxJsonlBytes), out.path);
  const std::size_t total = earlier.records.size();
  std::size_t ours = 0;
  for (const Record& record : earlier.records) ours += !options.planned_keys || options.planned_keys->count(record.key()) > 0;
  const bool torn = earlier.torn_line != 0 || earlier.missing_newline;
  if (ours == 0 && !torn) {
    fmt::print(stderr, "faprobe: note: {}: adding this run's records to its {} record{} of other pairs\n", out.name(),
               total, total == 1 ? "" : "s");
    return;
  }
  throw UsageError(fmt::format("{}: holds {} record{}{}{}; continue it with --resume or choose another file",
                               out.name(), total, total == 1 ? "" : "s",
                               ours == 0 || ours == total ? "" : fmt::format(", {} of them this run's pairs", ours),
                               torn ? " and a torn last line" : ""));
}

}  // namespace

std::shared_ptr<RunFiles> open_run_files(const RunOptions& options) {
  auto files = std::make_shared<RunFiles>();
  // Every path is checked before any is opened, so a bad one leaves nothing behind.
  files->targets = check_outputs({options.out_jsonl, options.json_path, options.csv_path, options.md_path});
  const std::optional<OutputTarget>& out = files->targets.out;
  if (options.resume && !out) throw UsageError("--resume needs --out FILE.jsonl (the records to resume from)");
  if (options.resume && out->kind != OutputKind::regular_file) {
    throw UsageError(fmt::format("--resume reads the records back from --out, and {} is not a file",
                                 out->name()));
  }
  if (!out) return files;
  auto file = std::make_unique<AppendFile>(*out);  // locked from here on
  if (!options.resume && out->kind == OutputKind::regular_file) check_earlier_records(*file, *out, options);
  if (options.resume) {
    const std::string bytes = file->read_all(kMaxJsonlBytes);
    ResumeFile resumed = parse_resume_jsonl(bytes, out->path);
    if (resumed.torn_line != 0) {
      fmt::print(stderr, "faprobe: warning: {}\n", resumed.warning);
      file->truncate(resumed.good_bytes);
    }
    if (resumed.missing_newline) {
      if (const std::error_code error = file->append("\n")) {
        throw OutputError(fmt::format("{}: write failed: {}", out->name(), error.message()));
      }
    }
    files->resumed = std::move(resumed.records);
  }
  files->jsonl = std::make_unique<JsonlWriter>(std::move(file), files->resumed.size());
  return files;
}

DocumentRewriter::DocumentRewriter(const RunFiles& files, const RunOptions& options, RunSummary& summary)
    : files_(files), options_(options), summary_(summary),
      last_(std::chrono::steady_clock::now() - std::chrono::seconds(1)) {}

// The documents hold every record, so rewriting them is O(records): at most once a second while the run goes
// on, and once at the end (JSONL is what streams each record the moment it is finished). Documents that are
// not regular files (stdout, a character device) are written once, at the end. A rewrite that fails while the
// run goes on leaves the previous version and is tried again; at the end it is an error.
void DocumentRewriter::rewrite(bool final) {
  if (!final && std::chrono::steady_clock::now() - last_ < std::chrono::seconds(1)) return;
  last_ = std::chrono::steady_clock::now();
  std::vector<std::string> failures;
  auto rewrite = [&](const std::optional<OutputTarget>& target, auto text) {
    if (!target || (!final && !target->rewritable())) return;
    try {
      write_document(*target, text());
    } catch (const OutputError& error) {
      failures.push_back(error.what());
      if (final) summary_.unwritten.push_back(target->flag);
    }
  };
  rewrite(files_.targets.json, [&] { return json_document(document_metadata(options_), summary_.records); });
  rewrite(files_.targets.csv, [&] { return csv_document(summary_.records); });
  rewrite(files_.targets.md, [&] { return markdown_document(summary_.records); });
  if (!final || failures.empty()) return;
  summary_.output_error = fmt::format("{}", fmt::join(failures, "; "));
  if (files_.jsonl && files_.targets.out->kind == OutputKind::regular_file) {
    summary_.output_error += fmt::format("; every record is in {}", files_.targets.out->path);
  }
}

RunSummary run_plan(const Plan& plan, const RunOptions& options, std::ostream& table_out) {
  const std::shared_ptr<RunFiles> files = options.files ? options.files : open_run_files(options);
  for (const Record& record : files->resumed) {
    // --resume of a shard continues that shard of that plan, never another's records.
    if (options.shard) {
      const ShardSelection& shard = *options.shard;
      const bool same = record.shard && record.shard->plan_fingerprint == shard.fingerprint &&
                        record.shard->index == shard.shard.index && record.shard->count == shard.shard.count;
      if (!same) {
        throw UsageError(fmt::format(
            "--resume: {} holds {} from {}, not from shard {}/{} of plan {} (resume a shard from its own --out)",
            options.out_jsonl, record.key(),
            record.shard ? fmt::format("shard {}/{} of plan {}", record.shard->index, record.shard->count,
                                       record.shard->plan_fingerprint)
                         : std::string("an unsharded run"),
            shard.shard.index, shard.shard.count, shard.fingerprint));
      }
    }
  }
  std::set<std::string> done;
  RunSummary summary = resumed_summary(files->resumed, done);
  JsonlWriter* jsonl = files->jsonl.get();

  if (plan.measure.threads > 0) omp_set_num_threads(plan.measure.threads);
  TableWriter table(table_out);
  if (options.strict) require_supported(plan);  // before anything runs, so --strict fails fast
  // The plan as --dry-run shows it: its --max-total skips, and the predictions the ETA is drawn from.
  std::map<std::string, const PlannedPair*> planned;
  const std::vector<PlannedPair> planned_pairs = plan_run(plan, options, done);
  double predicted_total_s = 0, predicted_done_s = 0;
  for (const PlannedPair& pair : planned_pairs) {
    planned.emplace(pair.screened.key(), &pair);
    predicted_total_s += pair.predicted_pair_s;
  }
  const auto planned_seconds = [&planned](const std::string& key) {
    const auto it = planned.find(key);
    return it != planned.end() ? it->second->predicted_pair_s : 0.0;
  };
  Progress progress(options.shard ? options.shard->keys.size() : plan.size(), predicted_total_s);
  std::size_t position = 0;
  DocumentRewriter documents(*files, options, summary);

  // A shard's records say which part of which plan they are, and where they ran.
  std::optional<ShardTag> shard_tag;
  if (options.shard) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    shard_tag = ShardTag{options.shard->shard.index, options.shard->shard.count, options.shard->fingerprint,
                         static_cast<std::int64_t>(options.shard->keys.size()), host_info().hostname,
                         visible != nullptr ? visible : ""};
  }

  // A finished record to every output.
  auto finish = [&](const Implementation& impl, Record record) {
    // Here rather than in run_one, so that isolated children need not know the GPU's rates.
    record.bandwidth_fraction = bandwidth_fraction(impl, record, options.rates);
    if (shard_tag) {
      record.shard = shard_tag;
      if (record.device == "cpu") record.shard->cuda_visible_devices.clear();
    }
    finish_record(impl, plan.measure, options, record);  // repro; the GPU's clocks after a GPU case
    summary.count(record);
    ++summary.ran;
    if (jsonl) jsonl->write(record);
    progress.clear();
    if (record.status != Status::unsupported || options.show_unsupported) table.write(record);
    summary.records.push_back(std::move(record));
    documents.update();
  };

  // Part after part; within a part, case after case, every implementation of the part on each. A pair that
  // two parts share runs once. With --interleave (timed runs only) a case's implementations are measured
  // together (interleave.hpp) and their records written when the case ends.
  const bool interleave = plan.measure.interleave && options.timing;
  for (const PlanPart& part : plan.parts) {
    for (const Case& c : part.cases) {
      std::vector<const Implementation*> pending;  // with --interleave: the case's pairs not yet done
      for (const std::string& name : part.impls) {
        if (interrupted()) break;
        const Implementation& impl = *find_implementation(name);
        const std::string key = record_key(name, c);
        if (options.shard && options.shard->keys.count(key) == 0) continue;  // another shard's
        if (!done.insert(key).second) {
          ++position;
          continue;
        }
        // Skipped on --max-total by the plan: the budget is the plan's, not what the pairs before took.
        if (const auto it = planned.find(key); it != planned.end() && it->second->over_total) {
          ++position;
          finish(impl, it->second->screened);
          continue;
        }
        if (interleave) {
          pending.push_back(&impl);
          continue;
        }
        progress.starting(position++, fmt::format("{} {}", name, c.label()), predicted_done_s);
        Record record = run_pair(impl, c, plan.measure, options);
        if (interrupted()) break;  // a case cut short is not recorded: --resume runs it again
        predicted_done_s += planned_seconds(key);
        finish(impl, std::move(record));
      }
      if (!pending.empty() && !interrupted()) {
        std::vector<std::string> names;
        for (const Implementation* impl : pending) names.push_back(impl->name());
        progress.starting(position, fmt::format("{} {} (interleaved)", fmt::join(names, ", "), c.label()),
                          predicted_done_s);
        position += pending.size();
        std::vector<Record> records = run_interleaved(pending, c, plan.measure, options);
        if (interrupted()) break;  // as above: none of the case is recorded
        for (const Implementation* impl : pending) predicted_done_s += planned_seconds(record_key(impl->name(), c));
        for (std::size_t i = 0; i < pending.size(); ++i) finish(*pending[i], std::move(records[i]));
      }
      if (interrupted()) break;
    }
    if (interrupted()) break;
  }
  progress.clear();
  summary.interrupted = interrupted();
  documents.finish();
  return summary;
}

}  // namespace faprobe
