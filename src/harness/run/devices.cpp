#include "harness/run/devices.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/child_process.hpp"
#include "harness/io/progress.hpp"
#include "harness/records/jsonl_reader.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kAllowed = "allowed: all, or device numbers like 0,2,3";

struct Worker {
  DeviceWorker spec;
  std::string out_path, log_path;
  pid_t pid = -1;
  bool exited = false;
  int wait_status = 0;
  FollowedFile records_file{""};  // its JSONL, as it grows
  std::size_t records = 0;   // records relayed from it
  std::string label() const {
    return fmt::format("GPU {} (shard {}/{})", spec.device, spec.shard.index, spec.shard.count);
  }
};

pid_t start_worker(const Worker& worker) {
  return start_logged_child(worker.spec.argv, {{"CUDA_VISIBLE_DEVICES", std::to_string(worker.spec.device)}},
                            worker.log_path);
}

// With --resume: the records --out holds of a worker's shard go into the worker's own file first (where that
// file lacks them), so that the worker, resumed from its file, does not run them again; a torn last line of
// the file (a crash) is cut off first, as the worker's own --resume would.
void seed_worker_file(const Worker& worker, const std::vector<Record>& resumed, const std::string& fingerprint) {
  std::string bytes;
  {
    std::ifstream file(worker.out_path, std::ios::binary);
    if (file) bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  const ResumeFile existing = parse_resume_jsonl(bytes, worker.out_path);
  std::set<std::string> present;
  for (const Record& record : existing.records) present.insert(record.key());
  std::string text = bytes.substr(0, existing.good_bytes);
  if (existing.missing_newline) text += "\n";
  const std::size_t kept = text.size();
  for (const Record& record : resumed) {
    const bool ours = record.shard && record.shard->plan_fingerprint == fingerprint &&
                      record.shard->index == worker.spec.shard.index && record.shard->count == worker.spec.shard.count;
    if (ours && present.insert(record.key()).second) text += jsonl_line(record);
  }
  if (text.size() == kept && kept == bytes.size()) return;  // nothing to add or cut
  std::ofstream file(worker.out_path, std::ios::binary | std::ios::trunc);
  file << text;
  if (!file.flush()) throw OutputError(fmt::format("--devices: cannot write {}", worker.out_path));
}

}  // namespace

std::vector<int> parse_devices(std::string_view text, int available, const std::string& no_device_reason) {
  std::vector<int> devices;
  if (text != "all") {
    std::set<int> seen;
    std::size_t begin = 0;
    while (begin <= text.size()) {
      const std::size_t comma = std::min(text.find(',', begin), text.size());
      const std::string_view item = text.substr(begin, comma - begin);
      int device = -1;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), device);
      if (item.empty() || error != std::errc() || end != item.data() + item.size() || device < 0 || device > 1023) {
        throw UsageError(fmt::format("--devices: '{}' is not a device ({})", item, kAllowed));
      }
      if (!seen.insert(device).second) throw UsageError(fmt::format("--devices: device {} is named twice", device));
      devices.push_back(device);
      begin = comma + 1;
    }
  }
  if (available == 0) {
    throw UsageError(fmt::format("--devices {}: this machine has no CUDA device ({}); run without --devices", text,
                                 no_device_reason.empty() ? "none found" : no_device_reason));
  }
  if (text == "all") {
    for (int device = 0; device < available; ++device) devices.push_back(device);
    return devices;
  }
  for (const int device : devices) {
    if (device >= available) {
      throw UsageError(fmt::format("--devices: there is no device {} (this machine has {}: 0..{})", device, available,
                                   available - 1));
    }
  }
  return devices;
}

Shard worker_shard(Shard node, int position, int count) {
  if (!node) return {position + 1, count};
  return {(node.index - 1) * count + position + 1, node.count * count};
}

