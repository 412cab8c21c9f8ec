#include "harness/commands/listing.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cpu/cpu_implementation.hpp"
#include "cpu/cpu_isa.hpp"
#include "harness/io/range.hpp"
#include "harness/plan/plugins.hpp"
#include "harness/plan/registry.hpp"
#include "harness/records/record.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

constexpr std::array kDTypes = {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3};
constexpr std::array<std::int64_t, 8> kHeadDims = {64, 72, 80, 96, 100, 128, 192, 256};
constexpr std::array kMasks = {Mask::none, Mask::causal, Mask::causal_top_left};
constexpr std::array kModes = {Mode::prefill, Mode::decode};
constexpr std::array kAligned = {true, false};  // sequence lengths 1024 (a multiple of 128) or 1000

}  // namespace

std::vector<SupportProbe> probe_support(const Implementation& impl) {
  std::vector<SupportProbe> probes;
  for (DType dtype : kDTypes)
    for (Mode mode : kModes)
      for (Mask mask : kMasks)
        for (bool aligned : kAligned)
          for (std::int64_t head_dim : kHeadDims) {
            SupportProbe p;
            p.c.mode = mode;
            p.c.dtype = dtype;
            p.c.mask = mask;
            p.c.head_dim = head_dim;
            p.c.seq_k = aligned ? 1024 : 1000;
            p.c.seq_q = mode == Mode::decode ? 1 : p.c.seq_k;
            p.aligned = aligned;
            p.reason = impl.supports(p.c);
            probes.push_back(std::move(p));
          }
  return probes;
}

namespace {

// The row axes besides dtype, in the order a row label names them.
enum Axis { kMode, kMask, kAlignment, kAxes };

int axis_value(const SupportProbe& p, Axis axis) {
  switch (axis) {
    case kMode: return int(p.c.mode);
    case kMask: return int(p.c.mask);
    case kAlignment: return p.aligned ? 0 : 1;
    case kAxes: break;
  }
  return 0;
}

// Whether changing `axis` alone changes some answer.
bool axis_matters(const std::vector<SupportProbe>& probes, Axis axis) {
  for (const SupportProbe& a : probes)
    for (const SupportProbe& b : probes) {
      bool same_elsewhere = a.c.dtype == b.c.dtype && a.c.head_dim == b.c.head_dim;
      for (int other = 0; other < kAxes; ++other)
        if (other != axis)
          same_elsewhere = same_elsewhere && axis_value(a, Axis(other)) == axis_value(b, Axis(other));
      if (same_elsewhere && a.reason.empty() != b.reason.empty()) return true;
    }
  return false;
}

std::string row_label(const SupportProbe& p, const std::array<bool, kAxes>& split) {
  std::string label(to_string(p.c.dtype));
  if (split[kMode]) label += fmt::format(" {}", to_string(p.c.mode));
  if (split[kMask]) label += fmt::format(" {}", to_string(p.c.mask));
  if (split[kAlignment]) label += p.aligned ? " aligned" : " unaligned";
  return label;
}

// Where `word` last occurs in `text` as a whole word (not inside a longer name or number), or npos.
std::size_t last_word(const std::string& text, const std::string& word) {
  auto part_of_word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.'; };
  for (std::size_t at = text.rfind(word); at != std::string::npos;) {
    const std::size_t end = at + word.size();
    if ((at == 0 || !part_of_word(text[at - 1])) && (end == text.size() || !part_of_word(text[end]))) return at;
    at = at == 0 ? std::string::npos : text.rfind(word, at - 1);
  }
  return std::string::npos;
}

}  // namespace

