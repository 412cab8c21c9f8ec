// --interleave: the timed implementations of one case sampled in rounds (A B C A B C ...) rather than one
// after another, so that drift in clocks or machine load (a turbo budget running out, a neighbour's build)
// falls on all of them alike, as hyperfine and paired GPU benchmarks arrange it. run_plan calls it once per
// case when MeasureSettings::interleave is set and the run is timed.
//
// One case, in this order:
// 1. Screen: every implementation as runner.hpp's screen() does it (supports(), predicted memory and time).
//    Untimed ones (emu.*) have nothing to interleave: they run as without --interleave (run_one), after
//    the others.
// 2. Group: the members of a round are held prepared at once, so their predicted peaks must fit together.
//    First fit, in plan order: a group takes an implementation while, on each memory (the host's, the
//    GPU's), the sum of its members' predicted bytes stays within every one of those members' limits
//    (--mem-limit or the device's default). Normally that is one group; groups run one after another,
//    and each record's interleaved_with says which implementations shared its rounds.
// 3. Peak and check, member by member: prepared, run once, checked against the reference, its memory read
//    and then freed, so that nothing else of the case is allocated while it is measured: peak_bytes and
//    workspace_bytes are what it needs alone, as a sequential run reports them (prepare and first run; the
//    later runs of a case allocate what the first did).
// 4. Prepared again, all of them, and kept; warm-up in rounds, max(1, --warmup) runs each (the first run of
//    fresh buffers is always a warm-up, as in a sequential run, where it is the checked one).
// 5. Sample rounds: each round takes one sample of every member that has budget left (its own --max-time,
//    which its first run and warm-up spent part of). Rounds go on while any member wants more, that is, has
//    not met its own stopping rule (--min-samples, --min-time, --max-noise) and has budget left; a member
//    that met its rule is still sampled in every round, so that all of them see the same drift, until its
//    budget is spent. The rounds end when every member has met its rule or spent its budget.
// A member that throws (in any step) gets a failed record and leaves the rounds; the others go on. Ctrl-C
// ends the case between two runs; run_plan then records none of it (--resume runs it again).
//
// Interleaving is in one process: nothing here is isolated (make_run_options, workflow.hpp, refuses
// --interleave with --isolate, and runs cuda.* in this process with a warning).
#pragma once
#include <vector>

#include "harness/records/record.hpp"
#include "harness/run/pair_run.hpp"
#include "model/case.hpp"
#include "model/implementation.hpp"

namespace faprobe {

// One record per implementation of `impls`, in that order, the timed ones measured interleaved (above).
// Never throws for a failing implementation. When interrupted() the records are incomplete.
std::vector<Record> run_interleaved(const std::vector<const Implementation*>& impls, const Case& c,
                                    const MeasureSettings& measure, const RunOptions& options);

}  // namespace faprobe
