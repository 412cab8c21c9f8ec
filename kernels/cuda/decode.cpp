// cuda.decode (and emu.decode) — decode attention with one CTA per (batch entry, KV head): the query-only
// parallelization, which the seed calls poor at long context. At batch 1 with 32 KV heads that is 32 CTAs
// on a 132-SM H200, each walking every key; its 4 warps split the keys among themselves, so a CTA does keep
// 32 KiB of K and V in flight, but 100 SMs stay idle. The kernel, its tiling and costs are in
// cuda/decode/decode.cuh; the shell (decode_run.hpp) is shared with cuda.decode-splitk, with no key split here.
#include "cuda/decode_run.hpp"
#include "cuda/factories.hpp"

namespace faprobe::cuda {

std::unique_ptr<Implementation> make_decode(Target target) {
  return std::make_unique<DecodeImplementation</*kSplitK=*/false>>(target);
}

}  // namespace faprobe::cuda
