// cuda.decode-splitk (and emu.decode-splitk) — FlashDecoding: each batch entry's keys are split over
// `splits` CTAs per (entry, KV head), each writing a partial output and its LSE in fp32, and a combine kernel
// merges them (cuda/decode/decode.cuh). The split count is the case's --splits, else the rule of
// cuda/decode/splits.hpp over the GPU's SMs and the kernel's occupancy (the fewest splits that fill 95 % of the
// CTA slots where the keys allow it); the record's details give it with the SMs, occupancy and fill it came from.
//
// Napkin math (batch 1, heads 32, kv_heads 32, head_dim 128, seq 32768, bf16, H200): K and V are 537 MB;
// at the ~4 TB/s an H200's HBM3e sustains that is ~0.13 ms, against ~3 µs of tensor-core work. 32 CTAs
// (cuda.decode) leave 100 of 132 SMs idle; the rule picks 8 splits (256 CTAs, 97 % of two CTAs per SM), and
// the combine adds 8 · 32 · 129 · 4 · 2 = 264 KB of traffic and a second launch (~0.05 % of the time plus a
// few µs), which the predicted time counts.
#include "cuda/decode_run.hpp"
#include "cuda/factories.hpp"

namespace faprobe::cuda {

std::unique_ptr<Implementation> make_decode_splitk(Target target) {
  return std::make_unique<DecodeImplementation</*kSplitK=*/true>>(target);
}

}  // namespace faprobe::cuda
