// cpu.tiled — FlashAttention on the CPU. Each thread takes one block of query rows of one head, walks the
// key/value blocks with the online softmax and keeps only one block_q × block_k tile of scores, so memory
// stays O(seq) and the tiles stay in cache; the score matrix is never written out.
//
// Tiling: a work item is (batch entry, query head, query block of block_q rows); the items are flattened and
// shared dynamically among the threads, heaviest causal blocks first, so both cores work even at batch 1,
// heads 1. Query head h reads KV head c.kv_head_of(h). Under the causal mask, key blocks entirely above the
// diagonal are skipped and only blocks that cross it are masked. One of four paths computes an item,
// chosen at run time from the CPU's instructions (cpu_isa.hpp), the case (choose_path) and, for bf16 where
// several paths run, by which of them this CPU measures fastest (measured_bf16_path), and named in the
// record's details ("path", with "path_note" where a better one was not taken or the choice was measured):
//   avx512-fp32    fp32, fp16 (and bf16 without AVX512_BF16): the query block as panels of 32 rows, each
//                  walking the key blocks through tiled_avx512.cpp's fp32 step (Qᵀ packed once per item; K
//                  and V copied once per key block into the thread's workspace, converted from fp16/bf16,
//                  or read in place when fp32 with one KV head: rows strided by kv_heads · head_dim cost
//                  TLB and prefetch misses on every panel's pass; b1 h8 d64 causal s16384 fp32 ran at 133
//                  GFLOP/s in place and 168 copied, h1 at 176 either way).
//   avx512-bf16    bf16 on AVX512_BF16: the same walk with vdpbf16ps products (Q packed as pairs, K in
//                  place, V interleaved by key pairs once per key block).
//   amx-bf16       bf16 on AMX (head_dim a multiple of 32): the same walk with both products on AMX tiles
//                  (tiled_amx.cpp; K in place, Vᵀ once per key block), 256 × 256 blocks.
//   portable-fp32  any other CPU: Eigen GEMMs. Q_blk (scale folded in) is loaded once as fp32; for every key
//                  block S = Q_blk·K_blkᵀ, the online softmax (online_softmax.hpp) turns S into P and
//                  rescales the accumulator, and O_acc += P·V_blk. fp32 K and V are read in place through
//                  strided maps; fp16/bf16 tiles are converted to fp32 in the thread's workspace first.
// fp16 has no fp16 dot product that accumulates in fp32 on any x86 CPU (AVX512-FP16's accumulate in fp16;
// AVX10.2's VDPPHPS is not in shipping CPUs), so fp16 is computed in fp32 everywhere and says so.
//
// Napkin math (batch 1, heads 8, head_dim 64, seq 4096, causal, fp32):
//   FLOPs      4·b·h·seq_q·avg_k·d = 4·8·4096·2048.5·64 = 17.2 GFLOP, plus one exp per visible score (69 M).
//   Bytes      Q and O once (2 × 8 MiB from DRAM); K and V once per query block, on average half a head's
//              2 MiB under causal: 8 heads · 32 blocks · 1 MiB = 256 MiB, from L2/L3. ~60 FLOP per byte
//              even counted from cache: compute bound.
//   Workspace  per thread: the item's Q panels and accumulator (2·block_q·d floats), one panel's scores
//              (block_k·32) and the converted or packed K/V block (2·block_k·d), 2 × 98 KiB here; peak
//              32.2 MiB at seq 4096 and 64.2 MiB at seq 8192 (the inputs dominate).
//   Bound      the FMA (or vdpbf16ps) rate less the softmax: tiled_avx512.cpp's napkin math.
//   Measured   see plan_tiled() for the block sizes and the README's CPU targets for the rates; the portable
//              path ran at ~80 % of the Eigen GEMM rate (0.19–0.21 s on a 2-core AVX2 machine).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <omp.h>

