// faprobe list: the devices found and what each implementation supports, and why not (harness/commands/listing.hpp
// does the work). Its flags: --json, --variants, --all and --plugin.
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/commands/listing.hpp"

namespace faprobe::cli {

void setup_list(CLI::App& app, int& exit_status) {
  auto json = std::make_shared<bool>(false);
  auto variants = std::make_shared<bool>(false);
  auto all = std::make_shared<bool>(false);
  auto plugins = std::make_shared<std::vector<std::string>>();
  CLI::App* sub = app.add_subcommand("list", "devices found, implementations, and what each supports (and why not)");
  sub->add_flag("--json", *json, "print JSON: the devices and every probe of the support table");
  sub->add_flag("--variants", *variants,
                "also list the variants (one tile of a kernel each: cuda.fa3@128x176), run only when named");
  sub->add_flag("--all", *all,
                "the full support table of each implementation (dtype × head_dim × mask × mode, and aligned or "
                "unaligned lengths), with the reason for each refusal; by default one row each");
  add_plugin_option(*sub, *plugins);
  sub->callback([json, variants, all, plugins, &exit_status] {
    exit_status = run_list(*json, *variants, *all, *plugins);
  });
}

}  // namespace faprobe::cli