std::vector<std::string> distinct_reasons(const std::vector<SupportProbe>& probes) {
  struct Group {
    std::string before, after;        // the reason around the merged value
    std::vector<std::string> values;  // in order of appearance
  };
  std::vector<Group> groups;
  for (const SupportProbe& p : probes) {
    if (p.reason.empty()) continue;
    std::string value = std::to_string(p.c.head_dim);
    std::size_t at = last_word(p.reason, value);
    if (at == std::string::npos) {
      value = std::string(to_string(p.c.dtype));
      at = last_word(p.reason, value);
    }
    Group group;
    if (at == std::string::npos) {
      group.before = p.reason;  // nothing to merge: the reason itself
    } else {
      group.before = p.reason.substr(0, at);
      group.after = p.reason.substr(at + value.size());
    }
    const auto same = [&](const Group& g) { return g.before == group.before && g.after == group.after; };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) it = groups.insert(groups.end(), group);
    if (at != std::string::npos && std::find(it->values.begin(), it->values.end(), value) == it->values.end())
      it->values.push_back(value);
  }
  std::vector<std::string> reasons;
  for (const Group& group : groups)
    reasons.push_back(fmt::format("{}{}{}", group.before, fmt::join(group.values, "/"), group.after));
  return reasons;
}

std::string support_block(const Implementation& impl, const std::vector<SupportProbe>& probes) {
  std::string text;
  std::string traits = impl.timed() ? "timed" : "checked, not timed";
  if (impl.isolate_by_default()) traits += ", isolated by default";
  if (const LoadedPlugin* plugin = plugin_of(impl.name())) traits += ", from " + plugin->path;
  text += fmt::format("{} ({}; {})\n", impl.name(), impl.device(), traits);

  const std::vector<std::string> reasons = distinct_reasons(probes);
  const bool none_supported =
      std::all_of(probes.begin(), probes.end(), [](const SupportProbe& p) { return !p.reason.empty(); });
  if (none_supported && reasons.size() == 1) {
    text += fmt::format("  ✗ every case: {}\n\n", reasons.front());
    return text;
  }

  std::array<bool, kAxes> split{};
  for (int axis = 0; axis < kAxes; ++axis) split[axis] = axis_matters(probes, Axis(axis));
  // Rows: the probes with the first value of every axis not split, grouped by their label.
  std::vector<std::pair<std::string, std::string>> rows;  // label, cells
  for (const SupportProbe& p : probes) {
    bool shown = true;
    for (int axis = 0; axis < kAxes; ++axis) shown = shown && (split[axis] || axis_value(p, Axis(axis)) == 0);
    if (!shown) continue;
    const std::string label = row_label(p, split);
    if (rows.empty() || rows.back().first != label) rows.emplace_back(label, "");
    rows.back().second += p.reason.empty() ? "   ✓" : "   ✗";  // ✓ and ✗ are one column wide: padded by hand
  }
  std::size_t label_width = 0;
  for (const auto& row : rows) label_width = std::max(label_width, row.first.size());
  std::string header;
  for (std::int64_t head_dim : kHeadDims) header += fmt::format("{:>4}", head_dim);
  text += fmt::format("  {:<{}}{}   (head_dim)\n", "", label_width, header);
  for (const auto& [label, cells] : rows) text += fmt::format("  {:<{}}{}\n", label, label_width, cells);
  for (const std::string& reason : reasons) text += fmt::format("  ✗ {}\n", reason);
  text += "\n";
  return text;
}

