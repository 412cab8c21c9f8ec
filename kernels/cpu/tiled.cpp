// cpu.tiled — FlashAttention on the CPU. Each thread takes one block of query rows of one head, walks the
// key/value blocks with the online softmax and keeps only one block_q × block_k tile of scores, so memory
// stays O(seq) and the tiles stay in cache; the score matrix is never written out.
//
// Tiling: a work item is (batch entry, query head, query block of block_q rows); the items are flattened and
// shared dynamically among the threads, heaviest causal blocks first, so both cores work even at batch 1,
// heads 1. Per item: Q_blk (block_q × head_dim, scale folded in) is loaded once as fp32; for every key block
// S = Q_blk·K_blkᵀ (Eigen GEMM), the online softmax turns S into P and rescales the accumulator, and
// O_acc += P·V_blk (Eigen GEMM). Under the causal mask, key blocks entirely above the diagonal are skipped
// and only blocks that cross it are masked. fp32 K and V are read in place through strided maps; fp16/bf16
// tiles are converted to fp32 in the thread's workspace first. Query head h reads KV head c.kv_head_of(h).
//
// Napkin math (batch 1, heads 8, head_dim 64, seq 4096, causal, fp32):
//   FLOPs      4·b·h·seq_q·avg_k·d = 4·8·4096·2048.5·64 = 17.2 GFLOP, plus one exp per visible score (69 M).
//   Bytes      Q and O once (2 × 8 MiB from DRAM); K and V once per query block, on average half a head's
//              2 MiB under causal: 8 heads · 32 blocks · 1 MiB = 256 MiB, from L2/L3. ~60 FLOP per byte
//              even counted from cache: compute bound.
//   Workspace  threads × (2·block_q·d + block_q·block_k [+ 2·block_k·d converted K/V for fp16/bf16]
//              [+ block_q·block_k partial scores for d > 64]) · 4 B + block_q softmax states
//              = 2 × 129 KiB here; peak 32.3 MiB at seq 4096 and 64.3 MiB at seq 8192 (inputs dominate).
//   Bound      the Eigen GEMM rate on 128 × 128 × 64 tiles, less the softmax (max, exp, sum, rescale:
//              ~1 cycle per score against ~8 for the two products at head_dim 64).
//   Measured   (2 cores, AVX2+FMA, 512² fp32 Eigen GEMM on each thread: 107–110 GFLOP/s in all) 0.19–0.21 s
//              = 82–90 GFLOP/s, ~80 % of the GEMM rate; cpu.naive takes 0.93–1.06 s on the same case.
//              fp16 0.20 s, bf16 0.21 s. Copying fp32 K/V tiles into contiguous workspace first measured no
//              faster (Eigen's GEMM packs its operands anyway), so fp32 tiles are read in place.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include <omp.h>

#include "cpu/common.hpp"
#include "cpu/cpu_implementation.hpp"
#include "cpu/factories.hpp"
#include "cpu/online_softmax.hpp"
#include "cpu/planted.hpp"

namespace faprobe::cpu {
namespace {

// Block sizes and threads, chosen in plan_tiled() and nowhere else.
struct TiledPlan {
  std::int64_t block_q = 0;  // query rows per work item (rows of the score tile)
  std::int64_t block_k = 0;  // keys per step (columns of the score tile)
  std::int64_t threads = 0;
  bool convert_kv = false;   // K/V tiles converted into workspace (fp16/bf16); fp32 is read in place

