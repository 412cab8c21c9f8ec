// The flags shared by the subcommands: the axes, the measurement settings and the outputs of docs/DESIGN.md.
// Values are kept as text and parsed by the same code as configs (axes.hpp), so a flag and a config
// key accept exactly the same values and give the same errors. What a run does with them is the harness's
// (harness/commands/workflow.hpp): command_settings hands it the values given, as plain data.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/commands/workflow.hpp"

namespace faprobe::cli {

// The flags as CLI11 binds them: the switches straight into the CommandSettings (commands/workflow.hpp) it
// extends, the value options as text beside their CLI::Option (to know which were given); command_settings()
// makes the plain CommandSettings the harness takes.
struct SettingsOptions : CommandSettings {
  std::map<std::string, std::string> texts;     // key → text, for the value options
  std::map<std::string, CLI::Option*> options;  // key → its option, to know which were given
};

// The option --KEY (underscores as dashes) for the setting KEY, kept as text in settings.texts[KEY].
void add_value(CLI::App& app, SettingsOptions& settings, const std::string& key, const std::string& help);

// --shard I/N and --devices on sweep and verify: run only the I-th of N disjoint parts of the plan; spread
// it over several GPUs, one worker process each.
void add_shard_option(CLI::App& app, SettingsOptions& settings);

// --plugin LIB.so (repeatable) on `app`, for subcommands without the case options (list).
void add_plugin_option(CLI::App& app, std::vector<std::string>& plugins);

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

// The values and switches given on the command line, for the harness (after parsing: an option's count says
// whether it was given).
CommandSettings command_settings(const SettingsOptions& settings);

// Every option of `app` and its subcommands that takes a value refuses an empty one ("--shard ''", an unset
// variable in a job script): a ParseError naming the flag, exit status 2, before any work. faprobe keeps ""
// for "not given", so an empty value would otherwise be the flag left out.
void refuse_empty_values(CLI::App& app);

// A value option given twice (`--threads 4 ... --threads 2`) takes the last, as most command lines do (a
// script that appends a flag to a base command overrides it); repeatable options (--plugin) keep them all.
void take_last_of_repeated(CLI::App& app);

}  // namespace faprobe::cli
