// Options shared by the subcommands: the axes, the measurement settings and the outputs of DESIGN.md.
// Values are kept as text and parsed by the same code as configs (axes.hpp), so a flag and a config
// key accept exactly the same values and give the same errors.
#pragma once
#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "axes.hpp"
#include "runner.hpp"

namespace faprobe::cli {

struct SettingsOptions {
  std::string config;
  std::map<std::string, std::string> values;   // key → text, for the options given
  std::map<std::string, CLI::Option*> options;  // key → its option, to know which were given
  bool no_verify = false;
  bool no_flush_l2 = false;
};

struct OutputOptions {
  std::string out_jsonl, json, csv, md;
  bool resume = false;
};

// AXES, MEASURE and OUTPUT of DESIGN.md's command line, for sweep, verify and run.
void add_case_options(CLI::App& app, SettingsOptions& settings, OutputOptions& output);

// Config file (or the embedded default when neither a config nor an axis was given), then flags.
SettingsSource settings_source(const SettingsOptions& settings, const char* default_config,
                               const char* default_config_name);

// The --json header: schema, version, git revision, command line, time, host, devices, rates.
nlohmann::json run_metadata(const nlohmann::json& rates);

std::string command_line();  // argv as given, for the metadata
void set_command_line(int argc, char** argv);

}  // namespace faprobe::cli

namespace faprobe::cli {

// RunOptions for a plan: outputs, memory limit (the flag or the host's free memory), rates for the time
// predictions (measured now unless `calibrate` is false), and the --json metadata.
RunOptions make_run_options(const Plan& plan, const OutputOptions& output, bool timing);

// Runs the plan with the table on stdout, then one line per status count and where the results are
// on stderr.
RunSummary run_and_report(const Plan& plan, const RunOptions& options);

}  // namespace faprobe::cli
