// faprobe probes: the instruction probes (kernels/cuda/probes/probe_suite.hpp) on the emulator and, where a
// GPU exists, on the GPU, compared probe by probe: docs/DESIGN.md's check of the emulator against the hardware.
// One line per probe (name, words, result); without a GPU the emulated outputs' checksums, so two machines
// can still compare, and exit 0; with one, exit 1 when any probe differs or fails. A probe of instructions
// the GPU lacks (Hopper's below sm_90) is "skipped" there with the reason, which is not a failure. --json FILE
// writes {device, seed, probes: [...]}, checked before any probe runs and written like sweep's documents
// (harness/io/output_files.hpp); with --json - the table goes to stderr.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cuda/launchers.hpp"
#include "cuda/probes/probe_suite.hpp"
#include "cuda/runtime/gpu.hpp"
#include "harness/io/output_files.hpp"
#include "harness/io/range.hpp"
#include "harness/records/record.hpp"
#include "model/errors.hpp"

namespace faprobe::cli {
namespace {

namespace probes = cuda::probes;

struct ProbesOptions {
  std::string json_path;
  std::string seed_text = "0";  // parsed like sweep's --seed (harness/io/range.hpp), so it is refused the same way
  std::uint64_t seed = 0;
  std::optional<OutputTarget> json;  // checked --json
  std::FILE* table = stdout;         // stderr when --json is "-"
};

struct Tally {
  std::size_t identical = 0, within_tolerance = 0, differ = 0, failed = 0, skipped = 0;
};

// The name column fits the longest probe name.
std::size_t name_width() {
  std::size_t width = 0;
  for (const probes::Probe& probe : probes::all_probes()) width = std::max(width, probe.name.size());
  return width;
}

void print_line(std::FILE* table, const std::string& name, const std::string& elements, const std::string& result) {
  fmt::print(table, "{:<{}} {:>6}  {}\n", name, name_width(), elements, result);
}
void print_line(std::FILE* table, const std::string& name, std::size_t elements, const std::string& result) {
  print_line(table, name, std::to_string(elements), result);
}

// One probe on the emulator and, with a device (null: none), on the GPU unless the GPU lacks the probed
// instructions (Probe::min_sm: then "skipped"); prints its line and returns its JSON entry.
nlohmann::json run_one(std::FILE* table, const probes::Probe& probe, std::uint64_t seed, const gpu::DeviceInfo* device,
                       Tally& tally) {
  nlohmann::json entry{{"name", probe.name},
                       {"element", probes::to_string(probe.element)},
                       {"tolerance", probe.tolerance.description}};
  probes::ProbeOutput emulated;
  try {
    emulated = probe.run(cuda::Target::emulator, seed);
  } catch (const std::exception& error) {
    ++tally.failed;
    print_line(table, probe.name, 0, fmt::format("FAILED on the emulator: {}", error.what()));
    entry.update({{"elements", 0}, {"result", "failed"}, {"error", fmt::format("emulator: {}", error.what())}});
    return entry;
  }
  const std::uint32_t checksum = probes::checksum(emulated);
  entry.update({{"elements", emulated.words.size()}, {"emulator_checksum", fmt::format("{:08x}", checksum)}});
  if (device == nullptr) {
    print_line(table, probe.name, emulated.words.size(), fmt::format("emulated, checksum {:08x}", checksum));
    entry["result"] = "emulator_only";
    return entry;
  }
  if (const std::string needs = probe.needs_gpu(device->compute_major, device->compute_minor); !needs.empty()) {
    ++tally.skipped;
    print_line(table, probe.name, emulated.words.size(),
               fmt::format("skipped: {} (emulated, checksum {:08x})", needs, checksum));
    entry.update({{"result", "skipped"}, {"skip_reason", needs}});
    return entry;
  }
  probes::ProbeOutput on_gpu;
  try {
    on_gpu = probe.run(cuda::Target::gpu, seed);
  } catch (const std::exception& error) {
    ++tally.failed;
    print_line(table, probe.name, emulated.words.size(), fmt::format("FAILED on the GPU: {}", error.what()));
    entry.update({{"result", "failed"}, {"error", fmt::format("gpu: {}", error.what())}});
    return entry;
  }
  const probes::Comparison comparison = probes::compare(probe, emulated, on_gpu);
  print_line(table, probe.name, comparison.elements, comparison.summary());
  entry.update({{"result", comparison.verdict == probes::Verdict::identical          ? "identical"
                           : comparison.verdict == probes::Verdict::within_tolerance ? "within_tolerance"
                                                                                      : "differs"},
                {"summary", comparison.summary()},
                {"max_abs_diff", comparison.max_abs_diff},
                {"max_ulps", comparison.max_ulps},
                {"inexact", comparison.inexact},
                {"differing", comparison.differing},
                {"nan_pairs", comparison.nan_pairs},
                {"gpu_checksum", fmt::format("{:08x}", probes::checksum(on_gpu))}});
  switch (comparison.verdict) {
    case probes::Verdict::identical: ++tally.identical; break;
    case probes::Verdict::within_tolerance: ++tally.within_tolerance; break;
    case probes::Verdict::differs:
      ++tally.differ;
      entry["first_difference"] = {{"index", comparison.first_difference},
                                   {"emulator", comparison.reference_value},
                                   {"gpu", comparison.candidate_value}};
      break;
  }
  return entry;
}

int run_probes(const ProbesOptions& options) {
  const std::vector<gpu::DeviceInfo> devices = gpu::devices();
  const bool with_gpu = !devices.empty();
  if (with_gpu) {
    fmt::print(options.table, "instruction probes, seed {}: emulator (reference) vs {} (sm_{}{})\n", options.seed,
               devices.front().name, devices.front().compute_major, devices.front().compute_minor);
  } else {
    fmt::print(options.table, "instruction probes, seed {}: emulator\n", options.seed);
  }
  print_line(options.table, "probe", "words", "result");
  Tally tally;
  nlohmann::json entries = nlohmann::json::array();
  for (const probes::Probe& probe : probes::all_probes())
    entries.push_back(run_one(options.table, probe, options.seed, with_gpu ? &devices.front() : nullptr, tally));

  const std::size_t count = probes::all_probes().size();
  std::string reason;
  if (with_gpu) {
    fmt::print(options.table, "\n{} probes on {}: {} identical, {} within tolerance, {} differ, {} failed{}\n", count,
               devices.front().name, tally.identical, tally.within_tolerance, tally.differ, tally.failed,
               tally.skipped > 0 ? fmt::format(", {} skipped (instructions the GPU lacks)", tally.skipped) : "");
  } else {
    reason = gpu::no_device_reason();
    if (reason.empty()) reason = "no CUDA device";
    fmt::print(options.table, "\nno GPU ({}): ran the probes on the emulator only{}\n", reason,
               tally.failed > 0 ? fmt::format(", {} failed", tally.failed) : "");
  }
  if (options.json) {
    nlohmann::json document{{"device", with_gpu ? nlohmann::json(devices.front()) : nlohmann::json(nullptr)},
                            {"reference", "emulator"},
                            {"seed", options.seed},
                            {"probes", entries}};
    if (!with_gpu) document["no_device_reason"] = reason;
    write_document(*options.json, json_text(document, 2) + "\n");
  }
  return tally.differ + tally.failed > 0 ? kExitFailed : kExitOk;
}

}  // namespace

void setup_probes(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<ProbesOptions>();
  CLI::App* sub = app.add_subcommand(
      "probes", "run the instruction probes on the emulator and, if there is a GPU, compare them with the GPU");
  sub->add_option("--json", options->json_path, "write the results as JSON to FILE");
  sub->add_option("--seed", options->seed_text, "input seed, 0 to 2^63-1 (default 0)");
  sub->callback([options, &exit_status] {
    options->seed = std::uint64_t(parse_integer(options->seed_text, "--seed", 0, std::numeric_limits<std::int64_t>::max()));
    if (!options->json_path.empty()) {
      options->json = check_output("--json", options->json_path, OutputUse::document);
      if (options->json->kind == OutputKind::standard_output) options->table = stderr;
    }
    exit_status = run_probes(*options);
  });
}

}  // namespace faprobe::cli
