#include "model/kv_layout.hpp"

#include <algorithm>
#include <utility>

#include "model/inputs.hpp"

namespace faprobe {

KvLayout make_kv_layout(const Case& c) {
  KvLayout layout;
  layout.page_size = c.page_size;
  layout.seq_starts.assign(std::size_t(c.batch) + 1, 0);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    layout.seq_starts[std::size_t(b) + 1] = std::int32_t(layout.seq_starts[std::size_t(b)] + c.seq_k_of(b));
  }
  if (!c.paged()) {
    layout.rows = c.total_keys();
    return layout;
  }
  layout.pages_per_seq = (c.seq_k + c.page_size - 1) / c.page_size;
  std::int64_t pages = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) pages += (c.seq_k_of(b) + c.page_size - 1) / c.page_size;
  layout.rows = pages * c.page_size;

  // Pool pages in a random order: a Fisher–Yates shuffle driven by the input generator's mixer.
  std::vector<std::int32_t> placement(std::size_t(pages), 0);
  for (std::int64_t i = 0; i < pages; ++i) placement[std::size_t(i)] = std::int32_t(i);
  const std::uint64_t key = mix64(c.seed ^ 0x7061676564ULL);  // "paged"
  for (std::int64_t i = pages - 1; i > 0; --i) {
    const std::int64_t j = std::int64_t(mix64(key + std::uint64_t(i)) % std::uint64_t(i + 1));
    std::swap(placement[std::size_t(i)], placement[std::size_t(j)]);
  }
  layout.block_table.assign(std::size_t(c.batch * layout.pages_per_seq), -1);
  std::int64_t next = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t entry_pages = (c.seq_k_of(b) + c.page_size - 1) / c.page_size;
    for (std::int64_t page = 0; page < entry_pages; ++page) {
      layout.block_table[std::size_t(b * layout.pages_per_seq + page)] = placement[std::size_t(next++)];
    }
  }
  return layout;
}

KvLayout::PageContents KvLayout::page_contents() const {
  const std::size_t pages = page_size > 0 ? std::size_t(rows / page_size) : 0;
  PageContents contents{std::vector<std::int32_t>(pages, 0), std::vector<std::int32_t>(pages, 0)};
  const std::int64_t batch = std::int64_t(seq_starts.size()) - 1;
  for (std::int64_t b = 0; b < batch && page_size > 0; ++b) {
    const std::int64_t keys = seq_starts[std::size_t(b) + 1] - seq_starts[std::size_t(b)];
    for (std::int64_t page = 0; page * page_size < keys; ++page) {
      const std::size_t pool_page = std::size_t(block_table[std::size_t(b * pages_per_seq + page)]);
      contents.first_row[pool_page] = std::int32_t(seq_starts[std::size_t(b)] + page * page_size);
      contents.valid_rows[pool_page] = std::int32_t(std::min(page_size, keys - page * page_size));
    }
  }
  return contents;
}

}  // namespace faprobe
