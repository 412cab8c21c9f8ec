// cpu.decode-splitk — FlashDecoding on the CPU. The keys of each batch entry are split into contiguous
// ranges processed in parallel, each with its own running max, sum and partial (unnormalised) output;
// a combine step merges the partials of each row with the same rescaling as the online softmax.
//
// Tiling, for K and V beyond the caches: a work item is (batch entry, key range of `chunk` keys) and covers
// every head: rows of K and V in
// the (batch, seq, heads, head_dim) layout hold all heads of one key contiguously, so an item streams one
// contiguous block of K and one of V (kStep keys at a time: the scores of all heads, the online softmax per
// head, then acc_h += p_h·V), instead of picking head_dim values out of every heads·head_dim-wide row as a
// per-head walk (cpu.decode) does. For K and V that fit the caches a work item is (batch entry, head, key
// range), walked per head as cpu.decode walks it (decode_head_walk.hpp). Either way the keys are split only
// when the units without a split would leave threads idle, FlashDecoding's occupancy argument (plan_splits),
// into ranges no shorter than kMinChunk keys, so the partials and the combine stay negligible; a per-head
// walk with no split writes its output row directly, exactly as cpu.decode does.
//
// Why all heads per item: measured at batch 1, heads 32, head_dim 128, seq_k 32768 (1 GiB of fp32 K and V,
// far beyond cache) on this 2-core machine, whose plain streaming read reaches 28 GB/s (20 on one core):
//   fp32, 2 threads   cpu.decode (per-head walk) 0.064–0.075 s, 14–16 GB/s; this 0.042–0.050 s, 21–25 GB/s
//   fp32, 1 thread    per-head walk 0.148 s; contiguous walk 0.073 s: 2.0× from the access pattern alone
//   fp16 / bf16       0.10 / 0.13 s against 0.046 / 0.040 s (the strided 256 B pieces prefetch worse still)
// With 32 heads both cores are busy either way here, so the gain is the memory layout; with batch·heads
// below the thread count the key split also supplies the parallelism a per-(batch, head) walk lacks. The
// step of 16 keys measured the same as 8, 32 and 64.
//
// Paged KV and variable lengths: a key row is found through the case's layout (src/model/kv_layout.hpp), one
// block-table lookup per row of kv_heads·head_dim values; a page of 16 keys is still 16 contiguous rows
// (256 KiB at the shape below), so the streams stay long. Every entry is cut into the same number of ranges
// of the longest entry's chunk; ranges past a shorter entry's end are empty and merge as nothing.
//
// Napkin math (batch 1, heads 32, head_dim 128, seq_k 32768, fp32, 2 threads → 8 splits of 4096 keys):
//   FLOPs      4·b·h·seq_k·d = 537 MFLOP (~1 FLOP per byte).
//   Bytes      K and V once, streamed: 1.07 GB; partials b·splits·heads·(d + 2)·4 = 133 KiB written and read.
//   Workspace  partials + threads × (heads·d + heads·kStep (+ 2·kv_heads·d for fp16/bf16))·4 B.
//   Bound      memory bandwidth; contiguous streams let the prefetchers run at the full streaming rate.
#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include <omp.h>

#include "cpu/common.hpp"
#include "cpu/cpu_implementation.hpp"
#include "cpu/decode_head_walk.hpp"
#include "cpu/factories.hpp"
#include "cpu/online_softmax.hpp"
#include "cpu/planted.hpp"

namespace faprobe::cpu {
namespace {

constexpr std::int64_t kStep = 16;        // keys whose scores are computed before one softmax update
constexpr std::int64_t kMinChunk = 512;   // shortest key range worth a split (partials stay negligible)
constexpr std::int64_t kPrefetchBytes = 1024;  // of a page's first row, one step before a paged walk jumps to it
constexpr std::int64_t kItemsPerThread = 4;  // items ≥ this × threads, for dynamic load balance

// How an item walks its keys: one head's strided pieces of the rows (decode_head_walk.hpp, cpu.decode's
// walk), or whole rows, every head (attend_key_range below).
enum class Walk { per_head, whole_rows };

struct SplitPlan {
  std::int64_t threads = 0;
  Walk walk = Walk::whole_rows;
  std::int64_t splits = 1;  // key ranges per batch entry
  std::int64_t chunk = 0;   // keys per range (a multiple of kStep)
  bool convert_kv = false;

