// faprobe calibrate: this machine's fp32 GEMM rate and copy bandwidth at a thread count (--threads; every
// core without it), the ceilings against which CPU results are read, each the median of its repetitions with
// their range; and, where a CUDA device exists, the GPU's device-to-device copy bandwidth and bf16 GEMM rate,
// the ceilings for GPU results. Timed runs measure the same numbers at their start, at their own --threads,
// and store them in --json.
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/io/range.hpp"
#include "harness/records/record.hpp"
#include "harness/run/calibrate.hpp"
#include "model/errors.hpp"
#include "model/host_info.hpp"

namespace faprobe::cli {

void setup_calibrate(CLI::App& app, int& exit_status) {
  auto seconds_text = std::make_shared<std::string>("2");  // parsed like --max-time: "nan" is refused
  auto threads_text = std::make_shared<std::string>();  // "": every core
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "calibrate", "measure this host's fp32 GEMM rate and memory bandwidth, and the GPU's bf16 GEMM rate and "
                   "copy bandwidth where there is one");
  sub->add_option("--time", *seconds_text, "seconds to spend on the host, and as many on the GPU, 0.05 to 600 (default 2)");
  sub->add_option("--threads", *threads_text,
                  "CPU threads, 1 to 1024, as a run's --threads (default: all cores); the time is the same");
  sub->add_flag("--json", *json, "print JSON instead of text");
  sub->callback([seconds_text, threads_text, json, &exit_status] {
    const double seconds = parse_number(*seconds_text, "--time", 0.05, 600.0);
    int threads = 0;  // every core
    if (!threads_text->empty()) {
      try {
        threads = int(parse_integer(*threads_text, "--threads", 1, 1024));
      } catch (const UsageError&) {
        throw UsageError(fmt::format("--threads: '{}' is not a thread count (allowed: 1 to 1024; default: all cores)",
                                     *threads_text));
      }
    }
    const HostCalibration calibration = calibrate_host(seconds, threads);
    const MachineRates rates = calibration.rates();
    const HostInfo host = host_info();
    const std::optional<gpu::GpuRates> gpu_rates = calibrate_gpu(seconds);
    const std::string gpu_name = gpu_rates ? gpu::devices().front().name : "";
    if (*json) {
      // The rates under the names a run's --json "rates" object gives them.
      nlohmann::json document = calibration.to_json();
      document["host"] = host;
      document["gpu"] = nullptr;
      if (gpu_rates) {
        document["gpu"] = {{"name", gpu_name},
                           {"copy_gbytes_per_s", gpu_rates->copy_gbytes_per_s},
                           {"bf16_gemm_tflops", gpu_rates->bf16_gemm_tflops}};
      } else {
        document["no_device_reason"] = gpu::no_device_reason();
      }
      std::cout << json_text(document, 2) << "\n";
    } else {
      const RateSpread& gemm = calibration.gemm_gflops;
      const RateSpread& copy = calibration.copy_gbytes_per_s;
      fmt::print("{} ({} cores), {} thread{}\n"
                 "fp32 GEMM: {:.1f} GFLOP/s, range {:.1f} to {:.1f} over {} rounds (Eigen, 512x512, one product per thread)\n"
                 "copy:      {:.1f} GB/s, range {:.1f} to {:.1f} over {} rounds (read + write, {} MiB)\n",
                 host.cpu_model, host.cores, calibration.threads, calibration.threads == 1 ? "" : "s",
                 rates.gemm_gflops, gemm.low, gemm.high, gemm.repetitions, rates.memory_gbytes_per_s, copy.low,
                 copy.high, copy.repetitions, calibration.copy_bytes >> 20);
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
