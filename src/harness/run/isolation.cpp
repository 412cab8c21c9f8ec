#include "harness/run/isolation.hpp"

#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "harness/plan/plugins.hpp"
#include "harness/plan/registry.hpp"
#include "harness/records/writers.hpp"
#include "harness/run/pair_run.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

constexpr std::string_view kRecordPrefix = "faprobe-record ";
constexpr auto kInterruptGrace = std::chrono::seconds(2);  // a forwarded SIGINT, then SIGKILL
constexpr int kRecordFd = 3;                       // where an isolated child writes its record
constexpr std::size_t kOutputTail = 64 << 10;      // of a child's stdout and stderr, the last bytes kept
constexpr std::size_t kMaxRecordBytes = 64 << 20;  // a record channel longer than this is no record


std::string to_hex(const std::string& bytes) {
  std::string hex;
  for (const char ch : bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(ch));
  return hex;
}

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw std::invalid_argument("plugin_hex: odd length");
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    std::size_t used = 0;
    const int value = std::stoi(hex.substr(i, 2), &used, 16);
    if (used != 2) throw std::invalid_argument("plugin_hex: not hex digits");
    bytes += static_cast<char>(value);
  }
  return bytes;
}

// --- The isolated child's job: what run_one needs, as JSON on the child's command line. ---

nlohmann::json make_job(const Implementation& impl, const Case& c, const MeasureSettings& measure,
                        const RunOptions& options) {
  return {{"impl", impl.name()},
          {"case", c},
          {"measure",
           {{"warmup", measure.warmup},
            {"min_samples", measure.min_samples},
            {"max_noise_percent", measure.max_noise_percent},
            {"min_time_s", measure.min_time_s},
            {"max_time_s", measure.max_time_s},
            {"verify", measure.verify},
            {"flush_l2", measure.flush_l2},
            {"threads", measure.threads}}},
          {"timing", options.timing},
          {"mem_limit", options.mem_limit},
          {"rates", {{"gemm_gflops", options.rates.gemm_gflops},
                     {"memory_gbytes_per_s", options.rates.memory_gbytes_per_s}}},
          // The records go to this descriptor, a channel of their own (what the child prints cannot mix in).
          {"record_fd", kRecordFd},
          // The library of a plugin's implementation, which the child loads before it looks the name up: its
          // path in hex, since a file name need not be UTF-8.
          {"plugin_hex", plugin_of(impl.name()) != nullptr ? nlohmann::json(to_hex(plugin_of(impl.name())->path))
                                                           : nlohmann::json()}};
}

// What a child left behind: how it ended, the last kOutputTail bytes of what it printed (with the count of
// bytes dropped before them: a child that prints a megabyte per call costs the parent no more), and what it
// wrote on the record channel.
struct ChildOutcome {
  bool timed_out = false;
  bool interrupted = false;
  int wait_status = 0;
  std::string out, err, records;
  std::size_t out_dropped = 0, err_dropped = 0;
  bool records_too_long = false;
};

// Appends to a tail of at most `limit` bytes; counts what falls out of it.
void append_tail(std::string& tail, std::size_t& dropped, const char* data, std::size_t size, std::size_t limit) {
  tail.append(data, size);
  if (tail.size() > limit) {
    dropped += tail.size() - limit;
    tail.erase(0, tail.size() - limit);
  }
}

std::string signal_text(int signal_number) {
  const char* abbreviation = sigabbrev_np(signal_number);  // glibc 2.32: "SEGV"
  return abbreviation != nullptr ? fmt::format("signal {} (SIG{})", signal_number, abbreviation)
                                 : fmt::format("signal {}", signal_number);
}

std::string last_line(const std::string& text) {
  const std::size_t end = text.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "";
  const std::size_t newline = text.rfind('\n', end);
  const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(begin, end + 1 - begin);
}