  // fp32 values each thread owns: Q tile, accumulator, score tile, K and V tiles (when converted), partial
  // scores (head_dim > kDotPiece, see score_product).
  std::int64_t q_tile_floats(std::int64_t head_dim) const { return cache_line_floats(block_q * head_dim); }
  std::int64_t kv_tile_floats(std::int64_t head_dim) const {
    return convert_kv ? cache_line_floats(block_k * head_dim) : 0;
  }
  std::int64_t score_floats() const { return cache_line_floats(block_q * block_k); }
  std::int64_t partial_floats(std::int64_t head_dim) const { return head_dim > kDotPiece ? score_floats() : 0; }
  std::int64_t per_thread_floats(std::int64_t head_dim) const {
    return 2 * q_tile_floats(head_dim) + 2 * kv_tile_floats(head_dim) + score_floats() + partial_floats(head_dim);
  }
  std::uint64_t workspace_bytes(std::int64_t head_dim) const {
    return std::uint64_t(threads) * (std::uint64_t(per_thread_floats(head_dim)) * sizeof(float) +
                                     std::uint64_t(block_q) * sizeof(OnlineSoftmax));
  }
};

TiledPlan plan_tiled(const Case& c) {
  TiledPlan plan;
  // 128 × 128: the score tile (64 KiB), Q tile and accumulator (32 KiB each at head_dim 64) stay in a core's
  // 512 KiB L2 with room for the K/V rows, and seq 4096 gives 32 query blocks per head to share out. On the
  // target case every block_q, block_k in {64, 128, 256} ran within the ±8 % run-to-run noise of this
  // 2-vCPU machine (0.19–0.22 s); head_dim 128 and 256 (seq 2048) likewise, so one choice serves all.
  plan.block_q = 128;
  plan.block_k = 128;
  plan.threads = cpu_threads();
  // Small cases (batch 1, heads 1, a few hundred rows): halve block_q (down to 32) until every thread has a
  // few query blocks to take, so that no core idles.
  const auto query_blocks = [&] { return c.batch * c.heads * ((c.seq_q + plan.block_q - 1) / plan.block_q); };
  while (plan.block_q > 32 && query_blocks() < 4 * plan.threads) plan.block_q /= 2;
  plan.block_q = std::min(plan.block_q, c.seq_q);
  plan.block_k = std::min(plan.block_k, c.seq_k);
  plan.convert_kv = c.dtype != DType::fp32;
  return plan;
}

// One work item: rows [q0, q0 + block_q) of query head `head` in batch entry `b`.
template <class T, PlantedDefect Defect>
void attend_query_block(const ForwardArgs& args, const TiledPlan& plan, std::int64_t b, std::int64_t head,
                        std::int64_t q0, float* workspace, OnlineSoftmax* states) {
  const Case& c = args.c;
  const std::int64_t head_dim = c.head_dim;
  const std::int64_t kv_head = c.kv_head_of(head);
  const std::int64_t rows = std::min(plan.block_q, c.seq_q - q0);
  auto out = head_rows<T>(args.o, b, q0, rows, head);

  // The block needs the keys its last row sees (key blocks entirely above the causal diagonal are never
  // visited); keys that its first row already sees need no mask.
  const std::int64_t key_end = planted_visible_keys<Defect>(c, q0 + rows - 1);
  const std::int64_t unmasked_end = planted_visible_keys<Defect>(c, q0);
  if (key_end == 0) {  // bottom-right causal with seq_q > seq_k: these rows see no key
    out.setZero();
    return;
  }

  float* q_data = workspace;
  float* acc_data = q_data + plan.q_tile_floats(head_dim);
  float* scores_data = acc_data + plan.q_tile_floats(head_dim);
  float* k_data = scores_data + plan.score_floats();
  float* v_data = k_data + plan.kv_tile_floats(head_dim);
  float* partial_data = v_data + plan.kv_tile_floats(head_dim);

  MatrixMap q_tile = matrix_at(q_data, rows, head_dim);
  load_rows<T>(args.q, b, q0, rows, head, q_data);
  q_tile *= float(c.scale());
  MatrixMap acc = matrix_at(acc_data, rows, head_dim);
  acc.setZero();
  for (std::int64_t r = 0; r < rows; ++r) states[r] = OnlineSoftmax{};

  for (std::int64_t k0 = 0; k0 < key_end; k0 += plan.block_k) {
    const std::int64_t cols = std::min(plan.block_k, key_end - k0);
    MatrixMap scores = matrix_at(scores_data, rows, cols);

    // S = Q·Kᵀ (the softmax scale is already in Q)
    if constexpr (std::is_same_v<T, float>) {
      score_product(scores, q_tile, head_rows<float>(args.k, b, k0, cols, kv_head), 1.0f, partial_data);
    } else {
      load_rows<T>(args.k, b, k0, cols, kv_head, k_data);
      score_product(scores, q_tile, matrix_at(k_data, cols, head_dim), 1.0f, partial_data);
    }

    // Causal mask, only on a block that crosses the diagonal: keys a row does not see become -inf.
    if (k0 + cols > unmasked_end) {
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t seen = std::clamp<std::int64_t>(planted_visible_keys<Defect>(c, q0 + r) - k0, 0, cols);
        scores.row(Eigen::Index(r)).tail(Eigen::Index(cols - seen)).setConstant(OnlineSoftmax::kMinusInf);
      }
    }

    // Online softmax: S becomes P = exp(S - row_max); what is accumulated is rescaled when row_max grows.
    for (std::int64_t r = 0; r < rows; ++r) {
      const float alpha = states[r].absorb(scores.row(Eigen::Index(r)).data(), cols);
      if constexpr (Defect != PlantedDefect::no_rescale) {
        if (alpha != 1.0f) acc.row(Eigen::Index(r)) *= alpha;
      }
    }

    // O += P·V
    if constexpr (std::is_same_v<T, float>) {
      acc.noalias() += scores * head_rows<float>(args.v, b, k0, cols, kv_head);
    } else {
      load_rows<T>(args.v, b, k0, cols, kv_head, v_data);
      acc.noalias() += scores * matrix_at(v_data, cols, head_dim);
    }
  }

