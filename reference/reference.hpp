// The float64 reference: any output row of any case, computed from the rounded inputs with Eigen.
// Inputs come from an InputSource, either regenerated from the case's seed (no copy of the tensors is
// needed) or read from tensors given on the command line (.npy files produced by another program): Q, K, V
// as (batch, seq, heads, head_dim) tensors, or Q and a KV cache.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "model/eigen.hpp"

#include "model/case.hpp"
#include "model/inputs.hpp"
#include "model/tensor.hpp"

namespace faprobe {

class InputSource {
 public:
  virtual ~InputSource() = default;
  // Writes head_dim values of row `s` of head `h` in batch entry `b` of tensor `id`, as rounded inputs
  // (for K and V, key s of entry b in logical order, whatever layout the implementation stores them in).
  virtual void row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const = 0;
};

// Regenerates inputs from (seed, tensor, index) in the case's input distribution, rounded to the case's dtype,
// exactly as make_inputs(c, transform): with QkTransform::incoherent, Q and K rows are the rotated e4m3 values
// an implementation that transforms them consumes (model/incoherent.hpp), descaled as it descales them.
// exact() gives the generator's values themselves instead, unrounded and untransformed (fp32 values, exact):
// the inputs before any quantization, for the error that quantization adds (check.hpp: add_exact_inputs_error).
class GeneratedInputs final : public InputSource {
 public:
  explicit GeneratedInputs(const Case& c, QkTransform transform = QkTransform::none);
  static GeneratedInputs exact(const Case& c);
  void row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const override;

 private:
  Case case_;
  QkTransform transform_;
  bool exact_ = false;
  std::uint64_t keys_[3];
  std::vector<std::int64_t> seq_starts_;  // logical (packed) first key row of each batch entry
};

// Reads inputs from host tensors (which must outlive it).
class TensorInputs final : public InputSource {
 public:
  TensorInputs(const HostTensor& q, const HostTensor& k, const HostTensor& v) : tensors_{&q, &k, &v} {}
  void row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const override;

 private:
  const HostTensor* tensors_[3];
};

// Reads Q from its (batch, seq_q, heads, head_dim) tensor and K, V from a KV cache in the layouts of
// flash-attention's flash_attn_with_kvcache (flash_attn/flash_attn_interface.py, its docstring): without a
// block table, a padded cache (batch, max_seq_k, kv_heads, head_dim), key s of entry b at [b, s]; with one, a
// page pool (num_blocks, page_size, kv_heads, head_dim), key s of entry b at
// [block_table[b][s / page_size], s % page_size], the block table being batch × blocks_per_seq. Each entry's
// length is the case's seq_k_of(b). Nothing is checked here: the caller has made sure that every row a
// length reaches is inside the cache (kv_cache_files.hpp does for verify). The tensors must outlive it.
class CacheInputs final : public InputSource {
 public:
  CacheInputs(const HostTensor& q, const HostTensor& k_cache, const HostTensor& v_cache,
              std::vector<std::int32_t> block_table = {}, std::int64_t blocks_per_seq = 0);
  void row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const override;

  bool paged() const { return blocks_per_seq_ > 0; }
  // Where key `key` of batch entry b is in the cache: (block, row in the block) in a pool, (b, key) in a
  // padded cache.
  std::pair<std::int64_t, std::int64_t> cache_row(std::int64_t b, std::int64_t key) const;

