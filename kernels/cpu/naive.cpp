// cpu.naive — textbook attention, three separate steps with their intermediates in memory: S = Q·Kᵀ·scale
// (masked entries -inf) for every (batch, head), then P = softmax(S) row by row, then O = P·V. It is the
// baseline the tiled version is measured against: same FLOPs (more, under causal), O(seq²) memory.
//
// Tiling: none beyond Eigen's own GEMM blocking. Each step is one OpenMP loop over (batch, head) (the
// softmax over all rows), and each step finishes before the next starts, as three separate GPU kernels
// would. The whole (batch, heads, seq_q, seq_k) fp32 S and a separate fp32 P are two workspace allocations;
// masked blocks are computed and then overwritten with -inf, never skipped. fp16/bf16 heads are converted to
// fp32 in a per-thread buffer first (Q and K for S; V and the output rows for O). For head_dim > 64 the
// scores are summed over head_dim in pieces of 64 (score_product, for fp32 accuracy), 64 query rows at a time.
//
// Napkin math (batch 1, heads 8, head_dim 64, seq 4096, causal, fp32):
//   FLOPs      4·b·h·seq_q·seq_k·d = 34.4 GFLOP, the full square (twice the 17.2 GFLOP causal work) + 134 M exps.
//   Bytes      S written and read, P written and read: 16·b·h·seq_q·seq_k = 2.1 GB, plus Q, K, V, O (32 MiB).
//   Workspace  S and P: 8·b·h·seq_q·seq_k = 1.07 GB (the seed's table: 8.6 GB at batch 8, heads 32, seq 2048),
//              plus threads·(seq_q + seq_k)·d·4 B of conversion buffers for fp16/bf16, and for head_dim > 64
//              threads·64·seq_k·4 B of partial scores.
//   Bound      the GEMMs at the ~110 GFLOP/s GEMM rate take ~0.3 s and the S/P traffic ~0.1 s at ~25 GB/s:
//              compute, with twice the necessary work under causal.
//   Measured   0.93–1.06 s (cpu.tiled: 0.19–0.21 s). perf: Eigen GEMM ~40 %, mask and softmax ~15 %, and
//              ~25 % in the kernel, first-touching the 1 GiB of freshly allocated S and P (page faults): the
//              price of materialising them. Peak 1056 MiB at seq 4096, 4160 MiB at seq 8192 (3.94×).
#include <algorithm>
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

// Query rows whose scores are computed together when head_dim > kDotPiece (the head_dim sum is then taken
// in pieces, see score_product, and one piece of these rows' scores needs a buffer of kPartialRows·seq_k).
constexpr std::int64_t kPartialRows = 64;

struct NaivePlan {
  std::int64_t threads = 0;
  bool convert = false;  // fp16/bf16: each head is converted to fp32 in a per-thread buffer

  static std::uint64_t score_elements(const Case& c) {
    return std::uint64_t(c.batch) * std::uint64_t(c.heads) * std::uint64_t(c.seq_q) * std::uint64_t(c.seq_k);
  }
  std::int64_t convert_floats(const Case& c) const {
    return convert ? cache_line_floats((c.seq_q + c.seq_k) * c.head_dim) : 0;
  }
  std::int64_t partial_floats(const Case& c) const {
    return c.head_dim > kDotPiece ? cache_line_floats(std::min(kPartialRows, c.seq_q) * c.seq_k) : 0;
  }
  // Per thread: Q and K of one head for S, then V and the output rows for O (the same buffer), and the
  // partial scores.
  std::int64_t per_thread_floats(const Case& c) const { return convert_floats(c) + partial_floats(c); }
  std::uint64_t workspace_bytes(const Case& c) const {
    return 2 * score_elements(c) * sizeof(float) +
           std::uint64_t(threads) * std::uint64_t(per_thread_floats(c)) * sizeof(float);
  }
};

NaivePlan plan_naive(const Case& c) { return {cpu_threads(), c.dtype != DType::fp32}; }