CompactRow compact_row(const Implementation& impl, const std::vector<SupportProbe>& probes) {
  CompactRow row;
  row.name = impl.name();
  row.device = impl.device();
  std::vector<std::string> notes;
  if (!impl.timed()) notes.push_back("checked, not timed");
  if (impl.isolate_by_default()) notes.push_back("isolated");
  if (const LoadedPlugin* plugin = plugin_of(impl.name())) notes.push_back("from " + plugin->path);
  row.notes = fmt::format("{}", fmt::join(notes, ", "));
  auto supported = [&](auto&& has) {
    return std::any_of(probes.begin(), probes.end(), [&](const SupportProbe& p) { return p.reason.empty() && has(p); });
  };
  std::vector<std::string> dtypes, head_dims, masks, modes;
  for (DType dtype : kDTypes)
    if (supported([&](const SupportProbe& p) { return p.c.dtype == dtype; })) dtypes.emplace_back(to_string(dtype));
  for (std::int64_t head_dim : kHeadDims)
    if (supported([&](const SupportProbe& p) { return p.c.head_dim == head_dim; })) head_dims.push_back(std::to_string(head_dim));
  for (Mask mask : kMasks)
    if (supported([&](const SupportProbe& p) { return p.c.mask == mask; })) masks.emplace_back(to_string(mask));
  for (Mode mode : kModes)
    if (supported([&](const SupportProbe& p) { return p.c.mode == mode; })) modes.emplace_back(to_string(mode));
  if (dtypes.empty()) {
    const std::vector<std::string> reasons = distinct_reasons(probes);
    row.dtypes = reasons.size() == 1 ? "none: " + reasons.front() : "none (faprobe list --all says why)";
    return row;
  }
  const bool aligned_only = !supported([](const SupportProbe& p) { return !p.aligned; });
  // Partial: some probe inside the product of the supported values (and lengths) is refused.
  auto listed = [](const std::vector<std::string>& values, const std::string& value) {
    return std::find(values.begin(), values.end(), value) != values.end();
  };
  for (const SupportProbe& p : probes) {
    const bool inside = listed(dtypes, std::string(to_string(p.c.dtype))) &&
                        listed(head_dims, std::to_string(p.c.head_dim)) &&
                        listed(masks, std::string(to_string(p.c.mask))) &&
                        listed(modes, std::string(to_string(p.c.mode))) && (p.aligned || !aligned_only);
    row.partial = row.partial || (inside && !p.reason.empty());
  }
  if (aligned_only) notes.insert(notes.begin(), "lengths a multiple of 128");
  row.notes = fmt::format("{}", fmt::join(notes, ", "));
  row.dtypes = fmt::format("{}", fmt::join(dtypes, ","));
  row.head_dims = head_dims.size() == kHeadDims.size() ? "all" : fmt::format("{}", fmt::join(head_dims, ","));
  row.masks = masks.size() == kMasks.size() ? "all" : fmt::format("{}", fmt::join(masks, ","));
  row.modes = fmt::format("{}", fmt::join(modes, ","));
  return row;
}

std::string compact_table(const std::vector<const Implementation*>& impls,
                          const std::vector<std::vector<SupportProbe>>& probes) {
  std::string text;
  std::vector<CompactRow> rows;
  for (std::size_t i = 0; i < impls.size(); ++i) rows.push_back(compact_row(*impls[i], probes[i]));
  std::size_t name = 14, device = 6, dtypes = 6, head_dims = 8, masks = 5;
  for (const CompactRow& row : rows) {
    name = std::max(name, row.name.size() + (row.partial ? 1 : 0));
    device = std::max(device, row.device.size());
    if (row.head_dims.empty()) continue;  // a row of "none: <reason>" runs on to the end of the line
    dtypes = std::max(dtypes, row.dtypes.size());
    head_dims = std::max(head_dims, row.head_dims.size());
    masks = std::max(masks, row.masks.size());
  }
  text += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", "implementation", name, "on", device, "dtypes",
                      dtypes, "head_dim", head_dims, "masks", masks, "modes");
  for (const CompactRow& row : rows) {
    const std::string label = row.name + (row.partial ? "*" : "");
    if (row.head_dims.empty()) {
      text += fmt::format("  {:<{}}  {:<{}}  {}\n", label, name, row.device, device, row.dtypes);
      continue;
    }
    const std::string line = fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<15}  {}", label, name, row.device,
                                         device, row.dtypes, dtypes, row.head_dims, head_dims, row.masks, masks,
                                         row.modes, row.notes);
    text += fmt::format("{}\n", line.substr(0, line.find_last_not_of(' ') + 1));
  }
  text += "\n";
  return text;
}

