// The plain-C++ parts of GPU timing (gpu.hpp, "Timing"), shared by the CUDA build and the build without
// CUDA so that the tests check them everywhere: the steps of a sample, in order, and what a case's samples
// write into its record's details.
#include <nlohmann/json.hpp>

#include "cuda/runtime/gpu.hpp"

namespace faprobe::gpu {

std::vector<SampleStep> sample_plan(bool flush_l2, Hold hold) {
  const bool held = hold == Hold::blocking_kernel;
  std::vector<SampleStep> plan;
  if (held) plan.push_back(SampleStep::hold);  // first: everything after it waits for the release
  if (flush_l2) plan.push_back(SampleStep::flush_l2);  // before the start event: never timed
  plan.insert(plan.end(), {SampleStep::start, SampleStep::work, SampleStep::stop});
  if (held) plan.push_back(SampleStep::release);  // only once the stop event is enqueued
  plan.push_back(SampleStep::wait);
  return plan;
}

const char* step_name(SampleStep step) {
  switch (step) {
    case SampleStep::hold: return "hold";
    case SampleStep::flush_l2: return "flush_l2";
    case SampleStep::start: return "start";
    case SampleStep::work: return "work";
    case SampleStep::stop: return "stop";
    case SampleStep::release: return "release";
    case SampleStep::wait: return "wait";
  }
  return "?";
}

void SampleTally::add(const GpuSample& sample) {
  if (sample.held) {
    ++held;
    if (sample.hold_timed_out) ++hold_timeouts;
  } else {
    ++unheld;
  }
}

void SampleTally::write_details(nlohmann::json& details, bool flush_l2) const {
  details["l2_flushed"] = flush_l2;
  if (held + unheld == 0) return;
  details["timing"] = unheld == 0 ? "blocking-kernel" : held == 0 ? "events" : "mixed";
  if (held > 0) details["hold_timeouts"] = hold_timeouts;
  if (held > 0 && unheld > 0) details["unheld_samples"] = unheld;
}

}  // namespace faprobe::gpu