template <class T, PlantedDefect Defect> void naive_forward(const ForwardArgs& args, const NaivePlan& plan) {
  const Case& c = args.c;
  const std::int64_t head_dim = c.head_dim;
  const std::int64_t heads_total = c.batch * c.heads;
  const std::int64_t head_scores = c.seq_q * c.seq_k;  // elements of S (and P) per (batch, head)
  const std::int64_t per_thread = plan.per_thread_floats(c);
  const Workspace<float> scores(std::size_t(NaivePlan::score_elements(c)));
  const Workspace<float> probabilities(std::size_t(NaivePlan::score_elements(c)));
  const Workspace<float> convert(std::size_t(plan.threads * per_thread));
  const auto scale = float(c.scale());

  // Step 1: S = Q·Kᵀ·scale for every (batch, head), then the causal mask as -inf.
#pragma omp parallel for schedule(dynamic) num_threads(int(plan.threads))
  for (std::int64_t bh = 0; bh < heads_total; ++bh) {
    const std::int64_t b = bh / c.heads, head = bh % c.heads, kv_head = c.kv_head_of(head);
    float* buffer = convert.data() + omp_get_thread_num() * per_thread;
    float* partial = buffer + plan.convert_floats(c);
    float* s_data = scores.data() + bh * head_scores;
    // One product for the whole head, or row blocks when the head_dim sum is taken in pieces.
    const std::int64_t row_block = head_dim > kDotPiece ? kPartialRows : c.seq_q;
    auto score_rows = [&](const auto& q, const auto& k) {
      for (std::int64_t i0 = 0; i0 < c.seq_q; i0 += row_block) {
        const std::int64_t rows = std::min(row_block, c.seq_q - i0);
        score_product(matrix_at(s_data + i0 * c.seq_k, rows, c.seq_k),
                      q.middleRows(Eigen::Index(i0), Eigen::Index(rows)), k, scale, partial);
      }
    };
    if constexpr (std::is_same_v<T, float>) {
      score_rows(head_rows<float>(args.q, b, 0, c.seq_q, head), head_rows<float>(args.k, b, 0, c.seq_k, kv_head));
    } else {
      load_rows<T>(args.q, b, 0, c.seq_q, head, buffer);
      load_rows<T>(args.k, b, 0, c.seq_k, kv_head, buffer + c.seq_q * head_dim);
      score_rows(matrix_at(buffer, c.seq_q, head_dim), matrix_at(buffer + c.seq_q * head_dim, c.seq_k, head_dim));
    }
    MatrixMap s = matrix_at(s_data, c.seq_q, c.seq_k);
    if (c.masked()) {
      for (std::int64_t i = 0; i < c.seq_q; ++i) {
        const std::int64_t seen = planted_visible_keys<Defect>(c, i);
        s.row(Eigen::Index(i)).tail(Eigen::Index(c.seq_k - seen)).setConstant(OnlineSoftmax::kMinusInf);
      }
    }
  }

  // Step 2: P = softmax(S), row by row: the whole row as one block of the shared softmax helper (row max,
  // exp, sum), then normalised; a row of -inf (sees no key) gives zeros.
  const std::int64_t rows_total = heads_total * c.seq_q;
#pragma omp parallel for schedule(static) num_threads(int(plan.threads))
  for (std::int64_t row = 0; row < rows_total; ++row) {
    const Eigen::Map<const Eigen::ArrayXf> s(scores.data() + row * c.seq_k, Eigen::Index(c.seq_k));
    Eigen::Map<Eigen::ArrayXf> p(probabilities.data() + row * c.seq_k, Eigen::Index(c.seq_k));
    p = s;
    OnlineSoftmax softmax;
    softmax.absorb(p.data(), c.seq_k);
    p *= softmax.inverse_sum();
  }

  // Step 3: O = P·V.
#pragma omp parallel for schedule(dynamic) num_threads(int(plan.threads))
  for (std::int64_t bh = 0; bh < heads_total; ++bh) {
    const std::int64_t b = bh / c.heads, head = bh % c.heads, kv_head = c.kv_head_of(head);
    const ConstMatrixMap p(probabilities.data() + bh * head_scores, Eigen::Index(c.seq_q), Eigen::Index(c.seq_k));
    if constexpr (std::is_same_v<T, float>) {
      head_rows<float>(args.o, b, 0, c.seq_q, head).noalias() = p * head_rows<float>(args.v, b, 0, c.seq_k, kv_head);
    } else {
      float* buffer = convert.data() + omp_get_thread_num() * per_thread;
      load_rows<T>(args.v, b, 0, c.seq_k, kv_head, buffer);
      MatrixMap o = matrix_at(buffer + c.seq_k * head_dim, c.seq_q, head_dim);
      o.noalias() = p * matrix_at(buffer, c.seq_k, head_dim);
      head_rows<T>(args.o, b, 0, c.seq_q, head) = o.template cast<T>();
    }
  }
}

template <PlantedDefect Defect> class Naive final : public CpuImplementation {
 public:
  std::string name() const override {
    return Defect == PlantedDefect::none ? "cpu.naive" : "cpu.naive+" + std::string(to_string(Defect));
  }
  bool top_left_mask() const override { return true; }  // masks by c.visible_keys

  std::uint64_t predicted_bytes(const Case& c) const override {
    return io_tensor_bytes(c) + plan_naive(c).workspace_bytes(c);
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    // The full square is computed (no causal skipping), and S and P each cross memory twice (written,
    // read). 0.35 of the GEMM rate is fitted to measurements (2-core EPYC, head_dim 64: 7.7 ns per score
    // element at seq 4096 and 8192, 11.5 ns at 16384, where first-touch page faults of S and P and the
    // scalar softmax pass weigh more); a prediction only has to be right within a factor of two.
    const double full_flops = 4.0 * double(NaivePlan::score_elements(c)) * double(c.head_dim);
    const double score_traffic = 16.0 * double(NaivePlan::score_elements(c));
    return full_flops / (0.35 * rates.gemm_gflops * 1e9) +
           (score_traffic + double(io_tensor_bytes(c))) / (rates.memory_gbytes_per_s * 1e9);
  }

  void describe(const Case& c, nlohmann::json& details) const override {
    details["threads"] = plan_naive(c).threads;
    details["score_bytes"] = 2 * NaivePlan::score_elements(c) * sizeof(float);
  }

  void forward(const ForwardArgs& args) const override {
    const NaivePlan plan = plan_naive(args.c);
    dispatch_storage(args.c.dtype, [&](auto tag) { naive_forward<decltype(tag), Defect>(args, plan); });
  }
};

}  // namespace

std::unique_ptr<Implementation> make_naive() { return std::make_unique<Naive<PlantedDefect::none>>(); }

std::unique_ptr<Implementation> make_planted_naive(PlantedDefect defect) {
  switch (defect) {
    case PlantedDefect::none: return make_naive();
    case PlantedDefect::causal_off_by_one: return std::make_unique<Naive<PlantedDefect::causal_off_by_one>>();
    case PlantedDefect::no_rescale:
    case PlantedDefect::combine_no_rescale:
    case PlantedDefect::writes_nothing:
    case PlantedDefect::skip_last_query_block: break;
  }
  throw std::invalid_argument("cpu.naive has no planted variant " + std::string(to_string(defect)));
}

}  // namespace faprobe::cpu
