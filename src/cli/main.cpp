// faprobe: benchmark and verify exact attention implementations. main() wires the subcommands and turns
// every error into one line on stderr and DESIGN.md's exit status (2 bad input, 1 failure).
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "model/errors.hpp"
#include "harness/progress.hpp"

int main(int argc, char** argv) {
  using namespace faprobe;
  cli::set_command_line(argc, argv);
  CLI::App app{"faprobe: benchmark and verify exact attention implementations against a float64 reference"};
  app.set_version_flag("--version", std::string(FAPROBE_VERSION) + " (" + FAPROBE_GIT_REVISION + ")");
  app.require_subcommand(1);
  int exit_status = kExitOk;
  cli::setup_list(app, exit_status);
  cli::setup_sweep(app, exit_status);
  cli::setup_verify(app, exit_status);
  cli::setup_run(app, exit_status);
  cli::setup_calibrate(app, exit_status);
  cli::setup_probes(app, exit_status);
  install_interrupt_handler();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& done) {  // --help, --version
    return app.exit(done);
  } catch (const CLI::ParseError& error) {
    fmt::print(stderr, "faprobe: {} (see faprobe --help)\n", error.what());
    return kExitUsage;
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
