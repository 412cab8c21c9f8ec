// The run workflow that sweep, verify, run and merge share, below the command line: the settings a command
// gave turned into a SettingsSource and a plan's RunOptions, the plan narrowed to this machine and split over
// --devices' workers, --dry-run's table, the run with its closing summary, and what a result document says of
// the run (command line, time, host, devices). No flag is defined here: src/cli/options.hpp defines them and
// fills CommandSettings and OutputOptions from them, so that tests call all of this without the binary.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/plan/axes.hpp"
#include "harness/run/devices.hpp"
#include "harness/run/runner.hpp"

namespace faprobe {

// The settings a command line gave, as plain values: the flags of docs/DESIGN.md's AXES, MEASURE and run
// options that were given, with the name of each flag (for messages), and the switches.
struct CommandSettings {
  struct Given {
    std::string text;  // as typed
    std::string flag;  // "--seq-q"
  };
  std::string config;                       // --config FILE; "" for none
  std::map<std::string, Given> values;      // key ("seq_q") → its value, for the value options given
  bool no_verify = false;
  bool no_flush_l2 = false;
  bool interleave = false, no_interleave = false;  // --interleave / --no-interleave (config key "interleave")
  bool isolate = false, no_isolate = false;  // --isolate / --no-isolate (config key "isolate")
  bool strict = false;                       // --strict: an unsupported pair is an error (exit 2)
  std::vector<std::string> plugins;          // --plugin LIB.so, repeatable
  std::string shard;                         // --shard I/N (sweep and verify; harness/plan/shard.hpp)
  std::string devices;                       // --devices all|0,2,3 (sweep and verify; harness/run/devices.hpp)

  bool given(const std::string& key) const { return values.count(key) != 0; }
};

// The outputs of a run as given ("" = none, "-" = stdout) and --resume.
struct OutputOptions {
  std::string out_jsonl, json, csv, md;
  bool resume = false;
};

// Config file (or the embedded default when neither a config nor an axis was given), then the values and
// switches given; the plugins they and FAPROBE_PLUGIN_PATH name are loaded (load_requested_plugins).
SettingsSource settings_source(const CommandSettings& settings, const char* default_config,
                               const char* default_config_name);

// Loads the plugins of FAPROBE_PLUGIN_PATH, then those of `source` (a config's, then --plugin's), before
// anything names an implementation; throws UsageError for a library that cannot be loaded (exit 2).
void load_requested_plugins(const SettingsSource& source);

// This process's command line, kept by main() for the metadata and for the child processes that run the same
// command (--devices' workers, --repeat's rounds).
void set_command_line(int argc, char** argv);
std::string command_line();  // argv as given, joined by spaces

// This process's command line for a child that runs the same command: argv[0] as /proc/self/exe, without the
// options in `options_with_value` (with their values: the next argument, or after '=') and the `flags`.
std::vector<std::string> this_command_without(const std::set<std::string>& options_with_value,
                                              const std::set<std::string>& flags);

std::string utc_time_now();      // "2026-12-02T05:56:50Z", the --json header's time
std::string local_time_stamp();  // "20261207-044608", for default output names (faprobe-out/sweep-<stamp>.jsonl)

// The CUDA devices this process sees (gpu::DeviceInfo objects), and why there are none ("" when some are).
struct DeviceScan {
  nlohmann::json devices = nlohmann::json::array();
  std::string no_device_reason;
};
DeviceScan scan_devices();

// The --json header: schema, version, git revision, command line, time, host, devices, rates.
nlohmann::json run_metadata(const nlohmann::json& rates);

// The "repeat" setting (sweep --repeat N, config "repeat"): processes per pair, 1..kMaxRepeat; 1 when absent.
int repeat_setting(const SettingsSource& source);

// Without --impl, narrows every part of the plan to what this machine runs: cuda.* only where a CUDA
// device exists; emu.* (verification only, never timed) only in `verify` and only where no device exists,
// where they stand in for cuda.*. --impl keeps whatever it names (unsupported pairs then show as records).
void narrow_to_this_machine(Plan& plan, bool verify);

// RunOptions for a plan: outputs, memory limit (the flag, or 0 for each implementation's device default),
// rates for the time predictions and bandwidth fractions (the host's, measured now; the GPU's too when
// the plan times a GPU implementation), --strict, isolation (--isolate, --no-isolate, config
// "isolate"; --isolate-timeout, config "isolate_timeout") and the --json metadata. A timed plan with
// --interleave runs in this process: an explicit --isolate (or "isolate": true) beside it is a UsageError,
// and the implementations isolated by default are named in a warning on stderr.
//
// `dry_run`: nothing is opened or watched (no outputs, no NVML); the rates are measured as for a run, since
// the predictions of --dry-run's plan come from them.
RunOptions make_run_options(const Plan& plan, const SettingsSource& source, const CommandSettings& settings,
                            const OutputOptions& output, bool timing, bool dry_run = false);

// --dry-run of sweep and verify: the plan as a table (plan_run: each pair's predicted seconds per run and in
// all, its predicted memory, and its fate: measure, measure once, or skipped or unsupported with the reason
// the run would record), the "measure: ..." settings line, and the counts and predicted total; print_dry_run
// writes it to stdout. `faprobe ab` compares two sides' pairs and settings lines (not their predictions,
// which depend on each side's calibration).
std::string dry_run_text(const Plan& plan, const RunOptions& options, int repeat = 1);
void print_dry_run(const Plan& plan, const RunOptions& options, int repeat = 1);
std::string measure_line(const MeasureSettings& measure, const RunOptions& options);

// --devices: the workers, one per GPU named, each a shard of the plan (harness/run/devices.hpp), with this
// command line minus its outputs, --resume, --shard and --devices; none without --devices. Checked before
// anything is opened or measured: the devices' syntax, a timed plan with CPU implementations (run side by
// side they would disturb each other's timing), then whether this machine has the devices.
std::vector<DeviceWorker> plan_device_workers(const Plan& plan, const CommandSettings& settings, bool timing);

// Runs the plan (on `workers` when there are some) with the table on stdout, then one line per status count
// and where the results are on stderr.
// With `repeat` > 1 the plan runs in that many rounds of child processes, each `round_argv` (harness/run/repeat.hpp),
// and `workers` are the rounds' own business.
RunSummary run_and_report(const Plan& plan, const RunOptions& options, const std::vector<DeviceWorker>& workers = {},
                          int repeat = 1, const std::vector<std::string>& round_argv = {});

}  // namespace faprobe
