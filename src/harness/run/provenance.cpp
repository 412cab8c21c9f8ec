// A record's repro command and the run's NVML readings in its documents (provenance.hpp).
#include "harness/run/provenance.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cuda/runtime/nvml.hpp"
#include "harness/plan/plugins.hpp"

namespace faprobe {

std::string shell_quote(std::string_view word) {
  const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789@%+=:,./_-") == std::string_view::npos;
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (const char ch : word) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

std::string repro_command(const std::string& impl, const Case& c, const MeasureSettings& measure) {
  std::string command = "faprobe run";
  auto flag = [&](const char* name, const std::string& value) { command += fmt::format(" {} {}", name, shell_quote(value)); };
  // The axes, in the order `faprobe run --help` lists them.
  if (const LoadedPlugin* plugin = plugin_of(impl)) flag("--plugin", plugin->path);
  flag("--impl", impl);
  if (!c.varlen()) flag("--seq", std::to_string(c.seq_k));
  if (c.mode == Mode::prefill) flag("--seq-q", std::to_string(c.seq_q));
  if (!c.varlen()) flag("--batch", std::to_string(c.batch));
  flag("--heads", std::to_string(c.heads));
  flag("--kv-heads", std::to_string(c.kv_heads));
  flag("--head-dim", std::to_string(c.head_dim));
  flag("--dtype", std::string(to_string(c.dtype)));
  flag("--mask", std::string(to_string(c.mask)));
  flag("--mode", std::string(to_string(c.mode)));
  flag("--seed", std::to_string(c.seed));
  if (c.inputs != InputDistribution::normal) flag("--inputs", std::string(to_string(c.inputs)));
  if (c.paged()) flag("--page-size", std::to_string(c.page_size));
  if (c.varlen()) flag("--seqlens", fmt::format("{}", fmt::join(c.seqlens, ",")));
  if (c.splits != 0) flag("--splits", std::to_string(c.splits));
  // The measure settings that are not the defaults; {} prints the shortest text that reads back as the same
  // double.
  const MeasureSettings defaults;
  if (measure.warmup != defaults.warmup) flag("--warmup", std::to_string(measure.warmup));
  if (measure.min_samples != defaults.min_samples) flag("--min-samples", std::to_string(measure.min_samples));
  if (measure.max_noise_percent != defaults.max_noise_percent) flag("--max-noise", fmt::format("{}", measure.max_noise_percent));
  if (measure.min_time_s != defaults.min_time_s) flag("--min-time", fmt::format("{}", measure.min_time_s));
  if (measure.max_time_s != defaults.max_time_s) flag("--max-time", fmt::format("{}", measure.max_time_s));
  if (measure.mem_limit) flag("--mem-limit", std::to_string(*measure.mem_limit));
  if (measure.threads != defaults.threads) flag("--threads", std::to_string(measure.threads));
  if (!measure.verify) command += " --no-verify";
  if (!measure.flush_l2) command += " --no-flush-l2";
  return command;
}

void finish_record(const Implementation& impl, const MeasureSettings& measure, const RunOptions& options,
                   Record& record) {
  record.repro = repro_command(impl.name(), record.c, measure);
  if (options.nvml && impl.runs_on_gpu()) options.nvml->sample();
}

nlohmann::json document_metadata(const RunOptions& options) {
  nlohmann::json metadata = options.metadata;
  if (!options.nvml) return metadata;
  metadata["nvml"] = options.nvml->summary();
  if (metadata.contains("devices") && metadata["devices"].is_array()) {
    for (nlohmann::json& device : metadata["devices"]) {
      if (device.contains("index")) device["nvml"] = options.nvml->report(device["index"].get<int>());
    }
  }
  return metadata;
}

}  // namespace faprobe