#include "cpu/common.hpp"
#include "cpu/cpu_implementation.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/factories.hpp"
#include "cpu/measured_choice.hpp"
#include "cpu/online_softmax.hpp"
#include "cpu/planted.hpp"
#include "cpu/tiled_amx.hpp"
#include "cpu/tiled_avx512.hpp"
#include "model/kv_layout.hpp"
#include "model/tensor.hpp"

namespace faprobe::cpu {
namespace {

// The code path of a case (details "path").
enum class TiledPath { portable_fp32, avx512_fp32, avx512_bf16, amx_bf16 };

std::string_view to_string(TiledPath path) {
  switch (path) {
    case TiledPath::portable_fp32: return "portable-fp32";
    case TiledPath::avx512_fp32: return "avx512-fp32";
    case TiledPath::avx512_bf16: return "avx512-bf16";
    case TiledPath::amx_bf16: return "amx-bf16";
  }
  return "?";
}

struct PathChoice {
  TiledPath path = TiledPath::portable_fp32;
  std::string note;  // why a faster path was not taken ("" when none was possible or it was taken)
};

// Query rows below which the 32-row panels of the AVX-512 paths compute mostly padding: measured (b1 h8 k4096
// d64 fp32) the portable path takes 1.56 ms at seq_q 16 against the panels' 1.95, 2.03 against 2.24 at 20,
// 2.17 against 2.25 at 24, and 2.41 against 2.17 at 28 (decode, seq_q 1: 0.26 against 1.96 ms).
constexpr std::int64_t kMinPanelQueryRows = 24;

// FAPROBE_CPU_PATH's path (cpu_isa.hpp), if set.
std::optional<TiledPath> forced_path() {
  const std::optional<std::string> setting = cpu_path_setting();
  if (!setting) return std::nullopt;
  for (const TiledPath path :
       {TiledPath::portable_fp32, TiledPath::avx512_fp32, TiledPath::avx512_bf16, TiledPath::amx_bf16}) {
    if (to_string(path) == *setting) return path;
  }
  return std::nullopt;
}

// bf16 with AVX512_BF16 available: its AMX path (where `with_amx`), its AVX512_BF16 path or the fp32 path on
// the same data, whichever this CPU runs fastest (measured once per head_dim and candidate set in a process;
// defined below, after the kernels it times). `amx_note` says why AMX was not a candidate, if it says anything.
PathChoice measured_bf16_path(std::int64_t head_dim, bool with_amx, const std::string& amx_note);

// The best path for this case on this CPU, capped by FAPROBE_MAX_CPU_ISA, forced by FAPROBE_CPU_PATH.
PathChoice choose_path(const Case& c) {
  const std::optional<TiledPath> forced = forced_path();
  if (forced == TiledPath::portable_fp32) return {TiledPath::portable_fp32, fmt::format("{}=portable-fp32", kCpuPathVariable)};
  const CpuIsa isa = cpu_isa();
  const CpuIsa detected = detected_cpu_isa();
  // Formatted only where it is the note: forward() plans every timed call.
  const auto capped = [&] {
    return fmt::format("{}={} (this CPU has {})", kMaxCpuIsaVariable, to_string(isa), to_string(detected));
  };
  if (isa == CpuIsa::portable) {
    return {TiledPath::portable_fp32, detected != isa ? capped() : std::string()};
  }
  if (c.seq_q < kMinPanelQueryRows) {
    return {TiledPath::portable_fp32, fmt::format("seq_q {} < {}: the AVX-512 paths' 32-row panels would compute "
                                                  "mostly padding", c.seq_q, kMinPanelQueryRows)};
  }
  if (c.dtype == DType::bf16) {
    if (isa < CpuIsa::avx512_bf16) {
      return {TiledPath::avx512_fp32, detected != isa ? capped() : "bf16 computed in fp32: this CPU has no AVX512_BF16"};
    }
    if (c.head_dim % 2 != 0) {
      return {TiledPath::avx512_fp32, "bf16 computed in fp32: vdpbf16ps takes head_dim in pairs and it is odd"};
    }
    // AMX takes head_dim in steps of 32 (tiled_amx.hpp).
    std::string amx_note;
    if (isa < CpuIsa::amx) {
      amx_note = detected == CpuIsa::amx ? capped() : amx_refusal();
    } else if (c.head_dim % amx::kHeadDimStep != 0) {
      amx_note = fmt::format("AMX not used: it takes head_dim in multiples of {}", amx::kHeadDimStep);
    }
    const bool with_amx = isa == CpuIsa::amx && amx_note.empty();
    if (forced == TiledPath::amx_bf16 && with_amx) return {TiledPath::amx_bf16, ""};
    if (forced == TiledPath::avx512_bf16) return {TiledPath::avx512_bf16, amx_note};
    if (forced == TiledPath::avx512_fp32) {
      return {TiledPath::avx512_fp32, fmt::format("bf16 computed in fp32: {}=avx512-fp32", kCpuPathVariable)};
    }
    return measured_bf16_path(c.head_dim, with_amx, amx_note);
  }
  if (c.dtype == DType::fp16) {
    return {TiledPath::avx512_fp32, "fp16 computed in fp32: x86 has no fp16 dot product accumulating in fp32"};
  }
  return {TiledPath::avx512_fp32, ""};
}

// Block sizes and threads, chosen in plan_tiled() and nowhere else.
struct TiledPlan {
  PathChoice choice;
  std::int64_t block_q = 0;  // query rows per work item (rows of the score tile)
  std::int64_t block_k = 0;  // keys per step (columns of the score tile)
  std::int64_t threads = 0;
  std::int64_t head_dim = 0;
  bool convert_kv = false;   // K/V tiles copied to dense fp32 rows in workspace (fp16/bf16, or interleaved heads)