// fork + exec of `argv` in its own process group, stdout and stderr captured (their tails) and descriptor
// kRecordFd open for the record; waits until the child has exited and the pipes are closed, the timeout has passed (then SIGKILL to the group), or an interrupt
// (then SIGINT to the group, and SIGKILL after kInterruptGrace).
ChildOutcome run_child(const std::vector<std::string>& argv, double timeout_s) {
  int pipes[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};  // stdout, stderr, records
  const auto close_pipes = [&pipes] {
    for (auto& pipe : pipes)
      for (int& fd : pipe)
        if (fd >= 0) close(std::exchange(fd, -1));
  };
  for (auto& pipe : pipes) {
    if (pipe2(pipe, O_CLOEXEC) != 0) {
      const int error = errno;
      close_pipes();
      throw std::system_error(error, std::generic_category(), "pipe2");
    }
  }
  int(&out_pipe)[2] = pipes[0];
  int(&err_pipe)[2] = pipes[1];
  int(&record_pipe)[2] = pipes[2];
  // Everything the child needs is prepared before fork: between fork and exec only async-signal-safe calls
  // are allowed (the parent has OpenMP threads).
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const std::string exec_failed = fmt::format("faprobe: cannot execute {} for --isolate\n", argv.front());
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    const int error = errno;
    close_pipes();
    throw std::system_error(error, std::generic_category(), "fork");
  }
  if (child == 0) {
    setpgid(0, 0);                    // its own group: a timeout kills it and anything it started
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // and it dies with the parent (a second Ctrl-C exits at once)
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (record_pipe[1] == kRecordFd) {
      fcntl(kRecordFd, F_SETFD, 0);  // already there: only keep it open across exec
    } else {
      dup2(record_pipe[1], kRecordFd);
    }
    close_range(kRecordFd + 1, UINT_MAX, 0);  // no other file of the parent's (a JSONL being written) leaks in
    execv(args[0], args.data());
    const ssize_t ignored = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)ignored;
    _exit(127);
  }
  setpgid(child, child);  // also here, so the group exists whichever process runs first
  for (auto& pipe : pipes) close(std::exchange(pipe[1], -1));

  ChildOutcome outcome;
  using clock = std::chrono::steady_clock;
  const auto deadline =
      clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  auto kill_at = deadline;
  bool reaped = false, killed = false;
  pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {record_pipe[0], POLLIN, 0}};
  for (auto& pipe : pipes) pipe[0] = -1;  // owned by fds from here on
  const auto open_fds = [&fds] { return fds[0].fd >= 0 || fds[1].fd >= 0 || fds[2].fd >= 0; };
  while (!reaped || open_fds()) {
    const auto now = clock::now();
    if (!killed && interrupted() && !outcome.interrupted) {
      outcome.interrupted = true;
      kill(-child, SIGINT);
      kill_at = std::min(deadline, now + kInterruptGrace);
    }
    if (!killed && now >= kill_at) {
      outcome.timed_out = !outcome.interrupted;
      kill(-child, SIGKILL);
      killed = true;
    }
    if (killed && reaped) break;  // a grandchild may hold a pipe; the group was killed, stop reading
    const auto wait = std::clamp<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - now).count(), 0, 100);
    if (poll(fds, 3, killed ? 10 : int(wait)) > 0) {
      for (int i = 0; i < 3; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        char buffer[65536];
        const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
        if (n > 0) {
          const std::size_t size = std::size_t(n);
          if (i == 0) append_tail(outcome.out, outcome.out_dropped, buffer, size, kOutputTail);
          if (i == 1) append_tail(outcome.err, outcome.err_dropped, buffer, size, kOutputTail);
          if (i == 2 && outcome.records.size() + size > kMaxRecordBytes) outcome.records_too_long = true;
          if (i == 2 && !outcome.records_too_long) outcome.records.append(buffer, size);
        } else if (n == 0 || errno != EINTR) {
          close(fds[i].fd);
          fds[i].fd = -1;  // poll ignores negative descriptors
        }
      }
    }
    if (!reaped && waitpid(child, &outcome.wait_status, WNOHANG) == child) reaped = true;
  }
  for (const pollfd& fd : fds)
    if (fd.fd >= 0) close(fd.fd);
  return outcome;
}

