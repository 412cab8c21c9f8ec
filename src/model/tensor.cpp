#include "model/tensor.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "model/fp8.hpp"

namespace faprobe {
namespace {

// How a HostTensor stores a float: the CPU storage types by their own conversion, fp8_e4m3 as the e4m3 code of
// value / the tensor's fp8_scale.
template <class T> struct StoredAs {
  using Storage = T;
  T from_float(float value) const { return static_cast<T>(value); }
  float to_float(T stored) const { return static_cast<float>(stored); }
};
struct StoredAsE4m3 {
  using Storage = std::uint8_t;
  float scale;
  std::uint8_t from_float(float value) const { return quantize_e4m3(value, scale); }
  float to_float(std::uint8_t code) const { return dequantize_e4m3(code, scale); }
};

// Calls fn(element) for the tensor's dtype: dispatch_storage's types, plus fp8_e4m3's codes with its scale.
template <class Fn> decltype(auto) dispatch_element(const HostTensor& tensor, Fn&& fn) {
  if (tensor.dtype() == DType::fp8_e4m3) return fn(StoredAsE4m3{tensor.fp8_scale()});
  return dispatch_storage(tensor.dtype(), [&](auto tag) { return fn(StoredAs<decltype(tag)>{}); });
}

}  // namespace

HostTensor::HostTensor(DType dtype, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       std::int64_t head_dim, float fp8_scale)
    : dtype_(dtype), fp8_scale_(fp8_scale), batch_(batch), seq_(seq), heads_(heads), head_dim_(head_dim),
      storage_(std::size_t(batch * seq * heads * head_dim) * dtype_bytes(dtype), AllocKind::tensor) {}

float HostTensor::get(std::int64_t index) const {
  return dispatch_element(*this, [&](auto element) {
    using E = decltype(element);
    return element.to_float(data<typename E::Storage>()[index]);
  });
}

void HostTensor::set(std::int64_t index, float value) {
  dispatch_element(*this, [&](auto element) {
    using E = decltype(element);
    data<typename E::Storage>()[index] = element.from_float(value);
  });
}

std::vector<double> HostTensor::row(std::int64_t b, std::int64_t s, std::int64_t h) const {
  std::vector<double> values(static_cast<std::size_t>(head_dim_));
  const std::int64_t base = offset(b, s, h);
  dispatch_element(*this, [&](auto element) {
    using E = decltype(element);
    const auto* source = data<typename E::Storage>() + base;
    for (std::int64_t c = 0; c < head_dim_; ++c) values[std::size_t(c)] = double(element.to_float(source[c]));
  });
  return values;
}

std::int64_t first_non_finite(const HostTensor& tensor) {
  for (std::int64_t i = 0; i < tensor.elements(); ++i) {
    if (!std::isfinite(tensor.get(i))) return i;
  }
  return -1;
}

LseTensor::LseTensor(const Case& c)
    : batch_(c.batch), heads_(c.heads), seq_q_(c.seq_q), storage_(std::size_t(lse_bytes(c)), AllocKind::tensor) {}

std::uint64_t lse_bytes(const Case& c) { return std::uint64_t(c.batch * c.heads * c.seq_q) * sizeof(float); }

std::uint64_t stored_tensor_bytes(const Case& c, bool with_lse) {
  const std::uint64_t output_bytes =  // O, and the LSE beside it
      dtype_bytes(output_dtype(c.dtype)) * std::uint64_t(c.q_elements()) + (with_lse ? lse_bytes(c) : 0);
  if (!c.paged() && !c.varlen()) {
    return dtype_bytes(c.dtype) * std::uint64_t(c.q_elements() + 2 * c.kv_elements()) + output_bytes;
  }
  // K and V as stored (a page pool's padding included), plus the layout's int32 offsets and block table.
  const KvLayout layout = make_kv_layout(c);
  const std::uint64_t kv_storage = std::uint64_t(layout.rows * c.kv_heads * c.head_dim);
  return dtype_bytes(c.dtype) * (std::uint64_t(c.q_elements()) + 2 * kv_storage) + output_bytes +
         sizeof(std::int32_t) * (layout.seq_starts.size() + layout.block_table.size());
}

void fill_nan(HostTensor& tensor) {
  const std::size_t bytes = std::size_t(tensor.elements()) * dtype_bytes(tensor.dtype());
  if (bytes != 0) std::memset(tensor.data<void>(), kNanPoisonByte, bytes);  // an empty tensor has no storage
}

void fill_nan(LseTensor& lse) {
  if (lse.bytes() != 0) std::memset(lse.data(), kNanPoisonByte, lse.bytes());
}

void fill_input(HostTensor& tensor, std::uint64_t seed, TensorId id, InputDistribution distribution) {
  const std::uint64_t key = tensor_key(seed, id);
  const std::int64_t count = tensor.elements();
  dispatch_element(tensor, [&](auto element) {
    using E = decltype(element);
    auto* out = tensor.data<typename E::Storage>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) out[i] = element.from_float(input_value(key, std::uint64_t(i), distribution));
  });
}

