// faprobe verify: correctness only, over a plan or of files that another program wrote (harness/commands/verify.hpp
// does the work). Its flags: the case options, --shard and --devices, the files and --dry-run.
#include <memory>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/commands/verify.hpp"

namespace faprobe::cli {
namespace {

struct VerifyOptions {
  SettingsOptions settings;
  OutputOptions output;
  VerifyFiles files;
  bool dry_run = false;  // --dry-run: the plan, nothing run
};

}  // namespace

void setup_verify(CLI::App& app, int& exit_status) {
  auto options = std::make_shared<VerifyOptions>();
  CLI::App* sub = app.add_subcommand("verify", "check implementations (or output files) against the float64 reference");
  add_case_options(*sub, options->settings, options->output);
  add_shard_option(*sub, options->settings);
  sub->add_option("--q", options->files.q, "query .npy (batch, seq_q, heads, head_dim): float32, float16 or float64 (read as float32)");
  sub->add_option("--k", options->files.k, "key .npy (batch, seq_k, kv_heads, head_dim)");
  sub->add_option("--v", options->files.v, "value .npy, shaped like --k");
  sub->add_option("--o", options->files.o, "output .npy to check, shaped like --q");
  sub->add_option("--k-cache", options->files.k_cache,
                  "instead of --k: key cache .npy, padded (batch, max_seq_k, kv_heads, head_dim) or, with "
                  "--block-table, a pool (num_blocks, page_size, kv_heads, head_dim)");
  sub->add_option("--v-cache", options->files.v_cache, "instead of --v: value cache .npy, shaped like --k-cache");
  sub->add_option("--block-table", options->files.block_table,
                  "paged: int32 .npy (batch, max_blocks_per_seq), each entry's pool blocks in order");
  sub->add_option("--cache-seqlens", options->files.cache_seqlens, "int32 .npy (batch,): each entry's key length");
  sub->add_flag("--dry-run", options->dry_run,
                "print the plan (each pair's predicted time and memory, and whether it is checked, skipped or "
                "unsupported, and why) and the predicted total, then exit without running anything");
  sub->callback([options, &exit_status] {
    exit_status = run_verify({command_settings(options->settings), options->output, options->files, options->dry_run});
  });
}

}  // namespace faprobe::cli
