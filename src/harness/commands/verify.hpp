// faprobe verify: correctness only. With axes (or the embedded configs/ci-verify.json) it runs every
// available implementation once per case and checks it; with --q --k --v --o it checks an output that
// another program produced from those inputs, and with --q --k-cache --v-cache [--block-table]
// --cache-seqlens --o one produced from a KV cache (kv_cache_files.hpp). Exit 1 on any mismatch, and on any
// NaN or Inf in the inputs the reference reads or in the output: a check of such files cannot pass.
// src/cli/cmd_verify.cpp defines the flags and calls run_verify.
#pragma once
#include <string>

#include "harness/commands/workflow.hpp"
#include "harness/io/output_files.hpp"
#include "model/case.hpp"
#include "reference/check.hpp"

namespace faprobe {

// The .npy files of a check of files, as given ("" = not given): an output produced elsewhere from Q, K, V,
// or from Q and a KV cache.
struct VerifyFiles {
  std::string q, k, v, o;
  std::string k_cache, v_cache, block_table, cache_seqlens;
  bool any() const {
    return !q.empty() || !k.empty() || !v.empty() || !o.empty() || !k_cache.empty() || !v_cache.empty() ||
           !block_table.empty() || !cache_seqlens.empty();
  }
};

struct VerifyRequest {
  CommandSettings settings;
  OutputOptions output;
  VerifyFiles files;      // none given: verify the plan the settings make
  bool dry_run = false;  // --dry-run: the plan, nothing run
};

// The whole of `faprobe verify`: the plan run and checked (run_and_report), or the files checked and reported;
// the exit status (0 all passed, 1 a mismatch, a failure, or nothing checked). Throws UsageError for what
// cannot be checked as asked (exit 2).
int run_verify(const VerifyRequest& request);

// A check of files: the case they make (shapes from the files; dtype, mask and mode from case.json beside
// --o when there is one, else assumed and said on stderr; --dtype and --mask override both) and the verdict.
// Only --mask and --dtype may accompany files (any other setting is a UsageError); K and V are either --k/--v
// or a KV cache, not both. Non-finite inputs or output make a mismatch naming the tensor and element, with
// nothing compared.
struct FileCheck {
  Case c;
  VerifyResult result;
};
FileCheck check_files(const VerifyFiles& files, const CommandSettings& settings);

// The record of a check of files (implementation "external", device "files") to the table and to every
// output of `targets`; 0 when it passed, 1 otherwise.
int report_file_check(const OutputTargets& targets, const FileCheck& check);

// A verify of a plan that checked nothing (every pair unsupported or skipped, or none on this machine) has not
// passed: a CI job that runs it must not go green on a machine where nothing it names can run. 1 with a line
// on stderr then; else the summary's own exit status.
int verify_exit_status(const RunSummary& summary);

}  // namespace faprobe