Record run_isolated(const Implementation& impl, const Case& c, const MeasureSettings& measure,
                    const RunOptions& options, Record screened) {
  double timeout_s = options.isolate_timeout_s > 0 ? options.isolate_timeout_s : default_isolate_timeout(measure);
  // A pair measured once past --max-time gets the default's margin over its own prediction.
  if (options.isolate_timeout_s <= 0 && one_sample_pair(screened, measure)) {
    timeout_s = std::max(timeout_s, 4 * predicted_pair_seconds(screened.predicted_time_s, measure, options.timing));
  }
  const ChildOutcome child = run_child(
      {options.child_executable, "run", "--isolated-child", make_job(impl, c, measure, options).dump()}, timeout_s);

  // The child's record is the last "faprobe-record" line on its record channel; what it printed on stdout
  // and stderr (their tails) goes to our stderr.
  std::optional<Record> record;
  std::string passed_on;
  const auto pass_on = [&passed_on](const std::string& tail, std::size_t dropped, const char* stream) {
    if (dropped != 0) passed_on += fmt::format("[{} earlier bytes of the isolated child's {} left out]\n", dropped, stream);
    passed_on += tail;
    if (!passed_on.empty() && passed_on.back() != '\n') passed_on += '\n';
  };
  pass_on(child.out, child.out_dropped, "stdout");
  if (child.records_too_long) {
    passed_on += fmt::format("the isolated child's record is longer than {} bytes: ignored\n", kMaxRecordBytes);
  }
  std::istringstream lines(child.records_too_long ? std::string() : child.records);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(kRecordPrefix, 0) != 0) continue;
    try {
      record = nlohmann::json::parse(line.substr(kRecordPrefix.size())).get<Record>();
    } catch (const std::exception& error) {
      passed_on += fmt::format("unreadable record from the isolated child: {}\n", valid_utf8(error.what()));
    }
  }
  pass_on(child.err, child.err_dropped, "stderr");
  if (!passed_on.empty() && !child.interrupted) {
    std::cerr << passed_on << (passed_on.back() == '\n' ? "" : "\n") << std::flush;
  }

  // A record the child wrote stands even if the child then did not exit cleanly (noted in its details).
  const bool exited_cleanly = WIFEXITED(child.wait_status) && WEXITSTATUS(child.wait_status) == 0;
  const std::string exit_text = WIFSIGNALED(child.wait_status)
                                    ? fmt::format("child exited with {}", signal_text(WTERMSIG(child.wait_status)))
                                    : fmt::format("child exited with status {}", WEXITSTATUS(child.wait_status));
  if (record) {
    if (child.timed_out) {
      record->details["child_exit"] = fmt::format("killed: not exited {:g} s after it started", timeout_s);
    } else if (!exited_cleanly) {
      record->details["child_exit"] = exit_text;
    }
  } else {
    Record failed = std::move(screened);
    failed.status = Status::failed;
    if (child.timed_out) {
      failed.reason = fmt::format("timed out after {:g} s (isolated)", timeout_s);
    } else {
      failed.reason = exit_text + (WIFSIGNALED(child.wait_status) ? "" : " without a record");
      if (const std::string line = last_line(child.err); !line.empty()) failed.reason += ": " + valid_utf8(line);
    }
    record = std::move(failed);
  }
  record->details["isolated"] = true;
  return *record;
}

}  // namespace

double default_isolate_timeout(const MeasureSettings& measure) { return std::max(60.0, 4.0 * measure.max_time_s); }

