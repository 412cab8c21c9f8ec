#include "harness/run/repeat.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/child_process.hpp"
#include "harness/io/progress.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "harness/records/writers.hpp"
#include "harness/run/measure.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;

// Which status a pooled record takes when its rounds disagree: the one that says most is wrong.
int severity(Status status) {
  switch (status) {
    case Status::failed: return 4;
    case Status::mismatch: return 3;
    case Status::skipped: return 2;
    case Status::unsupported: return 1;
    case Status::ok: return 0;
  }
  return 0;
}

}  // namespace

Record pool_processes(const std::vector<std::pair<int, Record>>& rounds, int round_count) {
  if (rounds.empty()) throw std::invalid_argument("pool_processes: no records to pool");
  Record pooled = rounds.front().second;
  const std::pair<int, Record>* worst = &rounds.front();
  for (const auto& round : rounds) {
    if (severity(round.second.status) > severity(worst->second.status)) worst = &round;
    pooled.memory.peak_bytes = std::max(pooled.memory.peak_bytes, round.second.memory.peak_bytes);
    pooled.memory.workspace_bytes = std::max(pooled.memory.workspace_bytes, round.second.memory.workspace_bytes);
  }
  if (worst != &rounds.front()) {
    pooled.status = worst->second.status;
    pooled.verify = worst->second.verify;
    pooled.reason = worst->second.reason;
  }
  if (round_count > 1 && !pooled.reason.empty()) {
    pooled.reason = fmt::format("round {} of {}: {}", worst->first, round_count, pooled.reason);
  }

  std::vector<double> samples;
  std::int64_t sample_count = 0;
  std::vector<ProcessRun> runs;
  std::optional<Contention> contended;
  // Records that were pooled already (a history of `sweep --repeat` runs) bring their processes along; then
  // every process is numbered in order, since their rounds belong to different runs.
  const bool renumber = std::any_of(rounds.begin(), rounds.end(), [](const auto& round) {
    return round.second.time && !round.second.time->runs.empty();
  });
  for (const auto& [round, record] : rounds) {
    if (!record.time) continue;
    const TimeStats& time = *record.time;
    samples.insert(samples.end(), time.samples_s.begin(), time.samples_s.end());
    sample_count += time.samples;
    if (time.runs.empty()) {
      runs.push_back({round, time.median, time.q1, time.q3, time.samples, time.contended.has_value()});
    } else {
      runs.insert(runs.end(), time.runs.begin(), time.runs.end());
    }
    if (renumber) {
      for (std::size_t i = 0; i < runs.size(); ++i) runs[i].round = int(i) + 1;
    }
    if (time.contended) {
      if (!contended) contended = Contention{};
      for (const std::string& line : time.contended->evidence) {
        contended->evidence.push_back(fmt::format("round {}: {}", round, line));
      }
      contended->cpu_share = std::min(contended->cpu_share, time.contended->cpu_share);
      contended->involuntary_switches = std::max(contended->involuntary_switches, time.contended->involuntary_switches);
      contended->quantised = contended->quantised || time.contended->quantised;
      contended->identical = contended->identical || time.contended->identical;
    }
  }
  if (runs.empty()) {
    pooled.time.reset();
    return pooled;
  }
  const TimeStats first = pooled.time ? *pooled.time : TimeStats{};
  const double first_median = rounds.front().second.time ? rounds.front().second.time->median : 0.0;
  // Records of old faprobe versions keep no samples: then only the processes' medians are there to pool.
  if (samples.empty()) {
    for (const ProcessRun& run : runs) samples.push_back(run.median);
  }
  TimeStats time = summarize(std::move(samples));
  time.samples = std::max<std::int64_t>(sample_count, time.samples);
  time.order = first.order;
  time.interleaved_with = first.interleaved_with;
  time.contended = std::move(contended);
  time.runs = std::move(runs);
  // The bandwidth fraction scales with the time it divides.
  if (pooled.bandwidth_fraction && first_median > 0 && time.median > 0) {
    pooled.bandwidth_fraction = *pooled.bandwidth_fraction * first_median / time.median;
  }
  pooled.time = std::move(time);
  return pooled;
}

std::vector<Record> pool_rounds(const std::vector<std::vector<Record>>& rounds) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<int, Record>>> by_key;
  for (std::size_t index = 0; index < rounds.size(); ++index) {
    for (const Record& record : rounds[index]) {
      auto& list = by_key[record.key()];
      if (list.empty()) order.push_back(record.key());
      if (!list.empty() && list.back().first == int(index) + 1) continue;  // twice in one round: the first
      list.emplace_back(int(index) + 1, record);
    }
  }
  std::vector<Record> pooled;
  pooled.reserve(order.size());
  for (const std::string& key : order) pooled.push_back(pool_processes(by_key.at(key), int(rounds.size())));
  return pooled;
}

std::string round_path(const std::string& directory, int round, int count) {
  return fmt::format("{}/round-{}-of-{}.jsonl", directory, round, count);
}

std::string round_log_path(const std::string& directory, int round, int count) {
  return fmt::format("{}/round-{}-of-{}.log", directory, round, count);
}

std::vector<Record> read_round_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return {};
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return parse_resume_jsonl(bytes, path).records;
}

