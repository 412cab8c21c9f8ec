#include "tensor.hpp"

#include <stdexcept>

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

AttentionInputs make_inputs(const Case& c) {
  AttentionInputs inputs{HostTensor(c.dtype, c.batch, c.seq_q, c.heads, c.head_dim),
                         HostTensor(c.dtype, c.batch, c.seq_k, c.kv_heads, c.head_dim),
                         HostTensor(c.dtype, c.batch, c.seq_k, c.kv_heads, c.head_dim)};
  fill_input(inputs.q, c.seed, TensorId::q);
  fill_input(inputs.k, c.seed, TensorId::k);
  fill_input(inputs.v, c.seed, TensorId::v);
  return inputs;
}

HostTensor make_output(const Case& c) { return HostTensor(c.dtype, c.batch, c.seq_q, c.heads, c.head_dim); }

}  // namespace faprobe
