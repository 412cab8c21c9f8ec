#include "reference/reference.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "model/fp8.hpp"
#include "model/fp8_accumulation.hpp"

namespace faprobe {

GeneratedInputs::GeneratedInputs(const Case& c, QkTransform transform)
    : case_(c),
      transform_(transform),
      keys_{tensor_key(c.seed, TensorId::q), tensor_key(c.seed, TensorId::k), tensor_key(c.seed, TensorId::v)} {
  if (transform == QkTransform::incoherent && (c.dtype != DType::fp8_e4m3 || !incoherent_head_dim(c.head_dim))) {
    throw std::invalid_argument("GeneratedInputs: incoherent processing takes fp8_e4m3 and a power-of-two head_dim up "
                                "to 256, got " + c.label());
  }
  seq_starts_.assign(std::size_t(c.batch), 0);
  for (std::int64_t b = 1; b < c.batch; ++b) seq_starts_[std::size_t(b)] = seq_starts_[std::size_t(b) - 1] + c.seq_k_of(b - 1);
}

GeneratedInputs GeneratedInputs::exact(const Case& c) {
  GeneratedInputs inputs(c);
  inputs.exact_ = true;
  return inputs;
}

void GeneratedInputs::row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const {
  const bool is_query = id == TensorId::q;
  const std::int64_t first_row = is_query ? b * case_.seq_q : seq_starts_[std::size_t(b)];
  const std::int64_t heads = is_query ? case_.heads : case_.kv_heads;
  const std::int64_t base = ((first_row + s) * heads + h) * case_.head_dim;
  const std::uint64_t key = keys_[std::size_t(id)];
  if (exact_) {
    for (std::int64_t c = 0; c < case_.head_dim; ++c) {
      out[c] = double(input_value(key, std::uint64_t(base + c), case_.inputs));
    }
    return;
  }
  const float descale = case_.fp8_descale(id, transform_);
  if (transform_ == QkTransform::incoherent && id != TensorId::v) {  // the rotated codes, as the device fill writes
    std::uint8_t codes[incoherent_max_head_dim];
    incoherent_row_codes(key, std::uint64_t(base), int(case_.head_dim), case_.inputs, incoherent_signs_key(case_.seed),
                         incoherent_scale_exponent(case_.head_dim, case_.inputs), codes);
    for (std::int64_t c = 0; c < case_.head_dim; ++c) out[c] = double(dequantize_e4m3(codes[c], descale));
    return;
  }
  for (std::int64_t c = 0; c < case_.head_dim; ++c) {
    out[c] = double(round_to(case_.dtype, input_value(key, std::uint64_t(base + c), case_.inputs), descale));
  }
}

void TensorInputs::row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const {
  const HostTensor& tensor = *tensors_[std::size_t(id)];
  const std::int64_t base = tensor.offset(b, s, h);
  for (std::int64_t c = 0; c < tensor.head_dim(); ++c) out[c] = double(tensor.get(base + c));
}

CacheInputs::CacheInputs(const HostTensor& q, const HostTensor& k_cache, const HostTensor& v_cache,
                         std::vector<std::int32_t> block_table, std::int64_t blocks_per_seq)
    : tensors_{&q, &k_cache, &v_cache}, block_table_(std::move(block_table)), blocks_per_seq_(blocks_per_seq) {}

std::pair<std::int64_t, std::int64_t> CacheInputs::cache_row(std::int64_t b, std::int64_t key) const {
  if (!paged()) return {b, key};
  const std::int64_t page_size = tensors_[std::size_t(TensorId::k)]->seq();
  return {std::int64_t(block_table_[std::size_t(b * blocks_per_seq_ + key / page_size)]), key % page_size};
}

void CacheInputs::row(TensorId id, std::int64_t b, std::int64_t s, std::int64_t h, double* out) const {
  const HostTensor& tensor = *tensors_[std::size_t(id)];
  const auto [first, second] = id == TensorId::q ? std::pair{b, s} : cache_row(b, s);
  const std::int64_t base = tensor.offset(first, second, h);
  for (std::int64_t c = 0; c < tensor.head_dim(); ++c) out[c] = double(tensor.get(base + c));
}

std::optional<InputElement> first_non_finite(const Case& c, const InputSource& inputs) {
  std::vector<double> row(std::size_t(c.head_dim));
  for (const TensorId id : {TensorId::q, TensorId::k, TensorId::v}) {
    const bool is_query = id == TensorId::q;
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const std::int64_t rows = is_query ? c.seq_q : c.seq_k_of(b), heads = is_query ? c.heads : c.kv_heads;
      for (std::int64_t s = 0; s < rows; ++s) {
        for (std::int64_t h = 0; h < heads; ++h) {
          inputs.row(id, b, s, h, row.data());
          for (std::int64_t d = 0; d < c.head_dim; ++d) {
            if (!std::isfinite(row[std::size_t(d)])) return InputElement{id, b, s, h, d, row[std::size_t(d)]};
          }
        }
      }
    }
  }
  return std::nullopt;
}

HeadReference::HeadReference(const Case& c, const InputSource& inputs, std::int64_t b, std::int64_t kv_head)
    : case_(c), b_(b), keys_(c.seq_k_of(b), c.head_dim), values_(c.seq_k_of(b), c.head_dim) {
  // Eigen is column-major: fill row by row through a transposed view of a row buffer.
  Eigen::VectorXd row(c.head_dim);
  for (std::int64_t s = 0; s < c.seq_k_of(b); ++s) {
    inputs.row(TensorId::k, b, s, kv_head, row.data());
    keys_.row(s) = row.transpose();
    inputs.row(TensorId::v, b, s, kv_head, row.data());
    values_.row(s) = row.transpose();
  }
  keys_fp32_ = keys_.transpose().cast<float>();  // (head_dim, seq_k): one key per contiguous column
  values_fp32_ = values_.transpose().cast<float>();
}

