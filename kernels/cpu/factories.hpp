// Factories of the CPU implementations, one per file (naive.cpp, tiled.cpp, decode.cpp, decode_splitk.cpp).
// The registry lists them; tests build them directly.
#pragma once
#include <memory>

#include "model/implementation.hpp"

namespace faprobe::cpu {

std::unique_ptr<Implementation> make_naive();          // cpu.naive: S and P materialised
std::unique_ptr<Implementation> make_tiled();          // cpu.tiled: FlashAttention on the CPU
std::unique_ptr<Implementation> make_decode();         // cpu.decode: one row per (batch, head)
std::unique_ptr<Implementation> make_decode_splitk();  // cpu.decode-splitk: FlashDecoding on the CPU

}  // namespace faprobe::cpu
