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
// value / fp8_input_scale.
template <class T> struct StoredAs {
  using Storage = T;
  static T from_float(float value) { return static_cast<T>(value); }
  static float to_float(T stored) { return static_cast<float>(stored); }
};
struct StoredAsE4m3 {
  using Storage = std::uint8_t;
  static std::uint8_t from_float(float value) { return quantize_e4m3(value, fp8_input_scale); }
  static float to_float(std::uint8_t code) { return dequantize_e4m3(code, fp8_input_scale); }
};

// Calls fn(StoredAs...{}) for dtype: dispatch_storage's types, plus fp8_e4m3's codes.
template <class Fn> decltype(auto) dispatch_element(DType dtype, Fn&& fn) {
  if (dtype == DType::fp8_e4m3) return fn(StoredAsE4m3{});
  return dispatch_storage(dtype, [&](auto tag) { return fn(StoredAs<decltype(tag)>{}); });
}

}  // namespace

HostTensor::HostTensor(DType dtype, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       std::int64_t head_dim)
    : dtype_(dtype), batch_(batch), seq_(seq), heads_(heads), head_dim_(head_dim),
      storage_(std::size_t(batch * seq * heads * head_dim) * dtype_bytes(dtype), AllocKind::tensor) {}

float HostTensor::get(std::int64_t index) const {
  return dispatch_element(dtype_, [&](auto element) {
    using E = decltype(element);
    return E::to_float(data<typename E::Storage>()[index]);
  });
}

void HostTensor::set(std::int64_t index, float value) {
  dispatch_element(dtype_, [&](auto element) {
    using E = decltype(element);
    data<typename E::Storage>()[index] = E::from_float(value);
  });
}

std::vector<double> HostTensor::row(std::int64_t b, std::int64_t s, std::int64_t h) const {
  std::vector<double> values(static_cast<std::size_t>(head_dim_));
  const std::int64_t base = offset(b, s, h);
  dispatch_element(dtype_, [&](auto element) {
    using E = decltype(element);
    const auto* source = data<typename E::Storage>() + base;
    for (std::int64_t c = 0; c < head_dim_; ++c) values[std::size_t(c)] = double(E::to_float(source[c]));
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

void fill_input(HostTensor& tensor, std::uint64_t seed, TensorId id) {
  const std::uint64_t key = tensor_key(seed, id);
  const std::int64_t count = tensor.elements();
  dispatch_element(tensor.dtype(), [&](auto element) {
    using E = decltype(element);
    auto* out = tensor.data<typename E::Storage>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) out[i] = E::from_float(input_value(key, std::uint64_t(i)));
  });
}

void fill_kv_input(HostTensor& tensor, const KvLayout& layout, std::uint64_t seed, TensorId id) {
  if (!layout.paged()) {
    fill_input(tensor, seed, id);
    return;
  }
  const std::uint64_t key = tensor_key(seed, id);
  const KvLayout::PageContents pages = layout.page_contents();
  const std::int64_t width = tensor.row_stride();
  dispatch_element(tensor.dtype(), [&](auto element) {
    using E = decltype(element);
    auto* out = tensor.data<typename E::Storage>();
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < layout.rows; ++row) {
      const std::size_t page = std::size_t(row / layout.page_size);
      const std::int64_t in_page = row % layout.page_size;
      const std::int64_t source = pages.first_row[page] + in_page;
      for (std::int64_t e = 0; e < width; ++e) {
        out[row * width + e] = in_page >= pages.valid_rows[page]
                                   ? E::from_float(std::numeric_limits<float>::quiet_NaN())
                                   : E::from_float(input_value(key, std::uint64_t(source * width + e)));
      }
    }
  });
}

AttentionInputs make_inputs(const Case& c) {
  KvLayout layout = make_kv_layout(c);
  // Equal lengths, contiguous: the (batch, seq_k) shape the prefill kernels index; otherwise storage rows.
  const bool plain = !c.paged() && !c.varlen();
  const std::int64_t kv_batch = plain ? c.batch : 1, kv_rows = plain ? c.seq_k : layout.rows;
  AttentionInputs inputs{HostTensor(c.dtype, c.batch, c.seq_q, c.heads, c.head_dim),
                         HostTensor(c.dtype, kv_batch, kv_rows, c.kv_heads, c.head_dim),
                         HostTensor(c.dtype, kv_batch, kv_rows, c.kv_heads, c.head_dim), std::move(layout)};
  fill_input(inputs.q, c.seed, TensorId::q);
  fill_kv_input(inputs.k, inputs.layout, c.seed, TensorId::k);
  fill_kv_input(inputs.v, inputs.layout, c.seed, TensorId::v);
  return inputs;
}

HostTensor make_output(const Case& c) {
  return HostTensor(output_dtype(c.dtype), c.batch, c.seq_q, c.heads, c.head_dim);
}

}  // namespace faprobe
