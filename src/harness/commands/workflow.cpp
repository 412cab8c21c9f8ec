#include "harness/commands/workflow.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cpu/cpu_isa.hpp"
#include "cuda/runtime/gpu.hpp"
#include "cuda/runtime/nvml.hpp"
#include "harness/io/build_info.hpp"
#include "harness/io/range.hpp"
#include "harness/plan/plugins.hpp"
#include "harness/records/writers.hpp"
#include "harness/run/calibrate.hpp"
#include "harness/run/isolation.hpp"
#include "harness/run/repeat.hpp"
#include "model/errors.hpp"
#include "model/host_info.hpp"

namespace faprobe {
namespace {
std::string g_command_line;
std::vector<std::string> g_arguments;  // argv, for --devices' workers and --repeat's rounds

// The cores this process may run on (its affinity mask, as `taskset` and Slurm set it); the machine's count
// where the mask cannot be read.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return std::max(1, int(std::thread::hardware_concurrency()));
}

// How long the host's rates are measured before a run: a second before timed runs (sweep, run), 0.2 s before
// verify; FAPROBE_CALIBRATION_SECONDS sets it (0.01 to 60), for scripts and test suites that start many short
// runs. The run's --json records the time used (rates.calibration_seconds).
double calibration_seconds(bool timing) {
  const char* setting = std::getenv("FAPROBE_CALIBRATION_SECONDS");
  if (setting == nullptr || *setting == '\0') return timing ? 1.0 : 0.2;
  return parse_number(setting, "FAPROBE_CALIBRATION_SECONDS", 0.01, 60.0);
}

// More threads than the cores this process may run on: they take turns on the cores, so the times are the
// scheduler's as much as the kernel's. A warning, not an error: oversubscribing is sometimes what is studied.
void warn_threads_beyond_cores(const MeasureSettings& measure, const SettingsSource& source) {
  const int cores = usable_cores();
  if (measure.threads <= cores) return;
  const auto it = source.values().find("threads");
  fmt::print(stderr, "faprobe: warning: {} {} is more than the {} cores this process may use; threads will take turns "
             "on them and times will be slower than the machine can do\n",
             it != source.values().end() ? it->second.origin : std::string("--threads"), measure.threads, cores);
}

}  // namespace

SettingsSource settings_source(const CommandSettings& settings, const char* default_config,
                               const char* default_config_name) {
  SettingsSource source;
  bool any_axis_flag = false;
  for (const std::string& key : axis_keys()) {
    if (key == "impl") continue;  // --impl alone narrows the default sweep rather than replacing it
    if (settings.given(key)) any_axis_flag = true;
  }
  if (!settings.config.empty()) {
    source.load_config_file(settings.config);
  } else if (!any_axis_flag && default_config != nullptr) {
    source.load_config_text(default_config, default_config_name);
  }
  for (const auto& [key, given] : settings.values) source.set(key, given.text, given.flag);
  if (settings.no_verify) source.set("verify", "false", "--no-verify");
  if (settings.no_flush_l2) source.set("flush_l2", "false", "--no-flush-l2");
  if (settings.interleave) source.set("interleave", "true", "--interleave");
  if (settings.no_interleave) source.set("interleave", "false", "--no-interleave");
  if (settings.isolate) source.set("isolate", "true", "--isolate");
  if (settings.no_isolate) source.set("isolate", "false", "--no-isolate");
  for (const std::string& library : settings.plugins) source.add_plugin({library, "--plugin"});
  load_requested_plugins(source);
  return source;
}

void load_requested_plugins(const SettingsSource& source) {
  std::vector<PluginRequest> requests = plugin_requests_from_environment();
  requests.insert(requests.end(), source.plugins().begin(), source.plugins().end());
  load_plugins(requests);
}

void set_command_line(int argc, char** argv) {
  g_command_line.clear();
  g_arguments.assign(argv, argv + argc);
  for (int i = 0; i < argc; ++i) g_command_line += (i ? " " : "") + std::string(argv[i]);
}