namespace {

template <class Enum, std::size_t N>
nlohmann::json names_of(const std::array<Enum, N>& values) {
  nlohmann::json names = nlohmann::json::array();
  for (Enum value : values) names.push_back(to_string(value));
  return names;
}

// The level of the CPU kernels' run-time code paths (cpu/cpu_isa.hpp): what this CPU runs and, when
// FAPROBE_MAX_CPU_ISA caps it, the cap. A bad setting of it or of FAPROBE_CPU_PATH is a usage error, as for
// sweep.
nlohmann::json kernel_isa() {
  std::optional<cpu::CpuIsa> cap;
  try {
    cap = cpu::max_cpu_isa_setting();
    cpu::cpu_path_setting();  // checked here too: the listing plans cpu.tiled's cases (tiled_paths)
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  nlohmann::json isa{{"cpu", cpu::to_string(cpu::detected_cpu_isa())}, {"used", cpu::to_string(cpu::cpu_isa())}};
  if (cap) isa["cap"] = cpu::to_string(*cap);
  return isa;
}

std::string kernel_isa_text(const nlohmann::json& isa) {
  const std::string used = isa.at("used");
  if (!isa.contains("cap") || used == isa.at("cpu")) return used;
  return fmt::format("{} ({} caps this CPU's {})", used, cpu::kMaxCpuIsaVariable, isa.at("cpu").get<std::string>());
}

// cpu.tiled's code path for each dtype at the common head dims, as a b1 h8 s4096 causal case takes it here:
// for bf16 where several paths run, chosen by timing them in this process (the note has their times), so
// `faprobe list` costs ~0.1 s more on such a CPU.
nlohmann::json tiled_paths() {
  nlohmann::json paths = nlohmann::json::array();
  const auto* tiled = dynamic_cast<const cpu::CpuImplementation*>(find_implementation("cpu.tiled"));
  if (tiled == nullptr) return paths;
  for (const DType dtype : {DType::fp32, DType::fp16, DType::bf16}) {
    for (const std::int64_t head_dim : {64, 128, 256}) {
      Case c;
      c.seq_q = c.seq_k = 4096;
      c.head_dim = head_dim;
      c.dtype = dtype;
      c.mask = Mask::causal;
      nlohmann::json details;
      tiled->describe(c, details);
      paths.push_back({{"dtype", to_string(dtype)}, {"head_dim", head_dim}, {"path", details.value("path", "?")},
                       {"note", details.value("path_note", "")}});
    }
  }
  return paths;
}

// The listing entry of one implementation or variant with every probe of its support table.
nlohmann::json listing_entry(const Implementation& impl, const std::vector<SupportProbe>& probes) {
  nlohmann::json entry{{"name", impl.name()},
                       {"device", impl.device()},
                       {"timed", impl.timed()},
                       {"isolate_by_default", impl.isolate_by_default()},
                       {"support", nlohmann::json::array()}};
  if (!impl.variant_of().empty()) entry["variant_of"] = impl.variant_of();
  if (const LoadedPlugin* plugin = plugin_of(impl.name())) entry["plugin"] = plugin->path;
  for (const SupportProbe& p : probes) {
    entry["support"].push_back({{"mode", to_string(p.c.mode)},
                                {"dtype", to_string(p.c.dtype)},
                                {"mask", to_string(p.c.mask)},
                                {"head_dim", p.c.head_dim},
                                {"seq_q", p.c.seq_q},
                                {"seq_k", p.c.seq_k},
                                {"aligned", p.aligned},
                                {"supported", p.reason.empty()},
                                {"reason", p.reason}});
  }
  return entry;
}

}  // namespace

Listing gather_listing(bool variants) {
  Listing listing;
  listing.host = host_info();
  const nlohmann::json isa = kernel_isa();
  listing.scan = scan_devices();
  const DeviceScan& scan = listing.scan;
  listing.json = {{"host", listing.host},
                  {"cpu_kernel_isa", isa},
                  {"cpu_tiled_paths", tiled_paths()},
                  {"devices", scan.devices},
                  {"implementations", nlohmann::json::array()},
                  {"probes", {{"dtypes", names_of(kDTypes)},
                              {"head_dims", kHeadDims},
                              {"masks", names_of(kMasks)},
                              {"modes", names_of(kModes)},
                              {"seq_aligned", 1024},
                              {"seq_unaligned", 1000},
                              {"batch", Case{}.batch},
                              {"heads", Case{}.heads}}}};
  if (scan.devices.empty()) listing.json["no_device_reason"] = scan.no_device_reason;
  if (!loaded_plugins().empty()) listing.json["plugins"] = plugins_metadata();
  for (const auto& impl : implementations()) {
    listing.probes.push_back(probe_support(*impl));
    listing.json["implementations"].push_back(listing_entry(*impl, listing.probes.back()));
  }
  if (variants) {
    listing.json["variants"] = nlohmann::json::array();
    for (const auto& impl : variant_implementations()) {
      listing.variant_probes.push_back(probe_support(*impl));
      listing.json["variants"].push_back(listing_entry(*impl, listing.variant_probes.back()));
    }
  }
  return listing;
}

std::string listing_text(const Listing& listing, bool all, bool variants) {
  const HostInfo& host = listing.host;
  const DeviceScan& scan = listing.scan;
  std::string text = fmt::format(
      "devices:\n  cpu      {} ({} cores, {}; vector code {}, -march={}{}; kernels' run-time paths {})\n",
      host.cpu_model, host.cores, format_bytes(double(host.memory_total_bytes)), host.vector_isa,
      host.march.empty() ? "compiler default" : host.march,
      host.cpu_vector_isa != host.vector_isa ? fmt::format("; this CPU has {}", host.cpu_vector_isa) : "",
      kernel_isa_text(listing.json.at("cpu_kernel_isa")));
  for (const nlohmann::json& path : listing.json.at("cpu_tiled_paths")) {
    const std::string note = path.at("note");
    text += fmt::format("  cpu.tiled {} d{}: {}{}\n", path.at("dtype").get<std::string>(),
                        path.at("head_dim").get<std::int64_t>(), path.at("path").get<std::string>(),
                        note.empty() ? "" : " (" + note + ")");
  }
  if (scan.devices.empty()) text += fmt::format("  cuda     none: {}\n", scan.no_device_reason);
  for (const auto& device : scan.devices) {
    text += fmt::format("  cuda {:<3} {}: compute capability {}, {} SMs, {}, L2 {}\n", device["index"].get<int>(),
                        device["name"].get<std::string>(), device["compute_capability"].get<std::string>(),
                        device["sm_count"].get<int>(), format_bytes(device["memory_total_bytes"].get<double>()),
                        format_bytes(device["l2_bytes"].get<double>()));
  }
  auto pointers = [](const auto& owned) {
    std::vector<const Implementation*> impls;
    for (const auto& impl : owned) impls.push_back(impl.get());
    return impls;
  };
  if (all) {
    text += "\nimplementations: ✓ supported, ✗ refused (the reasons follow each block); rows split by mode, mask,\n"
            "or alignment (aligned: sequence lengths 1024, a multiple of 128; unaligned: 1000) only where that\n"
            "changes an answer; `faprobe list --json` has every probe.\n\n";
    for (std::size_t i = 0; i < implementations().size(); ++i)
      text += support_block(*implementations()[i], listing.probes[i]);
  } else {
    text += "\nimplementations: what each supports in some combination (* not in every one; `faprobe list --all`\n"
            "has each one's table of dtype × head_dim × mask × mode, with the reason for each refusal):\n";
    text += compact_table(pointers(implementations()), listing.probes);
  }
  if (variants) {
    text += fmt::format("variants: one tile of a kernel each, run only when named (--impl cuda.fa3@128x176, or "
                        "cuda.fa3@* for\nall of them); the plain implementation runs the tile marked for each case.\n{}",
                        all ? "\n" : "");
    if (all) {
      for (std::size_t i = 0; i < variant_implementations().size(); ++i)
        text += support_block(*variant_implementations()[i], listing.variant_probes[i]);
    } else {
      text += compact_table(pointers(variant_implementations()), listing.variant_probes);
    }
  } else if (!variant_implementations().empty()) {
    std::vector<std::string> kernels;
    for (const auto& impl : variant_implementations())
      if (std::find(kernels.begin(), kernels.end(), impl->variant_of()) == kernels.end()) kernels.push_back(impl->variant_of());
    text += fmt::format("{} variants of {} (one tile each, run only when named): faprobe list --variants\n",
                        variant_implementations().size(), fmt::join(kernels, ", "));
  }
  return text;
}

int run_list(bool json, bool variants, bool all, const std::vector<std::string>& plugins) {
  SettingsSource source;
  for (const std::string& library : plugins) source.add_plugin({library, "--plugin"});
  load_requested_plugins(source);
  const Listing listing = gather_listing(variants);
  if (json) {
    std::cout << json_text(listing.json, 2) << "\n";
    return 0;
  }
  fmt::print("{}", listing_text(listing, all, variants));
  return 0;
}

}  // namespace faprobe
