// Choosing among code paths by what this CPU measures, not by the instructions it lists: the same
// instruction is fast on one vendor and slow on another (vdpbf16ps: cpu.tiled's bf16 path ran 1.7× faster
// than its fp32 path on an AMD Zen 4 and 1.66× slower on an Intel Xeon with AMX, b1 h8 d64 causal s4096).
// Each candidate runs once on a short probe (warm-up, and its output checked against an expected one), then
// `repetitions` more times; the fastest of those runs is the candidate's time, and the fastest candidate
// whose output was right is chosen. A wrong candidate is never chosen, whatever its speed.
//
// Cost: (1 + repetitions) runs of the probe per candidate, once per process and per key the caller caches
// it under: a few milliseconds, spent while a case is planned, never inside a timed sample.
#pragma once
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace faprobe::cpu {

struct CandidatePath {
  std::string name;
  std::function<void(std::vector<float>& output)> run;  // computes the probe's output into `output`
};

struct MeasuredChoice {
  std::size_t chosen = 0;  // index into the candidates
  std::string note;        // "avx512-bf16 1.23 ms, avx512-fp32 0.80 ms" (a wrong one: "x wrong: max |diff| 2.1")
};

// Throws std::logic_error when no candidate's output is within `tolerance` (absolute) of `expected`.
inline MeasuredChoice choose_fastest(const std::vector<CandidatePath>& candidates, const std::vector<float>& expected,
                                     double tolerance, int repetitions = 3) {
  using Clock = std::chrono::steady_clock;
  MeasuredChoice choice;
  double best = std::numeric_limits<double>::infinity();
  bool any = false;
  std::vector<float> output;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    output.assign(expected.size(), std::numeric_limits<float>::quiet_NaN());
    candidates[i].run(output);
    double worst = output.size() == expected.size() ? 0.0 : std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < output.size() && j < expected.size(); ++j) {
      const double diff = std::fabs(double(output[j]) - double(expected[j]));
      worst = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::fmax(worst, diff);
    }
    if (!choice.note.empty()) choice.note += ", ";
    if (!(worst <= tolerance)) {
      choice.note += fmt::format("{} wrong: max |diff| {:.3g}", candidates[i].name, worst);
      continue;
    }
    double fastest = std::numeric_limits<double>::infinity();
    for (int r = 0; r < repetitions; ++r) {
      const Clock::time_point start = Clock::now();
      candidates[i].run(output);
      fastest = std::fmin(fastest, std::chrono::duration<double>(Clock::now() - start).count());
    }
    choice.note += fmt::format("{} {:.3f} ms", candidates[i].name, fastest * 1e3);
    if (!any || fastest < best) {
      best = fastest;
      choice.chosen = i;
      any = true;
    }
  }
  if (!any) throw std::logic_error("no candidate path computed the probe right: " + choice.note);
  return choice;
}

}  // namespace faprobe::cpu
