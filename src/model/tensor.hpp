// A host tensor in (batch, seq, heads, head_dim) layout, stored in the case's dtype, allocated through the
// counting allocator. Q and O have `heads` heads and seq_q rows; K and V have kv_heads heads and seq_k rows.
// An fp8_e4m3 tensor holds one e4m3 code per element (std::uint8_t) of value / fp8_input_scale, the scale
// every fp8 input shares (fp8.hpp); get, set and row convert through it, so they see dequantized values.
// The output of a case is in output_dtype(c.dtype): bf16 for an fp8 case.
#pragma once
#include <cstdint>
#include <vector>

#include "model/case.hpp"
#include "model/dtype.hpp"
#include "model/inputs.hpp"
#include "model/kv_layout.hpp"
#include "model/memory.hpp"

namespace faprobe {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim);

  DType dtype() const { return dtype_; }
  std::int64_t batch() const { return batch_; }
  std::int64_t seq() const { return seq_; }
  std::int64_t heads() const { return heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  std::int64_t elements() const { return batch_ * seq_ * heads_ * head_dim_; }
  std::int64_t row_stride() const { return heads_ * head_dim_; }  // elements between consecutive seq rows
  std::int64_t offset(std::int64_t b, std::int64_t s, std::int64_t h) const {
    return ((b * seq_ + s) * heads_ + h) * head_dim_;
  }

  template <class T> T* data() { return static_cast<T*>(storage_.data()); }
  template <class T> const T* data() const { return static_cast<const T*>(storage_.data()); }

  float get(std::int64_t index) const;  // element as fp32, whatever the dtype
  void set(std::int64_t index, float value);
  // One head row (head_dim values) as float64.
  std::vector<double> row(std::int64_t b, std::int64_t s, std::int64_t h) const;

 private:
  DType dtype_ = DType::fp32;
  std::int64_t batch_ = 0, seq_ = 0, heads_ = 0, head_dim_ = 0;
  HostAllocation storage_;
};

// The flat index of the first element that is NaN or ±Inf, or -1 when every element is finite.
std::int64_t first_non_finite(const HostTensor& tensor);

// Allocates and fills Q, K, V of a case with the counter-based generator, rounded to the dtype. K and V are
// stored in the case's layout: (batch, seq_k, kv_heads, head_dim) for a contiguous equal-length case, else
// (1, layout.rows, kv_heads, head_dim) rows that layout.storage_row(b, key) finds.
struct AttentionInputs {
  HostTensor q, k, v;
  KvLayout layout;
};
AttentionInputs make_inputs(const Case& c);
HostTensor make_output(const Case& c);  // O, shaped like Q, in output_dtype(c.dtype), uninitialised
// Element i of the tensor = the generator's value i (a contiguous layout, where storage = logical order).
void fill_input(HostTensor& tensor, std::uint64_t seed, TensorId id);
// K or V in `layout`: each storage row holds its logical row's values, a page's padding rows NaN.
void fill_kv_input(HostTensor& tensor, const KvLayout& layout, std::uint64_t seed, TensorId id);

}  // namespace faprobe