RoundOutcome run_round_process(const RoundProcess& process, const std::function<void(std::size_t)>& on_record) {
  std::vector<std::string> argv = process.argv;
  argv.insert(argv.end(), {"--out", process.out_path, "--resume"});
  // A round measures the host's rates for its predictions and bandwidth fractions like any sweep, but in
  // 0.2 s rather than a second: a round is one of many processes, and the gate's time goes to rounds.
  std::vector<std::pair<std::string, std::string>> environment = process.environment;
  const char* calibration = std::getenv("FAPROBE_CALIBRATION_SECONDS");
  const bool given = std::any_of(environment.begin(), environment.end(), [](const auto& variable) {
    return variable.first == "FAPROBE_CALIBRATION_SECONDS";
  });
  if ((calibration == nullptr || *calibration == '\0') && !given) {
    environment.emplace_back("FAPROBE_CALIBRATION_SECONDS", std::to_string(kRoundCalibrationSeconds));
  }
  const pid_t pid = start_logged_child(argv, environment, process.log_path);
  FollowedFile records(process.out_path);
  std::size_t seen = read_round_file(process.out_path).size();  // what an earlier try left (resumed)
  records.new_lines();
  RoundOutcome outcome;
  int wait_status = 0;
  for (;;) {
    if (interrupted() && !outcome.interrupted) {
      outcome.interrupted = true;
      kill(-pid, SIGINT);
    }
    const bool exited = waitpid(pid, &wait_status, WNOHANG) == pid;
    seen += records.new_lines().size();
    if (on_record) on_record(seen);
    if (exited) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  outcome.finished = !outcome.interrupted && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) <= 1;
  if (!outcome.finished && !outcome.interrupted) {
    outcome.failure = fmt::format("{} {}; its output ({}):\n{}", process.label, exit_text(wait_status),
                                  process.log_path, tail_of(process.log_path, 5));
  }
  return outcome;
}

RunSummary run_repeated(const Plan& plan, const RunOptions& options, const std::vector<std::string>& child_argv,
                        int repeat, std::ostream& table_out) {
  if (options.out_jsonl.empty() || options.out_jsonl == "-") {
    throw UsageError("--repeat needs --out FILE.jsonl: each round's records are kept beside it until they are pooled");
  }
  const std::string directory = options.out_jsonl + ".rounds";
  std::error_code error;
  if (!options.resume) {
    for (int round = 1; round <= repeat; ++round) {
      const std::string path = round_path(directory, round, repeat);
      if (fs::exists(path, error) && fs::file_size(path, error) > 0) {
        throw UsageError(fmt::format("--repeat: {} holds records of an earlier run; give --resume to continue it (or "
                                     "remove it)",
                                     path));
      }
    }
  }
  const std::shared_ptr<RunFiles> files = options.files ? options.files : open_run_files(options);
  std::set<std::string> done;
  RunSummary summary = resumed_summary(files->resumed, done);
  DocumentRewriter documents(*files, options, summary);
  const std::size_t total = options.shard ? options.shard->keys.size() : plan.size();

  // Every pair pooled already (a crash after the last round's records reached --out): nothing to measure.
  const bool all_pooled = done.size() >= total && total > 0;
  if (!all_pooled) {
    fs::create_directories(directory, error);
    if (error) throw UsageError(fmt::format("--repeat: cannot create {}: {}", directory, error.message()));
    fmt::print(stderr, "repeat: {} rounds, each a process running every pair once; rounds in {}/\n", repeat, directory);
    Progress progress(total * std::size_t(repeat));
    for (int round = 1; round <= repeat && !interrupted(); ++round) {
      const RoundProcess process{child_argv, {}, round_path(directory, round, repeat),
                                 round_log_path(directory, round, repeat), fmt::format("round {} of {}", round, repeat)};
      const RoundOutcome outcome = run_round_process(process, [&](std::size_t records) {
        progress.starting(std::size_t(round - 1) * total + std::min(records, total ? total - 1 : 0),
                          fmt::format("round {} of {}: {} of {} pairs", round, repeat, records, total));
      });
      if (outcome.interrupted) break;
      if (!outcome.finished) {
        progress.clear();
        summary.incomplete.push_back(outcome.failure);
        documents.finish();
        return summary;
      }
    }
    progress.clear();
    if (interrupted()) {
      summary.interrupted = true;
      documents.finish();
      return summary;
    }
  }

  std::vector<std::vector<Record>> rounds;
  for (int round = 1; round <= repeat && !all_pooled; ++round) rounds.push_back(read_round_file(round_path(directory, round, repeat)));
  TableWriter table(table_out);
  for (Record& record : pool_rounds(rounds)) {
    if (!done.insert(record.key()).second) continue;  // pooled by an earlier try (--resume)
    if (files->jsonl) files->jsonl->write(record);
    if (record.status != Status::unsupported || options.show_unsupported) table.write(record);
    summary.count(record);
    ++summary.ran;
    summary.records.push_back(std::move(record));
    documents.update();
  }
  documents.finish();
  // Every pooled record is in --out: the round files are copies of what it holds.
  for (int round = 1; round <= repeat; ++round) {
    fs::remove(round_path(directory, round, repeat), error);
    fs::remove(round_log_path(directory, round, repeat), error);
  }
  fs::remove(directory, error);  // only when empty
  return summary;
}

}  // namespace faprobe
