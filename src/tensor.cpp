#include "tensor.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

namespace faprobe {

HostTensor::HostTensor(DType dtype, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       std::int64_t head_dim)
    : dtype_(dtype), batch_(batch), seq_(seq), heads_(heads), head_dim_(head_dim),
      storage_(std::size_t(batch * seq * heads * head_dim) * dtype_bytes(dtype), AllocKind::tensor) {}

float HostTensor::get(std::int64_t index) const {
  return dispatch_storage(dtype_, [&](auto tag) { return static_cast<float>(data<decltype(tag)>()[index]); });
}

void HostTensor::set(std::int64_t index, float value) {
  dispatch_storage(dtype_, [&](auto tag) {
    using T = decltype(tag);
    data<T>()[index] = static_cast<T>(value);
  });
}

std::vector<double> HostTensor::row(std::int64_t b, std::int64_t s, std::int64_t h) const {
  std::vector<double> values(static_cast<std::size_t>(head_dim_));
  const std::int64_t base = offset(b, s, h);
  dispatch_storage(dtype_, [&](auto tag) {
    const auto* source = data<decltype(tag)>() + base;
    for (std::int64_t c = 0; c < head_dim_; ++c) values[std::size_t(c)] = double(static_cast<float>(source[c]));
  });
  return values;
}

void fill_input(HostTensor& tensor, std::uint64_t seed, TensorId id) {
  const std::uint64_t key = tensor_key(seed, id);
  const std::int64_t count = tensor.elements();
  dispatch_storage(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = tensor.data<T>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(input_value(key, std::uint64_t(i)));
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
  dispatch_storage(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = tensor.data<T>();
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < layout.rows; ++row) {
      const std::size_t page = std::size_t(row / layout.page_size);
      const std::int64_t in_page = row % layout.page_size;
      const std::int64_t source = pages.first_row[page] + in_page;
      for (std::int64_t e = 0; e < width; ++e) {
        out[row * width + e] = in_page >= pages.valid_rows[page]
                                   ? static_cast<T>(std::numeric_limits<float>::quiet_NaN())
                                   : static_cast<T>(input_value(key, std::uint64_t(source * width + e)));
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

HostTensor make_output(const Case& c) { return HostTensor(c.dtype, c.batch, c.seq_q, c.heads, c.head_dim); }

}  // namespace faprobe
