// faprobe list: the implementations, the devices found, and what each implementation supports: a table
// of dtype × mode × mask with the reason where a combination is refused (no silent fallback).
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "host_info.hpp"
#include "range.hpp"
#include "registry.hpp"

namespace faprobe::cli {
namespace {

// Representative cases for the support table.
std::vector<Case> support_probes() {
  std::vector<Case> probes;
  for (Mode mode : {Mode::prefill, Mode::decode})
    for (DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3})
      for (Mask mask : {Mask::none, Mask::causal}) {
        Case c;
        c.mode = mode;
        c.dtype = dtype;
        c.mask = mask;
        c.seq_q = mode == Mode::decode ? 1 : 1024;
        c.head_dim = 128;
        probes.push_back(c);
      }
  return probes;
}

int run_list(bool json) {
  const HostInfo host = host_info();
  nlohmann::json listing{{"devices", nlohmann::json::array({{{"name", host.cpu_model}, {"kind", "cpu"},
                                                             {"cores", host.cores},
                                                             {"memory_bytes", host.memory_total_bytes}}})},
                         {"implementations", nlohmann::json::array()}};
  for (const auto& impl : implementations()) {
    nlohmann::json entry{{"name", impl->name()}, {"device", impl->device()}, {"timed", impl->timed()},
                         {"support", nlohmann::json::array()}};
    for (const Case& probe : support_probes()) {
      const std::string why = impl->supports(probe);
      entry["support"].push_back({{"mode", to_string(probe.mode)}, {"dtype", to_string(probe.dtype)},
                                  {"mask", to_string(probe.mask)}, {"supported", why.empty()}, {"reason", why}});
    }
    listing["implementations"].push_back(entry);
  }
  if (json) {
    std::cout << listing.dump(2) << "\n";
    return 0;
  }
  fmt::print("devices:\n  cpu: {} ({} cores, {})\n  cuda: not built into this binary\n\n", host.cpu_model,
             host.cores, format_bytes(double(host.memory_total_bytes)));
  fmt::print("implementations (head_dim 128, no mask; ✓ supported, ✗ refused, with the reason below):\n");
  fmt::print("  {:<18} {:<6} | prefill fp32 fp16 bf16  fp8 | decode fp32 fp16 bf16  fp8\n", "name", "device");
  for (const auto& entry : listing["implementations"]) {
    std::string cells[2];  // each cell is 5 columns wide; ✓/✗ are one column (not padded by fmt)
    std::vector<std::string> reasons;
    for (const auto& support : entry["support"]) {
      if (support["mask"] != "none") continue;
      cells[support["mode"] == "decode" ? 1 : 0] += support["supported"].get<bool>() ? "    ✓" : "    ✗";
      const std::string reason = support["reason"];
      if (!reason.empty() && std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(reason);
    }
    fmt::print("  {:<18} {:<6} |        {} |       {}\n", entry["name"].get<std::string>(),
               entry["device"].get<std::string>(), cells[0], cells[1]);
    for (const std::string& reason : reasons) fmt::print("      ✗ {}\n", reason);
  }
  return 0;
}

}  // namespace

void setup_list(CLI::App& app, int& exit_status) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("list", "implementations, devices found, and what each supports");
  sub->add_flag("--json", *json, "print JSON");
  sub->callback([json, &exit_status] { exit_status = run_list(*json); });
}

}  // namespace faprobe::cli
