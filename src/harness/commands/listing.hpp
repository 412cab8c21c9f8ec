// faprobe list: the devices found (the CPU, and each CUDA device or why there is none) and the backend
// table: which cases each implementation supports, and why not (its supports(case) reason; no silent
// fallback). src/cli/cmd_list.cpp defines the flags and calls run_list.
//
// The table probes every combination of dtype (fp32, fp16, bf16, fp8_e4m3) × head_dim (64, 72, 80, 96,
// 100, 128, 192, 256) × mask (none, causal, causal-top-left) × mode (prefill, decode) × sequence alignment
// (lengths a multiple of 128: 1024, or not: 1000), at batch 1 and 8 heads. `list --json` carries every probe.
// On the terminal each implementation is one block, laid out by this rule:
//   - columns are the head dims; rows are the dtypes, each row split by mode, by mask and by alignment
//     only where that axis changes some answer for this implementation (so cpu.decode gets prefill and
//     decode rows, and an implementation that ignores the mask gets one row per dtype);
//   - a cell is ✓ (supported) or ✗ (refused); the distinct reasons for ✗ are listed under the block,
//     those that differ only in the head_dim or dtype merged ("not 72/80/96");
//   - an implementation that refuses everything for one reason (cuda.* without a GPU) is one line.
// So a block is as small as the implementation's rules allow (six lines for a CPU kernel), and every
// refusal keeps its reason. Those blocks are `list --all`; plain `list` is one row per implementation with
// the dtypes, head dims, masks and modes it supports in some combination (compact_table).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/commands/workflow.hpp"
#include "model/case.hpp"
#include "model/host_info.hpp"
#include "model/implementation.hpp"

namespace faprobe {

// One probe of the support table and its answer.
struct SupportProbe {
  Case c;
  bool aligned = true;
  std::string reason;  // "" when supported
};

// Every probe of one implementation, in the order dtype, mode, mask, aligned, head_dim (head_dim fastest).
std::vector<SupportProbe> probe_support(const Implementation& impl);

// The distinct reasons of the refused probes, in order of appearance, with reasons that differ only in the
// probe's head_dim (or else its dtype) merged: "..., not 72" and "..., not 80" become "..., not 72/80".
std::vector<std::string> distinct_reasons(const std::vector<SupportProbe>& probes);

// `list --all`'s block of one implementation (the rule above), ending in a blank line.
std::string support_block(const Implementation& impl, const std::vector<SupportProbe>& probes);

// The compact listing: one row per implementation with the values of each axis it supports in some
// combination; `partial` (shown as `*`) when not every combination of them is (a dtype at some head dims
// only, aligned lengths only), which `list --all` shows probe by probe.
struct CompactRow {
  std::string name, device, dtypes, head_dims, masks, modes, notes;
  bool partial = false;
};
CompactRow compact_row(const Implementation& impl, const std::vector<SupportProbe>& probes);
std::string compact_table(const std::vector<const Implementation*>& impls,
                          const std::vector<std::vector<SupportProbe>>& probes);

// What `list` shows: `json` is `list --json`'s document (host, the CPU kernels' instruction-set level and
// cpu.tiled's paths, devices, every probe of every implementation, and of every variant with `variants`);
// the probes are kept for the text.
struct Listing {
  HostInfo host;
  DeviceScan scan;
  nlohmann::json json;
  std::vector<std::vector<SupportProbe>> probes;          // of implementations(), in order
  std::vector<std::vector<SupportProbe>> variant_probes;  // of variant_implementations(), with `variants`
};
// Throws UsageError for a bad FAPROBE_MAX_CPU_ISA or FAPROBE_CPU_PATH, as a sweep does.
Listing gather_listing(bool variants);

// The text `list` prints: the devices, then the compact table (or with `all` every block), then the variants
// or a line naming how many there are.
std::string listing_text(const Listing& listing, bool all, bool variants);

// The whole of `faprobe list`: the plugins of FAPROBE_PLUGIN_PATH and `plugins` (--plugin) loaded, then the
// listing on stdout, as JSON with `json`. Returns the exit status (0).
int run_list(bool json, bool variants, bool all, const std::vector<std::string>& plugins);

}  // namespace faprobe