  // A per-head walk with one range writes the output directly; everything else goes through partials.
  bool uses_partials() const { return walk == Walk::whole_rows || splits > 1; }
  std::int64_t per_thread_floats(const Case& c) const {
    if (walk == Walk::per_head) return head_row_floats(c.head_dim, convert_kv);
    return cache_line_floats(c.heads * c.head_dim) + cache_line_floats(c.heads * kStep) +
           (convert_kv ? 2 * cache_line_floats(c.kv_heads * c.head_dim) : 0);
  }
  std::int64_t partial_rows(const Case& c) const { return uses_partials() ? c.batch * splits * c.heads : 0; }
  std::uint64_t workspace_bytes(const Case& c) const {
    return std::uint64_t(threads * per_thread_floats(c) + partial_rows(c) * c.head_dim) * sizeof(float) +
           std::uint64_t(partial_rows(c)) * sizeof(OnlineSoftmax);
  }
};

// FlashDecoding's occupancy argument, for CPU threads instead of SMs. The parallel units without a split
// are batch·heads per-head walks (or batch whole-row walks); when they already keep every thread busy and
// balanced, a split only adds partials and a combine, so there is none. Otherwise the keys are cut into
// enough ranges for kItemsPerThread items per thread, none shorter than kMinChunk keys.
//
// Which walk: a per-head walk reads head_dim values out of every kv_heads·head_dim-wide row, which the
// hardware prefetchers follow well while K and V sit in the caches, but poorly from DRAM; whole rows stream.
// So whole rows when K and V exceed kCachedKvBytes (or the cache is paged: a per-head chunk would cross
// pages), per-head walks otherwise, and for MQA (one KV head: whole rows are that head's rows). Measured
// with each walk forced, b1 h4 d64 fp32 (2 cores, 2 MiB L2 each, 105 MiB L3 shared), one run each:
//   k16384 (34 MB of K/V)   per-head 6.2 ms, whole rows 6.0 ms: the same
//   k65536 (134 MB)         per-head 35.1 ms, whole rows 18.5 ms
//   k262144 (537 MB)        per-head 110.9 ms, whole rows 92.3 ms
constexpr std::uint64_t kCachedKvBytes = std::uint64_t(64) << 20;

Walk choose_walk(const Case& c) {
  const std::uint64_t kv_bytes = 2 * std::uint64_t(c.total_keys() * c.kv_heads * c.head_dim) * dtype_bytes(c.dtype);
  return c.paged() || kv_bytes > kCachedKvBytes || c.kv_heads == 1 ? Walk::whole_rows : Walk::per_head;
}

// The heuristic, unless the case forces a split count (--splits N: exactly N ranges, the last ones empty
// when N·kStep exceeds the keys). With variable lengths every entry is cut into the same number of ranges of
// the longest entry's chunk; a shorter entry's ranges past its end are empty.
SplitPlan plan_splits(const Case& c) {
  SplitPlan plan;
  plan.threads = cpu_threads();
  plan.convert_kv = c.dtype != DType::fp32;
  plan.walk = choose_walk(c);
  const std::int64_t keys = std::max<std::int64_t>(c.seq_k, 1);  // the longest entry (seq_q = 1: all visible)
  const std::int64_t units = plan.walk == Walk::per_head ? c.batch * c.heads : c.batch;
  // Equal units spread evenly over the threads need no split; unequal ones (variable lengths) need enough
  // of them for the dynamic schedule to even out.
  const bool busy = units >= kItemsPerThread * plan.threads ||
                    (!c.varlen() && units >= plan.threads && units % plan.threads == 0);
  const std::int64_t wanted = busy ? 1 : (kItemsPerThread * plan.threads + units - 1) / units;
  const std::int64_t most = (keys + kMinChunk - 1) / kMinChunk;
  const std::int64_t splits = c.splits > 0 ? c.splits : std::clamp<std::int64_t>(wanted, 1, most);
  plan.chunk = ((keys + splits - 1) / splits + kStep - 1) / kStep * kStep;
  // No empty range after rounding the chunk up, unless the split count was forced.
  plan.splits = c.splits > 0 ? c.splits : (keys + plan.chunk - 1) / plan.chunk;
  return plan;
}

// Keys [k_begin, k_end) of batch entry b, every head: partial state and unnormalised output per head.
template <class T>
void attend_key_range(const ForwardArgs& args, std::int64_t b, std::int64_t k_begin, std::int64_t k_end,
                      float* buffer, bool convert_kv, OnlineSoftmax* states, float* partial_acc) {
  const Case& c = args.c;
  const std::int64_t head_dim = c.head_dim, group = c.group_size();
  const std::int64_t kv_width = c.kv_heads * head_dim;  // one key row, all KV heads

  MatrixMap q = matrix_at(buffer, c.heads, head_dim);
  float* scores_data = buffer + cache_line_floats(c.heads * head_dim);  // (heads × kStep)
  float* k_row_data = scores_data + cache_line_floats(c.heads * kStep);
  float* v_row_data = k_row_data + (convert_kv ? cache_line_floats(kv_width) : 0);
  MatrixMap acc = matrix_at(partial_acc, c.heads, head_dim);
  MatrixMap scores = matrix_at(scores_data, c.heads, kStep);

  // q rows of all heads of this batch entry: contiguous in Q (seq_q = 1); the scale folded in.
  to_float(args.q.template data<T>() + args.q.offset(b, 0, 0), buffer, c.heads * head_dim);
  q *= float(c.scale());
  acc.setZero();
  for (std::int64_t h = 0; h < c.heads; ++h) states[h] = OnlineSoftmax{};

  // Row `key` of K or V (all KV heads, contiguous) as fp32: in place, or converted into `converted`. The
  // layout finds the row: a paged cache costs one block-table lookup per key row (kv_width elements).
  auto key_row = [&](const HostTensor& t, std::int64_t key, float* converted) -> const float* {
    const T* row = t.template data<T>() + args.layout.storage_row(b, key) * kv_width;
    if constexpr (std::is_same_v<T, float>) {
      return row;
    } else {
      to_float(row, converted, kv_width);
      return converted;
    }
  };

  const std::int64_t page_size = args.layout.page_size;
  for (std::int64_t k0 = k_begin; k0 < k_end; k0 += kStep) {
    const std::int64_t count = std::min(kStep, k_end - k0);
    // A paged cache jumps to another page every page_size keys, where the hardware prefetchers lose the
    // stream; touching the head of the next step's page now lets them start early (kPrefetchBytes).
    if (page_size > 0 && k0 + kStep < k_end && (k0 + kStep) % page_size < kStep) {
      for (const HostTensor* t : {&args.k, &args.v}) {
        const char* next = reinterpret_cast<const char*>(t->template data<T>() + args.layout.storage_row(b, k0 + kStep) * kv_width);
        for (std::int64_t byte = 0; byte < kPrefetchBytes; byte += 64) __builtin_prefetch(next + byte);
      }
    }
    // s[h][j] = q_h · K[k0 + j, kv_head(h)], walking the K rows in memory order
    for (std::int64_t j = 0; j < count; ++j) {
      const float* k_row = key_row(args.k, k0 + j, k_row_data);
      for (std::int64_t h = 0; h < c.heads; ++h) {
        const Eigen::Map<const Eigen::RowVectorXf> key(k_row + (h / group) * head_dim, Eigen::Index(head_dim));
        scores(Eigen::Index(h), Eigen::Index(j)) = q.row(Eigen::Index(h)).dot(key);
      }
    }
    // online softmax per head; its row of scores becomes p
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const float alpha = states[h].absorb(scores.row(Eigen::Index(h)).data(), count);
      if (alpha != 1.0f) acc.row(Eigen::Index(h)) *= alpha;
    }
    // acc_h += p_h[j] · V[k0 + j, kv_head(h)], walking the V rows in memory order
    for (std::int64_t j = 0; j < count; ++j) {
      const float* v_row = key_row(args.v, k0 + j, v_row_data);
      for (std::int64_t h = 0; h < c.heads; ++h) {
        const Eigen::Map<const Eigen::RowVectorXf> value(v_row + (h / group) * head_dim, Eigen::Index(head_dim));
        acc.row(Eigen::Index(h)) += scores(Eigen::Index(h), Eigen::Index(j)) * value;
      }
    }
  }
}

template <class T, PlantedDefect Defect> void splitk_forward(const ForwardArgs& args, const SplitPlan& plan) {
  const Case& c = args.c;
  const std::int64_t head_dim = c.head_dim;
  const std::int64_t per_thread = plan.per_thread_floats(c);
  const Workspace<float> workspace(std::size_t(plan.threads * per_thread));
  const Workspace<float> partial_acc(std::size_t(plan.partial_rows(c) * head_dim));
  const Workspace<OnlineSoftmax> partial_state(std::size_t(plan.partial_rows(c)));

  // Split: every (batch entry, key range) in parallel, each with its own state; per-head walks also
  // take each head separately. Partial index: (batch entry · splits + split) · heads + head.
  const std::int64_t heads_per_item = plan.walk == Walk::per_head ? 1 : c.heads;
  const std::int64_t items_per_entry = c.heads / heads_per_item;  // per key range
  const std::int64_t items = c.batch * items_per_entry * plan.splits;
#pragma omp parallel for schedule(dynamic) num_threads(int(plan.threads))
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t split = item % plan.splits, bh = item / plan.splits;
    const std::int64_t b = bh / items_per_entry, head = bh % items_per_entry * heads_per_item;
    const std::int64_t key_end = c.visible_keys(b, 0);  // seq_q = 1: every key of the entry, causal or not
    const std::int64_t k_begin = std::min(split * plan.chunk, key_end);
    const std::int64_t k_end = std::min(k_begin + plan.chunk, key_end);
    float* buffer = workspace.data() + omp_get_thread_num() * per_thread;
    if (plan.walk == Walk::whole_rows) {
      const std::int64_t partial = (b * plan.splits + split) * c.heads;
      attend_key_range<T>(args, b, k_begin, k_end, buffer, plan.convert_kv, partial_state.data() + partial,
                          partial_acc.data() + partial * head_dim);
    } else if (!plan.uses_partials()) {  // one range, the whole row: cpu.decode's item
      decode_head_row<T>(args, b, head, buffer, plan.convert_kv);
    } else {
      const std::int64_t partial = (b * plan.splits + split) * c.heads + head;
      walk_head_keys<T>(args, b, head, k_begin, k_end, buffer, partial_state.data()[partial],
                        partial_acc.data() + partial * head_dim);
    }
  }
  if (!plan.uses_partials()) return;

