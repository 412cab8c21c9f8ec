#include "harness/analysis/ab.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/io/child_process.hpp"
#include "harness/io/output_files.hpp"
#include "harness/io/progress.hpp"
#include "harness/records/writers.hpp"
#include "harness/run/repeat.hpp"
#include "model/errors.hpp"

namespace faprobe {
namespace {

namespace fs = std::filesystem;

// The lines of a plan listing: its pairs ("IMPL CASE"), and its "measure: ..." line apart. A side's
// `sweep --dry-run` prints either the plan as a table (a header line "impl  case  ...", then a row per pair
// whose first two fields, each followed by two spaces or more, are the implementation and the case) or, from
// a faprobe before the table, one "IMPL CASE" line per pair; both give the same pairs. The rows' predictions
// and fates are left out: they come from each side's own calibration, and two equal plans would differ.
struct PlanListing {
  std::vector<std::string> pairs;
  std::string measure;
};

PlanListing parse_listing(const std::string& text) {
  PlanListing listing;
  const bool table = text.rfind("impl  ", 0) == 0 || text.find("\nimpl  ") != std::string::npos;
  bool in_table = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("measure: ", 0) == 0) {
      listing.measure = line.substr(9);
      in_table = false;
    } else if (table) {
      if (line.rfind("impl  ", 0) == 0) {
        in_table = true;
      } else if (in_table) {
        const std::size_t impl_end = line.find("  ");
        const std::size_t case_begin = line.find_first_not_of(' ', impl_end);
        if (impl_end == std::string::npos || case_begin == std::string::npos) continue;
        const std::size_t case_end = line.find("  ", case_begin);
        listing.pairs.push_back(line.substr(0, impl_end) + " " + line.substr(case_begin, case_end - case_begin));
      }
    } else if (!line.empty() && line.find(" pairs") == std::string::npos) {
      listing.pairs.push_back(line);
    }
  }
  return listing;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// Runs a side's `sweep --dry-run`; its stdout is the plan. A side that refuses is a UsageError with its words.
std::string side_plan(const AbSide& side, const std::vector<std::string>& sweep_args, const std::string& directory) {
  std::vector<std::string> args = sweep_args;
  args.push_back("--dry-run");
  const std::string path = fmt::format("{}/{}.plan", directory, side.stem);
  std::error_code error;
  fs::remove(path, error);
  const pid_t pid = start_logged_child(side.sweep_command(args), side.environment, path);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    throw UsageError(fmt::format("ab: {}'s sweep ({}) {} when asked for its plan (is it a faprobe with `ab`?): {}",
                                 side.label, side.describe(), exit_text(wait_status), tail_of(path, 2)));
  }
  return read_text(path);
}

void write_pooled(const std::string& path, const std::vector<Record>& records) {
  const std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << jsonl_document(records);
    if (!file.flush()) throw OutputError(fmt::format("ab: cannot write {}", temporary));
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) throw OutputError(fmt::format("ab: cannot rename {} to {}: {}", temporary, path, error.message()));
}

}  // namespace

std::vector<std::string> AbSide::sweep_command(const std::vector<std::string>& sweep_args) const {
  std::vector<std::string> command{executable, "sweep"};
  command.insert(command.end(), sweep_args.begin(), sweep_args.end());
  if (!plugin.empty()) command.insert(command.end(), {"--plugin", plugin});
  return command;
}

std::string AbSide::describe() const {
  std::string text = executable;
  if (!plugin.empty()) text += " + plugin " + plugin;
  for (const auto& [name, value] : environment) text += fmt::format(" + {}={}", name, value);
  return text;
}

std::vector<std::pair<int, int>> abba_order(int rounds) {
  std::vector<std::pair<int, int>> order;
  for (int round = 1; round <= rounds; ++round) {
    const int first = (round % 2 == 1) ? 0 : 1;
    order.emplace_back(round, first);
    order.emplace_back(round, 1 - first);
  }
  return order;
}

std::string plan_difference(const std::string& base_plan, const std::string& new_plan) {
  const PlanListing base = parse_listing(base_plan), next = parse_listing(new_plan);
  const std::set<std::string> base_pairs(base.pairs.begin(), base.pairs.end());
  const std::set<std::string> new_pairs(next.pairs.begin(), next.pairs.end());
  std::vector<std::string> only_base, only_new;
  for (const std::string& pair : base.pairs)
    if (new_pairs.count(pair) == 0) only_base.push_back(pair);
  for (const std::string& pair : next.pairs)
    if (base_pairs.count(pair) == 0) only_new.push_back(pair);
  auto first_few = [](const std::vector<std::string>& pairs) {
    constexpr std::size_t kShown = 3;
    std::vector<std::string> shown(pairs.begin(), pairs.begin() + std::ptrdiff_t(std::min(pairs.size(), kShown)));
    return fmt::format("{}{}", fmt::join(shown, "; "),
                       pairs.size() > kShown ? fmt::format("; and {} more", pairs.size() - kShown) : "");
  };
  std::vector<std::string> differences;
  if (!only_base.empty() || !only_new.empty()) {
    differences.push_back(fmt::format("BASE has {} pairs, NEW {}", base.pairs.size(), next.pairs.size()));
    if (!only_base.empty()) differences.push_back(fmt::format("only BASE: {}", first_few(only_base)));
    if (!only_new.empty()) differences.push_back(fmt::format("only NEW: {}", first_few(only_new)));
  }
  if (base.measure != next.measure) {
    differences.push_back(fmt::format("measure: BASE {}, NEW {}", base.measure, next.measure));
  }
  return fmt::format("{}", fmt::join(differences, "; "));
}

