// faprobe: benchmark and verify exact attention implementations. main() wires the subcommands and turns
// every error into one line on stderr and docs/DESIGN.md's exit status (2 bad input, 1 failure).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "harness/io/build_info.hpp"
#include "harness/io/progress.hpp"
#include "model/errors.hpp"

namespace {

// CLI11 answers `faprobe frobnicate` with "A subcommand is required"; name the word and the real ones.
// The first argument that is not an option is the subcommand (faprobe's own options, --help and --version,
// take no value).
void reject_unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg.front() == '-') continue;
    if (std::find(names.begin(), names.end(), arg) == names.end()) {
      throw faprobe::UsageError(fmt::format("unknown subcommand '{}' (allowed: {})", arg, fmt::join(names, ", ")));
    }
    return;
  }
}

// The edit distance between two option names (insertions, deletions and substitutions of one character).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The long option names (without "--") that `app` takes.
void add_long_names(const CLI::App& app, std::vector<std::string>& names) {
  for (const CLI::Option* option : app.get_options()) {
    const std::vector<std::string>& long_names = option->get_lnames();
    names.insert(names.end(), long_names.begin(), long_names.end());
  }
}

// The one of `names` probably meant by `word`: the only one that `word` starts (--mem for --mem-limit), else
// the nearest within a typo of a character or two (--seqs, --dtpye), or one for a word of three; "" when
// none is near enough.
std::string nearest_name(const std::string& word, const std::vector<std::string>& names) {
  std::vector<std::string> extending;
  for (const std::string& name : names)
    if (name.rfind(word, 0) == 0 && std::find(extending.begin(), extending.end(), name) == extending.end())
      extending.push_back(name);
  if (extending.size() == 1) return extending.front();
  if (word.size() <= 2) return "";  // one edit from a one- or two-letter word is any short option: no guess
  std::string best;
  std::size_t best_distance = (word.size() <= 3 ? 1 : std::max<std::size_t>(2, word.size() / 3)) + 1;
  for (const std::string& name : names) {
    const std::size_t distance = edit_distance(word, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

// CLI11 answers `faprobe sweep --seqs 1024` with "The following arguments were not expected: 1024 --seqs";
// name the option, and the one probably meant. `ab` hands the options it does not know to its sweeps, so it
// takes sweep's too. Arguments after "--" are not options.
void reject_unknown_options(CLI::App& app, int argc, char** argv) {
  int at = 1;
  while (at < argc && argv[at][0] == '-') ++at;
  if (at == argc) return;
  const CLI::App* sub = app.get_subcommand(std::string(argv[at]));  // reject_unknown_subcommand has checked the name
  std::vector<std::string> names;
  add_long_names(app, names);
  add_long_names(*sub, names);
  if (sub->get_name() == "ab") add_long_names(*app.get_subcommand("sweep"), names);
  for (int i = at + 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    if (arg.size() <= 2 || arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(2, arg.find('=') - 2);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const std::string meant = nearest_name(name, names);
    throw faprobe::UsageError(fmt::format("{}: unknown option --{}{} (see faprobe {} --help)", sub->get_name(), name,
                                          meant.empty() ? "" : fmt::format("; did you mean --{}?", meant),
                                          sub->get_name()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace faprobe;
  set_command_line(argc, argv);
  CLI::App app{"faprobe: benchmark and verify exact attention implementations against a float64 reference"};
  app.set_version_flag("--version", std::string(FAPROBE_VERSION) + " (" + build_info().revision_text() + ")");
  app.require_subcommand(1);
  int exit_status = kExitOk;
  cli::setup_list(app, exit_status);
  cli::setup_sweep(app, exit_status);
  cli::setup_verify(app, exit_status);
  cli::setup_run(app, exit_status);
  cli::setup_calibrate(app, exit_status);
  cli::setup_probes(app, exit_status);
  cli::setup_compare(app, exit_status);
  cli::setup_report(app, exit_status);
  cli::setup_merge(app, exit_status);
  cli::setup_ab(app, exit_status);
  cli::refuse_empty_values(app);
  cli::take_last_of_repeated(app);
  install_interrupt_handler();
  try {
    reject_unknown_subcommand(app, argc, argv);
    reject_unknown_options(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::Success& done) {  // --help, --version
    return app.exit(done);
  } catch (const CLI::ParseError& error) {
    fmt::print(stderr, "faprobe: {} (see faprobe --help)\n", error.what());
    return kExitUsage;
  } catch (const Interrupted&) {
    fmt::print(stderr, "faprobe: interrupted\n");
    return kExitInterrupted;
  } catch (const UsageError& error) {
    fmt::print(stderr, "faprobe: {}\n", error.what());
    return kExitUsage;
  } catch (const OutputError& error) {  // a result file could not be written; the message says what is on disk
    fmt::print(stderr, "faprobe: {}\n", error.what());
    return kExitFailed;
  } catch (const std::exception& error) {
    fmt::print(stderr, "faprobe: error: {}\n", error.what());
    return kExitFailed;
  }
  return exit_status;
}