  // Combine: per (batch, head), merge the partials of every split, rescaling each to the common max.
  const std::int64_t heads_total = c.batch * c.heads;
#pragma omp parallel for schedule(static) num_threads(int(plan.threads))
  for (std::int64_t bh = 0; bh < heads_total; ++bh) {
    const std::int64_t b = bh / c.heads, head = bh % c.heads;
    auto partial = [&](std::int64_t split) { return (b * plan.splits + split) * c.heads + head; };
    RowVectorMap out(partial_acc.data() + partial(0) * head_dim, Eigen::Index(head_dim));
    OnlineSoftmax state = partial_state[std::size_t(partial(0))];
    for (std::int64_t split = 1; split < plan.splits; ++split) {
      const OnlineSoftmax& other = partial_state[std::size_t(partial(split))];
      const RowVectorMap other_acc(partial_acc.data() + partial(split) * head_dim, Eigen::Index(head_dim));
      if constexpr (Defect == PlantedDefect::combine_no_rescale) {
        state.row_sum += other.row_sum;  // as if every split had the same row_max: wrong
        state.row_max = std::max(state.row_max, other.row_max);
        out += other_acc;
      } else {
        const OnlineSoftmax::MergeFactors factors = state.merge(other);
        out = factors.self * out + factors.other * other_acc;
      }
    }
    head_rows<T>(args.o, b, 0, 1, head) = (out * state.inverse_sum()).template cast<T>();
  }
}