AbOutcome run_ab(const AbRun& run) {
  const std::vector<const AbSide*> sides{&run.base, &run.next};
  std::error_code error;
  fs::create_directories(run.directory, error);
  if (error) throw UsageError(fmt::format("ab: cannot create --out-dir {}: {}", run.directory, error.message()));
  AbOutcome outcome;
  outcome.base_path = fmt::format("{}/{}.jsonl", run.directory, run.base.stem);
  outcome.new_path = fmt::format("{}/{}.jsonl", run.directory, run.next.stem);
  auto rounds_directory = [&](const AbSide& side) { return fmt::format("{}/{}.rounds", run.directory, side.stem); };
  if (!run.resume) {
    for (const AbSide* side : sides) {
      for (const std::string& path : {fmt::format("{}/{}.jsonl", run.directory, side->stem), rounds_directory(*side)}) {
        if (fs::exists(path, error)) {
          throw UsageError(fmt::format("ab: {} is left from an earlier run; give --resume to continue it (or another "
                                       "--out-dir)",
                                       path));
        }
      }
    }
  }
  // A resumed run whose pooled files are written has only its comparison left.
  const bool pooled = run.resume && fs::exists(outcome.base_path, error) && fs::exists(outcome.new_path, error) &&
                      !fs::exists(rounds_directory(run.base), error) && !fs::exists(rounds_directory(run.next), error);
  if (pooled) return outcome;

  const std::string base_plan = side_plan(run.base, run.sweep_args, run.directory);
  const std::string new_plan = side_plan(run.next, run.sweep_args, run.directory);
  const std::string difference = plan_difference(base_plan, new_plan);
  if (!difference.empty()) throw UsageError(fmt::format("ab: the sides' plans differ: {}", difference));
  const std::size_t pairs = parse_listing(base_plan).pairs.size();

  for (const AbSide* side : sides) {
    fs::create_directories(rounds_directory(*side), error);
    if (error) throw UsageError(fmt::format("ab: cannot create {}: {}", rounds_directory(*side), error.message()));
  }
  std::vector<std::string> round_args = run.sweep_args;
  round_args.insert(round_args.end(), {"--repeat", "1"});
  const std::vector<std::pair<int, int>> order = abba_order(run.rounds);
  fmt::print(stderr, "ab: {} rounds of BASE and NEW ({} processes, ABBA order), {} pairs each; files in {}/\n",
             run.rounds, order.size(), pairs, run.directory);
  Progress progress(order.size() * pairs);
  for (std::size_t index = 0; index < order.size() && !interrupted(); ++index) {
    const int round = order[index].first;  // plain names: a lambda below captures them (C++17)
    const int side_index = order[index].second;
    const AbSide& side = *sides[std::size_t(side_index)];
    const std::string directory = rounds_directory(side);
    const RoundProcess process{side.sweep_command(round_args), side.environment,
                               round_path(directory, round, run.rounds), round_log_path(directory, round, run.rounds),
                               fmt::format("{} round {} of {}", side.label, round, run.rounds)};
    const RoundOutcome result = run_round_process(process, [&](std::size_t records) {
      progress.starting(index * pairs + std::min(records, pairs ? pairs - 1 : 0),
                        fmt::format("round {} of {}: {} {} of {} pairs", round, run.rounds, side.label, records, pairs));
    });
    if (result.interrupted) break;
    if (!result.finished) {
      progress.clear();
      outcome.failure = result.failure;
      return outcome;
    }
  }
  progress.clear();
  if (interrupted()) {
    outcome.interrupted = true;
    return outcome;
  }
  for (const AbSide* side : sides) {
    std::vector<std::vector<Record>> rounds;
    for (int round = 1; round <= run.rounds; ++round) {
      rounds.push_back(read_round_file(round_path(rounds_directory(*side), round, run.rounds)));
    }
    write_pooled(fmt::format("{}/{}.jsonl", run.directory, side->stem), pool_rounds(rounds));
  }
  // The pooled files hold every process's samples and summary: the round files are copies.
  for (const AbSide* side : sides) fs::remove_all(rounds_directory(*side), error);
  return outcome;
}

}  // namespace faprobe
