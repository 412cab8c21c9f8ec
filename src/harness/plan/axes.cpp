#include "harness/plan/axes.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/input_file.hpp"
#include "harness/io/progress.hpp"
#include "harness/io/range.hpp"
#include "harness/plan/registry.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {
// A config is a few kilobytes of settings; a larger file is not one (and /dev/zero is refused before it is read).
constexpr std::uint64_t kMaxConfigBytes = std::uint64_t(1) << 20;
}  // namespace

const std::vector<std::string>& axis_keys() {
  static const std::vector<std::string> keys = {"impl",  "seq",  "seq_q", "batch",     "heads",  "kv_heads",
                                                "head_dim", "dtype", "mask", "mode", "seed", "page_size",
                                                "splits", "seqlens", "inputs"};
  return keys;
}

const std::vector<std::string>& setting_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> all = axis_keys();
    for (const char* key : {"warmup", "min_samples", "max_noise", "min_time", "max_time", "mem_limit", "verify",
                            "flush_l2", "threads", "interleave", "isolate", "isolate_timeout", "max_total", "plugins",
                            "repeat", "description"})
      all.emplace_back(key);
    return all;
  }();
  return keys;
}

void SettingsSource::set(const std::string& key, std::string text, std::string origin) {
  values_[key] = Value{std::move(text), std::move(origin)};
}

bool SettingsSource::has_any_axis() const {
  return std::any_of(axis_keys().begin(), axis_keys().end(), [&](const std::string& key) { return has(key); });
}

void SettingsSource::load_config_file(const std::string& path) {
  config_folder_ = std::filesystem::path(path).parent_path().string();
  load_config_text(read_text_file(path, "--config", kMaxConfigBytes), path);
}

void SettingsSource::load_config_text(const std::string& text, const std::string& origin) {
  // nlohmann keeps the last of two equal keys silently; a config that says a setting twice is a mistake
  // (also when it is spelled both ways, "seq_q" and "seq-q"), so every object's keys are tracked as parsed.
  std::vector<std::map<std::string, std::string>> keys_of_open_objects;  // setting → the spelling seen
  auto reject_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys_of_open_objects.emplace_back();
    if (event == Event::object_end && !keys_of_open_objects.empty()) keys_of_open_objects.pop_back();
    if (event == Event::key && !keys_of_open_objects.empty()) {
      const std::string raw = parsed.get<std::string>();
      std::string setting = raw;
      std::replace(setting.begin(), setting.end(), '-', '_');
      const auto [it, inserted] = keys_of_open_objects.back().emplace(setting, raw);
      if (!inserted) {
        throw UsageError(it->second == raw
                             ? fmt::format("--config {}: duplicate key \"{}\"", origin, raw)
                             : fmt::format("--config {}: duplicate key \"{}\" (the same setting as \"{}\")", origin,
                                           raw, it->second));
      }
    }
    return true;
  };
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text, reject_duplicates);
  } catch (const nlohmann::json::exception& error) {
    // A parse_error says "parse error at line L, column C: ..."; keep it whole. A number too large for a
    // double ("1e999") is an out_of_range, found by the config fuzzer: bad input all the same.
    std::string message = error.what();
    const std::size_t at = message.find("] ");
    throw UsageError(fmt::format("--config {}: invalid JSON: {}", origin,
                                 at == std::string::npos ? message : message.substr(at + 2)));
  }
  load_config_object(config, origin, /*nested=*/false);
}

