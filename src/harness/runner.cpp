#include "harness/runner.hpp"

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
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/contention.hpp"
#include "harness/interleave.hpp"
#include "harness/measure.hpp"
#include "harness/plugins.hpp"
#include "harness/progress.hpp"
#include "harness/provenance.hpp"
#include "harness/range.hpp"
#include "harness/writers.hpp"
#include "model/errors.hpp"
#include "model/host_info.hpp"
#include "model/memory.hpp"
#include "reference/check.hpp"

namespace faprobe {
namespace {

constexpr std::string_view kRecordPrefix = "faprobe-record ";
constexpr auto kInterruptGrace = std::chrono::seconds(2);  // a forwarded SIGINT, then SIGKILL
constexpr int kRecordFd = 3;                       // where an isolated child writes its record
constexpr std::size_t kOutputTail = 64 << 10;      // of a child's stdout and stderr, the last bytes kept
constexpr std::size_t kMaxRecordBytes = 64 << 20;  // a record channel longer than this is no record

}  // namespace

// FAPROBE_TEST_FAULT=KIND[@SEQ_K] (see runner.hpp): a planted fault for the tests of fault handling.
void apply_test_fault(const Case& c) {
  const char* setting = std::getenv("FAPROBE_TEST_FAULT");
  if (setting == nullptr || *setting == '\0') return;
  const std::string text = setting;
  const std::size_t at = text.find('@');
  const std::string kind = text.substr(0, at);
  if (at != std::string::npos && text.substr(at + 1) != std::to_string(c.seq_k)) return;
  if (kind == "throw") throw std::runtime_error("FAPROBE_TEST_FAULT: planted error (throw)");
  if (kind == "crash") {
    const rlimit no_core{0, 0};  // a planted crash leaves no core file behind
    setrlimit(RLIMIT_CORE, &no_core);
    std::signal(SIGSEGV, SIG_DFL);  // past any handler a sanitizer installed: die as a real crash would
    std::raise(SIGSEGV);
  }
  if (kind == "hang") {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  throw std::runtime_error(fmt::format("FAPROBE_TEST_FAULT: unknown fault '{}' (allowed: throw, crash, hang)", kind));
}

bool screen(const Implementation& impl, const Case& c, const MeasureSettings& measure, const RunOptions& options,
            bool device_limit, Record& record) {
  record.impl = impl.name();
  record.device = impl.device();
  record.c = c;
  try {
    if (std::string why = impl.supports(c); !why.empty()) {
      record.status = Status::unsupported;
      record.reason = why;
      return false;
    }
    record.memory.predicted_bytes = impl.predicted_bytes(c);
    record.predicted_time_s = impl.predicted_seconds(c, options.rates);
  } catch (const std::exception& error) {  // a plugin's supports() or workspace_bytes() crashed, hung or lied
    record.status = Status::failed;
    record.reason = valid_utf8(error.what());
    return false;
  }
  if (options.mem_limit != 0 || device_limit) {
    std::uint64_t mem_limit = options.mem_limit != 0 ? options.mem_limit : impl.default_memory_limit();
    // The default limit is a reading of free memory that another process may have lowered for a moment:
    // read again before skipping on it.
    if (options.mem_limit == 0 && record.memory.predicted_bytes > mem_limit) mem_limit = impl.default_memory_limit();
    if (record.memory.predicted_bytes > mem_limit) {
      record.status = Status::skipped;
      record.reason = fmt::format("needs {}, limit {}", format_bytes(double(record.memory.predicted_bytes)),
                                  format_bytes(double(mem_limit)));
      if (options.mem_limit == 0) {
        const std::string source = impl.default_memory_limit_source();
        record.reason += source.empty() ? " (default)" : fmt::format(" (default, bound by {})", source);
      }
      return false;
    }
  }
  // In a timed run --min-samples 1 says one sample is enough: such a pair runs once however long
  // (one_sample_pair). verify samples nothing, so its --max-time alone decides.
  if (record.predicted_time_s > measure.max_time_s && (measure.min_samples > 1 || !options.timing)) {
    record.status = Status::skipped;
    record.reason = fmt::format("predicted {} per run, budget {} (--max-time){}",
                                format_seconds(record.predicted_time_s), format_seconds(measure.max_time_s),
                                options.timing ? "; --min-samples 1 runs it once" : "");
    return false;
  }
  return true;
}

bool one_sample_pair(const Record& screened, const MeasureSettings& measure) {
  return measure.min_samples == 1 && screened.predicted_time_s > measure.max_time_s;
}

MeasureSettings sampling_settings(const Record& screened, const MeasureSettings& measure, double first_run_s) {
  MeasureSettings rest = measure;
  rest.warmup = std::max(0, measure.warmup - 1);  // the first run was one
  rest.max_time_s = std::max(0.0, measure.max_time_s - first_run_s);
  if (one_sample_pair(screened, measure)) {
    rest.warmup = 0;
    rest.min_samples = 1;
    rest.max_time_s = 0;  // the sampler's first sample is always taken; none after it
  }
  return rest;
}

double predicted_pair_seconds(double per_run_s, const MeasureSettings& measure, bool timed) {
  const double t = per_run_s;
  if (!(t > 0) || !std::isfinite(t)) return 0;
  if (!timed) return t;                        // verify, emulated: the checked run alone
  if (t > measure.max_time_s) return 2 * t;    // one_sample_pair: the checked run and one sample
  // As run_one and Sampler take them: after the first run, warm-ups while the budget lasts, then samples
  // until --min-samples and --min-time (one at least), or until the budget is spent.
  const double budget = std::max(0.0, measure.max_time_s - t);
  const double warmups = std::min(double(std::max(0, measure.warmup - 1)), std::ceil(budget / t));
  const double wanted = std::max(double(measure.min_samples), std::ceil(measure.min_time_s / t));
  const double left = budget - warmups * t;
  const double samples = std::max(1.0, std::min(wanted, left > 0 ? std::ceil(left / t) : 0.0));
  return t * (1 + warmups + samples);
}

double first_run_checked(const Implementation& impl, const Case& c, PreparedCase& prepared,
                         const MeasureSettings& measure, Record& record) {
  // The checked run writes into outputs that are all NaN, so that what it leaves unwritten fails the check
  // (PreparedCase::poison_outputs); the timed samples after it are not poisoned.
  if (measure.verify) prepared.poison_outputs();
  const double seconds = prepared.timed_run();
  if (!measure.verify) return seconds;
  // The checker regenerates the inputs itself rather than trusting the implementation's copy.
  record.verify = check_output(c, GeneratedInputs(c, impl.qk_transform()), prepared.output(), prepared.lse());
  if (c.dtype == DType::fp8_e4m3) add_exact_inputs_error(c, prepared.output(), *record.verify);
  if (!record.verify->passed) {
    record.status = Status::mismatch;
    record.reason = record.verify->note;
  }
  return seconds;
}

void record_failure(Record& record, const std::exception_ptr& error) {
  record.status = Status::failed;
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc&) {
    record.reason = fmt::format("out of host memory (predicted {})", format_bytes(double(record.memory.predicted_bytes)));
  } catch (const std::exception& failure) {
    record.reason = valid_utf8(failure.what());
  }
}

namespace {

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

std::optional<double> bandwidth_fraction(const Implementation& impl, const Record& record,
                                         const MachineRates& rates) {
  const double copy_gbytes_per_s = impl.runs_on_gpu() ? rates.gpu_copy_gbytes_per_s : rates.memory_gbytes_per_s;
  const std::optional<double> gbytes_per_s = record.gbytes_per_s();
  if (!impl.timed() || !gbytes_per_s || copy_gbytes_per_s <= 0) return std::nullopt;
  return *gbytes_per_s / copy_gbytes_per_s;
}

double default_isolate_timeout(const MeasureSettings& measure) { return std::max(60.0, 4.0 * measure.max_time_s); }

bool runs_isolated(const Implementation& impl, const RunOptions& options) {
  if (options.child_executable.empty()) return false;
  return options.isolate.value_or(impl.isolate_by_default());
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

Record run_one(const Implementation& impl, const Case& c, const MeasureSettings& measure,
               const RunOptions& options) {
  Record record;
  if (!screen(impl, c, measure, options, /*device_limit=*/true, record)) return record;

  try {
    apply_test_fault(c);
    host_memory().reset_peaks();
    auto prepared = impl.prepare(c);
    prepared->configure(measure);
    const double first_run = first_run_checked(impl, c, *prepared, measure, record);  // also the first warm-up run
    if (options.timing && impl.timed() && !interrupted()) {
      const MeasureSettings rest = sampling_settings(record, measure, first_run);
      record.time = faprobe::measure([&] { return prepared->timed_run(); }, rest, interrupted,
                                     contention_context(impl.runs_on_gpu(), measure.threads));
      if (record.time->samples == 0) record.time.reset();
    }
    const MemoryCounters counters = prepared->device_memory().value_or(host_memory().counters());
    record.memory.peak_bytes = counters.peak_bytes;
    record.memory.workspace_bytes = counters.workspace_bytes;
    record.details = prepared->details();
    if (!impl.timed()) record.details["timed"] = false;
  } catch (const std::exception&) {
    record_failure(record, std::current_exception());
  }
  return record;
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
  const std::string line = std::string(kRecordPrefix) +
                           nlohmann::json(record).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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
