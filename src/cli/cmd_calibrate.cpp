// faprobe calibrate: this machine's fp32 GEMM rate (all cores) and copy bandwidth, the ceilings against
// which CPU results are read, and, where a CUDA device exists, the GPU's device-to-device copy bandwidth
// and bf16 GEMM rate, the ceilings for GPU results. Timed runs measure the same numbers at their start and
// store them in --json.
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/calibrate.hpp"
#include "harness/range.hpp"
#include "model/host_info.hpp"

namespace faprobe::cli {

void setup_calibrate(CLI::App& app, int& exit_status) {
  auto seconds_text = std::make_shared<std::string>("2");  // parsed like --max-time: "nan" is refused
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "calibrate", "measure this host's fp32 GEMM rate and memory bandwidth, and the GPU's bf16 GEMM rate and "
                   "copy bandwidth where there is one");
  sub->add_option("--time", *seconds_text, "seconds to spend on the host, and as many on the GPU, 0.05 to 600 (default 2)");
  sub->add_flag("--json", *json, "print JSON instead of text");
  sub->callback([seconds_text, json, &exit_status] {
    const double seconds = parse_number(*seconds_text, "--time", 0.05, 600.0);
    const MachineRates rates = calibrate_host(seconds);
    const HostInfo host = host_info();
    const std::optional<gpu::GpuRates> gpu_rates = calibrate_gpu(seconds);
    const std::string gpu_name = gpu_rates ? gpu::devices().front().name : "";
    if (*json) {
      nlohmann::json document{{"host", host},
                              {"fp32_gemm_gflops", rates.gemm_gflops},
                              {"memory_gbytes_per_s", rates.memory_gbytes_per_s},
                              {"gpu", nullptr}};
      if (gpu_rates) {
        document["gpu"] = {{"name", gpu_name},
                           {"copy_gbytes_per_s", gpu_rates->copy_gbytes_per_s},
                           {"bf16_gemm_tflops", gpu_rates->bf16_gemm_tflops}};
      } else {
        document["no_device_reason"] = gpu::no_device_reason();
      }
      std::cout << document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      fmt::print("{} ({} cores)\nfp32 GEMM: {:.1f} GFLOP/s (Eigen, 512x512, one product per core)\n"
                 "copy:      {:.1f} GB/s (read + write, 256 MiB)\n",
                 host.cpu_model, host.cores, rates.gemm_gflops, rates.memory_gbytes_per_s);
      if (gpu_rates) {
        fmt::print("{} bf16 GEMM: {:.1f} TFLOP/s (cuBLAS, 8192x8192x8192, fp32 compute)\n"
                   "{} copy:      {:.1f} GB/s (device to device, read + write, {} MiB)\n",
                   gpu_name, gpu_rates->bf16_gemm_tflops, gpu_name, gpu_rates->copy_gbytes_per_s,
                   gpu_rates->copy_bytes >> 20);
      } else {
        fmt::print("no GPU: {}\n", gpu::no_device_reason());
      }
    }
    exit_status = 0;
  });
}

}  // namespace faprobe::cli
