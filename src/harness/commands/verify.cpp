#include "harness/commands/verify.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "default_config.hpp"
#include "harness/io/input_file.hpp"
#include "harness/io/kv_cache_files.hpp"
#include "harness/io/npy.hpp"
#include "harness/records/writers.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

constexpr std::uint64_t kMaxCaseFileBytes = std::uint64_t(1) << 20;  // case.json is a few hundred bytes

// Only --mask and --dtype may accompany files: the shapes come from the files.
void check_file_flags(const SettingsSource& source, std::string_view files) {
  for (const auto& [key, value] : source.values()) {
    if (key != "mask" && key != "dtype" && key != "verify") {
      throw UsageError(fmt::format("{} cannot be combined with {} (shapes come from the files; allowed: --mask, "
                                   "--dtype)", value.origin, files));
    }
  }
}

// The case.json that `faprobe run --save` writes beside o.npy, when there is one.
struct SavedCase {
  std::string path;
  Case c;
};
std::optional<SavedCase> read_saved_case(const std::string& output_path) {
  const std::filesystem::path path = std::filesystem::path(output_path).parent_path() / "case.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  try {
    const std::string text = read_text_file(path.string(), "", kMaxCaseFileBytes);
    return SavedCase{path.string(), nlohmann::json::parse(text).at("case").get<Case>()};
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& error) {
    throw UsageError(fmt::format("{}: not a faprobe case file: {}", path.string(), error.what()));
  }
}

// --mask and --dtype override what the files and case.json say.
void apply_flags(const SettingsSource& source, Case& c) {
  if (const auto it = source.values().find("mask"); it != source.values().end()) {
    c.mask = parse_mask(it->second.text, it->second.origin);
  }
  if (const auto it = source.values().find("dtype"); it != source.values().end()) {
    c.dtype = parse_dtype(it->second.text, it->second.origin);
  }
}

// The tensors of a check, read, with the flags of those that were float64 (rounded to float32 on reading).
class TensorReader {
 public:
  HostTensor read(const std::string& path, const char* flag) {
    bool narrowed = false;
    HostTensor tensor = read_npy(path, flag, &narrowed);
    if (narrowed) narrowed_.push_back(flag);
    return tensor;
  }
  bool narrowed(std::string_view flag) const {
    return std::find(narrowed_.begin(), narrowed_.end(), flag) != narrowed_.end();
  }
  // One line on stderr when any file was float64: its values are checked as the float32 nearest them.
  void note() const {
    if (narrowed_.empty()) return;
    fmt::print(stderr, "verify: {} {} float64, read as the nearest float32 values (relative change below 6e-8, far "
               "inside every tolerance)\n", fmt::join(narrowed_, ", "), narrowed_.size() == 1 ? "is" : "are");
  }

 private:
  std::vector<std::string> narrowed_;
};

// Without case.json, the files say the shapes and --o's element type but not the precision the output was
// computed in, the mask (or, for a cache, the mode): what is taken for them is said in one line, with the
// flags that set them (none for what a flag gave).
void note_assumptions(const SettingsSource& source, const Case& c, const TensorReader& reader, const std::string& o,
                      const std::string& mode) {
  std::vector<std::string> assumed;
  if (source.values().count("dtype") == 0) {
    const std::string_view stored = reader.narrowed("--o") ? "float64" : c.dtype == DType::fp16 ? "float16" : "float32";
    assumed.push_back(fmt::format("dtype {} (--o is {})", to_string(c.dtype), stored));
  }
  if (source.values().count("mask") == 0) assumed.push_back(fmt::format("mask {}", to_string(c.mask)));
  if (!mode.empty()) assumed.push_back(mode);
  if (assumed.empty()) return;
  fmt::print(stderr, "verify: no case.json beside --o {}: assuming {}; --dtype and --mask say otherwise\n", o,
             fmt::join(assumed, ", "));
}

std::string non_finite_text(double value) { return std::isnan(value) ? "NaN" : value > 0 ? "Inf" : "-Inf"; }

// "--k k.npy: NaN at [0, 17, 1, 5] (batch, seq, head, dim)": the first non-finite element of a file.
std::string non_finite_note(std::string_view flag, const std::string& path, double value,
                            std::array<std::int64_t, 4> index, std::string_view axes = "batch, seq, head, dim") {
  return fmt::format("{} {}: {} at [{}] ({})", flag, path, non_finite_text(value), fmt::join(index, ", "), axes);
}

// The first NaN or ±Inf in --o, anywhere: every output row must be finite (a row that sees no key is zero).
std::string non_finite_output(const HostTensor& o, const std::string& path) {
  const std::int64_t at = first_non_finite(o);
  if (at < 0) return "";
  const std::int64_t d = at % o.head_dim(), h = at / o.head_dim() % o.heads(),
                     s = at / o.row_stride() % o.seq(), b = at / (o.row_stride() * o.seq());
  return non_finite_note("--o", path, double(o.get(at)), {b, s, h, d});
}

