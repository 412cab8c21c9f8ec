// What an implementation is, to everything above it: a small object with its name, its device,
// supports(case) (an empty string, or the reason it cannot run the case), its predicted peak memory and
// time for a case, and prepare(case), which allocates and fills the inputs and returns a runnable. The
// kernels implement this interface; the harness's registry (harness/plan/registry.hpp) is the one list of them.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/case.hpp"
#include "model/host_info.hpp"
#include "model/memory.hpp"
#include "model/tensor.hpp"

namespace faprobe {

// How a case is measured; the harness fills it from flags and configs (harness/plan/axes.hpp).
struct MeasureSettings {
  int warmup = 1;                        // untimed runs before sampling
  int min_samples = 10;                  // nvbench's default
  double max_noise_percent = 0.5;        // stop once the relative standard deviation is below this ...
  double min_time_s = 0.5;               // ... and this much time was sampled
  double max_time_s = 10.0;              // cap per case; a case predicted to exceed it is skipped
  std::optional<std::uint64_t> mem_limit;  // default: what the host has free, less a margin
  bool verify = true;
  bool flush_l2 = true;                  // GPU only
  int threads = 0;                       // CPU threads, 0 = all cores
  // The harness samples a case's implementations in rounds rather than one after another (--interleave);
  // nothing for an implementation to do.
  bool interleave = false;
};

// What a time prediction may use: this machine's measured rates.
struct MachineRates {
  double gemm_gflops = 50.0;        // fp32 GEMM, all cores (faprobe calibrate measures it)
  double memory_gbytes_per_s = 8.0;  // streaming bandwidth, all cores
  // The GPU's ceilings (gpu::measure_gpu_rates), measured by `faprobe calibrate` and by a timed run that
  // includes a GPU implementation; 0: not measured, or no GPU.
  double gpu_copy_gbytes_per_s = 0;  // device-to-device copy, read + write
  double gpu_bf16_gemm_tflops = 0;   // cuBLAS bf16 GEMM, fp32 compute
};

// One implementation prepared for one case: inputs allocated and filled, output allocated.
//
// A checked run cannot pass by accident: the harness calls poison_outputs() right before the run it checks,
// which fills every output buffer the run writes (O and, where the implementation produces one, the LSE;
// on the device for a GPU, in the emulated device memory under the emulator, on the host for the CPU) with
// NaN (kNanPoisonByte, model/tensor.hpp). An element the run leaves unwritten is then NaN in output() or
// lse() and fails the check, whatever the buffer held before (a previous run's correct output, zeros that
// match a masked region). It is pure virtual so that no family of implementations can leave it out; it
// costs one memset of the outputs and is called before the checked run only, never before a timed sample.
class PreparedCase {
 public:
  virtual ~PreparedCase() = default;
  // Called once after prepare with the run's measure settings (e.g. flush_l2 for GPU timing).
  virtual void configure(const MeasureSettings& settings) { (void)settings; }
  virtual void poison_outputs() = 0;        // every output buffer NaN, until the next run writes it
  virtual double timed_run() = 0;           // one call, seconds (wall clock on the CPU, CUDA events on a GPU)
  // O on the host, as the latest run left it (copied back from the device after each run, never a stale
  // host copy), after at least one run.
  virtual const HostTensor& output() = 0;
  // The LSE of every query row as the latest run left it (LseTensor, model/tensor.hpp), or nullptr when the
  // implementation produces none (the CPU kernels, cuda.naive); the checker compares it when there is one.
  virtual const LseTensor* lse() { return nullptr; }
  virtual const AttentionInputs* host_inputs() const { return nullptr; }  // for --save
  virtual nlohmann::json details() const { return nlohmann::json::object(); }
  // Peak and workspace bytes of a case whose memory lives on a device (the GPU's pool), read after the
  // runs; nullopt: host memory, counted by the runner's tracker.
  virtual std::optional<MemoryCounters> device_memory() const { return std::nullopt; }
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual std::string name() const = 0;
  virtual std::string device() const = 0;
  // For a variant (one tile of a kernel, named "<implementation>@<tile>": cuda.fa3@128x176), the name of the
  // implementation it is a variant of; "" for an implementation in its own right. Variants are run only when
  // named (--impl cuda.fa3@128x176, or cuda.fa3@* for all of them) and listed by `faprobe list --variants`.
  virtual std::string variant_of() const { return ""; }
  virtual std::string supports(const Case& c) const = 0;  // "" when supported, else the reason
  // What it does to Q and K before quantizing them (model/incoherent.hpp), so that the checker regenerates the
  // inputs it consumed: none, or incoherent processing (*.fa3-incoherent).
  virtual QkTransform qk_transform() const { return QkTransform::none; }
  virtual std::uint64_t predicted_bytes(const Case& c) const = 0;
  virtual double predicted_seconds(const Case& c, const MachineRates& rates) const = 0;
  virtual bool timed() const { return true; }  // emulated implementations are checked, never timed
  // Whether its cases run on the GPU: its records are then read against the GPU's copy bandwidth, not the
  // host's.
  virtual bool runs_on_gpu() const { return false; }
  // GPU implementations run each case in a child process by default (--isolate), so that an error that
  // poisons the CUDA context (an illegal address) spoils only that case.
  virtual bool isolate_by_default() const { return false; }
  // The default --mem-limit for this implementation's device: free host memory, or free device memory,
  // less a margin.
  virtual std::uint64_t default_memory_limit() const { return default_host_memory_limit(); }
  // What bound it, for a skip's reason ("MemAvailable", "RLIMIT_AS", "cgroup memory.max", "free GPU memory").
  virtual std::string default_memory_limit_source() const { return default_host_memory_limit_source(); }
  virtual std::unique_ptr<PreparedCase> prepare(const Case& c) const = 0;
};

}  // namespace faprobe
