#include "model/case.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "model/errors.hpp"
#include "model/json_number.hpp"

namespace faprobe {

std::string_view to_string(Mask mask) {
  switch (mask) {
    case Mask::causal: return "causal";
    case Mask::causal_top_left: return "causal-top-left";
    case Mask::none: break;
  }
  return "none";
}
std::string_view to_string(Mode mode) { return mode == Mode::decode ? "decode" : "prefill"; }

Mask parse_mask(std::string_view text, std::string_view what) {
  if (text == "none") return Mask::none;
  if (text == "causal") return Mask::causal;
  if (text == "causal-top-left") return Mask::causal_top_left;
  throw UsageError(fmt::format("{}: unknown mask '{}' (allowed: none, causal (bottom-right), causal-top-left "
                               "(PyTorch's is_causal))",
                               what, text));
}

Mode parse_mode(std::string_view text, std::string_view what) {
  if (text == "prefill") return Mode::prefill;
  if (text == "decode") return Mode::decode;
  throw UsageError(fmt::format("{}: unknown mode '{}' (allowed: prefill, decode)", what, text));
}

std::string_view to_string(InputDistribution inputs) {
  return inputs == InputDistribution::outliers ? "outliers" : "normal";
}

InputDistribution parse_inputs(std::string_view text, std::string_view what) {
  if (text == "normal") return InputDistribution::normal;
  if (text == "outliers") return InputDistribution::outliers;
  throw UsageError(fmt::format("{}: unknown input distribution '{}' (allowed: normal, outliers (0.1 % of "
                               "entries with standard deviation 10, FlashAttention-3's FP8 test))",
                               what, text));
}

void Case::validate() const {
  auto positive = [](std::int64_t value, std::string_view name) {
    if (value <= 0) throw UsageError(fmt::format("--{} must be at least 1, got {}", name, value));
  };
  positive(batch, "batch");
  positive(heads, "heads");
  positive(kv_heads, "kv-heads");
  positive(seq_q, "seq-q");
  positive(seq_k, "seq");
  positive(head_dim, "head-dim");
  if (heads % kv_heads != 0) {
    throw UsageError(fmt::format("--kv-heads {} does not divide --heads {} (heads % kv_heads must be 0)",
                                 kv_heads, heads));
  }
  if (mode == Mode::decode && seq_q != 1) {
    throw UsageError(fmt::format("--mode decode has one query row per sequence, got --seq-q {}", seq_q));
  }
  if (page_size != 0 && (page_size < kMinPageSize || page_size > kMaxPageSize || (page_size & (page_size - 1)) != 0)) {
    throw UsageError(fmt::format("--page-size must be 0 (contiguous) or a power of two from {} to {}, got {}",
                                 kMinPageSize, kMaxPageSize, page_size));
  }
  if (splits < 0 || splits > kMaxSplits) {
    throw UsageError(fmt::format("--splits must be 0 (the implementation's heuristic) or 1 to {}, got {}", kMaxSplits,
                                 splits));
  }
  if (!seqlens.empty()) {
    if (mode != Mode::decode) {
      throw UsageError("--seqlens gives each batch entry of a decode case its own key length: it needs --mode decode");
    }
    for (std::int64_t length : seqlens) {
      if (length <= 0) throw UsageError(fmt::format("--seqlens: every length must be at least 1, got {}", length));
    }
    if (std::int64_t(seqlens.size()) != batch || *std::max_element(seqlens.begin(), seqlens.end()) != seq_k) {
      throw UsageError(fmt::format("--seqlens has {} lengths (longest {}) but the case has batch {} and seq {}",
                                   seqlens.size(), *std::max_element(seqlens.begin(), seqlens.end()), batch, seq_k));
    }
  }
  // Element counts must fit comfortably in 63 bits and in size_t byte counts; checked in doubles, before any
  // int64 product (total_keys() below, q_elements()) can overflow.
  const double largest = std::max(double(batch) * double(seq_q) * double(heads) * double(head_dim),
                                  double(batch) * double(seq_k) * double(kv_heads) * double(head_dim));
  if (largest > 4.0e18 / 8.0) throw UsageError(fmt::format("case {} is too large to index", label()));
  // Paged and variable-length layouts index key rows with 32-bit block tables and offsets, as
  // flash-attention's and vLLM's do.
  if ((paged() || varlen()) && double(total_keys()) + double(batch) * double(kMaxPageSize) > 2147483647.0) {
    throw UsageError(fmt::format("case {} has more key rows than a paged or variable-length layout indexes (2^31)",
                                 label()));
  }
}

double Case::scale() const { return 1.0 / std::sqrt(double(head_dim)); }

float Case::fp8_descale(TensorId id, QkTransform transform) const {
  if (dtype != DType::fp8_e4m3) return 1.0f;
  if (transform == QkTransform::incoherent && id != TensorId::v) return incoherent_descale(id, head_dim, inputs);
  return fp8_tensor_scale(id, inputs);
}

std::int64_t Case::total_keys() const {
  if (seqlens.empty()) return batch * seq_k;
  std::int64_t total = 0;
  for (std::int64_t length : seqlens) total += length;
  return total;
}

std::int64_t Case::visible_keys(std::int64_t row) const { return visible_keys(0, row); }

std::int64_t Case::visible_keys(std::int64_t b, std::int64_t row) const {
  const std::int64_t keys = seq_k_of(b);
  if (!masked()) return keys;
  return std::clamp<std::int64_t>(row + diagonal(b) + 1, 0, keys);
}

namespace {
// Mean over seq_q rows of the keys each sees: seq_k, or under a causal mask clamp(i + diagonal + 1, 0, seq_k).
double mean_visible_keys(std::int64_t seq_q, std::int64_t seq_k, Mask mask) {
  if (mask == Mask::none) return double(seq_k);
  // Sum of clamp(i + diagonal + 1, 0, seq_k) over rows i, in closed form per segment.
  const std::int64_t offset = (mask == Mask::causal_top_left ? 0 : seq_k - seq_q) + 1;
  double total = 0;
  const std::int64_t first_visible = std::max<std::int64_t>(0, -offset + 1);      // first row with >=1 key
  const std::int64_t ramp_end = std::clamp<std::int64_t>(seq_k - offset, first_visible, seq_q);
  // rows in [first_visible, ramp_end) see row + offset keys; rows in [ramp_end, seq_q) see seq_k.
  const double n_ramp = double(ramp_end - first_visible);
  total += n_ramp * double(offset) + (double(first_visible + ramp_end - 1) * n_ramp) / 2.0;
  total += double(seq_q - ramp_end) * double(seq_k);
  return total / double(seq_q);
}
}  // namespace

double Case::avg_keys() const {
  if (seqlens.empty()) return mean_visible_keys(seq_q, seq_k, mask);
  double total = 0;
  for (std::int64_t length : seqlens) total += mean_visible_keys(seq_q, length, mask);
  return total / double(seqlens.size());
}

double Case::flops() const {
  return 4.0 * double(batch) * double(heads) * double(seq_q) * avg_keys() * double(head_dim);
}

double Case::min_bytes() const {
  return double(dtype_bytes(dtype)) * (double(q_elements()) + 2.0 * double(kv_elements())) +
         double(dtype_bytes(output_dtype(dtype))) * double(q_elements());
}

std::string Case::label() const {
  std::string heads_text = kv_heads == heads ? fmt::format("h{}", heads) : fmt::format("h{}:{}", heads, kv_heads);
  std::string seq_text =
      seq_q == seq_k ? fmt::format("s{}", seq_k) : fmt::format("q{} k{}", seq_q, seq_k);
  if (varlen()) {  // the lengths themselves, the first few of a long list
    constexpr std::size_t kShown = 4;
    std::string lengths;
    for (std::size_t i = 0; i < std::min(seqlens.size(), kShown); ++i) lengths += (i ? "," : "") + std::to_string(seqlens[i]);
    if (seqlens.size() > kShown) lengths += fmt::format(",...({})", seqlens.size());
    seq_text = fmt::format("q{} k[{}]", seq_q, lengths);
  }
  return fmt::format("b{} {} {} d{} {}{}{}{}{}{}", batch, heads_text, seq_text, head_dim, to_string(dtype),
                     masked() ? fmt::format(" {}", to_string(mask)) : "", mode == Mode::decode ? " decode" : "",
                     paged() ? fmt::format(" page{}", page_size) : "", splits != 0 ? fmt::format(" splits{}", splits) : "",
                     inputs != InputDistribution::normal ? fmt::format(" {}", to_string(inputs)) : "");
}

std::string kv_layout_support(const Case& c, KvLayouts layouts) {
  if (c.paged() && !layouts.paged) return "contiguous K/V only (no paged KV cache: --page-size 0)";
  if (c.varlen() && !layouts.varlen) return "equal key lengths only (no --seqlens)";
  return "";
}

std::string Case::key() const { return nlohmann::json(*this).dump(); }

void to_json(nlohmann::json& out, const Case& c) {
  out = nlohmann::json{{"batch", c.batch},       {"heads", c.heads},
                       {"kv_heads", c.kv_heads}, {"seq_q", c.seq_q},
                       {"seq_k", c.seq_k},       {"head_dim", c.head_dim},
                       {"dtype", to_string(c.dtype)}, {"mask", to_string(c.mask)},
                       {"mode", to_string(c.mode)},   {"seed", c.seed}};
  // Written only when set, so that a contiguous, equal-length case keeps the key it always had (--resume).
  if (c.page_size != 0) out["page_size"] = c.page_size;
  if (!c.seqlens.empty()) out["seqlens"] = c.seqlens;
  if (c.splits != 0) out["splits"] = c.splits;
  if (c.inputs != InputDistribution::normal) out["inputs"] = to_string(c.inputs);
}

void from_json(const nlohmann::json& in, Case& c) {
  // Every integer through json_int64/json_uint64: a case may come from a file faprobe did not write.
  if (!in.is_object()) throw std::invalid_argument("case: expected an object, found " + json_value_text(in));
  auto member = [&](const char* key) -> const nlohmann::json& { return json_member(in, key, std::string("case.") + key); };
  auto integer = [&](const char* key) { return json_int64(member(key), std::string("case.") + key); };
  auto text = [&](const char* key) { return json_string(member(key), std::string("case.") + key); };
  auto optional_integer = [&](const char* key) {
    return in.contains(key) ? json_int64(in.at(key), std::string("case.") + key) : std::int64_t{0};
  };
  c.batch = integer("batch");
  c.heads = integer("heads");
  c.kv_heads = integer("kv_heads");
  c.seq_q = integer("seq_q");
  c.seq_k = integer("seq_k");
  c.head_dim = integer("head_dim");
  c.dtype = parse_dtype(text("dtype"), "case.dtype");
  c.mask = parse_mask(text("mask"), "case.mask");
  c.mode = parse_mode(text("mode"), "case.mode");
  c.seed = in.contains("seed") ? json_uint64(in.at("seed"), "case.seed") : std::uint64_t{0};
  c.page_size = optional_integer("page_size");
  c.seqlens.clear();
  if (in.contains("seqlens")) {
    if (!in.at("seqlens").is_array()) {
      throw std::invalid_argument("case.seqlens: expected a list of lengths, found " + json_value_text(in.at("seqlens")));
    }
    for (const nlohmann::json& length : in.at("seqlens")) {
      c.seqlens.push_back(json_int64(length, "case.seqlens"));
    }
  }
  c.splits = optional_integer("splits");
  // Absent in records of normal inputs (and in every record written before there was a choice).
  c.inputs = in.contains("inputs") ? parse_inputs(text("inputs"), "case.inputs")
                                   : InputDistribution::normal;
}

}  // namespace faprobe