  bool simd() const { return choice.path != TiledPath::portable_fp32; }
  std::int64_t panels() const { return (block_q + avx512::kPanelRows - 1) / avx512::kPanelRows; }

  // fp32 values each thread owns, as consecutive buffers of whole cache lines.
  //   portable: Q tile, accumulator, score tile, K and V tiles (when converted), partial scores (head_dim >
  //             kDotPiece, see score_product).
  //   avx512:   the item's Qᵀ panels and Oᵀ accumulators, row_max and row_sum, one panel's Sᵀ and (bf16) its
  //             probability pairs, K and V blocks converted to fp32 (when converted) or V's key pairs (bf16).
  std::int64_t q_tile_floats() const {
    return simd() ? panels() * avx512::kPanelRows * head_dim : cache_line_floats(block_q * head_dim);
  }
  std::int64_t row_state_floats() const { return simd() ? panels() * avx512::kPanelRows : 0; }
  bool amx() const { return choice.path == TiledPath::amx_bf16; }
  // Keys of a block as the steps store them: AMX pads them to whole tile steps.
  std::int64_t stored_keys() const { return amx() ? amx::padded_keys(block_k) : block_k; }
  std::int64_t score_floats() const {  // avx512: also the scratch of one output row at the end
    return simd() ? cache_line_floats(std::max(stored_keys() * avx512::kPanelRows, head_dim))
                  : cache_line_floats(block_q * block_k);
  }
  std::int64_t pair_floats() const {  // bf16: probability pairs, one 32-bit word per pair and row
    const bool pairs = choice.path == TiledPath::avx512_bf16 || amx();
    return pairs ? cache_line_floats((stored_keys() + 1) / 2 * avx512::kPanelRows) : 0;
  }
  std::int64_t kv_tile_floats() const {
    if (choice.path == TiledPath::avx512_bf16) return cache_line_floats((block_k + 1) / 2 * head_dim);  // V pairs
    if (amx()) return cache_line_floats(stored_keys() * head_dim / 2);  // K rows and Vᵀ, bf16
    return convert_kv ? cache_line_floats(block_k * head_dim) : 0;
  }
  std::int64_t partial_floats() const { return !simd() && head_dim > kDotPiece ? score_floats() : 0; }
  std::int64_t per_thread_floats() const {
    return 2 * q_tile_floats() + 2 * row_state_floats() + score_floats() + pair_floats() + 2 * kv_tile_floats() +
           partial_floats();
  }
  std::uint64_t workspace_bytes() const {
    const std::uint64_t states = simd() ? 0 : std::uint64_t(block_q) * sizeof(OnlineSoftmax);
    return std::uint64_t(threads) * (std::uint64_t(per_thread_floats()) * sizeof(float) + states);
  }
};

TiledPlan plan_tiled(const Case& c, const PathChoice& choice) {
  TiledPlan plan;
  plan.choice = choice;
  plan.head_dim = c.head_dim;
  // 128 × 128: a panel's scores (16 KiB), the item's Q panels and accumulator (32 KiB each at head_dim 64)
  // and one key block's K and V (64 KiB) stay in a core's L2 (512 KiB to 2 MiB on AVX-512 parts), and seq
  // 4096 gives 32 query blocks per head to share out. Measured on the AVX-512 paths (b1 h8 d64 causal s4096,
  // a 2-core Zen 4): every block_q, block_k in {64, 128, 256} ran within this machine's ±6 % run-to-run
  // noise, fp32 at 164–175 GFLOP/s and bf16 at 291–320; block_q 256 against 128 came out ahead in one run and
  // behind in the next at s4096, s16384 and at head_dim 128 (s2048), in both dtypes, so one choice serves all.
  plan.block_q = 128;
  plan.block_k = 128;
  // The AMX path: 256 × 256. Each key block is transposed (Vᵀ) once for the item's panels, and the P·V
  // product walks a block's keys with its Oᵀ tiles held: twice the rows and keys amortize both. Measured on a
  // 2-core Intel Xeon (AMX-BF16), fastest of 5 interleaved runs: b1 h8 d64 causal s4096 30.7 ms at 128 × 128,
  // 28.5 at 128 × 256, 26.9 at 256 × 256, 26.6 at 256 × 512; d128 s2048 no mask 23.7, 20.0 and 19.8 ms at
  // 128 × 128, 256 × 256 and 256 × 512. Workspace per thread at head_dim 128: 2 × 128 KiB of Qᵀ and Oᵀ,
  // 32 KiB of Sᵀ and 2 × 64 KiB of K and Vᵀ, within a 2 MiB L2.
  if (plan.amx()) plan.block_q = plan.block_k = 256;
  plan.threads = cpu_threads();
  // Small cases (batch 1, heads 1, a few hundred rows): halve block_q (down to 32) until every thread has a
  // few query blocks to take, so that no core idles.
  const auto query_blocks = [&] { return c.batch * c.heads * ((c.seq_q + plan.block_q - 1) / plan.block_q); };
  while (plan.block_q > 32 && query_blocks() < 4 * plan.threads) plan.block_q /= 2;
  plan.block_q = std::min(plan.block_q, c.seq_q);
  plan.block_k = std::min(plan.block_k, c.seq_k);
  plan.convert_kv = plan.choice.path != TiledPath::avx512_bf16 && !plan.amx() &&
                    (c.dtype != DType::fp32 || (plan.choice.path == TiledPath::avx512_fp32 && c.kv_heads > 1));
  return plan;
}

TiledPlan plan_tiled(const Case& c) { return plan_tiled(c, choose_path(c)); }

// One work item on the portable path: rows [q0, q0 + block_q) of query head `head` in batch entry `b`.
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
  float* acc_data = q_data + plan.q_tile_floats();
  float* scores_data = acc_data + plan.q_tile_floats();
  float* k_data = scores_data + plan.score_floats();
  float* v_data = k_data + plan.kv_tile_floats();
  float* partial_data = v_data + plan.kv_tile_floats();
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


// The causal diagonal as an offset: query row `row` sees the keys j < row + diagonal, clamped to [0, seq_k]
// (Case::visible_keys), and one key more in the planted causal_off_by_one variant.
template <PlantedDefect Defect> std::int64_t causal_diagonal(const Case& c) {
  return c.diagonal(0) + 1 + (Defect == PlantedDefect::causal_off_by_one ? 1 : 0);  // either alignment
}

constexpr std::int64_t kPanelRows = avx512::kPanelRows;
constexpr std::int64_t kMaxPanels = 8;  // panels per work item: block_q ≤ 256

// Rows [first, first + count) of query head `head` as a transposed panel: fp32 Qᵀ[d][r], or for the bf16
// step 32-bit pairs [d / 2][r] of the row's elements (2p, 2p + 1). Rows from count to 32 are zeros.
template <class T, bool Pairs>
void pack_query_panel(const HostTensor& q, std::int64_t b, std::int64_t first, std::int64_t count,
                      std::int64_t head, float* panel) {
  const std::int64_t head_dim = q.head_dim();
  const T* rows = q.data<T>() + q.offset(b, first, head);
  if constexpr (Pairs) {
    amx::pack_query_pairs(reinterpret_cast<const std::uint16_t*>(rows), q.row_stride(), count, head_dim,
                          reinterpret_cast<std::uint32_t*>(panel));
  } else {
    std::fill(panel, panel + head_dim * kPanelRows, 0.0f);
    for (std::int64_t r = 0; r < count; ++r) {
      const T* row = rows + r * q.row_stride();
      for (std::int64_t d = 0; d < head_dim; ++d) panel[d * kPanelRows + r] = static_cast<float>(row[d]);
    }
  }
}

// One work item on an AVX-512 path: rows [q0, q0 + block_q) of query head `head` in batch entry `b`, as
// panels of 32 rows that walk the key blocks together (each key block is converted or packed once for all of
// them, and stays in L1/L2 while they use it). A panel stops at the keys its last row sees; a block is masked
// only for a panel whose first row does not see all of it.
template <class T, PlantedDefect Defect, TiledPath Path>
void attend_query_block_simd(const ForwardArgs& args, const TiledPlan& plan, std::int64_t b, std::int64_t head,
                             std::int64_t q0, float* workspace) {
  constexpr bool kAmx = Path == TiledPath::amx_bf16;
  constexpr bool kBf16 = Path == TiledPath::avx512_bf16 || kAmx;
  const Case& c = args.c;
  const std::int64_t head_dim = c.head_dim;
  const std::int64_t kv_head = c.kv_head_of(head);
  const std::int64_t rows = std::min(plan.block_q, c.seq_q - q0);
  const std::int64_t panels = (rows + kPanelRows - 1) / kPanelRows;

  float* query_panels = workspace;
  float* acc = query_panels + plan.q_tile_floats();
  float* row_max = acc + plan.q_tile_floats();
  float* row_sum = row_max + plan.row_state_floats();
  float* scores = row_sum + plan.row_state_floats();
  auto* probability_pairs = reinterpret_cast<std::uint32_t*>(scores + plan.score_floats());
  float* key_block = scores + plan.score_floats() + plan.pair_floats();
  float* value_block = key_block + plan.kv_tile_floats();
  const std::int64_t panel_floats = kPanelRows * head_dim;

  std::int64_t key_end[kMaxPanels], unmasked_end[kMaxPanels];
  for (std::int64_t p = 0; p < panels; ++p) {
    const std::int64_t first = q0 + p * kPanelRows, count = std::min(kPanelRows, rows - p * kPanelRows);
    key_end[p] = planted_visible_keys<Defect>(c, first + count - 1);
    unmasked_end[p] = planted_visible_keys<Defect>(c, first);
    pack_query_panel<T, kBf16>(args.q, b, first, count, head, query_panels + p * panel_floats);
    std::fill(row_max + p * kPanelRows, row_max + (p + 1) * kPanelRows, OnlineSoftmax::kMinusInf);
    std::fill(row_sum + p * kPanelRows, row_sum + (p + 1) * kPanelRows, 0.0f);
    std::fill(acc + p * panel_floats, acc + (p + 1) * panel_floats, 0.0f);
  }

  if constexpr (kAmx) amx::configure_tiles();
  avx512::PanelBlock block;
  block.head_dim = head_dim;
  block.diagonal = causal_diagonal<Defect>(c);
  block.scale_log2 = float(c.scale() * 1.4426950408889634);  // log2(e): the steps use exp2
  block.rescale = Defect != PlantedDefect::no_rescale;
  block.scores = scores;
  block.probability_pairs = probability_pairs;
  const std::int64_t walk_end = key_end[panels - 1];  // the last row sees the most keys
  for (std::int64_t k0 = 0; k0 < walk_end; k0 += plan.block_k) {
    const std::int64_t cols = std::min(plan.block_k, walk_end - k0);
    // K and V of the block as the step reads them: in place (fp32, one KV head), copied or converted to
    // dense fp32 rows (plan.convert_kv), or for bf16 K in place and V in key pairs.
    const std::int64_t kv_offset = args.k.offset(b, k0, kv_head), kv_stride = args.k.row_stride();
    if constexpr (kAmx) {  // K rows in place (a block of whole tile steps) or dense and padded with zeros; Vᵀ
      const auto* key_rows = reinterpret_cast<const std::uint16_t*>(args.k.data<T>() + kv_offset);
      if (cols == amx::padded_keys(cols)) {  // a dense copy measured no faster (b1 h8 d64 causal s16384)
        block.keys = key_rows;
        block.key_stride = kv_stride;
      } else {
        amx::pack_keys(key_rows, kv_stride, cols, head_dim, reinterpret_cast<std::uint16_t*>(key_block));
        block.keys = key_block;
        block.key_stride = head_dim;
      }
      amx::transpose_values(reinterpret_cast<const std::uint16_t*>(args.v.data<T>() + kv_offset), kv_stride, cols,
                            head_dim, reinterpret_cast<std::uint16_t*>(value_block), plan.stored_keys());
      block.values = value_block;
      block.value_stride = plan.stored_keys();
    } else if constexpr (kBf16) {
      block.keys = args.k.data<T>() + kv_offset;
      block.key_stride = kv_stride;
      auto* value_pairs = reinterpret_cast<std::uint32_t*>(value_block);
      avx512::pack_value_pairs(reinterpret_cast<const std::uint16_t*>(args.v.data<T>() + kv_offset), kv_stride,
                               cols, head_dim, value_pairs);
      block.values = value_pairs;
    } else if (std::is_same_v<T, float> && !plan.convert_kv) {
      block.keys = args.k.data<float>() + kv_offset;
      block.values = args.v.data<float>() + kv_offset;
      block.key_stride = block.value_stride = kv_stride;
    } else {
      load_rows<T>(args.k, b, k0, cols, kv_head, key_block);
      load_rows<T>(args.v, b, k0, cols, kv_head, value_block);
      block.keys = key_block;
      block.values = value_block;
      block.key_stride = block.value_stride = head_dim;
    }
    for (std::int64_t p = 0; p < panels; ++p) {
      if (k0 >= key_end[p]) continue;  // above this panel's part of the causal diagonal
      block.cols = std::min(cols, key_end[p] - k0);
      block.masked = k0 + block.cols > unmasked_end[p];
      block.first_row = q0 + p * kPanelRows;
      block.first_key = k0;
      block.query_panel = query_panels + p * panel_floats;
      block.row_max = row_max + p * kPanelRows;
      block.row_sum = row_sum + p * kPanelRows;
      block.acc = acc + p * panel_floats;
      if constexpr (kAmx) {
        amx::attend_block(block);
      } else if constexpr (kBf16) {
        avx512::attend_block_bf16(block);
      } else {
        avx512::attend_block_fp32(block);
      }
    }
  }

  if constexpr (kAmx) amx::release_tiles();

  // O = Oᵀ / row_sum, transposed back (zeros for a row that saw no key); scores is the row's scratch.
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t p = r / kPanelRows, lane = r % kPanelRows;
    const float sum = row_sum[p * kPanelRows + lane];
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    const float* column = acc + p * panel_floats + lane;
    for (std::int64_t d = 0; d < head_dim; ++d) scores[d] = column[d * kPanelRows] * inverse;
    head_rows<T>(args.o, b, q0 + r, 1, head) = RowVectorMap(scores, Eigen::Index(head_dim)).template cast<T>();
  }
}

template <class T, PlantedDefect Defect, TiledPath Path>
void tiled_forward(const ForwardArgs& args, const TiledPlan& plan) {
  const Case& c = args.c;
  const std::int64_t q_blocks = (c.seq_q + plan.block_q - 1) / plan.block_q;
  const std::int64_t items = c.batch * c.heads * q_blocks;
  const std::int64_t per_thread = plan.per_thread_floats();
  const Workspace<float> workspace(std::size_t(plan.threads * per_thread));
  const Workspace<OnlineSoftmax> states(Path == TiledPath::portable_fp32 ? std::size_t(plan.threads * plan.block_q) : 0);

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
    float* own = workspace.data() + thread * per_thread;
    if constexpr (Path == TiledPath::portable_fp32) {
      attend_query_block<T, Defect>(args, plan, bh / c.heads, bh % c.heads, q_block * plan.block_q, own,
                                    states.data() + thread * plan.block_q);
    } else {
      attend_query_block_simd<T, Defect, Path>(args, plan, bh / c.heads, bh % c.heads, q_block * plan.block_q, own);
    }
  }
}