RunSummary run_on_devices(const Plan& plan, const RunOptions& options, std::vector<DeviceWorker> specs,
                          std::ostream& table_out) {
  if (options.out_jsonl.empty() || options.out_jsonl == "-") {
    throw UsageError("--devices needs --out FILE.jsonl: the workers' records are collected there");
  }
  const std::string directory = options.out_jsonl + ".workers";
  std::vector<Worker> workers;
  for (DeviceWorker& spec : specs) {
    Worker worker;
    const std::string stem = fmt::format("shard-{}-of-{}", spec.shard.index, spec.shard.count);
    worker.out_path = directory + "/" + stem + ".jsonl";
    worker.log_path = directory + "/" + stem + ".log";
    worker.records_file = FollowedFile(worker.out_path);
    std::error_code error;
    if (!options.resume && fs::exists(worker.out_path, error) && fs::file_size(worker.out_path, error) > 0) {
      throw UsageError(fmt::format("--devices: {} holds records of an earlier run; give --resume to continue it (or "
                                   "remove it)",
                                   worker.out_path));
    }
    spec.argv.insert(spec.argv.end(), {"--shard", fmt::format("{}/{}", spec.shard.index, spec.shard.count), "--out",
                                       worker.out_path, "--resume"});
    worker.spec = std::move(spec);
    workers.push_back(std::move(worker));
  }
  const std::shared_ptr<RunFiles> files = options.files ? options.files : open_run_files(options);
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) throw UsageError(fmt::format("--devices: cannot create {}: {}", directory, error.message()));

  std::set<std::string> done;
  RunSummary summary = resumed_summary(files->resumed, done);
  DocumentRewriter documents(*files, options, summary);
  TableWriter table(table_out);

  if (options.resume) {
    for (const Worker& worker : workers) seed_worker_file(worker, files->resumed, plan_fingerprint(plan_pairs(plan)));
  }
  const std::size_t total = options.shard ? options.shard->keys.size() : plan.size();
  Progress progress(total);
  for (Worker& worker : workers) worker.pid = start_worker(worker);
  std::vector<std::string> names;
  for (const Worker& worker : workers) names.push_back(worker.label());
  fmt::print(stderr, "devices: {} workers: {}; their records stream to {} (workers' files in {}/)\n", workers.size(),
             fmt::join(names, ", "), options.out_jsonl, directory);

  bool forwarded = false;
  auto relay = [&] {
    for (Worker& worker : workers) {
      for (const std::string& line : worker.records_file.new_lines()) {
        Record record;
        try {
          record = nlohmann::json::parse(line).get<Record>();
        } catch (const std::exception& parse_error) {
          fmt::print(stderr, "faprobe: warning: {}: unreadable record skipped: {}\n", worker.out_path,
                     shortened_error(parse_error.what()));
          continue;
        }
        ++worker.records;
        if (!done.insert(record.key()).second) continue;  // --out has it already (resumed)
        files->jsonl->write(record);
        progress.clear();
        if (record.status != Status::unsupported || options.show_unsupported) table.write(record);
        summary.count(record);
        ++summary.ran;
        summary.records.push_back(std::move(record));
        documents.update();
      }
    }
  };
  for (;;) {
    if (interrupted() && !forwarded) {
      forwarded = true;
      for (const Worker& worker : workers)
        if (!worker.exited) kill(-worker.pid, SIGINT);
    }
    bool running = false;
    for (Worker& worker : workers) {
      if (worker.exited) continue;
      if (waitpid(worker.pid, &worker.wait_status, WNOHANG) == worker.pid) {
        worker.exited = true;
      } else {
        running = true;
      }
    }
    relay();
    if (!running) break;
    std::vector<std::string> counts;
    for (const Worker& worker : workers) {
      counts.push_back(fmt::format("GPU {}: {}", worker.spec.device, worker.records));
    }
    progress.starting(std::min(summary.records.size(), total ? total - 1 : 0),
                      fmt::format("{}", fmt::join(counts, ", ")));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  relay();
  progress.clear();

  // A worker exits 0 or 1 (a mismatch or a failed pair, recorded) when its part is done; anything else means
  // pairs of its part may be missing.
  bool all_finished = !forwarded;
  for (const Worker& worker : workers) {
    const bool finished = WIFEXITED(worker.wait_status) && WEXITSTATUS(worker.wait_status) <= 1;
    if (finished) continue;
    all_finished = false;
    if (forwarded) continue;
    summary.incomplete.push_back(fmt::format("{} {} after {} records; its output ({}):\n{}", worker.label(),
                                             exit_text(worker.wait_status), worker.records, worker.log_path,
                                             tail_of(worker.log_path, 5)));
  }
  // The workers' warnings (a GPU slowed down by its power cap, a torn line dropped) would go with their logs.
  for (const Worker& worker : workers) {
    std::ifstream log(worker.log_path);
    for (std::string line; std::getline(log, line);) {
      if (line.find("warning") != std::string::npos) table_out << worker.label() << ": " << line << "\n";
    }
  }
  summary.interrupted = forwarded;
  documents.finish();
  if (all_finished) {  // every record is in --out: the workers' files are copies
    for (const Worker& worker : workers) {
      fs::remove(worker.out_path, error);
      fs::remove(worker.log_path, error);
    }
    fs::remove(directory, error);  // only when empty
  }
  return summary;
}

}  // namespace faprobe
