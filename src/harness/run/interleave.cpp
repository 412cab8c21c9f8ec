#include "harness/run/interleave.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "harness/io/progress.hpp"
#include "harness/run/contention.hpp"
#include "harness/run/measure.hpp"
#include "model/memory.hpp"

namespace faprobe {
namespace {

// One timed implementation of the case on its way through the steps of interleave.hpp.
struct Member {
  const Implementation* impl = nullptr;
  Record* record = nullptr;
  std::uint64_t mem_limit = 0;  // --mem-limit, or its device's default
  double first_run_s = 0;
  MemoryCounters memory;  // its use alone (step 3): in the rounds the others' allocations count too
  std::unique_ptr<PreparedCase> prepared;  // held from step 4 until it fails or the rounds end
  std::unique_ptr<Sampler> sampler;
};

// Runs `step`; a std::exception it throws makes the member's record failed and frees what it holds.
template <class Step> bool guarded(Member& member, Step&& step) {
  try {
    step();
    return true;
  } catch (const std::exception&) {
    record_failure(*member.record, std::current_exception());
    member.prepared.reset();
    return false;
  }
}

// Step 2: first fit of the members into groups that may be prepared at once.
std::vector<std::vector<Member*>> memory_groups(std::vector<Member>& members) {
  std::vector<std::vector<Member*>> groups;
  auto fits = [](const std::vector<Member*>& group, const Member& candidate) {
    std::vector<const Member*> together(group.begin(), group.end());
    together.push_back(&candidate);
    for (const Member* member : together) {
      std::uint64_t sum = 0;
      for (const Member* other : together) {
        if (other->impl->runs_on_gpu() == member->impl->runs_on_gpu()) sum += other->record->memory.predicted_bytes;
      }
      if (sum > member->mem_limit) return false;
    }
    return true;
  };
  for (Member& member : members) {
    const auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return fits(g, member); });
    if (group != groups.end()) {
      group->push_back(&member);
    } else {
      groups.push_back({&member});
    }
  }
  return groups;
}

// Steps 3 to 5 for one group.
void run_group(const std::vector<Member*>& group, const Case& c, const MeasureSettings& measure) {
  std::vector<Member*> round;  // the members that reach step 4, in plan order
  for (Member* member : group) {
    if (interrupted()) return;
    Record& record = *member->record;
    guarded(*member, [&] {
      apply_test_fault(c);
      host_memory().reset_peaks();
      const std::unique_ptr<PreparedCase> alone = member->impl->prepare(c);
      alone->configure(measure);
      member->first_run_s = first_run_checked(*member->impl, c, *alone, measure, record);
      member->memory = used_memory(*alone);
      record_measured(*alone, member->memory, std::nullopt, record);  // what stands if the rounds fail
      round.push_back(member);
    });
  }

  for (Member* member : round) {
    if (interrupted()) return;
    guarded(*member, [&] {
      member->prepared = member->impl->prepare(c);
      member->prepared->configure(measure);
    });
    MeasureSettings rest = sampling_settings(*member->record, measure, member->first_run_s);
    // Prepared again for the rounds, so warmed again (a pair measured once is not).
    if (!one_sample_pair(*member->record, measure)) rest.warmup = std::max(1, measure.warmup);
    member->sampler = std::make_unique<Sampler>(rest);
  }
  std::vector<std::string> names;  // who shares the rounds: what each record's interleaved_with says
  for (const Member* member : round) {
    if (member->prepared) names.push_back(member->impl->name());
  }

  // One pass of `wants` members: each runs once, in round order, and `add` takes the seconds.
  auto pass = [&](auto wants, auto add) {
    bool ran = false;
    for (Member* member : round) {
      if (interrupted()) return false;
      if (!member->prepared || !wants(*member->sampler)) continue;
      ran = true;
      guarded(*member, [&] {
        ContentionProbe probe(!member->impl->runs_on_gpu());
        probe.start();
        const double seconds = member->prepared->timed_run();
        add(*member->sampler, seconds, probe.stop(seconds));
      });
    }
    return ran;
  };
  while (pass([](const Sampler& s) { return s.warming_up(); },
              [](Sampler& s, double t, const SampleObservation&) { s.add_warmup(t); })) {
  }
  // Read before the rounds: the load average at their start.
  const ContentionContext on_cpu = contention_context(false, measure.threads);
  const ContentionContext on_gpu = contention_context(true, measure.threads);
  auto anyone_wants_more = [&] {
    return std::any_of(round.begin(), round.end(),
                       [](const Member* member) { return member->prepared && member->sampler->wants_more(); });
  };
  while (!interrupted() && anyone_wants_more()) {
    pass([](const Sampler& s) { return s.budget_left(); },
         [](Sampler& s, double t, const SampleObservation& observed) { s.add(t, observed); });
  }
  if (interrupted()) return;

  for (Member* member : round) {
    if (!member->prepared) continue;  // failed: no time, as a sequential run that throws has none
    TimeStats time = member->sampler->stats(member->impl->runs_on_gpu() ? on_gpu : on_cpu);
    time.order = SampleOrder::interleaved;
    time.interleaved_with = names;
    guarded(*member, [&] { record_measured(*member->prepared, member->memory, std::move(time), *member->record); });
    member->prepared.reset();
  }
}

}  // namespace

std::vector<Record> run_interleaved(const std::vector<const Implementation*>& impls, const Case& c,
                                    const MeasureSettings& measure, const RunOptions& options) {
  std::vector<Record> records(impls.size());
  std::vector<Member> members;
  for (std::size_t i = 0; i < impls.size(); ++i) {
    const Implementation& impl = *impls[i];
    if (!impl.timed()) continue;  // after the others, below
    if (!screen(impl, c, measure, options, /*device_limit=*/true, records[i])) continue;
    Member member;
    member.impl = &impl;
    member.record = &records[i];
    member.mem_limit = options.mem_limit != 0 ? options.mem_limit : impl.default_memory_limit();
    members.push_back(std::move(member));
  }
  for (const std::vector<Member*>& group : memory_groups(members)) {
    if (interrupted()) return records;
    run_group(group, c, measure);
  }
  for (std::size_t i = 0; i < impls.size(); ++i) {
    if (interrupted()) return records;
    if (!impls[i]->timed()) records[i] = run_one(*impls[i], c, measure, options);
  }
  return records;
}

}  // namespace faprobe
