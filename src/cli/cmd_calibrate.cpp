// faprobe calibrate: this machine's fp32 GEMM rate (all cores) and copy bandwidth, the ceilings against
// which CPU results are read. Sweeps measure the same numbers at their start and store them in --json.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "calibrate.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "host_info.hpp"

namespace faprobe::cli {

void setup_calibrate(CLI::App& app, int& exit_status) {
  auto seconds = std::make_shared<double>(2.0);
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("calibrate", "measure this host's fp32 GEMM rate and memory bandwidth");
  sub->add_option("--time", *seconds, "seconds to spend (default 2)")->check(CLI::Range(0.05, 600.0));
  sub->add_flag("--json", *json, "print JSON instead of text");
  sub->callback([seconds, json, &exit_status] {
    const MachineRates rates = calibrate_host(*seconds);
    const HostInfo host = host_info();
    if (*json) {
      std::cout << nlohmann::json{{"host", host},
                                  {"fp32_gemm_gflops", rates.gemm_gflops},
                                  {"memory_gbytes_per_s", rates.memory_gbytes_per_s}}
                       .dump(2)
                << "\n";
    } else {
      fmt::print("{} ({} cores)\nfp32 GEMM: {:.1f} GFLOP/s (Eigen, 512x512, one product per core)\n"
                 "copy:      {:.1f} GB/s (read + write, 256 MiB)\n",
                 host.cpu_model, host.cores, rates.gemm_gflops, rates.memory_gbytes_per_s);
    }
    exit_status = 0;
  });
}

}  // namespace faprobe::cli