bool runs_isolated(const Implementation& impl, const RunOptions& options) {
  if (options.child_executable.empty()) return false;
  return options.isolate.value_or(impl.isolate_by_default());
}

Record run_pair(const Implementation& impl, const Case& c, const MeasureSettings& measure,
                const RunOptions& options) {
  if (!runs_isolated(impl, options)) return run_one(impl, c, measure, options);
  Record record;
  if (!screen(impl, c, measure, options, /*device_limit=*/false, record)) return record;
  return run_isolated(impl, c, measure, options, std::move(record));
}

int run_isolated_child(const std::string& job_text, std::ostream& out) {
  int record_fd = -1;  // -1: the record goes to `out`
  const Implementation* impl = nullptr;
  Case c;
  MeasureSettings measure;
  RunOptions options;
  try {
    const nlohmann::json job = nlohmann::json::parse(job_text);
    isolate_plugin_entry_points(false, 0);  // this process is the isolation
    if (job.contains("plugin_hex") && !job.at("plugin_hex").is_null()) {
      load_plugins({{from_hex(job.at("plugin_hex").get<std::string>()), "--isolated-child plugin"}});
    }
    if (job.contains("record_fd")) record_fd = job.at("record_fd").get<int>();
    impl = find_implementation(job.at("impl").get<std::string>());
    if (impl == nullptr) throw std::invalid_argument("unknown implementation " + job.at("impl").dump());
    c = job.at("case").get<Case>();
    const nlohmann::json& m = job.at("measure");
    measure.warmup = m.at("warmup").get<int>();
    measure.min_samples = m.at("min_samples").get<int>();
    measure.max_noise_percent = m.at("max_noise_percent").get<double>();
    measure.min_time_s = m.at("min_time_s").get<double>();
    measure.max_time_s = m.at("max_time_s").get<double>();
    measure.verify = m.at("verify").get<bool>();
    measure.flush_l2 = m.at("flush_l2").get<bool>();
    measure.threads = m.at("threads").get<int>();
    options.timing = job.at("timing").get<bool>();
    options.mem_limit = job.at("mem_limit").get<std::uint64_t>();
    options.rates.gemm_gflops = job.at("rates").at("gemm_gflops").get<double>();
    options.rates.memory_gbytes_per_s = job.at("rates").at("memory_gbytes_per_s").get<double>();
    // The job is input like any other: a case the parent would have refused (kv_heads 0 would divide by
    // zero) or settings out of their flags' ranges are refused here too, before anything runs.
    c.validate();
    const bool in_range = measure.warmup >= 0 && measure.min_samples >= 1 && measure.max_noise_percent >= 0 &&
                          measure.min_time_s >= 0 && measure.max_time_s > 0 && measure.threads >= 0 &&
                          std::isfinite(measure.max_noise_percent + measure.min_time_s + measure.max_time_s) &&
                          std::isfinite(options.rates.gemm_gflops) && options.rates.gemm_gflops > 0 &&
                          std::isfinite(options.rates.memory_gbytes_per_s) && options.rates.memory_gbytes_per_s > 0;
    if (!in_range) throw std::invalid_argument("a measure setting or rate is out of range");
  } catch (const std::exception& error) {
    std::cerr << "faprobe: --isolated-child: not a job: " << error.what() << std::endl;
    return kExitUsage;
  }
  if (measure.threads > 0) omp_set_num_threads(measure.threads);
  const Record record = run_one(*impl, c, measure, options);
  const std::string line = std::string(kRecordPrefix) + jsonl_line(record);
  if (record_fd < 0) {
    out << line << std::flush;
    return kExitOk;
  }
  for (std::size_t written = 0; written < line.size();) {
    const ssize_t n = write(record_fd, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::cerr << "faprobe: --isolated-child: cannot write the record: " << std::strerror(errno) << std::endl;
      return kExitFailed;
    }
    written += std::size_t(n);
  }
  return kExitOk;
}

}  // namespace faprobe
