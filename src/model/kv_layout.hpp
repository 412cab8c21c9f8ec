// Where the rows of K and V live: contiguous (equal lengths: (batch, seq_k, kv_heads, head_dim); variable
// lengths: the entries' rows packed one after the other, flash-attention's varlen layout with cu_seqlens),
// or a paged cache: a pool of pages of page_size rows, each batch entry's keys in pages placed at random in
// the pool and found through its row of a block table (vLLM's PagedAttention layout).
//
// A key's values come from its logical (packed) row, seq_starts[b] + key, whatever the layout, so every
// layout of a case holds the same K and V. The rows of a page past the end of its entry's keys are filled
// with NaN: a kernel that reads them and lets them reach its output fails the check.
#pragma once
#include <cstdint>
#include <vector>

#include "model/case.hpp"

namespace faprobe {

struct KvLayout {
  std::int64_t page_size = 0;             // 0: contiguous
  std::int64_t rows = 0;                  // rows of the K and V storage: total keys, or pages · page_size
  std::vector<std::int32_t> seq_starts;   // batch + 1 logical (packed) row offsets: entry b is rows
                                          // [seq_starts[b], seq_starts[b + 1]) (cu_seqlens)
  std::int64_t pages_per_seq = 0;         // paged: block-table columns, the pages of the longest entry
  std::vector<std::int32_t> block_table;  // paged: batch × pages_per_seq pool pages; -1 past an entry's last

  bool paged() const { return page_size > 0; }
  // The storage row of key `key` of batch entry b.
  std::int64_t storage_row(std::int64_t b, std::int64_t key) const {
    if (page_size == 0) return seq_starts[std::size_t(b)] + key;
    return std::int64_t(block_table[std::size_t(b * pages_per_seq + key / page_size)]) * page_size + key % page_size;
  }
  // Paged: what each pool page holds, the inverse of the block table: page p's row r is logical row
  // first_row[p] + r when r < valid_rows[p], else padding.
  struct PageContents {
    std::vector<std::int32_t> first_row, valid_rows;
  };
  PageContents page_contents() const;
};

// The layout of a case: contiguous unless c.page_size > 0. The page placement is a permutation drawn from
// the case's seed (deterministic, the same on every machine).
KvLayout make_kv_layout(const Case& c);

}  // namespace faprobe
