// Options shared by the subcommands: the axes, the measurement settings and the outputs of docs/DESIGN.md.
// Values are kept as text and parsed by the same code as configs (axes.hpp), so a flag and a config
// key accept exactly the same values and give the same errors.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/axes.hpp"
#include "harness/devices.hpp"
#include "harness/runner.hpp"

namespace faprobe::cli {

struct SettingsOptions {
  std::string config;
  std::map<std::string, std::string> values;   // key → text, for the options given
  std::map<std::string, CLI::Option*> options;  // key → its option, to know which were given
  bool no_verify = false;
  bool no_flush_l2 = false;
  bool interleave = false, no_interleave = false;  // --interleave / --no-interleave (config key "interleave")
  bool isolate = false, no_isolate = false;  // --isolate / --no-isolate (config key "isolate")
  bool strict = false;                       // --strict: an unsupported pair is an error (exit 2)
  std::vector<std::string> plugins;          // --plugin LIB.so, repeatable
  std::string shard;                         // --shard I/N (sweep and verify; harness/shard.hpp)
  std::string devices;                       // --devices all|0,2,3 (sweep and verify; harness/devices.hpp)
};

// The option --KEY (underscores as dashes) for the setting KEY, kept as text in settings.values[KEY].
void add_value(CLI::App& app, SettingsOptions& settings, const std::string& key, const std::string& help);

// --shard I/N and --devices on sweep and verify: run only the I-th of N disjoint parts of the plan; spread
// it over several GPUs, one worker process each.
void add_shard_option(CLI::App& app, SettingsOptions& settings);

// --plugin LIB.so (repeatable) on `app`, for subcommands without the case options (list).
void add_plugin_option(CLI::App& app, std::vector<std::string>& plugins);
// Loads the plugins of FAPROBE_PLUGIN_PATH, then those of `source` (a config's, then --plugin's), before
// anything names an implementation; throws UsageError for a library that cannot be loaded (exit 2).
void load_requested_plugins(const SettingsSource& source);

struct OutputOptions {
  std::string out_jsonl, json, csv, md;
  bool resume = false;
};

// AXES of docs/DESIGN.md's command line with --config and --plugin: what a plan is made of (merge takes these
// alone, to re-expand the plan of the shards it merges).
void add_axis_options(CLI::App& app, SettingsOptions& settings);

// The options of sweep's command line that do not change its plan (MEASURE, --strict, --isolate, --no-isolate,
// --isolate-timeout, --repeat, --resume, --shard, --devices) on `app`, bound to `settings` and `resume`, under
// the help heading `group`; returns them. merge takes them so that the sweep's own command line names its
// plan, and ignores them.
std::vector<CLI::Option*> add_run_only_options(CLI::App& app, SettingsOptions& settings, bool& resume,
                                               const std::string& group);

// AXES, MEASURE and OUTPUT of docs/DESIGN.md's command line, for sweep, verify and run, plus --strict, --isolate,
// --no-isolate and --isolate-timeout.
void add_case_options(CLI::App& app, SettingsOptions& settings, OutputOptions& output);

// Config file (or the embedded default when neither a config nor an axis was given), then flags; the
// plugins they and FAPROBE_PLUGIN_PATH name are loaded (load_requested_plugins).
SettingsSource settings_source(const SettingsOptions& settings, const char* default_config,
                               const char* default_config_name);

std::string utc_time_now();
std::string local_time_stamp();  // "20261207-044608", for default output names (faprobe-out/sweep-<stamp>.jsonl)  // "2026-12-02T05:56:50Z", the --json header's time

// The --json header: schema, version, git revision, command line, time, host, devices, rates.
nlohmann::json run_metadata(const nlohmann::json& rates);

// The CUDA devices this process sees (gpu::DeviceInfo objects), and why there are none ("" when some are).
struct DeviceScan {
  nlohmann::json devices = nlohmann::json::array();
  std::string no_device_reason;
};
DeviceScan scan_devices();

// Without --impl, narrows every part of the plan to what this machine runs: cuda.* only where a CUDA
// device exists; emu.* (verification only, never timed) only in `verify` and only where no device exists,
// where they stand in for cuda.*. --impl keeps whatever it names (unsupported pairs then show as records).
void narrow_to_this_machine(Plan& plan, bool verify);

// Every option of `app` and its subcommands that takes a value refuses an empty one ("--shard ''", an unset
// variable in a job script): a ParseError naming the flag, exit status 2, before any work. faprobe keeps ""
// for "not given", so an empty value would otherwise be the flag left out.
void refuse_empty_values(CLI::App& app);

// A value option given twice (`--threads 4 ... --threads 2`) takes the last, as most command lines do (a
// script that appends a flag to a base command overrides it); repeatable options (--plugin) keep them all.
void take_last_of_repeated(CLI::App& app);

std::string command_line();  // argv as given, for the metadata

// This process's command line for a child that runs the same command: argv[0] as /proc/self/exe, without the
// options in `options_with_value` (with their values: the next argument, or after '=') and the `flags`.
std::vector<std::string> this_command_without(const std::set<std::string>& options_with_value,
                                              const std::set<std::string>& flags);

// The "repeat" setting (sweep --repeat N, config "repeat"): processes per pair, 1..kMaxRepeat; 1 when absent.
int repeat_setting(const SettingsSource& source);
void set_command_line(int argc, char** argv);

}  // namespace faprobe::cli

