// One attention problem: O = softmax(Q·Kᵀ·scale + mask)·V. Every derived quantity (GQA group, scale,
// visible keys under the causal mask, FLOPs, minimum bytes) is computed here and nowhere else.
//
// Layout is (batch, seq, heads, head_dim), row-major, as in flash-attention; K and V have kv_heads heads.
// Causal is bottom-right aligned, as in flash-attention: query row i sees keys j <= i + seq_k - seq_q.
// causal-top-left is PyTorch's `is_causal`: row i sees keys j <= i, whatever seq_k is. The two agree when
// seq_q == seq_k. A row that sees no key outputs zeros.
//
// K and V may also be a paged cache (page_size > 0: fixed-size pages placed anywhere in a pool, found
// through a block table; kv_layout.hpp) and, in decode, the batch entries may have their own key lengths
// (seqlens, packed with no padding). Both change where K and V rows live, not what they hold: a key's
// values come from its logical (packed) position, so a case gives the same output in every layout.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/dtype.hpp"
#include "model/incoherent.hpp"
#include "model/inputs.hpp"

namespace faprobe {

enum class Mask { none, causal, causal_top_left };
enum class Mode { prefill, decode };

std::string_view to_string(Mask mask);
// What an implementation without --mask causal-top-left says in its support table.
inline constexpr const char* kTopLeftUnsupported =
    "causal-top-left (PyTorch's is_causal) is not implemented: this causal mask is bottom-right aligned, as in "
    "flash-attention (--mask causal)";
std::string_view to_string(Mode mode);
Mask parse_mask(std::string_view text, std::string_view what);
Mode parse_mode(std::string_view text, std::string_view what);
std::string_view to_string(InputDistribution inputs);  // "normal", "outliers"
InputDistribution parse_inputs(std::string_view text, std::string_view what);

struct Case {
  std::int64_t batch = 1;
  std::int64_t heads = 8;     // query heads
  std::int64_t kv_heads = 8;  // heads % kv_heads == 0: MHA (equal), GQA, MQA (1)
  std::int64_t seq_q = 1024;
  std::int64_t seq_k = 1024;
  std::int64_t head_dim = 64;
  DType dtype = DType::fp32;
  Mask mask = Mask::none;
  Mode mode = Mode::prefill;
  std::uint64_t seed = 0;
  std::int64_t page_size = 0;         // 0: contiguous K/V; else a paged cache with pages of this many keys
  std::vector<std::int64_t> seqlens;  // decode only: key length of each batch entry (batch = size, seq_k =
                                      // max); empty: every entry has seq_k keys
  std::int64_t splits = 0;            // split-K implementations: key splits; 0 = their heuristic
  InputDistribution inputs = InputDistribution::normal;  // of Q, K and V (model/inputs.hpp)

  static constexpr std::int64_t kMinPageSize = 16, kMaxPageSize = 256;
  static constexpr std::int64_t kMaxSplits = 256;

  // Throws UsageError naming the offending field when the case is not a valid problem.
  void validate() const;

  std::int64_t group_size() const { return heads / kv_heads; }  // query heads per KV head
  std::int64_t kv_head_of(std::int64_t head) const { return head / group_size(); }
  double scale() const;  // 1/sqrt(head_dim)
  bool causal() const { return mask == Mask::causal; }  // bottom-right aligned (what the kernels implement)
  bool masked() const { return mask != Mask::none; }  // either causal alignment
  // Under a causal mask, query row i of batch entry b sees keys j <= i + diagonal(b): seq_k_of(b) - seq_q
  // bottom-right, 0 top-left.
  std::int64_t diagonal(std::int64_t b) const { return mask == Mask::causal_top_left ? 0 : seq_k_of(b) - seq_q; }

  bool paged() const { return page_size > 0; }
  bool varlen() const { return !seqlens.empty(); }
  std::int64_t seq_k_of(std::int64_t b) const {  // keys of batch entry b
    return seqlens.empty() ? seq_k : seqlens[std::size_t(b)];
  }
  std::int64_t total_keys() const;  // over the batch: batch · seq_k, or the sum of seqlens

  // Number of keys query row `row` sees: seq_k, or under a causal mask clamp(row + diagonal + 1, 0, seq_k).
  std::int64_t visible_keys(std::int64_t row) const;
  // The same in batch entry b, whose key length is seq_k_of(b).
  std::int64_t visible_keys(std::int64_t b, std::int64_t row) const;
  double avg_keys() const;  // mean of visible_keys over the rows and batch entries

  double flops() const;      // 4 · batch · heads · seq_q · avg_k · head_dim
  double min_bytes() const;  // Q, K, V read once in the case's dtype, O written once in output_dtype(dtype)

  std::int64_t q_elements() const { return batch * seq_q * heads * head_dim; }
  std::int64_t kv_elements() const { return total_keys() * kv_heads * head_dim; }  // real lengths, no padding

  // The fp8_e4m3 descale of tensor `id` as an implementation with `transform` consumes it (real value = e4m3
  // value · descale): fp8_tensor_scale of the case's input distribution, or under incoherent processing Q's
  // and K's incoherent_descale (model/incoherent.hpp). 1 for the other dtypes.
  float fp8_descale(TensorId id, QkTransform transform = QkTransform::none) const;

  std::string label() const;  // short, for tables: "b1 h8 s4096 d64 fp32 causal" (" outliers" with them)
  std::string key() const;    // canonical identity, used by --resume
};

// The K/V layouts an implementation takes besides contiguous equal-length tensors.
struct KvLayouts {
  bool paged = false;   // a paged cache (page_size > 0)
  bool varlen = false;  // batch entries of their own lengths (seqlens)
};
// "" when an implementation taking `layouts` can run c's K/V layout, else the reason.
std::string kv_layout_support(const Case& c, KvLayouts layouts);

void to_json(nlohmann::json& out, const Case& c);
void from_json(const nlohmann::json& in, Case& c);

}  // namespace faprobe
