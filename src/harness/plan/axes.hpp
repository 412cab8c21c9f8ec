// What a command runs: the axes (expanded into cases) and the measurement settings. Both come from a
// JSON config (--config FILE, same keys as the flags, with '-' or '_') and from flags, flags winning.
// Values are given as text in the grammar of range.hpp, or in a config as numbers or arrays.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/plan/plugins.hpp"
#include "model/case.hpp"
#include "model/implementation.hpp"

namespace faprobe {

// Raw settings: key → (text value, where it came from). Keys are the flag names with '_' ("seq_q").
class SettingsSource {
 public:
  void set(const std::string& key, std::string text, std::string origin);
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  bool has_any_axis() const;
  // Reads a JSON config; throws UsageError naming the file (and line/column for malformed JSON).
  void load_config_file(const std::string& path);
  void load_config_text(const std::string& text, const std::string& origin);

  struct Value {
    std::string text;
    std::string origin;  // "--seq" or "configs/x.json: \"seq\""
  };
  const std::map<std::string, Value>& values() const { return values_; }
  // A config's "plugins" (paths resolved against the config file's folder), then each add_plugin (--plugin),
  // in order; loaded by settings_source (workflow.hpp) before the plan names any implementation (plugins.hpp).
  const std::vector<PluginRequest>& plugins() const { return plugins_; }
  void add_plugin(PluginRequest request) { plugins_.push_back(std::move(request)); }
  // A config's "parts": each an object of axis settings over the config's own, run one after the other
  // (see make_plan). Empty for a config without parts and for flags alone.
  const std::vector<SettingsSource>& parts() const { return parts_; }

 private:
  void load_config_object(const nlohmann::json& config, const std::string& origin, bool nested);

  std::map<std::string, Value> values_;
  std::vector<SettingsSource> parts_;
  std::vector<PluginRequest> plugins_;
  std::string config_folder_;  // of the config file being read: what its "plugins" are relative to
};

// Keys a config may hold, and the axis keys among them.
const std::vector<std::string>& setting_keys();
const std::vector<std::string>& axis_keys();

// One cross product of implementations and cases.
struct PlanPart {
  std::vector<std::string> impls;  // in registry order; all when none was named
  std::vector<Case> cases;         // in sweep order: seq varies fastest
};

struct Plan {
  std::vector<PlanPart> parts;     // run in order; one part unless the config has "parts"
  std::vector<std::string> impls;  // every implementation of any part, in registry order
  std::vector<Case> cases;         // every case of any part, each once, in part order
  MeasureSettings measure;
  bool impls_named = false;        // --impl on the command line chose the implementations
  std::vector<std::string> notes;  // flags the plan does not use, each a line to show the user

  std::size_t size() const;        // (implementation, case) pairs over all parts
};

// Turns the settings into implementations, cases and measurement settings; throws UsageError.
//
// A config may hold "parts": an array of objects with axis keys (not measurement keys). Each part is the
// config's own axes overridden by the part's, and flags override both; the plan runs part after part.
// This is how one config ties axes together that a single cross product cannot (batch = 16k / seq), or
// gives different implementations different cases (the CPU kernels the full CI matrix, the emulated GPU
// kernels a smaller one). In "impl", a name ending in ".*" means every implementation with that prefix.
//
// A plan of more than limits.max_pairs (implementation, case) pairs is refused before a case is made, with
// its size and the axes that multiply to it (each axis is also capped by range.hpp's kMaxAxisValues), and
// Ctrl-C during the expansion throws Interrupted (progress.hpp).
struct PlanLimits {
  std::size_t max_pairs = 1000000;  // a million pairs is days of measuring at a fraction of a second each
};
Plan make_plan(const SettingsSource& source, const PlanLimits& limits = {});

}  // namespace faprobe
