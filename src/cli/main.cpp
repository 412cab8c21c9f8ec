// faprobe: benchmark and verify exact attention implementations. main() wires the subcommands and turns
// every error into one line on stderr and DESIGN.md's exit status (2 bad input, 1 failure).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/build_info.hpp"
#include "harness/progress.hpp"
#include "model/errors.hpp"

namespace {

// CLI11 answers `faprobe frobnicate` with "A subcommand is required"; name the word and the real ones.
// The first argument that is not an option is the subcommand (faprobe's own options, --help and --version,
// take no value).
void reject_unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg.front() == '-') continue;
    if (std::find(names.begin(), names.end(), arg) == names.end()) {
      throw faprobe::UsageError(fmt::format("unknown subcommand '{}' (allowed: {})", arg, fmt::join(names, ", ")));
    }
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace faprobe;
  cli::set_command_line(argc, argv);
  CLI::App app{"faprobe: benchmark and verify exact attention implementations against a float64 reference"};
  app.set_version_flag("--version", std::string(FAPROBE_VERSION) + " (" + build_info().revision_text() + ")");
  app.require_subcommand(1);
  int exit_status = kExitOk;
  cli::setup_list(app, exit_status);
  cli::setup_sweep(app, exit_status);
  cli::setup_verify(app, exit_status);
  cli::setup_run(app, exit_status);
  cli::setup_calibrate(app, exit_status);
  cli::setup_probes(app, exit_status);
  cli::setup_compare(app, exit_status);
  cli::setup_report(app, exit_status);
  cli::setup_merge(app, exit_status);
  cli::setup_ab(app, exit_status);
  cli::refuse_empty_values(app);
  install_interrupt_handler();
  try {
    reject_unknown_subcommand(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::Success& done) {  // --help, --version
    return app.exit(done);
  } catch (const CLI::ParseError& error) {
    fmt::print(stderr, "faprobe: {} (see faprobe --help)\n", error.what());
    return kExitUsage;
  } catch (const Interrupted&) {
    fmt::print(stderr, "faprobe: interrupted\n");
    return kExitInterrupted;
  } catch (const UsageError& error) {
    fmt::print(stderr, "faprobe: {}\n", error.what());
    return kExitUsage;
  } catch (const OutputError& error) {  // a result file could not be written; the message says what is on disk
    fmt::print(stderr, "faprobe: {}\n", error.what());
    return kExitFailed;
  } catch (const std::exception& error) {
    fmt::print(stderr, "faprobe: error: {}\n", error.what());
    return kExitFailed;
  }
  return exit_status;
}
