#include "harness/io/kv_cache_files.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/errors.hpp"
#include "model/kv_layout.hpp"

namespace faprobe {
namespace {

// A variable-length contiguous case's packed K or V rows (1, total_keys, kv_heads, head_dim) as a padded
// cache (batch, seq_k, kv_heads, head_dim): entry b's keys first, NaN after them.
HostTensor padded_cache(const Case& c, const HostTensor& packed, const KvLayout& layout) {
  HostTensor cache(packed.dtype(), c.batch, c.seq_k, c.kv_heads, c.head_dim);
  const std::int64_t width = cache.row_stride();
  const std::size_t row_bytes = std::size_t(width) * dtype_bytes(packed.dtype());
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t key = 0; key < c.seq_k; ++key) {
      const std::int64_t to = cache.offset(b, key, 0);
      if (key < c.seq_k_of(b)) {  // the stored bytes as they are: no conversion, so fp8 codes stay exact
        const std::int64_t from = packed.offset(0, layout.storage_row(b, key), 0);
        std::memcpy(cache.data<char>() + std::size_t(to) * dtype_bytes(packed.dtype()),
                    packed.data<char>() + std::size_t(from) * dtype_bytes(packed.dtype()), row_bytes);
      } else {
        for (std::int64_t e = 0; e < width; ++e) cache.set(to + e, std::numeric_limits<float>::quiet_NaN());
      }
    }
  }
  return cache;
}

}  // namespace

std::vector<std::string> save_kv_cache(const std::string& directory, const Case& c, const AttentionInputs& inputs) {
  const KvLayout& layout = inputs.layout;
  if (layout.paged()) {
    // The pool is stored as (1, pages · page_size, ...) rows; the same bytes are (pages, page_size, ...).
    const std::vector<std::int64_t> pool{layout.rows / layout.page_size, layout.page_size, c.kv_heads, c.head_dim};
    write_npy(directory + "/k_cache.npy", inputs.k, pool);
    write_npy(directory + "/v_cache.npy", inputs.v, pool);
    write_npy_int32(directory + "/block_table.npy", Int32Array{{c.batch, layout.pages_per_seq}, layout.block_table});
  } else {
    write_npy(directory + "/k_cache.npy", padded_cache(c, inputs.k, layout));
    write_npy(directory + "/v_cache.npy", padded_cache(c, inputs.v, layout));
  }
  Int32Array lengths{{c.batch}, {}};
  for (std::int64_t b = 0; b < c.batch; ++b) lengths.values.push_back(std::int32_t(c.seq_k_of(b)));
  write_npy_int32(directory + "/cache_seqlens.npy", lengths);
  std::vector<std::string> names{"k_cache.npy", "v_cache.npy"};
  if (layout.paged()) names.push_back("block_table.npy");
  names.push_back("cache_seqlens.npy");
  return names;
}

void check_kv_cache(const KvCacheArrays& arrays) {
  const HostTensor &q = arrays.q, &k = arrays.k_cache, &v = arrays.v_cache, &o = arrays.o;
  const std::string qs = shape_text(q), ks = shape_text(k), vs = shape_text(v), os = shape_text(o);
  if (ks != vs) {
    throw UsageError(fmt::format("--k-cache {} and --v-cache {} must have the same shape", ks, vs));
  }
  if (os != qs) {
    throw UsageError(fmt::format("--o {} must have the shape of --q {} (batch, seq_q, heads, head_dim)", os, qs));
  }
  if (q.head_dim() != k.head_dim()) {
    throw UsageError(fmt::format("--q {} and --k-cache/--v-cache {} disagree in head_dim ({} vs {})", qs, ks,
                                 q.head_dim(), k.head_dim()));
  }
  if (q.heads() % k.heads() != 0) {
    throw UsageError(fmt::format("--q {} has {} heads, not a multiple of the {} kv heads of --k-cache/--v-cache {}",
                                 qs, q.heads(), k.heads(), ks));
  }
  const std::int64_t batch = q.batch();
  if (arrays.paged()) {
    const Int32Array& table = *arrays.block_table;
    const std::int64_t page_size = k.seq();
    if (page_size < Case::kMinPageSize || page_size > Case::kMaxPageSize || (page_size & (page_size - 1)) != 0) {
      throw UsageError(fmt::format("--k-cache {} with --block-table is a pool (num_blocks, page_size, kv_heads, "
                                   "head_dim), but page_size {} is not a power of two from {} to {} (a padded "
                                   "cache takes no --block-table)",
                                   ks, page_size, Case::kMinPageSize, Case::kMaxPageSize));
    }
    if (table.shape[0] != batch) {
      throw UsageError(fmt::format("--block-table {} has {} rows, --q {} has batch {} (one row per entry)",
                                   shape_text(table.shape), table.shape[0], qs, batch));
    }
  } else if (k.batch() != batch) {
    throw UsageError(fmt::format("--k-cache {} holds {} entries, --q {} has batch {} (a padded cache is (batch, "
                                 "max_seq_k, kv_heads, head_dim); a paged pool needs --block-table)",
                                 ks, k.batch(), qs, batch));
  }
  const Int32Array& lengths = arrays.cache_seqlens;
  if (lengths.shape[0] != batch) {
    throw UsageError(fmt::format("--cache-seqlens {} has {} lengths, --q {} has batch {}", shape_text(lengths.shape),
                                 lengths.shape[0], qs, batch));
  }
  const std::int64_t capacity = arrays.capacity();
  const std::string capacity_text =
      arrays.paged() ? fmt::format("{} blocks of {} keys per entry (--block-table {})", arrays.blocks_per_seq(),
                                   arrays.page_size(), shape_text(arrays.block_table->shape))
                     : fmt::format("max_seq_k {} (--k-cache {})", k.seq(), ks);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t length = lengths.values[std::size_t(b)];
    if (length < 1) {
      throw UsageError(fmt::format("--cache-seqlens: entry {} has length {}; every length must be at least 1", b,
                                   length));
    }
    if (length > capacity) {
      throw UsageError(fmt::format("--cache-seqlens: entry {} has length {}, more than the cache holds: {}", b,
                                   length, capacity_text));
    }
  }
  if (!arrays.paged()) return;
  const Int32Array& table = *arrays.block_table;
  const std::int64_t blocks = k.batch(), page_size = k.seq();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t used = (lengths.values[std::size_t(b)] + page_size - 1) / page_size;
    for (std::int64_t j = 0; j < used; ++j) {
      const std::int32_t block = table.values[std::size_t(b * arrays.blocks_per_seq() + j)];
      if (block < 0 || block >= blocks) {
        throw UsageError(fmt::format("--block-table: entry [{}, {}] is {}, outside the pool's {} blocks (--k-cache "
                                     "{}); entry {}'s {} keys read the first {} of its row",
                                     b, j, block, blocks, ks, b, lengths.values[std::size_t(b)], used));
      }
    }
  }
}

Case kv_cache_case(const KvCacheArrays& arrays) {
  Case c;
  c.batch = arrays.q.batch();
  c.seq_q = arrays.q.seq();
  c.heads = arrays.q.heads();
  c.head_dim = arrays.q.head_dim();
  c.kv_heads = arrays.k_cache.heads();
  c.page_size = arrays.page_size();
  const std::vector<std::int32_t>& lengths = arrays.cache_seqlens.values;
  c.seq_k = *std::max_element(lengths.begin(), lengths.end());
  if (std::any_of(lengths.begin(), lengths.end(), [&](std::int32_t length) { return length != c.seq_k; })) {
    c.seqlens.assign(lengths.begin(), lengths.end());
  }
  return c;
}

}  // namespace faprobe