  // O = acc / row_sum (zeros for a row that saw no key)
  for (std::int64_t r = 0; r < rows; ++r) {
    out.row(Eigen::Index(r)) = (acc.row(Eigen::Index(r)) * states[r].inverse_sum()).template cast<T>();
  }
}

template <class T, PlantedDefect Defect> void tiled_forward(const ForwardArgs& args, const TiledPlan& plan) {
  const Case& c = args.c;
  const std::int64_t q_blocks = (c.seq_q + plan.block_q - 1) / plan.block_q;
  const std::int64_t items = c.batch * c.heads * q_blocks;
  const std::int64_t per_thread = plan.per_thread_floats(c.head_dim);
  const Workspace<float> workspace(std::size_t(plan.threads * per_thread));
  const Workspace<OnlineSoftmax> states(std::size_t(plan.threads * plan.block_q));

#pragma omp parallel for schedule(dynamic) num_threads(int(plan.threads))
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t thread = omp_get_thread_num();
    // Items of one (batch, head) are consecutive (its K and V stay in cache), last query block first: under
    // the causal mask it is the heaviest, and handing out heavy items first keeps the tail short.
    const std::int64_t bh = item / q_blocks;
    const std::int64_t q_block = q_blocks - 1 - item % q_blocks;
    if constexpr (Defect == PlantedDefect::skip_last_query_block) {
      if (q_block == q_blocks - 1) continue;
    }
    attend_query_block<T, Defect>(args, plan, bh / c.heads, bh % c.heads, q_block * plan.block_q,
                                  workspace.data() + thread * per_thread, states.data() + thread * plan.block_q);
  }
}

template <PlantedDefect Defect> class Tiled final : public CpuImplementation {
 public:
  std::string name() const override {
    return Defect == PlantedDefect::none ? "cpu.tiled" : "cpu.tiled+" + std::string(to_string(Defect));
  }

  std::uint64_t predicted_bytes(const Case& c) const override {
    return io_tensor_bytes(c) + plan_tiled(c).workspace_bytes(c.head_dim);
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    // Compute bound: ~60 % of the GEMM rate (small tiles, softmax between the two products).
    return c.flops() / (0.6 * rates.gemm_gflops * 1e9) + double(io_tensor_bytes(c)) / (rates.memory_gbytes_per_s * 1e9);
  }

  void forward(const ForwardArgs& args, nlohmann::json& details) const override {
    const TiledPlan plan = plan_tiled(args.c);
    details["block_q"] = plan.block_q;
    details["block_k"] = plan.block_k;
    details["threads"] = plan.threads;
    if constexpr (Defect == PlantedDefect::writes_nothing) return;
    dispatch_storage(args.c.dtype, [&](auto tag) { tiled_forward<decltype(tag), Defect>(args, plan); });
  }
};

}  // namespace

std::unique_ptr<Implementation> make_tiled() { return std::make_unique<Tiled<PlantedDefect::none>>(); }

std::unique_ptr<Implementation> make_planted_tiled(PlantedDefect defect) {
  switch (defect) {
    case PlantedDefect::none: return make_tiled();
    case PlantedDefect::no_rescale: return std::make_unique<Tiled<PlantedDefect::no_rescale>>();
    case PlantedDefect::causal_off_by_one: return std::make_unique<Tiled<PlantedDefect::causal_off_by_one>>();
    case PlantedDefect::writes_nothing: return std::make_unique<Tiled<PlantedDefect::writes_nothing>>();
    case PlantedDefect::skip_last_query_block: return std::make_unique<Tiled<PlantedDefect::skip_last_query_block>>();
    case PlantedDefect::combine_no_rescale: break;
  }
  throw std::invalid_argument("cpu.tiled has no planted variant " + std::string(to_string(defect)));
}

}  // namespace faprobe::cpu
