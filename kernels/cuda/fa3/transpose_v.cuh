// cuda.fa3's e4m3 prologue: V (batch, seq_k, kv_heads, d) of e4m3 codes rewritten as V^T (batch, kv_heads, d,
// seq_k padded to 32), because e4m3 wgmma takes K-major operands only: in P·V the keys are K, so V must have
// them contiguous. Within each 32-key group the columns are in fp8_key_of_column's order (fa3.cuh), which
// lets P's A fragments come from the thread's own accumulators; keys past seq_k are zero.
//
// Grid (seq_k_padded / 32, kv_heads, batch), 256 threads: a CTA writes the 32 columns of one group for every
// d row of one head. Costs: V read once and written once (2·batch·seq_k·kv_heads·d bytes), no FLOPs: small next
// to the attention it feeds (4·seq_q·seq_k·d FLOPs per head).
#pragma once

#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/fa3/fa3.cuh"

namespace faprobe::cuda::fa3 {

struct TransposeParams {
  GlobalSpan<const std::uint8_t> v;  // (batch, seq_k, kv_heads, d)
  GlobalSpan<std::uint8_t> v_t;      // (batch, kv_heads, d, seq_k_padded)
  int batch = 1, kv_heads = 1, seq_k = 1, seq_k_padded = 32, head_dim = 64;
};

inline constexpr int kTransposeThreads = 256;

// Keys of V^T's rows: seq_k rounded up to the 32-key groups of the column order.
inline constexpr int transposed_keys(int seq_k) { return (seq_k + 31) / 32 * 32; }

FAPROBE_DEVICE void transpose_v_body(const TransposeParams& p) {
  const int column0 = static_cast<int>(isa::block_idx_x()) * 32;
  const auto head = static_cast<std::size_t>(isa::block_idx_y());
  const auto batch = static_cast<std::size_t>(isa::block_idx_z());
  const auto d = static_cast<std::size_t>(p.head_dim);
  for (int element = static_cast<int>(isa::thread_linear_idx()); element < 32 * p.head_dim; element += kTransposeThreads) {
    const auto row = static_cast<std::size_t>(element / 32);
    const int column = column0 + element % 32;
    const int key = fp8_key_of_column(column);
    const std::uint8_t value =
        key < p.seq_k ? p.v[((batch * static_cast<unsigned>(p.seq_k) + static_cast<unsigned>(key)) * static_cast<unsigned>(p.kv_heads) + head) * d + row]
                      : std::uint8_t{0};
    p.v_t[((batch * static_cast<unsigned>(p.kv_heads) + head) * d + row) * static_cast<unsigned>(p.seq_k_padded) +
          static_cast<unsigned>(column)] = value;
  }
}

}  // namespace faprobe::cuda::fa3