template <PlantedDefect Defect> class DecodeSplitK final : public CpuImplementation {
 public:
  std::string name() const override {
    return Defect == PlantedDefect::none ? "cpu.decode-splitk" : "cpu.decode-splitk+" + std::string(to_string(Defect));
  }

  std::string supports(const Case& c) const override {
    if (auto reason = CpuImplementation::supports(c); !reason.empty()) return reason;
    if (c.mode != Mode::decode || c.seq_q != 1) return "decode implementations need --mode decode (seq_q = 1)";
    return "";
  }
  KvLayouts kv_layouts() const override { return {/*paged=*/true, /*varlen=*/true}; }

  std::uint64_t predicted_bytes(const Case& c) const override {
    return io_tensor_bytes(c) + plan_splits(c).workspace_bytes(c);
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    // Memory bound, streaming K and V once.
    return double(io_tensor_bytes(c)) / (rates.memory_gbytes_per_s * 1e9) + c.flops() / (0.3 * rates.gemm_gflops * 1e9);
  }

  void describe(const Case& c, nlohmann::json& details) const override {
    const SplitPlan plan = plan_splits(c);
    details["walk"] = plan.walk == Walk::per_head ? "per-head" : "whole-rows";
    details["splits"] = plan.splits;
    details["chunk"] = plan.chunk;
    details["step"] = kStep;
    details["threads"] = plan.threads;
    if (c.paged()) details["page_size"] = c.page_size;
  }

  void forward(const ForwardArgs& args) const override {
    const SplitPlan plan = plan_splits(args.c);
    dispatch_storage(args.c.dtype, [&](auto tag) { splitk_forward<decltype(tag), Defect>(args, plan); });
  }
};

}  // namespace

std::unique_ptr<Implementation> make_decode_splitk() {
  return std::make_unique<DecodeSplitK<PlantedDefect::none>>();
}

std::unique_ptr<Implementation> make_planted_decode_splitk(PlantedDefect defect) {
  switch (defect) {
    case PlantedDefect::none: return make_decode_splitk();
    case PlantedDefect::combine_no_rescale:
      return std::make_unique<DecodeSplitK<PlantedDefect::combine_no_rescale>>();
    case PlantedDefect::no_rescale:
    case PlantedDefect::causal_off_by_one:
    case PlantedDefect::writes_nothing:
    case PlantedDefect::skip_last_query_block: break;
  }
  throw std::invalid_argument("cpu.decode-splitk has no planted variant " + std::string(to_string(defect)));
}

}  // namespace faprobe::cpu
