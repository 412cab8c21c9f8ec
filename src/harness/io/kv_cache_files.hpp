// The KV cache as files: what `faprobe run --save` writes for a paged or variable-length case, and what
// `faprobe verify --k-cache ...` reads. The layouts are those flash-attention's flash_attn_with_kvcache takes
// (flash_attn/flash_attn_interface.py; its docstring gives each shape and dtype below), so the files can be
// handed to it as they are:
//   k_cache.npy, v_cache.npy  paged: the page pool (num_blocks, page_size, kv_heads, head_dim); variable
//                             lengths, contiguous: a padded cache (batch, max_seq_k, kv_heads, head_dim)
//   block_table.npy           paged only: int32 (batch, max_blocks_per_seq), the pool block holding each
//                             page of each entry. Only the first ceil(length / page_size) entries of a row
//                             are read; faprobe writes -1 in the others (its layout's mark for "no page"),
//                             which a reader must not follow
//   cache_seqlens.npy         int32 (batch,): the key length of each entry
// Every row past an entry's length (its last page's padding, a padded cache's tail) is NaN, so a consumer
// that reads past cache_seqlens lets NaN into its output and fails the check. The docstring also says that
// FA-2's kernel takes page_block_size only in multiples of 256: of faprobe's page sizes (16..256) only 256
// runs there unchanged. faprobe's cache batch is the batch itself (no cache_batch_idx).
//
// A pool and a padded cache are both 4-D. Which one a cache is, is said by --block-table: given, the cache
// is a pool whose second axis is the page size; absent, a padded cache with one entry per batch entry. A
// case.json beside --o, when there is one, must agree (verify checks its page_size).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "harness/io/npy.hpp"
#include "model/case.hpp"
#include "model/tensor.hpp"

namespace faprobe {

// Writes k_cache.npy, v_cache.npy, block_table.npy (paged only) and cache_seqlens.npy of a paged or
// variable-length case into `directory`; returns the names written. `inputs` is the case's (make_inputs).
std::vector<std::string> save_kv_cache(const std::string& directory, const Case& c, const AttentionInputs& inputs);

// The arrays of `faprobe verify --q --k-cache --v-cache [--block-table] --cache-seqlens --o`.
struct KvCacheArrays {
  HostTensor q, k_cache, v_cache, o;
  std::optional<Int32Array> block_table;  // given: the caches are pools
  Int32Array cache_seqlens;
  bool paged() const { return block_table.has_value(); }
  std::int64_t page_size() const { return paged() ? k_cache.seq() : 0; }
  std::int64_t blocks_per_seq() const { return paged() ? block_table->shape[1] : 0; }
  std::int64_t capacity() const { return paged() ? blocks_per_seq() * page_size() : k_cache.seq(); }
};

// Checks that the arrays describe one attention problem whose every read stays inside the cache; each
// failure is one UsageError naming the flag and the shapes. q (B, Sq, H, D), o alike; k_cache and v_cache
// alike, with D and H % Hkv == 0; cache_seqlens (B,), every length at least 1 and at most the capacity (a
// padded cache's max_seq_k, a pool's max_blocks_per_seq · page_size). With a block table: (B,
// max_blocks_per_seq), the page size a power of two from 16 to 256 (faprobe's), and every entry a length
// reaches a block of the pool. Without: the cache's first axis is B.
void check_kv_cache(const KvCacheArrays& arrays);

// The case the arrays hold (shapes, page_size, lengths: seqlens when they differ, else seq_k); dtype, mask
// and mode are left for the caller. Call check_kv_cache first.
Case kv_cache_case(const KvCacheArrays& arrays);

}  // namespace faprobe