PathChoice measured_bf16_path(std::int64_t head_dim, bool with_amx, const std::string& amx_note) {
  static std::mutex mutex;
  static std::map<std::pair<std::int64_t, bool>, PathChoice> chosen;  // by head_dim and candidate set
  const std::lock_guard<std::mutex> lock(mutex);
  const auto with_note = [&](PathChoice choice) {  // why AMX was not a candidate, for this case
    if (!amx_note.empty()) choice.note += "; " + amx_note;
    return choice;
  };
  if (const auto found = chosen.find({head_dim, with_amx}); found != chosen.end()) return with_note(found->second);
  // The probe: b1 h2 s512, no mask, the case's head_dim; the portable path's output is the expected one. Long
  // enough for each path's per-block costs (packing, Vᵀ) to weigh as they do in real cases: at s256 the AMX
  // path measured 0.21 ms against avx512-fp32's 0.32 (d64), at s512 0.60 against 0.93, at s1024 1.5 against
  // 3.0, and b1 h8 d64 causal s4096 ran 27 against ~85 ms (Intel Xeon with AMX). Cost at d64: ~10 ms once per
  // process.
  constexpr std::int64_t kProbeSeq = 512;
  Case probe;
  probe.batch = 1;
  probe.heads = probe.kv_heads = 2;
  probe.seq_q = probe.seq_k = kProbeSeq;
  probe.head_dim = head_dim;
  probe.dtype = DType::bf16;
  probe.seed = 1;
  probe.validate();
  const AttentionInputs inputs = make_inputs(probe);
  HostTensor output = make_output(probe);
  const KvLayout layout = make_kv_layout(probe);
  const ForwardArgs args{probe, inputs.q, inputs.k, inputs.v, output, layout};
  const auto run = [&](auto path_tag, std::vector<float>& out) {
    constexpr TiledPath path = decltype(path_tag)::value;
    tiled_forward<Eigen::bfloat16, PlantedDefect::none, path>(args, plan_tiled(probe, PathChoice{path, ""}));
    out.resize(std::size_t(output.elements()));
    for (std::int64_t i = 0; i < output.elements(); ++i) out[std::size_t(i)] = output.get(i);
  };
  using Portable = std::integral_constant<TiledPath, TiledPath::portable_fp32>;
  using Fp32 = std::integral_constant<TiledPath, TiledPath::avx512_fp32>;
  using Bf16 = std::integral_constant<TiledPath, TiledPath::avx512_bf16>;
  using Amx = std::integral_constant<TiledPath, TiledPath::amx_bf16>;
  std::vector<float> expected;
  run(Portable{}, expected);
  std::vector<TiledPath> paths;  // the candidates, in the order choose_fastest sees them
  std::vector<CandidatePath> candidates;
  const auto add = [&](auto path_tag) {
    paths.push_back(decltype(path_tag)::value);
    candidates.push_back({std::string(to_string(paths.back())), [&run, path_tag](std::vector<float>& out) { run(path_tag, out); }});
  };
  if (with_amx) add(Amx{});
  add(Bf16{});
  add(Fp32{});
  // Every path differs from the portable one by bf16's rounding of P (up to 2^-9 relative), far below 3e-2.
  const MeasuredChoice measured = choose_fastest(candidates, expected, 3e-2);
  const TiledPath path = paths[measured.chosen];
  PathChoice choice{path, fmt::format("bf16 path measured in this process (b1 h2 s{} d{}, fastest of 3): {}{}",
                                      kProbeSeq, head_dim, measured.note,
                                      path == TiledPath::avx512_fp32 ? "; bf16 computed in fp32" : "")};
  chosen.emplace(std::make_pair(head_dim, with_amx), choice);
  return with_note(choice);
}

