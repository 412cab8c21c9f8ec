// libFuzzer's entry point for one target of fuzz_targets.hpp, chosen at compile time (FAPROBE_FUZZ_TARGET).
#include <cstddef>
#include <cstdint>

#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return faprobe::fuzz::FAPROBE_FUZZ_TARGET(data, size);
}
