// Fuzz target: a --config file's text, parsed (duplicate keys, parts, every value in the range grammar) and
// expanded into its plan. The plan limit is lowered so that each input stays fast; the limit itself is
// what refuses larger plans, so it is exercised all the same.
#include <string>

#include "fuzz_targets.hpp"
#include "harness/plan/axes.hpp"
#include "model/errors.hpp"

namespace faprobe::fuzz {

int config_plan(const std::uint8_t* data, std::size_t size) {
  try {
    SettingsSource source;
    source.load_config_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    const Plan plan = make_plan(source, PlanLimits{20000});
    for (const Case& c : plan.cases) c.validate();  // every case of an accepted plan is a valid problem
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace faprobe::fuzz
