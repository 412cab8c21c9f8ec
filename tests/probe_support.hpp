// What the probe-suite tests share (test_probe_suite.cpp, test_probes_command.cpp): a probe by name, and a
// probe's output on the emulator within the emulator tests' deadline.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/launchers.hpp"
#include "cuda/probes/probe_suite.hpp"
#include "emulator_test_support.hpp"

namespace faprobe::test_support {

inline const cuda::probes::Probe& probe_named(const std::string& name) {
  for (const cuda::probes::Probe& probe : cuda::probes::all_probes())
    if (probe.name == name) return probe;
  throw std::invalid_argument("no probe " + name);
}

inline cuda::probes::ProbeOutput emulated(const cuda::probes::Probe& probe, std::uint64_t seed) {
  cuda::probes::ProbeOutput output;
  emu::testing::within_deadline([&] { output = probe.run(cuda::Target::emulator, seed); });
  return output;
}

}  // namespace faprobe::test_support
