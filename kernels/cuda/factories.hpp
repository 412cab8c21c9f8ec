// Factories of the implementations on faprobe's CUDA kernels, one per file (naive.cpp, fa1.cpp, fa2/, fa3/). Each is
// registered twice: for the GPU (cuda.<name>) and under the emulator (emu.<name>). cuda.cudnn runs cuDNN's
// kernels, which the emulator cannot: the GPU only.
#pragma once
#include <memory>
#include <vector>

#include "cuda/launchers.hpp"
#include "model/implementation.hpp"

namespace faprobe::cuda {

std::unique_ptr<Implementation> make_naive(Target target);  // cuBLAS S = Q·Kᵀ, softmax kernel, cuBLAS P·V
std::unique_ptr<Implementation> make_fa1(Target target);    // FlashAttention-1: one CTA per (batch, head)
std::unique_ptr<Implementation> make_fa2(Target target);    // FlashAttention-2: one CTA per (query block, head, batch)
// cuda.fa2@<tile> (emu.fa2@<tile>): one implementation per tile built (fa2/CMakeLists.txt), reachable by name.
std::vector<std::unique_ptr<Implementation>> make_fa2_variants(Target target);
std::unique_ptr<Implementation> make_fa3(Target target);    // FlashAttention-3 (sm_90a): TMA + wgmma, warp-specialized
// The fa3 fp8 kernel on Q and K under incoherent processing (Hadamard transform with random signs, fused into
// the input fill): fp8_e4m3 only.
std::unique_ptr<Implementation> make_fa3_incoherent(Target target);
// cuda.fa3@<tile> (emu.fa3@<tile>): one implementation per tile built (fa3/CMakeLists.txt), reachable by name.
std::vector<std::unique_ptr<Implementation>> make_fa3_variants(Target target);
std::unique_ptr<Implementation> make_decode(Target target);  // decode, one CTA per (batch, KV head): no key split
std::unique_ptr<Implementation> make_decode_splitk(Target target);  // FlashDecoding: keys split over CTAs + combine
std::unique_ptr<Implementation> make_cudnn();  // cuDNN's SDPA forward (cudnn-frontend graph), cuDNN loaded at run time

}  // namespace faprobe::cuda