Eigen::VectorXd HeadReference::output_row(const InputSource& inputs, std::int64_t h, std::int64_t row,
                                          double* lse) const {
  const std::int64_t visible = case_.visible_keys(b_, row);
  Eigen::VectorXd output = Eigen::VectorXd::Zero(case_.head_dim);
  if (visible == 0) {  // a row that sees no key outputs zeros; its LSE is ln 0
    if (lse != nullptr) *lse = -std::numeric_limits<double>::infinity();
    return output;
  }
  Eigen::VectorXd query(case_.head_dim);
  inputs.row(TensorId::q, b_, row, h, query.data());
  const Eigen::VectorXd scores = (keys_.topRows(visible) * query) * case_.scale();
  const double max_score = scores.maxCoeff();
  const Eigen::ArrayXd weights = (scores.array() - max_score).exp();
  output.noalias() = values_.topRows(visible).transpose() * weights.matrix();
  if (lse != nullptr) *lse = max_score + std::log(weights.sum());
  return output / weights.sum();
}

Eigen::VectorXf HeadReference::plain_scores(const Eigen::VectorXf& query, std::int64_t visible) const {
  Eigen::VectorXf scores(visible);
  const std::size_t head_dim = std::size_t(case_.head_dim);
  for (std::int64_t j = 0; j < visible; ++j) {
    float dot = 0.0f;
    if (case_.dtype == DType::fp8_e4m3) {  // e4m3 products added as Hopper's tensor core adds them
      dot = hopper_e4m3_dot(&keys_fp32_(0, j), 1, query.data(), 1, head_dim);
    } else {
      for (std::int64_t c = 0; c < case_.head_dim; ++c) dot += keys_fp32_(c, j) * query(c);
    }
    scores(j) = dot * float(case_.scale());
  }
  return scores;
}

double HeadReference::plain_log_sum_exp(const Eigen::VectorXf& scores) {
  const float max_score = scores.maxCoeff();
  float row_sum = 0.0f;
  for (Eigen::Index j = 0; j < scores.size(); ++j) row_sum += std::exp(scores(j) - max_score);
  return double(max_score + std::log(row_sum));
}

Eigen::VectorXd HeadReference::plain_row(const InputSource& inputs, std::int64_t h, std::int64_t row,
                                         double* plain_lse) const {
  const std::int64_t visible = case_.visible_keys(b_, row);
  Eigen::VectorXd output = Eigen::VectorXd::Zero(case_.head_dim);
  if (visible == 0) {
    if (plain_lse != nullptr) *plain_lse = -std::numeric_limits<double>::infinity();
    return output;
  }
  const DType dtype = case_.dtype;
  Eigen::VectorXd query_row(case_.head_dim);
  inputs.row(TensorId::q, b_, row, h, query_row.data());
  const Eigen::VectorXf query = query_row.cast<float>();
  // Plain loops in fp32: each score summed serially over head_dim (as a GEMM's inner product does).
  Eigen::VectorXf scores = plain_scores(query, visible);
  if (plain_lse != nullptr) *plain_lse = plain_log_sum_exp(scores);
  if (dtype == DType::fp8_e4m3) return plain_fp8_row(scores);

  // Scores rounded to the dtype as a framework's matmul output would be; softmax in fp32; P·V summed
  // serially over keys.
  for (std::int64_t j = 0; j < visible; ++j) scores(j) = round_to(dtype, scores(j));
  Eigen::ArrayXf weights = (scores.array() - scores.maxCoeff()).exp();
  weights /= weights.sum();
  Eigen::VectorXf accumulated = Eigen::VectorXf::Zero(case_.head_dim);
  for (std::int64_t j = 0; j < visible; ++j) {
    accumulated += round_to(dtype, weights(j)) * values_fp32_.col(j);
  }
  for (std::int64_t c = 0; c < case_.head_dim; ++c) output(c) = double(round_to(dtype, accumulated(c)));
  return output;
}

Eigen::VectorXd HeadReference::plain_fp8_row(const Eigen::VectorXf& scores) const {
  // Rounding the unnormalised P̃ (largest element exactly 1), as FA-3 does, rather than the normalised P keeps
  // it where e4m3 has its 3 bits: at seq_k 4096 a typical normalised probability (~2^-12) is below e4m3's
  // smallest subnormal (2^-9) and would round to zero.
  const std::int64_t visible = scores.size();
  const Eigen::ArrayXf weights = (scores.array() - scores.maxCoeff()).exp();
  const float row_sum = weights.sum();
  Eigen::VectorXf rounded_weights(visible);
  for (std::int64_t j = 0; j < visible; ++j) rounded_weights(j) = e4m3_to_float(float_to_e4m3(weights(j)));
  // P·V over the keys in k-groups of 32, each added by the tensor core's adder into the running fp32 sum.
  Eigen::VectorXf accumulated(case_.head_dim);
  const std::size_t head_dim = std::size_t(case_.head_dim);
  for (std::int64_t c = 0; c < case_.head_dim; ++c) {
    accumulated(c) = hopper_e4m3_dot(rounded_weights.data(), 1, &values_fp32_(c, 0), head_dim, std::size_t(visible));
  }
  const DType output = output_dtype(DType::fp8_e4m3);
  Eigen::VectorXd row(case_.head_dim);
  for (std::int64_t c = 0; c < case_.head_dim; ++c) row(c) = double(round_to(output, accumulated(c) / row_sum));
  return row;
}

}  // namespace faprobe