void SettingsSource::load_config_object(const nlohmann::json& config, const std::string& origin, bool nested) {
  if (!config.is_object()) {
    throw UsageError(fmt::format("--config {}: expected a JSON object of settings, got {}", origin, config.type_name()));
  }
  for (const auto& [raw_key, value] : config.items()) {
    std::string key = raw_key;
    std::replace(key.begin(), key.end(), '-', '_');
    if (key == "parts" && !nested) {
      if (!value.is_array() || value.empty()) {
        throw UsageError(fmt::format("--config {}: \"parts\" must be a non-empty array of objects", origin));
      }
      for (std::size_t i = 0; i < value.size(); ++i) {
        SettingsSource part;
        part.load_config_object(value[i], fmt::format("{} parts[{}]", origin, i), /*nested=*/true);
        for (const auto& [part_key, part_value] : part.values()) {
          if (std::find(axis_keys().begin(), axis_keys().end(), part_key) == axis_keys().end()) {
            throw UsageError(fmt::format("{}: a part may only set axes ({}), not a measurement setting",
                                         part_value.origin, fmt::join(axis_keys(), ", ")));
          }
        }
        parts_.push_back(std::move(part));
      }
      continue;
    }
    if (std::find(setting_keys().begin(), setting_keys().end(), key) == setting_keys().end()) {
      throw UsageError(fmt::format("--config {}: unknown key \"{}\" (allowed: {}{})", origin, raw_key,
                                   fmt::join(setting_keys(), ", "), nested ? "" : ", parts"));
    }
    if (key == "description") continue;
    const std::string where = fmt::format("--config {}: \"{}\"", origin, raw_key);
    if (key == "plugins") {  // paths, not values of the range grammar: a path may hold a comma
      if (nested) throw UsageError(fmt::format("{}: a part may only set axes, not plugins", where));
      const nlohmann::json paths = value.is_string() ? nlohmann::json::array({value}) : value;
      if (!paths.is_array() || paths.empty() ||
          !std::all_of(paths.begin(), paths.end(), [](const nlohmann::json& item) { return item.is_string(); })) {
        throw UsageError(fmt::format("{}: expected a library path or a non-empty array of them", where));
      }
      for (const nlohmann::json& item : paths) {
        const std::filesystem::path library = item.get<std::string>();
        add_plugin({(library.is_relative() ? std::filesystem::path(config_folder_) / library : library).string(), where});
      }
      continue;
    }
    auto scalar_text = [&](const nlohmann::json& item) -> std::string {
      if (item.is_string()) return item.get<std::string>();
      if (item.is_number_integer() || item.is_number_unsigned()) return item.dump();
      if (item.is_number_float()) return item.dump();
      if (item.is_boolean()) return item.get<bool>() ? "true" : "false";
      throw UsageError(fmt::format("{}: expected a number, a string or an array of them, got {}", where,
                                   item.type_name()));
    };
    std::string value_text;
    if (value.is_array()) {
      if (value.empty()) throw UsageError(fmt::format("{}: empty array", where));
      for (const auto& item : value) value_text += (value_text.empty() ? "" : ",") + scalar_text(item);
    } else {
      value_text = scalar_text(value);
    }
    set(key, value_text, where);
  }
}

namespace {

const SettingsSource::Value* find(const SettingsSource& source, const std::string& key) {
  const auto it = source.values().find(key);
  return it == source.values().end() ? nullptr : &it->second;
}

std::vector<std::int64_t> integers(const SettingsSource& source, const std::string& key,
                                   std::vector<std::int64_t> fallback, std::int64_t max_value) {
  const auto* value = find(source, key);
  return value ? parse_integer_list(value->text, value->origin, 1, max_value) : fallback;
}

template <class Enum, class Parse>
std::vector<Enum> enums(const SettingsSource& source, const std::string& key, Enum fallback, Parse parse) {
  const auto* value = find(source, key);
  if (!value) return {fallback};
  std::vector<Enum> out;
  for (const std::string& name : parse_name_list(value->text, value->origin)) {
    const Enum parsed = parse(name, value->origin);
    if (std::find(out.begin(), out.end(), parsed) == out.end()) out.push_back(parsed);
  }
  return out;
}

bool boolean(const SettingsSource::Value& value) {
  if (value.text == "true" || value.text == "1") return true;
  if (value.text == "false" || value.text == "0") return false;
  throw UsageError(fmt::format("{}: '{}' is not a boolean (true or false)", value.origin, value.text));
}

MeasureSettings measure_settings(const SettingsSource& source) {
  MeasureSettings measure;
  if (const auto* v = find(source, "warmup")) measure.warmup = int(parse_integer(v->text, v->origin, 0, 1000));
  if (const auto* v = find(source, "min_samples")) measure.min_samples = int(parse_integer(v->text, v->origin, 1, 1000000));
  if (const auto* v = find(source, "max_noise")) measure.max_noise_percent = parse_number(v->text, v->origin, 0.0, 100.0);
  if (const auto* v = find(source, "min_time")) measure.min_time_s = parse_number(v->text, v->origin, 0.0, 86400.0);
  if (const auto* v = find(source, "max_time")) measure.max_time_s = parse_number(v->text, v->origin, 0.001, 86400.0);
  if (const auto* v = find(source, "mem_limit")) measure.mem_limit = parse_size(v->text, v->origin);
  if (const auto* v = find(source, "verify")) measure.verify = boolean(*v);
  if (const auto* v = find(source, "flush_l2")) measure.flush_l2 = boolean(*v);
  if (const auto* v = find(source, "threads")) measure.threads = int(parse_integer(v->text, v->origin, 1, 1024));
  if (const auto* v = find(source, "interleave")) measure.interleave = boolean(*v);
  return measure;
}

}  // namespace

namespace {

bool from_flag(const SettingsSource::Value& value) { return value.origin.rfind("--config ", 0) != 0; }

// True when `name` is `pattern`, or pattern is "prefix.*" and name starts with "prefix.".
bool name_matches(const std::string& pattern, const std::string& name) {
  if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0)
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == name;
}