template <PlantedDefect Defect> class Tiled final : public CpuImplementation {
 public:
  std::string name() const override {
    return Defect == PlantedDefect::none ? "cpu.tiled" : "cpu.tiled+" + std::string(to_string(Defect));
  }
  bool top_left_mask() const override { return true; }  // key ranges from c.visible_keys alone

  std::uint64_t predicted_bytes(const Case& c) const override {
    return io_tensor_bytes(c) + plan_tiled(c).workspace_bytes();
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    // Compute bound, at a fraction of the fp32 GEMM rate that depends on the path (measured b1 h8 d64 causal
    // s4096 on a 2-core AVX512_BF16 machine, GEMM 175 GFLOP/s): portable ~0.6, avx512-fp32 ~1.0 (0.9
    // assumed, s16384 ran at 0.97), avx512-bf16 ~1.8 (1.6 assumed). Slightly pessimistic on purpose: the
    // prediction decides max_time skips and shard balance, where a late surprise costs more than an early one.
    const double fraction_of_gemm = [&] {
      switch (choose_path(c).path) {
        case TiledPath::avx512_fp32: return 0.9;
        case TiledPath::avx512_bf16: return 1.6;
        case TiledPath::amx_bf16: return 2.5;
        case TiledPath::portable_fp32: break;
      }
      return 0.6;
    }();
    return c.flops() / (fraction_of_gemm * rates.gemm_gflops * 1e9) +
           double(io_tensor_bytes(c)) / (rates.memory_gbytes_per_s * 1e9);
  }

  void describe(const Case& c, nlohmann::json& details) const override {
    const TiledPlan plan = plan_tiled(c);
    details["path"] = to_string(plan.choice.path);
    if (!plan.choice.note.empty()) details["path_note"] = plan.choice.note;
    details["block_q"] = plan.block_q;
    details["block_k"] = plan.block_k;
    details["threads"] = plan.threads;
  }

  void forward(const ForwardArgs& args) const override {
    const TiledPlan plan = plan_tiled(args.c);
    if constexpr (Defect == PlantedDefect::writes_nothing) return;
    dispatch_storage(args.c.dtype, [&](auto tag) {
      using T = decltype(tag);
      switch (plan.choice.path) {
        case TiledPath::portable_fp32: return tiled_forward<T, Defect, TiledPath::portable_fp32>(args, plan);
        case TiledPath::avx512_fp32: return tiled_forward<T, Defect, TiledPath::avx512_fp32>(args, plan);
        case TiledPath::avx512_bf16:
          if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
            return tiled_forward<T, Defect, TiledPath::avx512_bf16>(args, plan);
          }
          break;
        case TiledPath::amx_bf16:
          if constexpr (std::is_same_v<T, Eigen::bfloat16>) return tiled_forward<T, Defect, TiledPath::amx_bf16>(args, plan);
          break;
      }
      throw std::logic_error("cpu.tiled: no " + std::string(to_string(plan.choice.path)) + " path for this dtype");
    });
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
