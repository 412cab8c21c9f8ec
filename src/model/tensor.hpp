// A host tensor in (batch, seq, heads, head_dim) layout, stored in the case's dtype, allocated through the
// counting allocator. Q and O have `heads` heads and seq_q rows; K and V have kv_heads heads and seq_k rows.
// An fp8_e4m3 tensor holds one e4m3 code per element (std::uint8_t) of value / fp8_scale, its descale (the
// case's Case::fp8_descale: fp8_input_scale for normal inputs, fp8.hpp); get, set and row convert through it,
// so they see dequantized values.
// The output of a case is in output_dtype(c.dtype): bf16 for an fp8 case.
//
// Beside them, the LSE tensor: the log-sum-exp of every query row, which the flash-style CUDA kernels write
// next to O, and the NaN poison that output buffers are filled with before a checked run (fill_nan).
#pragma once
#include <cstddef>
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
  HostTensor(DType dtype, std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
             float fp8_scale = fp8_input_scale);

  DType dtype() const { return dtype_; }
  float fp8_scale() const { return fp8_scale_; }  // fp8_e4m3: real value = e4m3 value · fp8_scale
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
  float fp8_scale_ = fp8_input_scale;
  std::int64_t batch_ = 0, seq_ = 0, heads_ = 0, head_dim_ = 0;
  HostAllocation storage_;
};

// The flat index of the first element that is NaN or ±Inf, or -1 when every element is finite.
std::int64_t first_non_finite(const HostTensor& tensor);

// The byte that output buffers are filled with before a checked run, on the host, under the emulator and on
// the GPU (cudaMemset): all-ones bytes are a quiet NaN in every dtype faprobe stores, fp32 (0xFFFFFFFF),
// fp16 and bf16 (0xFFFF) and e4m3 (0xFF, its one NaN code), so a kernel that leaves any element unwritten
// fails the check instead of passing on what the buffer held before (a previous run's correct output, or
// zeros that happen to match).
inline constexpr unsigned char kNanPoisonByte = 0xFF;

// The log-sum-exp of each query row, LSE = ln Σ_j exp(scale · q·k_j) over the keys the row sees (natural
// log, scaled scores; fp8: the scores of the dequantized inputs), −inf for a row that sees no key (ln 0:
// causal with seq_q > seq_k), in fp32 and in flash-attention's softmax_lse layout (batch, heads, seq_q).
// Allocated through the counting allocator, uninitialised. flash-attention itself writes +inf for a row
// that sees no key (so that its backward pass gets exp(s − inf) = 0); faprobe's kernels and reference use
// the value the definition gives, which split-K's merge also needs (a split that saw no key has weight
// exp(−inf) = 0).
class LseTensor {
 public:
  LseTensor() = default;
  explicit LseTensor(const Case& c);

  std::int64_t batch() const { return batch_; }
  std::int64_t heads() const { return heads_; }
  std::int64_t seq_q() const { return seq_q_; }
  std::int64_t elements() const { return batch_ * heads_ * seq_q_; }
  std::size_t bytes() const { return std::size_t(elements()) * sizeof(float); }
  std::int64_t offset(std::int64_t b, std::int64_t h, std::int64_t row) const {
    return (b * heads_ + h) * seq_q_ + row;
  }
  float at(std::int64_t b, std::int64_t h, std::int64_t row) const { return data()[offset(b, h, row)]; }

  float* data() { return static_cast<float*>(storage_.data()); }
  const float* data() const { return static_cast<const float*>(storage_.data()); }

 private:
  std::int64_t batch_ = 0, heads_ = 0, seq_q_ = 0;
  HostAllocation storage_;
};

// Bytes of a case's LSE (fp32, batch · heads · seq_q), for the predictions of implementations that write one.
std::uint64_t lse_bytes(const Case& c);
// Bytes of a case's tensors as an implementation holds them: Q, K and V in the dtype, K and V as stored (a
// page pool's padding included) with the layout's int32 offsets and block table where the case is paged or
// of variable lengths, O in output_dtype, and the LSE when `with_lse`. The part of predicted_bytes that
// implementations taking every layout share.
std::uint64_t stored_tensor_bytes(const Case& c, bool with_lse);

// Fills every element with NaN (kNanPoisonByte in every byte): what a tensor is poisoned with before a run
// whose output is checked.
void fill_nan(HostTensor& tensor);
void fill_nan(LseTensor& lse);

// Allocates and fills Q, K, V of a case with the counter-based generator of its input distribution, rounded to
// the dtype. K and V are stored in the case's layout: (batch, seq_k, kv_heads, head_dim) for a contiguous
// equal-length case, else (1, layout.rows, kv_heads, head_dim) rows that layout.storage_row(b, key) finds. With
// QkTransform::incoherent (an fp8_e4m3 case, contiguous, head_dim incoherent_head_dim), Q and K hold the
// rotated codes the device fill writes (model/incoherent.hpp), with Case::fp8_descale as their scales.
struct AttentionInputs {
  HostTensor q, k, v;
  KvLayout layout;
};
AttentionInputs make_inputs(const Case& c, QkTransform transform = QkTransform::none);
HostTensor make_output(const Case& c);  // O, shaped like Q, in output_dtype(c.dtype), uninitialised
// Element i of the tensor = the generator's value i (a contiguous layout, where storage = logical order).
void fill_input(HostTensor& tensor, std::uint64_t seed, TensorId id, InputDistribution distribution);
// K or V in `layout`: each storage row holds its logical row's values, a page's padding rows NaN.
void fill_kv_input(HostTensor& tensor, const KvLayout& layout, std::uint64_t seed, TensorId id,
                   InputDistribution distribution);

}  // namespace faprobe