namespace faprobe::cli {

// RunOptions for a plan: outputs, memory limit (the flag, or 0 for each implementation's device default),
// rates for the time predictions and bandwidth fractions (the host's, measured now; the GPU's too when
// the plan times a GPU implementation), --strict, isolation (--isolate, --no-isolate, config
// "isolate"; --isolate-timeout, config "isolate_timeout") and the --json metadata. A timed plan with
// --interleave runs in this process: an explicit --isolate (or "isolate": true) beside it is a UsageError,
// and the implementations isolated by default are named in a warning on stderr.
//
// `dry_run`: nothing is opened or watched (no outputs, no NVML); the rates are measured as for a run, since
// the predictions of --dry-run's plan come from them.
RunOptions make_run_options(const Plan& plan, const SettingsSource& source, const SettingsOptions& settings,
                            const OutputOptions& output, bool timing, bool dry_run = false);

// --dry-run of sweep and verify, on stdout: the plan as a table (plan_run: each pair's predicted seconds per
// run and in all, its predicted memory, and its fate: measure, measure once, or skipped or unsupported with
// the reason the run would record), the "measure: ..." settings line, and the counts and predicted total.
// `faprobe ab` compares two sides' pairs and settings lines (not their predictions, which depend on each
// side's calibration).
void print_dry_run(const Plan& plan, const RunOptions& options, int repeat = 1);
std::string measure_line(const MeasureSettings& measure, const RunOptions& options);

// --devices: the workers, one per GPU named, each a shard of the plan (harness/devices.hpp), with this
// command line minus its outputs, --resume, --shard and --devices; none without --devices. Checked before
// anything is opened or measured: the devices' syntax, a timed plan with CPU implementations (run side by
// side they would disturb each other's timing), then whether this machine has the devices.
std::vector<DeviceWorker> plan_device_workers(const Plan& plan, const SettingsOptions& settings, bool timing);

// Runs the plan (on `workers` when there are some) with the table on stdout, then one line per status count
// and where the results are on stderr.
// With `repeat` > 1 the plan runs in that many rounds of child processes, each `round_argv` (harness/repeat.hpp),
// and `workers` are the rounds' own business.
RunSummary run_and_report(const Plan& plan, const RunOptions& options, const std::vector<DeviceWorker>& workers = {},
                          int repeat = 1, const std::vector<std::string>& round_argv = {});

}  // namespace faprobe::cli
