// One file per subcommand (CLI11's subcom_in_files pattern): setup_X adds the subcommand and its options
// to the app, and its callback hands their values to the harness (run_verify, harness/commands/verify.hpp; run_list,
// harness/commands/listing.hpp; the run workflow of harness/commands/workflow.hpp) and sets `exit_status` from what it
// returns; main.cpp only wires them.
#pragma once
#include <CLI/CLI.hpp>

namespace faprobe::cli {

void setup_list(CLI::App& app, int& exit_status);
void setup_sweep(CLI::App& app, int& exit_status);
void setup_verify(CLI::App& app, int& exit_status);
void setup_run(CLI::App& app, int& exit_status);
void setup_calibrate(CLI::App& app, int& exit_status);
void setup_probes(CLI::App& app, int& exit_status);
void setup_compare(CLI::App& app, int& exit_status);
void setup_report(CLI::App& app, int& exit_status);
void setup_merge(CLI::App& app, int& exit_status);
void setup_ab(CLI::App& app, int& exit_status);

}  // namespace faprobe::cli
