// cpu.decode — decode attention without a key split: one query row per (batch, head), walking every key in
// order with the online softmax. It is what a prefill kernel does with seq_q = 1, and the baseline that
// cpu.decode-splitk improves on.
//
// Tiling: one work item per (batch entry, query head), shared among the threads (no parallelism inside a
// row, so batch·heads < threads leaves cores idle). The keys are taken kDecodeChunk at a time (the walk is
// decode_head_walk.hpp's, shared with cpu.decode-splitk) so the scores, the
// exp and the two matrix–vector products vectorise: s = K_chunk·q, the online softmax on s, acc += V_chunkᵀ·p.
// fp32 K/V are read in place; fp16/bf16 chunks are converted into the thread's workspace first.
//
// Napkin math (batch 1, heads 32, head_dim 128, seq_k 32768, fp32):
//   FLOPs      4·b·h·seq_k·d = 537 MFLOP, about 1 FLOP per byte of K and V.
//   Bytes      K and V once: 2·b·seq_k·kv_heads·d·4 = 1.07 GB.
//   Workspace  threads × (2·d + kDecodeChunk (+ 2·kDecodeChunk·d for fp16/bf16)) · 4 B: ~3 KiB (fp32).
//   Bound      memory: ~1 GB at the machine's ~10–20 GB/s is 50–100 ms; the FLOPs would take ~5 ms. Walking
//              one head reads head_dim·4 = 512 B out of every heads·head_dim·4 = 16 KiB row, a strided
//              stream that crosses a 4 KiB page every row, which the hardware prefetchers follow poorly.
//   Measured   0.064–0.075 s (14–16 GB/s, against a 28 GB/s streaming read); cpu.decode-splitk, which
//              streams whole rows, 0.042–0.050 s. fp16 0.10 s, bf16 0.13 s (256 B pieces of 8 KiB rows).
#include <algorithm>
#include <type_traits>

#include <omp.h>

#include "cpu/common.hpp"
#include "cpu/cpu_implementation.hpp"
#include "cpu/decode_head_walk.hpp"
#include "cpu/factories.hpp"
#include "cpu/online_softmax.hpp"

namespace faprobe::cpu {
namespace {

struct DecodePlan {
  std::int64_t threads = 0;
  bool convert_kv = false;

  std::int64_t per_thread_floats(std::int64_t head_dim) const { return head_row_floats(head_dim, convert_kv); }
  std::uint64_t workspace_bytes(std::int64_t head_dim) const {
    return std::uint64_t(threads * per_thread_floats(head_dim)) * sizeof(float);
  }
};

DecodePlan plan_decode(const Case& c) { return {cpu_threads(), c.dtype != DType::fp32}; }

template <class T> void decode_forward(const ForwardArgs& args, const DecodePlan& plan) {
  const Case& c = args.c;
  const std::int64_t head_dim = c.head_dim;
  const std::int64_t per_thread = plan.per_thread_floats(head_dim);
  const Workspace<float> workspace(std::size_t(plan.threads * per_thread));
  const std::int64_t heads_total = c.batch * c.heads;

#pragma omp parallel for schedule(dynamic) num_threads(int(plan.threads))
  for (std::int64_t bh = 0; bh < heads_total; ++bh) {
    decode_head_row<T>(args, bh / c.heads, bh % c.heads, workspace.data() + omp_get_thread_num() * per_thread,
                       plan.convert_kv);
  }
}

class Decode final : public CpuImplementation {
 public:
  std::string name() const override { return "cpu.decode"; }

  std::string supports(const Case& c) const override {
    if (auto reason = CpuImplementation::supports(c); !reason.empty()) return reason;
    if (c.mode != Mode::decode || c.seq_q != 1) return "decode implementations need --mode decode (seq_q = 1)";
    return "";
  }
  // Variable lengths, packed: an entry's keys stay consecutive rows. Not paged: a chunk of kDecodeChunk keys
  // would cross pages (cpu.decode-splitk takes paged caches).
  KvLayouts kv_layouts() const override { return {/*paged=*/false, /*varlen=*/true}; }

  std::uint64_t predicted_bytes(const Case& c) const override {
    return io_tensor_bytes(c) + plan_decode(c).workspace_bytes(c.head_dim);
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    // Memory bound; the strided per-head walk reaches perhaps half of the streaming bandwidth.
    return double(io_tensor_bytes(c)) / (0.5 * rates.memory_gbytes_per_s * 1e9) +
           c.flops() / (0.3 * rates.gemm_gflops * 1e9);
  }

  void describe(const Case& c, nlohmann::json& details) const override {
    details["chunk"] = kDecodeChunk;
    details["threads"] = plan_decode(c).threads;
  }

  void forward(const ForwardArgs& args) const override {
    const DecodePlan plan = plan_decode(args.c);
    dispatch_storage(args.c.dtype, [&](auto tag) { decode_forward<decltype(tag)>(args, plan); });
  }
};

}  // namespace

std::unique_ptr<Implementation> make_decode() { return std::make_unique<Decode>(); }

}  // namespace faprobe::cpu