// True when `name` is a variant that `pattern` names: the variant itself, or "<implementation>@*".
bool variant_matches(const std::string& pattern, const std::string& name) {
  if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, "@*") == 0)
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == name;
}

PlanPart make_part(const SettingsSource& source, const PlanLimits& limits) {
  PlanPart plan;
  if (const auto* value = find(source, "impl")) {
    const auto named = parse_name_list(value->text, value->origin);
    const auto names = implementation_names();
    const auto variants = variant_names();
    for (const std::string& pattern : named) {
      if (std::none_of(names.begin(), names.end(), [&](const std::string& name) { return name_matches(pattern, name); }) &&
          std::none_of(variants.begin(), variants.end(), [&](const std::string& name) { return variant_matches(pattern, name); })) {
        throw UsageError(fmt::format("{}: unknown implementation '{}' (allowed: {}, or a prefix like cpu.*, or a variant "
                                     "such as cuda.fa3@128x176 or cuda.fa3@*: faprobe list --variants)",
                                     value->origin, pattern, fmt::join(names, ", ")));
      }
    }
    // Registry order, so tables read the same whatever order the flag gave; variants after the implementations.
    for (const std::string& name : names)
      if (std::any_of(named.begin(), named.end(), [&](const std::string& pattern) { return name_matches(pattern, name); }))
        plan.impls.push_back(name);
    for (const std::string& name : variants)
      if (std::any_of(named.begin(), named.end(), [&](const std::string& pattern) { return variant_matches(pattern, name); }))
        plan.impls.push_back(name);
  } else {
    plan.impls = implementation_names();
  }

  constexpr std::int64_t kMaxSeq = std::int64_t(1) << 31;
  auto seqs = integers(source, "seq", {1024}, kMaxSeq);
  const auto* seq_q_value = find(source, "seq_q");
  const auto seq_qs = seq_q_value ? parse_integer_list(seq_q_value->text, seq_q_value->origin, 1, kMaxSeq)
                                  : std::vector<std::int64_t>{0};  // 0: same as seq (prefill) or 1 (decode)
  auto batches = integers(source, "batch", {1}, 1 << 20);
  // --seqlens is one case's lengths, not an axis: it sets the batch and the (longest) length.
  std::vector<std::int64_t> seqlens;
  if (const auto* value = find(source, "seqlens")) {
    seqlens = parse_integer_sequence(value->text, value->origin, 1, kMaxSeq, /*keep_duplicates=*/true);
    for (const char* replaced : {"batch", "seq"}) {
      const auto* other = find(source, replaced);
      if (other != nullptr && from_flag(*other)) {
        throw UsageError(fmt::format("{} and {} both set the batch's key lengths; give one of them",
                                     value->origin, other->origin));
      }
    }
    batches = {std::int64_t(seqlens.size())};
    seqs = {*std::max_element(seqlens.begin(), seqlens.end())};
  }
  const auto* page_value = find(source, "page_size");
  const auto page_sizes = page_value ? parse_integer_list(page_value->text, page_value->origin, 0, Case::kMaxPageSize)
                                     : std::vector<std::int64_t>{0};
  const auto* splits_value = find(source, "splits");
  const auto splits_list = splits_value ? parse_integer_list(splits_value->text, splits_value->origin, 0, Case::kMaxSplits)
                                        : std::vector<std::int64_t>{0};
  const auto heads_list = integers(source, "heads", {8}, 1 << 16);
  const auto* kv_value = find(source, "kv_heads");
  const auto kv_list = kv_value ? parse_integer_list(kv_value->text, kv_value->origin, 1, 1 << 16)
                                : std::vector<std::int64_t>{0};  // 0: the case's heads
  const auto head_dims = integers(source, "head_dim", {64}, 1 << 16);
  const auto* seed_value = find(source, "seed");
  const auto seeds = seed_value ? parse_integer_list(seed_value->text, seed_value->origin, 0,
                                                     std::numeric_limits<std::int64_t>::max())
                                : std::vector<std::int64_t>{0};
  const auto dtypes = enums(source, "dtype", DType::fp32, parse_dtype);
  const auto masks = enums(source, "mask", Mask::none, parse_mask);
  const auto modes = enums(source, "mode", Mode::prefill, parse_mode);
  const auto input_distributions = enums(source, "inputs", InputDistribution::normal, parse_inputs);

  // The size of the product, before any case is made: an absurd plan is refused with its size and the
  // axes that made it, not expanded.
  const std::pair<const char*, std::size_t> axes[] = {
      {"seq", seqs.size()},       {"seq_q", seq_qs.size()},         {"batch", batches.size()},
      {"heads", heads_list.size()}, {"kv_heads", kv_list.size()},    {"head_dim", head_dims.size()},
      {"seed", seeds.size()},     {"page_size", page_sizes.size()}, {"splits", splits_list.size()},
      {"dtype", dtypes.size()},   {"mask", masks.size()},           {"mode", modes.size()},
      {"inputs", input_distributions.size()}};
  double pairs = double(plan.impls.size());
  for (const auto& [key, count] : axes) pairs *= double(count);
  if (pairs > double(limits.max_pairs)) {
    std::vector<std::pair<std::size_t, std::string>> factors;
    for (const auto& [key, count] : axes) {
      if (count > 1) factors.emplace_back(count, fmt::format("{} ({} values)", find(source, key)->origin, count));
    }
    std::sort(factors.begin(), factors.end(), std::greater<>());
    std::string product;
    for (const auto& factor : factors) product += factor.second + " × ";
    throw UsageError(fmt::format("the plan has {:.0f} (implementation, case) pairs, at most {}: {}{} implementations; "
                                 "narrow an axis or split the sweep",
                                 pairs, limits.max_pairs, product, plan.impls.size()));
  }

  std::set<std::string> seen;
  for (Mode mode : modes)
    for (DType dtype : dtypes)
      for (InputDistribution inputs : input_distributions)
        for (Mask mask : masks)
          for (std::int64_t batch : batches)
            for (std::int64_t heads : heads_list)
              for (std::int64_t kv_heads : kv_list)
                for (std::int64_t head_dim : head_dims)
                  for (std::int64_t seed : seeds)
                    for (std::int64_t page_size : page_sizes)
                      for (std::int64_t splits : splits_list)
                        for (std::int64_t seq_q : seq_qs) {
                          if (interrupted()) throw Interrupted();  // Ctrl-C answers at once, even here
                          for (std::int64_t seq : seqs) {
                            Case c;
                            c.batch = batch;
                            c.heads = heads;
                            c.kv_heads = kv_heads != 0 ? kv_heads : heads;
                            c.head_dim = head_dim;
                            c.dtype = dtype;
                            c.mask = mask;
                            c.mode = mode;
                            c.seed = std::uint64_t(seed);
                            c.seq_k = seq;
                            c.page_size = page_size;
                            c.splits = splits;
                            c.seqlens = seqlens;
                            c.inputs = inputs;
                            // --seq-q applies to prefill; decode always has one query row.
                            c.seq_q = mode == Mode::decode ? 1 : (seq_q != 0 ? seq_q : seq);
                            c.validate();
                            if (seen.insert(c.key()).second) plan.cases.push_back(c);
                          }
                        }
  return plan;
}

}  // namespace