 private:
  const HostTensor* tensors_[3];
  std::vector<std::int32_t> block_table_;
  std::int64_t blocks_per_seq_ = 0;
};

// One input element the reference reads, by its logical place: (batch, row, head, dim) of Q, (batch entry,
// key, kv head, dim) of K and V.
struct InputElement {
  TensorId tensor = TensorId::q;
  std::int64_t b = 0, s = 0, h = 0, d = 0;
  double value = 0;
};

// The first NaN or ±Inf among the inputs the reference reads for case c: Q, then K, then V, each in that
// logical order, or nullopt when all are finite. Only keys within each entry's length are read, so a paged
// or padded cache's NaN padding is never reported. A non-finite input makes any output's check meaningless
// (the reference row is NaN), so a check of files runs this first.
std::optional<InputElement> first_non_finite(const Case& c, const InputSource& inputs);

// K and V of one (batch entry, KV head) in float64, and the rows of output computed from them.
class HeadReference {
 public:
  HeadReference(const Case& c, const InputSource& inputs, std::int64_t b, std::int64_t kv_head);

  // Exact (float64) output row for query row `row` of query head `h` (which must map to this KV head).
  // With `lse`, also the row's log-sum-exp, ln Σ_j exp(scale · q·k_j) over the keys it sees (LseTensor's
  // definition, model/tensor.hpp): −inf for a row that sees no key.
  Eigen::VectorXd output_row(const InputSource& inputs, std::int64_t h, std::int64_t row,
                             double* lse = nullptr) const;

  // The same row computed "plainly in the case's precision", as a framework would: fp32 dot products,
  // scores rounded to the dtype, softmax in fp32, P rounded to the dtype, P·V accumulated in fp32, O
  // rounded to the dtype. Its distance from output_row() sets the tolerance (flash-attention's rule).
  // fp8_e4m3 follows FlashAttention-3's FP8 forward instead (plain_fp8_row).
  // With `plain_lse`, also the log-sum-exp computed plainly in fp32, the precision every kernel keeps its
  // scores and row sums in: each score the fp32 dot product (summed serially over head_dim; for fp8_e4m3 through the
  // e4m3 tensor core's adder, as every fp8 kernel's scores are) times the fp32 scale, not rounded to the dtype (no kernel rounds its scores); m their maximum; the row sum of
  // exp(s − m) in fp32, summed serially over the keys; m + ln(sum) in fp32. −inf for a row that sees no key.
  Eigen::VectorXd plain_row(const InputSource& inputs, std::int64_t h, std::int64_t row,
                            double* plain_lse = nullptr) const;

 private:
  // FA-3's FP8 forward done plainly, over all visible keys at once, from plain_scores:
  // S = (Q_fp8·K_fp8ᵀ)·scale_q·scale_k·scale, each dot product added as Hopper's e4m3 tensor core adds it
  // (hopper_e4m3_dot, model/fp8_accumulation.hpp: k-groups of 32 through a 13-fraction-bit adder) and kept in
  // fp32; P̃ = exp(S − max S) in fp32, in [0, 1]; the row sum l over the fp32 P̃; P̃ rounded to e4m3 without a
  // scale (as FA-3 feeds P to the P·V GEMM); O = (Σ e4m3(P̃)·V_fp8)·scale_v / l, the sum over keys again
  // through the tensor core's adder in k-groups of 32, rounded to bf16 (output_dtype). The inputs are the
  // dequantized values; with power-of-two scales (fp8.hpp) that is the same computation bit for bit as on
  // the codes (the adder's truncation follows the largest addend's exponent, so it commutes with them).
  Eigen::VectorXd plain_fp8_row(const Eigen::VectorXf& scores) const;
  // The scores of `query` against the first `visible` keys in fp32: serial dot products (fp8_e4m3: through
  // the tensor core's adder) times the fp32 scale.
  Eigen::VectorXf plain_scores(const Eigen::VectorXf& query, std::int64_t visible) const;
  // plain_row's LSE from those fp32 scores.
  static double plain_log_sum_exp(const Eigen::VectorXf& scores);

  const Case& case_;
  std::int64_t b_;
  Eigen::MatrixXd keys_, values_;            // (seq_k_of(b), head_dim)
  Eigen::MatrixXf keys_fp32_, values_fp32_;  // the same values transposed (head_dim, seq_k), for plain_row
};

}  // namespace faprobe