std::vector<std::string> this_command_without(const std::set<std::string>& options_with_value,
                                              const std::set<std::string>& flags) {
  std::vector<std::string> command{"/proc/self/exe"};
  for (std::size_t i = 1; i < g_arguments.size(); ++i) {
    const std::string& argument = g_arguments[i];
    const std::string flag = argument.substr(0, argument.find('='));
    if (flags.count(argument) != 0) continue;
    if (options_with_value.count(flag) != 0) {
      if (flag == argument) ++i;  // and its value
      continue;
    }
    command.push_back(argument);
  }
  return command;
}

int repeat_setting(const SettingsSource& source) {
  const auto it = source.values().find("repeat");
  if (it == source.values().end()) return 1;
  return int(parse_integer(it->second.text, it->second.origin, 1, kMaxRepeat));
}

std::vector<DeviceWorker> plan_device_workers(const Plan& plan, const CommandSettings& settings, bool timing) {
  if (settings.devices.empty()) return {};
  if (timing) {
    std::vector<std::string> on_cpu;
    for (const std::string& name : plan.impls) {
      const Implementation* impl = find_implementation(name);
      if (impl != nullptr && !impl->runs_on_gpu() && impl->timed()) on_cpu.push_back(name);
    }
    if (!on_cpu.empty()) {
      throw UsageError(fmt::format("--devices: this sweep times {} on the CPU; timed side by side, CPU cases disturb each "
                                   "other's timing (run them without --devices, or name only GPU implementations "
                                   "with --impl)",
                                   fmt::join(on_cpu, ", ")));
    }
  }
  // FAPROBE_TEST_DEVICE_COUNT=N stands in for N devices, for the tests of the workers on a machine without a
  // GPU (a verify of CPU implementations); nothing else sets it.
  int available = static_cast<int>(gpu::devices().size());
  if (const char* count = std::getenv("FAPROBE_TEST_DEVICE_COUNT"); count != nullptr && *count != '\0') {
    available = static_cast<int>(parse_number(count, "FAPROBE_TEST_DEVICE_COUNT", 0, 64));
  }
  const std::vector<int> devices = parse_devices(settings.devices, available, gpu::no_device_reason());
  // The worker's command line: this one without what the parent keeps (outputs, --resume) or replaces
  // (--shard, --devices).
  const std::vector<std::string> base =
      this_command_without({"--out", "--json", "--csv", "--md", "--shard", "--devices"}, {"--resume"});
  const Shard node = settings.shard.empty() ? Shard{} : parse_shard_setting(settings.shard);
  std::vector<DeviceWorker> workers;
  for (std::size_t position = 0; position < devices.size(); ++position) {
    workers.push_back({devices[position], worker_shard(node, int(position), int(devices.size())), base});
  }
  return workers;
}
std::string command_line() { return g_command_line; }

DeviceScan scan_devices() {
  DeviceScan scan;
  for (const gpu::DeviceInfo& device : gpu::devices()) scan.devices.push_back(device);
  if (scan.devices.empty()) scan.no_device_reason = gpu::no_device_reason();
  return scan;
}

void narrow_to_this_machine(Plan& plan, bool verify) {
  if (plan.impls_named) return;
  const bool has_gpu = !gpu::devices().empty();
  auto keep = [&](const std::string& name) {
    if (name.rfind("cuda.", 0) == 0) return has_gpu;
    if (name.rfind("emu.", 0) == 0) return verify && !has_gpu;
    return true;
  };
  for (PlanPart& part : plan.parts) part.impls.erase(std::remove_if(part.impls.begin(), part.impls.end(),
                                                                    [&](const std::string& name) { return !keep(name); }),
                                                     part.impls.end());
  plan.impls.erase(std::remove_if(plan.impls.begin(), plan.impls.end(), [&](const std::string& name) { return !keep(name); }),
                   plan.impls.end());
}

namespace {
// Now, through strftime's `format`, in local time or UTC.
std::string time_now(const char* format, bool utc) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm parts{};
  if (utc) {
    gmtime_r(&now, &parts);
  } else {
    localtime_r(&now, &parts);
  }
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), format, &parts);
  return stamp;
}
}  // namespace

