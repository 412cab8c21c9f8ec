#include "harness/run/pair_run.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "harness/io/range.hpp"
#include "harness/run/contention.hpp"
#include "model/errors.hpp"
#include "reference/check.hpp"

namespace faprobe {

// FAPROBE_TEST_FAULT=KIND[@SEQ_K] (see pair_run.hpp): a planted fault for the tests of fault handling.
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

MemoryCounters used_memory(const PreparedCase& prepared) {
  return prepared.device_memory().value_or(host_memory().counters());
}

void record_measured(const PreparedCase& prepared, const MemoryCounters& counters, std::optional<TimeStats> time,
                     Record& record) {
  if (time && time->samples == 0) time.reset();
  record.time = std::move(time);
  record.memory.peak_bytes = counters.peak_bytes;
  record.memory.workspace_bytes = counters.workspace_bytes;
  record.details = prepared.details();  // last: a plugin's details() may throw, leaving the rest filled
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
    std::optional<TimeStats> time;
    if (options.timing && impl.timed() && !interrupted()) {
      const MeasureSettings rest = sampling_settings(record, measure, first_run);
      time = faprobe::measure([&] { return prepared->timed_run(); }, rest, interrupted,
                              contention_context(impl.runs_on_gpu(), measure.threads));
    }
    record_measured(*prepared, used_memory(*prepared), std::move(time), record);
    if (!impl.timed()) record.details["timed"] = false;
  } catch (const std::exception&) {
    record_failure(record, std::current_exception());
  }
  return record;
}

}  // namespace faprobe
