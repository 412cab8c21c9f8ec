// Factories of the CPU implementations, one per file (naive.cpp, tiled.cpp, decode.cpp, decode_splitk.cpp),
// and their list, which the registry (src/harness/plan/registry.cpp) takes whole. A new CPU kernel is its file,
// its line in CMakeLists.txt here, and its factory declared and listed below; tests build them directly.
#pragma once
#include <memory>

#include "model/implementation.hpp"

namespace faprobe::cpu {

std::unique_ptr<Implementation> make_naive();          // cpu.naive: S and P materialised
std::unique_ptr<Implementation> make_tiled();          // cpu.tiled: FlashAttention on the CPU
std::unique_ptr<Implementation> make_decode();         // cpu.decode: one row per (batch, head)
std::unique_ptr<Implementation> make_decode_splitk();  // cpu.decode-splitk: FlashDecoding on the CPU

// Every CPU implementation, in the order `faprobe list` shows them.
using Factory = std::unique_ptr<Implementation> (*)();
inline constexpr Factory kFactories[] = {make_naive, make_tiled, make_decode, make_decode_splitk};

}  // namespace faprobe::cpu
