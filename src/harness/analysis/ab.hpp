// faprobe ab: two sides measured over the same plan on the same machine at the same time, alternating at the
// level of processes, and compared process by process: the regression gate a CI job runs on each change.
//
// A side is a faprobe program (another build: --base ./old/build/release/faprobe; default: this one), a
// plugin library it loads (--base-plugin old.so; the same implementation name on both sides), and variables
// set in its environment (--base-env FAPROBE_MAX_CPU_ISA=portable). Both run `sweep` with the same flags.
//
// Order. Round k runs one process of each side, every pair once (a sweep of the whole plan); the side that
// goes first alternates A B, B A, A B, ... (ABBA: over two rounds each side is first once, so neither always
// runs on the warmer or the colder machine, and a drift over a round pair falls on both alike). The rounds'
// records are kept in DIR/base.rounds/ and DIR/new.rounds/ (harness/run/repeat.hpp's round files), pooled at the
// end into DIR/base.jsonl and DIR/new.jsonl (time_s.runs: each process's summary, with its round), and the
// two compared with the rounds paired (compare.hpp).
//
// Checked before anything is measured: both sides' plans, from `sweep --dry-run` with the side's flags,
// environment and plugin, must be the same pairs with the same measurement settings; a difference is a
// UsageError that names it ("only NEW: ...", "measure: ... against ...").
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace faprobe {

struct AbSide {
  std::string label;        // "BASE", "NEW"
  std::string stem;         // "base", "new": its files in the directory
  std::string executable;   // a faprobe program
  std::string plugin;       // a plugin library, "" for none
  std::vector<std::pair<std::string, std::string>> environment;  // set for its processes
  // executable sweep SWEEP_ARGS [--plugin LIB]
  std::vector<std::string> sweep_command(const std::vector<std::string>& sweep_args) const;
  std::string describe() const;  // "./faprobe + plugin new.so + FAPROBE_MAX_CPU_ISA=portable"
};

// The processes of `rounds` rounds in ABBA order: (round, side), side 0 the first given (BASE).
std::vector<std::pair<int, int>> abba_order(int rounds);

// Two `sweep --dry-run` outputs: "" when they are the same plan, else a one-line description of the
// difference (pairs only on one side, the first few named; or the measurement settings of each).
std::string plan_difference(const std::string& base_plan, const std::string& new_plan);

struct AbRun {
  AbSide base, next;
  std::vector<std::string> sweep_args;  // the flags both sides' sweeps get
  int rounds = 10;
  std::string directory;
  bool resume = false;
};

struct AbOutcome {
  std::string base_path, new_path;  // the pooled records, when every round finished
  bool interrupted = false;
  std::string failure;  // a process that did not finish, with its output's last lines
};

// Asks each side for its plan (a UsageError when a side's sweep refuses its flags or the plans differ), then
// runs the rounds (each process's output in its round's log) and pools them. Throws UsageError before any
// round for files of an earlier run in the directory without `resume`.
AbOutcome run_ab(const AbRun& run);

}  // namespace faprobe