namespace {
// Q or K of an fp8 case under incoherent processing: every head_dim-long row rotated and rounded once
// (incoherent_row_codes), as the device fill writes it.
void fill_rotated_input(HostTensor& tensor, std::uint64_t seed, TensorId id, InputDistribution distribution) {
  const std::uint64_t key = tensor_key(seed, id), signs_key = incoherent_signs_key(seed);
  const int head_dim = int(tensor.head_dim()), scale_exponent = incoherent_scale_exponent(head_dim, distribution);
  const std::int64_t rows = tensor.elements() / head_dim;
  auto* out = tensor.data<std::uint8_t>();
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    incoherent_row_codes(key, std::uint64_t(row * head_dim), head_dim, distribution, signs_key, scale_exponent,
                         out + row * head_dim);
  }
}
}  // namespace

void fill_kv_input(HostTensor& tensor, const KvLayout& layout, std::uint64_t seed, TensorId id,
                   InputDistribution distribution) {
  if (!layout.paged()) {
    fill_input(tensor, seed, id, distribution);
    return;
  }
  const std::uint64_t key = tensor_key(seed, id);
  const KvLayout::PageContents pages = layout.page_contents();
  const std::int64_t width = tensor.row_stride();
  dispatch_element(tensor, [&](auto element) {
    using E = decltype(element);
    auto* out = tensor.data<typename E::Storage>();
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < layout.rows; ++row) {
      const std::size_t page = std::size_t(row / layout.page_size);
      const std::int64_t in_page = row % layout.page_size;
      const std::int64_t source = pages.first_row[page] + in_page;
      for (std::int64_t e = 0; e < width; ++e) {
        out[row * width + e] = in_page >= pages.valid_rows[page]
                                   ? element.from_float(std::numeric_limits<float>::quiet_NaN())
                                   : element.from_float(input_value(key, std::uint64_t(source * width + e), distribution));
      }
    }
  });
}

AttentionInputs make_inputs(const Case& c, QkTransform transform) {
  KvLayout layout = make_kv_layout(c);
  // Equal lengths, contiguous: the (batch, seq_k) shape the prefill kernels index; otherwise storage rows.
  const bool plain = !c.paged() && !c.varlen();
  const std::int64_t kv_batch = plain ? c.batch : 1, kv_rows = plain ? c.seq_k : layout.rows;
  AttentionInputs inputs{
      HostTensor(c.dtype, c.batch, c.seq_q, c.heads, c.head_dim, c.fp8_descale(TensorId::q, transform)),
      HostTensor(c.dtype, kv_batch, kv_rows, c.kv_heads, c.head_dim, c.fp8_descale(TensorId::k, transform)),
      HostTensor(c.dtype, kv_batch, kv_rows, c.kv_heads, c.head_dim, c.fp8_descale(TensorId::v, transform)),
      std::move(layout)};
  if (transform == QkTransform::incoherent) {
    if (c.dtype != DType::fp8_e4m3 || !plain || !incoherent_head_dim(c.head_dim)) {
      throw std::invalid_argument("make_inputs: incoherent processing takes fp8_e4m3, contiguous K/V and a "
                                  "power-of-two head_dim up to 256, got " + c.label());
    }
    fill_rotated_input(inputs.q, c.seed, TensorId::q, c.inputs);
    fill_rotated_input(inputs.k, c.seed, TensorId::k, c.inputs);
  } else {
    fill_input(inputs.q, c.seed, TensorId::q, c.inputs);
    fill_kv_input(inputs.k, inputs.layout, c.seed, TensorId::k, c.inputs);
  }
  fill_kv_input(inputs.v, inputs.layout, c.seed, TensorId::v, c.inputs);
  return inputs;
}

HostTensor make_output(const Case& c) {
  return HostTensor(output_dtype(c.dtype), c.batch, c.seq_q, c.heads, c.head_dim);
}

}  // namespace faprobe
