// Deliberately broken variants of the CPU implementations, for the tests only: each must be reported as a
// mismatch by the checker on a case where the defect matters, which shows the checker can see that class
// of bug. They are not in the registry, so the command line cannot reach them.
//
// The defect is a template parameter of the implementation, turned into a constant once, outside the hot
// loop; the production instantiation (PlantedDefect::none) compiles the checks away and pays nothing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>

#include "model/case.hpp"
#include "model/implementation.hpp"

namespace faprobe::cpu {

enum class PlantedDefect {
  none,                   // the production code
  no_rescale,             // tiled: the accumulator is not rescaled when row_max grows
  causal_off_by_one,      // tiled, naive: query row i also sees key i + seq_k - seq_q + 1
  combine_no_rescale,     // decode-splitk: partial outputs are summed without rescaling to the common max
  // Outputs left unwritten, which only the NaN poison of a checked run shows (PreparedCase::poison_outputs):
  // over a buffer that holds an earlier correct output, the check would pass.
  writes_nothing,         // tiled: forward() returns before it writes anything
  skip_last_query_block,  // tiled: the last query block of every (batch, head) is never computed
};

constexpr std::string_view to_string(PlantedDefect defect) {
  switch (defect) {
    case PlantedDefect::none: return "none";
    case PlantedDefect::no_rescale: return "no_rescale";
    case PlantedDefect::causal_off_by_one: return "causal_off_by_one";
    case PlantedDefect::combine_no_rescale: return "combine_no_rescale";
    case PlantedDefect::writes_nothing: return "writes_nothing";
    case PlantedDefect::skip_last_query_block: return "skip_last_query_block";
  }
  return "?";
}

// Keys query row `row` sees: the case's bottom-right causal rule, or with causal_off_by_one one key more.
template <PlantedDefect Defect> std::int64_t planted_visible_keys(const Case& c, std::int64_t row) {
  if constexpr (Defect == PlantedDefect::causal_off_by_one) {
    if (c.masked()) return std::min(c.seq_k, c.visible_keys(row) + 1);
  }
  return c.visible_keys(row);
}

// Each throws std::invalid_argument for a defect that the implementation has no variant of. The name of a
// planted variant is the implementation's name with "+" and the defect appended ("cpu.tiled+no_rescale").
std::unique_ptr<Implementation> make_planted_naive(PlantedDefect defect);
std::unique_ptr<Implementation> make_planted_tiled(PlantedDefect defect);
std::unique_ptr<Implementation> make_planted_decode_splitk(PlantedDefect defect);

}  // namespace faprobe::cpu
