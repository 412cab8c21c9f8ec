#include "cli/options.hpp"

#include <algorithm>

namespace faprobe::cli {

void add_value(CLI::App& app, SettingsOptions& settings, const std::string& key, const std::string& help) {
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  settings.options[key] = app.add_option(flag, settings.texts[key], help);
}

void add_axis_options(CLI::App& app, SettingsOptions& settings) {
  app.add_option("--config", settings.config, "JSON file with the same keys as these flags (flags override it)");
  add_plugin_option(app, settings.plugins);
  add_value(app, settings, "impl", "implementations, comma-separated (default: all; see `faprobe list`)");
  add_value(app, settings, "seq", "key/value length: 512..65536, 512..65536:*4, 1024..8192:+1024, 1,17,4097, 1k..64k");
  add_value(app, settings, "seq_q", "query length for prefill (default: same as --seq; decode is always 1)");
  add_value(app, settings, "batch", "batch size (default 1)");
  add_value(app, settings, "heads", "query heads (default 8)");
  add_value(app, settings, "kv_heads", "key/value heads, dividing --heads (default: = heads; 1 = MQA)");
  add_value(app, settings, "head_dim", "head dimension (default 64)");
  add_value(app, settings, "dtype",
            "fp32, fp16, bf16, fp8_e4m3 (default fp32); PyTorch's names too: float32, float16, bfloat16, "
            "torch.bfloat16, float8_e4m3fn");
  add_value(app, settings, "mask",
            "none, causal, causal-top-left (default none); causal is bottom-right aligned (flash-attention), "
            "causal-top-left is PyTorch's is_causal");
  add_value(app, settings, "mode", "prefill, decode (default prefill)");
  add_value(app, settings, "seed", "input generator seed (default 0)");
  add_value(app, settings, "inputs",
            "input distribution: normal (default), outliers (N(0,1) with 0.1 % of entries of standard deviation 10, "
            "FlashAttention-3's FP8 test); a list sweeps");
  add_value(app, settings, "page_size",
            "paged KV cache: keys per page, 0 (contiguous, default) or a power of two 16..256; a list sweeps");
  add_value(app, settings, "seqlens",
            "decode: one key length per batch entry, no padding (e.g. 1000,17,32768); sets --batch and --seq");
  add_value(app, settings, "splits", "split-K implementations: key splits, 0 = their heuristic (default); a list sweeps");
}

namespace {

void add_measure_options(CLI::App& app, SettingsOptions& settings) {
  add_value(app, settings, "warmup", "untimed runs before sampling (default 1)");
  add_value(app, settings, "min_samples", "minimum timed samples (default 10)");
  add_value(app, settings, "max_noise", "stop when the relative standard error of the mean is below this percent (default 0.5)");
  add_value(app, settings, "min_time", "minimum seconds of samples (default 0.5)");
  add_value(app, settings, "max_time",
            "cap in seconds per case; longer predicted runs are skipped, or with --min-samples 1 run once (default 10)");
  add_value(app, settings, "max_total",
            "budget in seconds for the run's predicted total: pairs that would take it over are skipped (default: none)");
  add_value(app, settings, "mem_limit",
            "memory limit per case: 4G = 4GiB = 4·2^30 bytes, 4GB = 4·10^9 bytes, 512M, 4096 (default: free memory "
            "less a margin)");
  add_value(app, settings, "threads", "CPU threads (default: all cores)");
  CLI::Option* interleave = app.add_flag(
      "--interleave", settings.interleave,
      "sample the implementations of each case in rounds (A B C A B C ...), so that drift hits all of them alike");
  CLI::Option* no_interleave =
      app.add_flag("--no-interleave", settings.no_interleave, "sample one implementation after another (default)");
  interleave->excludes(no_interleave);
  app.add_flag("--no-verify", settings.no_verify, "do not check outputs against the float64 reference");
  app.add_flag("--no-flush-l2", settings.no_flush_l2, "do not flush the GPU L2 cache before each sample");
}

void add_execution_options(CLI::App& app, SettingsOptions& settings) {
  app.add_flag("--strict", settings.strict, "an unsupported (implementation, case) is an error, not a record");
  CLI::Option* isolate = app.add_flag(
      "--isolate", settings.isolate,
      "run every (implementation, case) in a child process: a crash or a hang costs one record "
      "(default: on for cuda.* and plugin.*)");
  CLI::Option* no_isolate = app.add_flag("--no-isolate", settings.no_isolate, "run every case in this process");
  isolate->excludes(no_isolate);
  add_value(app, settings, "isolate_timeout",
            "seconds an isolated case may take before it is killed (default: max(60, 4 × --max-time))");
}

void add_output_options(CLI::App& app, OutputOptions& output) {
  app.add_option("--out", output.out_jsonl, "JSONL file, one record per line, appended and flushed per case");
  app.add_option("--json", output.json, "JSON document: the records with the run's metadata ('-' = stdout)");
  app.add_option("--csv", output.csv, "CSV, one row per record, units in the headers ('-' = stdout)");
  app.add_option("--md", output.md, "Markdown table ('-' = stdout)");
  app.add_flag("--resume", output.resume, "skip the (implementation, case) pairs already in --out");
}
}  // namespace

void add_plugin_option(CLI::App& app, std::vector<std::string>& plugins) {
  app.add_option("--plugin", plugins,
                 "shared library of attention implementations (include/faprobe/plugin.h), registered as "
                 "plugin.<name>; repeatable; also FAPROBE_PLUGIN_PATH")
      ->expected(1)
      ->take_all();
}

void add_case_options(CLI::App& app, SettingsOptions& settings, OutputOptions& output) {
  add_axis_options(app, settings);
  add_measure_options(app, settings);
  add_execution_options(app, settings);
  add_output_options(app, output);
}

std::vector<CLI::Option*> add_run_only_options(CLI::App& app, SettingsOptions& settings, bool& resume,
                                               const std::string& group) {
  const std::vector<CLI::Option*> before = app.get_options();
  add_measure_options(app, settings);
  add_execution_options(app, settings);
  add_shard_option(app, settings);
  add_value(app, settings, "repeat", "processes per pair");
  app.add_flag("--resume", resume, "continue an earlier run");
  std::vector<CLI::Option*> added;
  for (CLI::Option* option : app.get_options()) {
    if (std::find(before.begin(), before.end(), option) != before.end()) continue;
    option->group(group);
    added.push_back(option);
  }
  return added;
}

void add_shard_option(CLI::App& app, SettingsOptions& settings) {
  app.add_option("--shard", settings.shard,
                 "run the I-th of N disjoint parts of the plan (I/N, 1-based), balanced by predicted time and the "
                 "same on every machine; records carry the shard and the plan's fingerprint. 'slurm': I/N from the "
                 "Slurm array task (SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT) or srun task (SLURM_PROCID of "
                 "SLURM_NTASKS)");
  app.add_option("--devices", settings.devices,
                 "spread the run over GPUs, one worker process each: all, or device numbers like 0,2,3; records "
                 "stream to --out, each with the shard and CUDA_VISIBLE_DEVICES it ran with (needs --out; a timed "
                 "sweep of CPU implementations is refused)");
}

CommandSettings command_settings(const SettingsOptions& settings) {
  CommandSettings given = settings;  // the switches; the values below, only those given
  given.values.clear();
  for (const auto& [key, option] : settings.options) {
    if (option->count() > 0) given.values[key] = {settings.texts.at(key), option->get_name()};
  }
  return given;
}

void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size_max() == 0) continue;  // a flag: it takes no value
    option->check([](const std::string& value) {
      return value.empty() ? std::string("the value is empty (an unset variable?); give a value, or leave the option out")
                           : std::string();
    });
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_values(*sub);
}

void take_last_of_repeated(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const bool single_value = option->get_expected_max() == 1 && option->get_type_size_max() == 1;
    if (single_value && option->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw) {
      option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) take_last_of_repeated(*sub);
}

}  // namespace faprobe::cli