std::string local_time_stamp() { return time_now("%Y%m%d-%H%M%S", false); }

std::string utc_time_now() { return time_now("%Y-%m-%dT%H:%M:%SZ", true); }

nlohmann::json run_metadata(const nlohmann::json& rates) {
  const std::string stamp = utc_time_now();
  const DeviceScan scan = scan_devices();
  nlohmann::json metadata{{"schema", "faprobe/1"},
                          {"version", FAPROBE_VERSION},
                          {"git_revision", build_info().git_revision},
                          {"build", build_info()},
                          {"command", g_command_line},
                          {"time", stamp},
                          {"host", host_info()},
                          {"devices", scan.devices},
                          {"rates", rates}};
  if (scan.devices.empty()) metadata["no_device_reason"] = scan.no_device_reason;
  if (!loaded_plugins().empty()) metadata["plugins"] = plugins_metadata();
  return metadata;
}

RunOptions make_run_options(const Plan& plan, const SettingsSource& source, const CommandSettings& settings,
                            const OutputOptions& output, bool timing, bool dry_run) {
  const double calibration_s = calibration_seconds(timing);  // a bad setting is refused before any file is opened
  warn_threads_beyond_cores(plan.measure, source);
  try {
    cpu::max_cpu_isa_setting();  // the CPU kernels' cap (cpu/cpu_isa.hpp), refused here rather than per case
    cpu::cpu_path_setting();     // and their forced path
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  RunOptions options;
  options.timing = timing;
  options.strict = settings.strict;
  if (!settings.shard.empty()) {
    options.shard = select_shard(plan, parse_shard_setting(settings.shard));
    const ShardSelection& shard = *options.shard;
    fmt::print(stderr, "shard {}/{} of plan {}: {} of its {} pairs, {:.3g} s of {:.3g} s at the partition's reference "
               "rates\n", shard.shard.index, shard.shard.count, shard.fingerprint, shard.keys.size(), shard.plan_pairs,
               shard.cost, shard.plan_cost);
  }
  if (options.strict) require_supported(plan);  // one line and exit 2 before anything is printed or measured
  if (const auto it = source.values().find("isolate"); it != source.values().end()) {
    const std::string& text = it->second.text;
    if (text != "true" && text != "false" && text != "1" && text != "0") {
      throw UsageError(fmt::format("{}: '{}' is not a boolean (allowed: true, false)", it->second.origin, text));
    }
    options.isolate = text == "true" || text == "1";
  }
  if (const auto it = source.values().find("isolate_timeout"); it != source.values().end()) {
    options.isolate_timeout_s = parse_number(it->second.text, it->second.origin, 0.1, 1e6);
  }
  if (const auto it = source.values().find("max_total"); it != source.values().end()) {
    options.max_total_s = parse_number(it->second.text, it->second.origin, 0.001, 1e7);
  }
  // Interleaving samples the implementations of a case in turn, in this process: it cannot span children.
  if (timing && plan.measure.interleave) {
    const std::string& interleave_origin = source.values().at("interleave").origin;
    if (options.isolate.value_or(false)) {
      throw UsageError(fmt::format("{} cannot be combined with {}: interleaved implementations are sampled in turn "
                                   "in one process (allowed: --interleave with --no-isolate or neither)",
                                   source.values().at("isolate").origin, interleave_origin));
    }
    std::vector<std::string> isolated_by_default;
    for (const std::string& name : plan.impls) {
      const Implementation* impl = find_implementation(name);
      if (impl != nullptr && impl->isolate_by_default()) isolated_by_default.push_back(name);
    }
    if (!isolated_by_default.empty()) {
      fmt::print(stderr, "faprobe: warning: {} runs {} in this process, not isolated: a crash or a hang there ends "
                 "the run\n", interleave_origin, fmt::join(isolated_by_default, ", "));
    }
    options.isolate = false;
  }
  isolate_plugin_entry_points(options.isolate.value_or(true), options.isolate_timeout_s > 0
                                                                  ? options.isolate_timeout_s
                                                                  : default_isolate_timeout(plan.measure));
  options.child_executable = "/proc/self/exe";  // this program, re-executed by --isolate
  options.out_jsonl = output.out_jsonl;
  options.json_path = output.json;
  options.csv_path = output.csv;
  options.md_path = output.md;
  options.resume = output.resume;
  if (output.resume && output.out_jsonl.empty()) {
    throw UsageError("--resume needs --out FILE.jsonl (the records to resume from)");
  }
  // Every output checked, --out locked and resumed (or, without --resume, refused where it holds a record of
  // one of this run's pairs), before the calibration below: that measures too, and a run that cannot keep its
  // results should not start.
  std::set<std::string> keys;
  for (const PlanPair& pair : plan_pairs(plan))
    if (!options.shard || options.shard->keys.count(pair.key()) > 0) keys.insert(pair.key());
  options.planned_keys = std::move(keys);
  if (!dry_run) options.files = open_run_files(options);  // a dry run writes nothing
  options.mem_limit = plan.measure.mem_limit.value_or(0);  // 0: each implementation's device default
  // At the run's thread count (--threads; every core without it): a one-thread run's ceiling is one core's.
  const HostCalibration calibration = calibrate_host(calibration_s, plan.measure.threads);
  options.rates = calibration.rates();
  options.rate_threads = calibration.threads;
  nlohmann::json rates = calibration.to_json();
  rates["calibration_seconds"] = calibration_s;
  // The GPU's ceilings, for the bandwidth fraction of GPU records: only when they will be timed. This
  // process keeps its CUDA context afterwards, but no device memory (gpu::measure_gpu_rates frees it all).
  // A --devices parent runs nothing itself: its workers measure their own GPUs.
  const bool times_gpu = timing && settings.devices.empty() && std::any_of(plan.impls.begin(), plan.impls.end(), [](const std::string& name) {
                           const Implementation* impl = find_implementation(name);
                           return impl != nullptr && impl->runs_on_gpu() && impl->timed();
                         });
  if (times_gpu) {
    try {
      if (const std::optional<gpu::GpuRates> gpu_rates = calibrate_gpu(1.0)) {
        options.rates.gpu_copy_gbytes_per_s = gpu_rates->copy_gbytes_per_s;
        options.rates.gpu_bf16_gemm_tflops = gpu_rates->bf16_gemm_tflops;
        rates["gpu"] = {{"name", gpu::devices().front().name},
                        {"copy_gbytes_per_s", gpu_rates->copy_gbytes_per_s},
                        {"bf16_gemm_tflops", gpu_rates->bf16_gemm_tflops}};
      }
    } catch (const std::exception& error) {  // the run goes on without them; the cases report their own errors
      fmt::print(stderr, "faprobe: the GPU's rates were not measured: {}\n", error.what());
    }
  }
  // The GPUs' clocks and throttle reasons from here on (after the GPU's calibration, whose GEMM would show
  // as a power cap of its own), sampled by a thread of their own while the plan has GPU cases, and after
  // each of them; without NVML the header says why and the run goes on.
  if (dry_run) return options;
  options.nvml = std::make_shared<gpu::NvmlMonitor>();
  for (const gpu::DeviceInfo& device : gpu::devices()) options.nvml->watch(device);
  const bool runs_gpu = std::any_of(plan.impls.begin(), plan.impls.end(), [](const std::string& name) {
    const Implementation* impl = find_implementation(name);
    return impl != nullptr && impl->runs_on_gpu();
  });
  if (runs_gpu && settings.devices.empty()) options.nvml->start_sampling(std::chrono::milliseconds(100));
  options.metadata = run_metadata(rates);
  // A number or null, never a string in a number's place: where the limit came from is a field of its own.
  const auto mem_limit_setting = source.values().find("mem_limit");
  options.metadata["mem_limit_bytes"] = options.mem_limit != 0 ? nlohmann::json(options.mem_limit) : nlohmann::json();
  options.metadata["mem_limit_source"] =
      mem_limit_setting != source.values().end() ? mem_limit_setting->second.origin : std::string("device default");
  options.metadata["measure"] = {{"warmup", plan.measure.warmup},
                                 {"min_samples", plan.measure.min_samples},
                                 {"max_noise_percent", plan.measure.max_noise_percent},
                                 {"min_time_s", plan.measure.min_time_s},
                                 {"max_time_s", plan.measure.max_time_s},
                                 {"verify", plan.measure.verify},
                                 {"interleave", timing && plan.measure.interleave}};
  // A boolean or null (each implementation's default: cuda.* and plugin.* isolated), never a string.
  options.metadata["isolate"] = options.isolate ? nlohmann::json(*options.isolate) : nlohmann::json();
  if (!options.isolate) options.metadata["isolate_default"] = "cuda.*, plugin.*";
  return options;
}

std::string measure_line(const MeasureSettings& m, const RunOptions& options) {
  return fmt::format("measure: warmup {} min_samples {} min_time {} s max_time {} s max_noise {} % threads {} verify {} "
                     "interleave {}{}",
                     m.warmup, m.min_samples, m.min_time_s, m.max_time_s, m.max_noise_percent,
                     m.threads > 0 ? std::to_string(m.threads) : std::string("all"), m.verify, m.interleave,
                     options.max_total_s > 0 ? fmt::format(" max_total {} s", options.max_total_s) : "");
}

std::string dry_run_text(const Plan& plan, const RunOptions& options, int repeat) {
  const std::vector<PlannedPair> pairs = plan_run(plan, options);
  const bool timing = options.timing;
  // Two spaces at least after the implementation and the case, however long: `faprobe ab` reads them back.
  constexpr const char* kRow = "{:<18}  {:<34}  {:>10}  {:>10}  {:>10}  {}\n";
  std::string text = fmt::format(kRow, "impl", "case", "per run", timing ? "pair" : "check", "memory", "plan");
  double total_s = 0;
  int runs = 0, once = 0, skipped = 0, unsupported = 0, failed = 0;
  for (const PlannedPair& pair : pairs) {
    const Record& r = pair.screened;
    std::string fate;
    if (pair.runs && pair.one_sample) {
      fate = fmt::format("{} once (n=1: predicted over --max-time {}, --min-samples 1)", timing ? "measure" : "check",
                         format_seconds(plan.measure.max_time_s));
    } else if (pair.runs) {
      fate = timing ? "measure" : "check";
    } else {
      fate = fmt::format("{}: {}", to_string(r.status), r.reason);
    }
    const bool predicted = r.status != Status::unsupported && r.status != Status::failed;
    text += fmt::format(kRow, r.impl, r.c.label(), predicted ? format_seconds(r.predicted_time_s) : "-",
                        pair.runs ? format_seconds(pair.predicted_pair_s) : "-",
                        predicted && r.memory.predicted_bytes ? format_bytes(double(r.memory.predicted_bytes)) : "-",
                        fate);
    total_s += pair.predicted_pair_s;
    runs += pair.runs;
    once += pair.runs && pair.one_sample;
    skipped += r.status == Status::skipped;
    unsupported += r.status == Status::unsupported;
    failed += r.status == Status::failed;
  }
  text += measure_line(plan.measure, options) + "\n";
  text += fmt::format("{} pairs: {} to {}{}, {} skipped, {} unsupported{}; predicted {} in all{}\n", pairs.size(), runs,
                      timing ? "measure" : "check", once ? fmt::format(" ({} once)", once) : "", skipped, unsupported,
                      failed ? fmt::format(", {} failed", failed) : "", format_seconds(total_s),
                      repeat > 1 ? fmt::format(", {} over {} processes (--repeat)", format_seconds(total_s * repeat), repeat)
                                 : "");
  text += timing ? "(a pair: its first run, warm-ups and samples at --min-samples and --min-time, as if --max-noise "
                   "were met; preparing inputs and checking outputs not counted; nothing was measured)\n"
                 : "(a pair: its one checked run; the reference's check not counted; nothing was run)\n";
  return text;
}

void print_dry_run(const Plan& plan, const RunOptions& options, int repeat) {
  fmt::print("{}", dry_run_text(plan, options, repeat));
}

RunSummary run_and_report(const Plan& plan, const RunOptions& options, const std::vector<DeviceWorker>& workers,
                          int repeat, const std::vector<std::string>& round_argv) {
  for (const std::string& note : plan.notes) fmt::print(stderr, "faprobe: note: {}\n", note);
  // With a result file on stdout ("-"), stdout carries that file alone and the table goes to stderr.
  const bool stdout_taken = options.files && options.files->targets.uses_stdout();
  std::ostream& table = stdout_taken ? std::cerr : std::cout;
  const RunSummary summary = repeat > 1        ? run_repeated(plan, options, round_argv, repeat, table)
                             : workers.empty() ? run_plan(plan, options, table)
                                               : run_on_devices(plan, options, workers, table);
  if (options.nvml) {
    options.nvml->stop_sampling();
    for (const std::string& line : options.nvml->slowdown_lines()) {
      table << fmt::format("warning: {} (NVML clock event reasons); its times may be below what it can do\n", line);
    }
    table.flush();
  }
  int ok = 0;
  for (const Record& record : summary.records) ok += record.status == Status::ok;
  fmt::print(stderr, "\n{} records: {} ok, {} mismatch, {} failed, {} skipped, {} unsupported{}{}\n",
             summary.records.size(), ok, summary.failed_checks, summary.failed_runs, summary.skipped,
             summary.unsupported, summary.resumed ? fmt::format(" ({} resumed)", summary.resumed) : "",
             summary.interrupted ? "; interrupted" : "");
  int timed = 0, contended = 0, one_sample = 0;
  for (const Record& record : summary.records) {
    timed += record.time.has_value();
    contended += record.time && record.time->contended;
    one_sample += record.time && record.time->samples == 1;
  }
  if (one_sample > 0) {
    fmt::print(stderr, "{} of {} timed records have one sample (n 1, ± -): no spread to say how far off they may be\n",
               one_sample, timed);
  }
  if (contended > 0) {
    fmt::print(stderr,
               "{} of {} timed records were measured while the machine was busy (marked busy; their evidence is in "
               "time_s.contended): their times are partly the scheduler's; rerun when the machine is quiet\n",
               contended, timed);
  }
  fmt::print(stderr, "this host: fp32 GEMM {:.1f} GFLOP/s, copy {:.1f} GB/s ({} thread{}, medians of the calibration)\n",
             options.rates.gemm_gflops, options.rates.memory_gbytes_per_s, options.rate_threads,
             options.rate_threads == 1 ? "" : "s");
  if (options.rates.gpu_copy_gbytes_per_s > 0) {
    fmt::print(stderr, "{}: bf16 GEMM {:.1f} TFLOP/s, copy {:.1f} GB/s\n", gpu::devices().front().name,
               options.rates.gpu_bf16_gemm_tflops, options.rates.gpu_copy_gbytes_per_s);
  }
  for (const auto& [flag, path] : {std::pair{"--out", &options.out_jsonl}, {"--json", &options.json_path},
                                   {"--csv", &options.csv_path}, {"--md", &options.md_path}}) {
    if (path->empty() || *path == "-") continue;
    const auto& unwritten = summary.unwritten;
    if (std::find(unwritten.begin(), unwritten.end(), flag) == unwritten.end()) fmt::print(stderr, "wrote {}\n", *path);
  }
  if (!summary.output_error.empty()) fmt::print(stderr, "faprobe: {}\n", summary.output_error);
  for (const std::string& worker : summary.incomplete) fmt::print(stderr, "faprobe: worker {}\n", worker);
  if (!summary.incomplete.empty()) {
    fmt::print(stderr, "faprobe: run the same command with --resume to finish the workers' parts\n");
  }
  return summary;
}

}  // namespace faprobe
