// The per-head decode walk shared by cpu.decode and cpu.decode-splitk: one query row of one head against
// keys [k_begin, k_end) of batch entry b, kDecodeChunk keys at a time: s = K_chunk·q (a matrix–vector
// product over the head's strided rows), the online softmax on s, acc = alpha·acc + pᵀ·V_chunk. The state
// and the accumulator are the caller's (the output row for cpu.decode, a split's partial for split-K).
// The entry's keys must be consecutive storage rows (contiguous layout, equal or variable lengths).
#pragma once
#include <algorithm>
#include <type_traits>

#include "cpu/common.hpp"
#include "cpu/cpu_implementation.hpp"
#include "cpu/online_softmax.hpp"

namespace faprobe::cpu {

// Keys per step: long enough that the exp and the matrix–vector products vectorise well, short enough that
// the converted fp16/bf16 chunk (2·kDecodeChunk·d floats) stays in L1/L2.
constexpr std::int64_t kDecodeChunk = 64;

// fp32 values one thread needs: q, the scores, and (fp16/bf16) the converted K and V chunks. The accumulator
// is the caller's.
inline std::int64_t head_walk_floats(std::int64_t head_dim, bool convert_kv) {
  return cache_line_floats(head_dim) + cache_line_floats(kDecodeChunk) +
         (convert_kv ? 2 * cache_line_floats(kDecodeChunk * head_dim) : 0);
}

template <class T>
void walk_head_keys(const ForwardArgs& args, std::int64_t b, std::int64_t head, std::int64_t k_begin,
                    std::int64_t k_end, float* buffer, OnlineSoftmax& state, float* acc_data) {
  const Case& c = args.c;
  const std::int64_t head_dim = c.head_dim, kv_head = c.kv_head_of(head);
  const std::int64_t first_row = args.layout.storage_row(b, 0);
  RowVectorMap q(buffer, Eigen::Index(head_dim));
  RowVectorMap acc(acc_data, Eigen::Index(head_dim));
  float* scores_data = buffer + cache_line_floats(head_dim);
  float* k_data = scores_data + cache_line_floats(kDecodeChunk);
  float* v_data = k_data + cache_line_floats(kDecodeChunk * head_dim);

  load_rows<T>(args.q, b, 0, 1, head, q.data());
  q *= float(c.scale());
  acc.setZero();
  state = OnlineSoftmax{};
  for (std::int64_t k0 = k_begin; k0 < k_end; k0 += kDecodeChunk) {
    const std::int64_t count = std::min(kDecodeChunk, k_end - k0);
    Eigen::Map<Eigen::VectorXf> scores(scores_data, Eigen::Index(count));
    // s = K·q (the scale is in q)
    if constexpr (std::is_same_v<T, float>) {
      scores.noalias() = head_rows<float>(args.k, 0, first_row + k0, count, kv_head) * q.transpose();
    } else {
      load_rows<T>(args.k, 0, first_row + k0, count, kv_head, k_data);
      scores.noalias() = matrix_at(k_data, count, head_dim) * q.transpose();
    }
    // online softmax, then acc = alpha·acc + p·V
    const float alpha = state.absorb(scores_data, count);
    if (alpha != 1.0f) acc *= alpha;
    if constexpr (std::is_same_v<T, float>) {
      acc.noalias() += scores.transpose() * head_rows<float>(args.v, 0, first_row + k0, count, kv_head);
    } else {
      load_rows<T>(args.v, 0, first_row + k0, count, kv_head, v_data);
      acc.noalias() += scores.transpose() * matrix_at(v_data, count, head_dim);
    }
  }
}

// The whole row: every visible key of entry b (seq_q = 1: all of them, causal or not), normalised and written
// to O. `buffer` holds head_row_floats() values: the walk's, then the accumulator.
inline std::int64_t head_row_floats(std::int64_t head_dim, bool convert_kv) {
  return head_walk_floats(head_dim, convert_kv) + cache_line_floats(head_dim);
}

template <class T>
void decode_head_row(const ForwardArgs& args, std::int64_t b, std::int64_t head, float* buffer, bool convert_kv) {
  const std::int64_t head_dim = args.c.head_dim;
  float* acc = buffer + head_walk_floats(head_dim, convert_kv);
  OnlineSoftmax state;
  walk_head_keys<T>(args, b, head, 0, args.c.visible_keys(b, 0), buffer, state, acc);
  head_rows<T>(args.o, b, 0, 1, head) = (RowVectorMap(acc, Eigen::Index(head_dim)) * state.inverse_sum()).template cast<T>();
}

}  // namespace faprobe::cpu