std::size_t Plan::size() const {
  std::size_t total = 0;
  for (const PlanPart& part : parts) total += part.impls.size() * part.cases.size();
  return total;
}

Plan make_plan(const SettingsSource& source, const PlanLimits& limits) {
  Plan plan;
  plan.measure = measure_settings(source);
  plan.impls_named = source.has("impl") && from_flag(source.values().at("impl"));
  if (source.parts().empty()) plan.parts.push_back(make_part(source, limits));
  for (const SettingsSource& part : source.parts()) {
    // The config's own axes, then the part's, then flags (which override every part).
    SettingsSource merged;
    for (const auto& [key, value] : source.values())
      if (!from_flag(value)) merged.set(key, value.text, value.origin);
    for (const auto& [key, value] : part.values()) merged.set(key, value.text, value.origin);
    for (const auto& [key, value] : source.values())
      if (from_flag(value)) merged.set(key, value.text, value.origin);
    plan.parts.push_back(make_part(merged, limits));
    if (plan.size() > limits.max_pairs) {
      throw UsageError(fmt::format("--config: its parts have {} (implementation, case) pairs together, at most {}",
                                   plan.size(), limits.max_pairs));
    }
  }
  // A flag that changes no case is said, not dropped: --seq-q when every case is a decode case.
  if (const auto it = source.values().find("seq_q"); it != source.values().end() && from_flag(it->second)) {
    const bool any_prefill = std::any_of(plan.parts.begin(), plan.parts.end(), [](const PlanPart& part) {
      return std::any_of(part.cases.begin(), part.cases.end(), [](const Case& c) { return c.mode == Mode::prefill; });
    });
    if (!any_prefill) plan.notes.push_back(it->second.origin + " has no effect: a decode case has one query row");
  }
  std::set<std::string> seen;
  std::vector<std::string> ordered = implementation_names();
  for (const std::string& name : variant_names()) ordered.push_back(name);
  for (const std::string& name : ordered)
    for (const PlanPart& part : plan.parts)
      if (std::find(part.impls.begin(), part.impls.end(), name) != part.impls.end()) {
        plan.impls.push_back(name);
        break;
      }
  for (const PlanPart& part : plan.parts)
    for (const Case& c : part.cases)
      if (seen.insert(c.key()).second) plan.cases.push_back(c);
  return plan;
}

}  // namespace faprobe