// A check that cannot pass: inputs or output hold NaN or Inf. Nothing is compared, so nothing is counted.
VerifyResult not_finite(std::string note) {
  VerifyResult result;
  result.note = std::move(note);
  return result;
}

// verify --q --k --v --o.
FileCheck check_tensor_files(const VerifyFiles& files, const CommandSettings& settings) {
  for (const auto& [flag, path] : {std::pair{"--q", &files.q}, {"--k", &files.k}, {"--v", &files.v},
                                   {"--o", &files.o}}) {
    if (path->empty()) throw UsageError(fmt::format("verify with files needs --q, --k, --v and --o; {} is missing", flag));
  }
  TensorReader reader;
  const HostTensor q = reader.read(files.q, "--q"), k = reader.read(files.k, "--k"),
                   v = reader.read(files.v, "--v"), o = reader.read(files.o, "--o");
  reader.note();
  check_attention_shapes(q, k, v, o);
  const SettingsSource source = settings_source(settings, nullptr, nullptr);
  check_file_flags(source, "--q/--k/--v/--o");
  Case c;
  c.batch = q.batch();
  c.seq_q = q.seq();
  c.heads = q.heads();
  c.head_dim = q.head_dim();
  c.seq_k = k.seq();
  c.kv_heads = k.heads();
  c.dtype = o.dtype();  // the precision the tolerance assumes; --dtype overrides (bf16 saved as float32)
  // `faprobe run --save` writes case.json beside o.npy: its dtype and mask are the defaults here.
  if (const auto saved = read_saved_case(files.o)) {
    c.dtype = saved->c.dtype;
    c.mask = saved->c.mask;
    c.inputs = saved->c.inputs;  // for the record: the files hold the values themselves
    fmt::print(stderr, "verify: dtype {} and mask {} from {} (flags override)\n", to_string(c.dtype),
               to_string(c.mask), saved->path);
  } else {
    note_assumptions(source, c, reader, files.o, "");
  }
  apply_flags(source, c);
  c.validate();
  const TensorInputs inputs(q, k, v);
  if (const auto bad = first_non_finite(c, inputs)) {
    const auto& [flag, path] = bad->tensor == TensorId::q   ? std::pair{"--q", &files.q}
                               : bad->tensor == TensorId::k ? std::pair{"--k", &files.k}
                                                            : std::pair{"--v", &files.v};
    return FileCheck{c, not_finite(non_finite_note(flag, *path, bad->value, {bad->b, bad->s, bad->h, bad->d}))};
  }
  if (std::string note = non_finite_output(o, files.o); !note.empty()) return FileCheck{c, not_finite(note)};
  return FileCheck{c, check_output(c, inputs, o)};
}

