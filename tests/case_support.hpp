// Shared by the implementation tests: a validated Case from its axes, seeded from its shape so that every
// shape draws different inputs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/case.hpp"

namespace faprobe::test_support {

inline Case make_case(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, std::int64_t seq_q,
                      std::int64_t seq_k, std::int64_t head_dim, DType dtype, Mask mask, Mode mode = Mode::prefill) {
  Case c;
  c.batch = batch;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = head_dim;
  c.dtype = dtype;
  c.mask = mask;
  c.mode = mode;
  c.seed = std::uint64_t(seq_q * 1000003 + seq_k * 101 + head_dim + heads);
  c.validate();
  return c;
}

// A decode case with one key length per batch entry (variable lengths), over a paged KV cache when
// page_size > 0; validated.
inline Case make_decode_case(std::vector<std::int64_t> seqlens, std::int64_t page_size, std::int64_t heads,
                             std::int64_t kv_heads, std::int64_t head_dim, DType dtype = Case().dtype,
                             std::uint64_t seed = Case().seed) {
  Case c;
  c.mode = Mode::decode;
  c.seq_q = 1;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.dtype = dtype;
  c.seed = seed;
  c.batch = std::int64_t(seqlens.size());
  c.seq_k = *std::max_element(seqlens.begin(), seqlens.end());
  c.seqlens = std::move(seqlens);
  c.page_size = page_size;
  c.validate();
  return c;
}

}  // namespace faprobe::test_support