// verify --q --k-cache --v-cache [--block-table] --cache-seqlens --o: the files `run --save` writes for a paged
// or variable-length case, or flash_attn_with_kvcache's arguments saved by another program (kv_cache_files.hpp).
FileCheck check_cache_files(const VerifyFiles& files, const CommandSettings& settings) {
  for (const auto& [flag, path] : {std::pair{"--q", &files.q}, {"--k-cache", &files.k_cache},
                                   {"--v-cache", &files.v_cache}, {"--cache-seqlens", &files.cache_seqlens},
                                   {"--o", &files.o}}) {
    if (path->empty()) {
      throw UsageError(fmt::format("verify with a KV cache needs --q, --k-cache, --v-cache, --cache-seqlens and --o "
                                   "(--block-table for a paged pool); {} is missing", flag));
    }
  }
  TensorReader reader;
  KvCacheArrays arrays{reader.read(files.q, "--q"), reader.read(files.k_cache, "--k-cache"),
                       reader.read(files.v_cache, "--v-cache"), reader.read(files.o, "--o"), std::nullopt,
                       read_npy_int32(files.cache_seqlens, "--cache-seqlens", 1, "(batch,)")};
  if (!files.block_table.empty()) {
    arrays.block_table = read_npy_int32(files.block_table, "--block-table", 2, "(batch, max_blocks_per_seq)");
  }
  reader.note();
  check_kv_cache(arrays);
  const SettingsSource source = settings_source(settings, nullptr, nullptr);
  check_file_flags(source, "--q/--k-cache/--v-cache/--o");
  Case c = kv_cache_case(arrays);
  c.dtype = arrays.o.dtype();
  c.mode = c.seq_q == 1 ? Mode::decode : Mode::prefill;
  if (const auto saved = read_saved_case(files.o)) {
    // The saved case says whether the cache is a pool; --block-table must agree (kv_cache_files.hpp).
    if (saved->c.paged() && !arrays.paged()) {
      throw UsageError(fmt::format("--block-table is missing: {} says the case is paged (page_size {}), so "
                                   "--k-cache is a pool", saved->path, saved->c.page_size));
    }
    if (!saved->c.paged() && arrays.paged()) {
      throw UsageError(fmt::format("--block-table: {} says the case is not paged, so --k-cache is a padded cache, "
                                   "which takes no block table", saved->path));
    }
    if (saved->c.page_size != c.page_size) {
      throw UsageError(fmt::format("--k-cache: pages of {} keys, but {} says page_size {}", c.page_size, saved->path,
                                   saved->c.page_size));
    }
    if (saved->c.mode == Mode::decode && c.seq_q != 1) {
      throw UsageError(fmt::format("--q: {} says mode decode (one query row), but --q has seq_q {}", saved->path,
                                   c.seq_q));
    }
    c.dtype = saved->c.dtype;
    c.mask = saved->c.mask;
    c.mode = saved->c.mode;
    fmt::print(stderr, "verify: dtype {}, mask {} and mode {} from {} (flags override dtype and mask)\n",
               to_string(c.dtype), to_string(c.mask), to_string(c.mode), saved->path);
  } else {
    note_assumptions(source, c, reader, files.o,
                     c.mode == Mode::decode ? "mode decode (--q has one query row)"
                                            : fmt::format("mode prefill (--q has {} query rows)", c.seq_q));
  }
  if (c.varlen() && c.mode != Mode::decode) {
    throw UsageError(fmt::format("--cache-seqlens: the entries' lengths differ, which faprobe's case takes in decode "
                                 "only (one query row), but --q has seq_q {}", c.seq_q));
  }
  apply_flags(source, c);
  c.validate();
  const CacheInputs inputs(arrays.q, arrays.k_cache, arrays.v_cache,
                           arrays.paged() ? arrays.block_table->values : std::vector<std::int32_t>{},
                           arrays.blocks_per_seq());
  if (const auto bad = first_non_finite(c, inputs)) {
    if (bad->tensor == TensorId::q) {
      return FileCheck{c, not_finite(non_finite_note("--q", files.q, bad->value, {bad->b, bad->s, bad->h, bad->d}))};
    }
    const bool is_k = bad->tensor == TensorId::k;
    const std::string_view flag = is_k ? "--k-cache" : "--v-cache";
    const std::string& path = is_k ? files.k_cache : files.v_cache;
    const auto [first, row] = inputs.cache_row(bad->b, bad->s);
    std::string note = non_finite_note(flag, path, bad->value, {first, row, bad->h, bad->d},
                                       inputs.paged() ? "block, row, head, dim" : "batch, seq, head, dim");
    if (inputs.paged()) note += fmt::format(", key {} of batch entry {}", bad->s, bad->b);
    return FileCheck{c, not_finite(std::move(note))};
  }
  if (std::string note = non_finite_output(arrays.o, files.o); !note.empty()) {
    return FileCheck{c, not_finite(note)};
  }
  return FileCheck{c, check_output(c, inputs, arrays.o)};
}

// Checking files, nothing runs: --strict and --resume would be dropped without a word, so each one given says
// so (every other flag and config key but mask and dtype is refused by check_file_flags).
void warn_flags_without_effect_on_files(const CommandSettings& settings, const OutputOptions& output) {
  if (settings.strict) fmt::print(stderr, "verify: --strict has no effect when checking files (nothing runs)\n");
  if (output.resume) fmt::print(stderr, "verify: --resume has no effect when checking files (nothing runs)\n");
  if (!settings.shard.empty()) {
    throw UsageError("--shard: checking files is one case, not a plan to split (allowed: --shard with --impl, axes "
                     "or --config)");
  }
  if (!settings.devices.empty()) {
    throw UsageError("--devices: checking files runs nothing on a device (allowed: --devices with --impl, axes or "
                     "--config)");
  }
}

// K and V come one way or the other: --k/--v tensors, or --k-cache/--v-cache with their index arrays. Whether
// they are a KV cache; a UsageError when both ways are given.
bool uses_kv_cache(const VerifyFiles& files) {
  const char* tensor_flag = !files.k.empty() ? "--k" : !files.v.empty() ? "--v" : nullptr;
  const char* cache_flag = !files.k_cache.empty()         ? "--k-cache"
                           : !files.v_cache.empty()       ? "--v-cache"
                           : !files.block_table.empty()   ? "--block-table"
                           : !files.cache_seqlens.empty() ? "--cache-seqlens"
                                                          : nullptr;
  if (tensor_flag && cache_flag) {
    throw UsageError(fmt::format("{} cannot be combined with {}: K and V are either --k/--v tensors or a KV cache "
                                 "(--k-cache, --v-cache, --cache-seqlens, --block-table when paged)",
                                 tensor_flag, cache_flag));
  }
  return cache_flag != nullptr;
}

int verify_given_files(const VerifyRequest& request) {
  warn_flags_without_effect_on_files(request.settings, request.output);
  uses_kv_cache(request.files);
  // The outputs are checked before anything is read or checked (output_files.hpp).
  const OutputOptions& output = request.output;
  const OutputTargets targets = check_outputs({output.out_jsonl, output.json, output.csv, output.md});
  return report_file_check(targets, check_files(request.files, request.settings));
}

constexpr const char* kChecksNothing = "--no-verify makes `faprobe verify` check nothing";

int run_verify_plan(const VerifyRequest& request) {
  const CommandSettings& settings = request.settings;
  const SettingsSource source = settings_source(settings, kDefaultVerifyConfig, kDefaultVerifyConfigName);
  Plan plan = make_plan(source);
  narrow_to_this_machine(plan, /*verify=*/true);
  MeasureSettings measure = plan.measure;
  if (!measure.verify) throw UsageError(kChecksNothing);  // "verify": false in --config
  const std::vector<DeviceWorker> workers = plan_device_workers(plan, settings, /*timing=*/false);
  Plan verify_plan = plan;
  // verify's per-case budget is a minute unless --max-time says otherwise: nothing is sampled.
  if (!settings.given("max_time")) verify_plan.measure.max_time_s = 60.0;
  // --dry-run: the plan (workflow.hpp's print_dry_run), nothing run or written.
  if (request.dry_run) {
    print_dry_run(verify_plan, make_run_options(plan, source, settings, request.output, /*timing=*/false,
                                                /*dry_run=*/true));
    return kExitOk;
  }
  RunOptions run = make_run_options(plan, source, settings, request.output, /*timing=*/false);
  run.show_unsupported = settings.given("impl");
  // verify runs each case once and times nothing: the sampling flags would be dropped without a word.
  for (const char* key : {"warmup", "min_samples", "max_noise", "min_time"}) {
    if (settings.given(key)) {
      fmt::print(stderr, "verify: {} has no effect (verify runs each case once, untimed)\n",
                 settings.values.at(key).flag);
    }
  }
  if (settings.no_flush_l2) fmt::print(stderr, "verify: --no-flush-l2 has no effect (nothing is timed)\n");
  if (settings.interleave) fmt::print(stderr, "verify: --interleave has no effect (nothing is timed)\n");
  fmt::print(stderr, "verify: {} cases × {} implementations\n", plan.cases.size(), plan.impls.size());
  return verify_exit_status(run_and_report(verify_plan, run, workers));
}

}  // namespace

int run_verify(const VerifyRequest& request) {
  if (request.settings.no_verify) throw UsageError(kChecksNothing);  // with files or without
  if (request.files.any()) {
    if (request.dry_run) {
      throw UsageError("--dry-run plans a verify over axes; with --q, --k, --v, --o there is nothing to plan (allowed: "
                       "--dry-run without the file options)");
    }
    return verify_given_files(request);
  }
  return run_verify_plan(request);
}

FileCheck check_files(const VerifyFiles& files, const CommandSettings& settings) {
  return uses_kv_cache(files) ? check_cache_files(files, settings) : check_tensor_files(files, settings);
}

int report_file_check(const OutputTargets& targets, const FileCheck& check) {
  Record record;
  record.impl = "external";
  record.device = "files";
  record.c = check.c;
  record.verify = check.result;
  record.status = check.result.passed ? Status::ok : Status::mismatch;
  record.reason = check.result.note;
  TableWriter(targets.uses_stdout() ? std::cerr : std::cout).write(record);
  if (targets.out) JsonlWriter(std::make_unique<AppendFile>(*targets.out)).write(record);
  if (targets.json) write_document(*targets.json, json_document(run_metadata(nullptr), {record}));
  if (targets.csv) write_document(*targets.csv, csv_document({record}));
  if (targets.md) write_document(*targets.md, markdown_document({record}));
  return check.result.passed ? kExitOk : kExitFailed;
}

int verify_exit_status(const RunSummary& summary) {
  const bool checked = std::any_of(summary.records.begin(), summary.records.end(),
                                   [](const Record& record) { return record.verify.has_value(); });
  if (!checked && !summary.interrupted) {
    fmt::print(stderr, "verify: nothing was checked (every pair was unsupported or skipped); that is not a pass\n");
    return kExitFailed;
  }
  return summary.exit_status();
}

}  // namespace faprobe
