// Inputs read from a KV cache (reference/reference.hpp: CacheInputs) give the reference exactly the rows the
// generator gives, through a page pool and its block table or through a padded cache; first_non_finite finds
// the first NaN or Inf the reference would read and never the padding; and check_output fails a check whose
// reference is not finite instead of letting NaN differences pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "case_support.hpp"
#include "cpu/factories.hpp"
#include "model/kv_layout.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Case decode_case(std::vector<std::int64_t> seqlens, std::int64_t page_size) {
  return test_support::make_decode_case(std::move(seqlens), page_size, 6, 2, 16, DType::bf16, 9);
}

// The pool of a paged case as a file holds it: (pages, page_size, kv_heads, head_dim), the same bytes.
HostTensor as_pool(const HostTensor& rows, std::int64_t page_size) {
  HostTensor pool(rows.dtype(), rows.seq() / page_size, page_size, rows.heads(), rows.head_dim());
  std::memcpy(pool.data<char>(), rows.data<char>(), std::size_t(rows.elements()) * dtype_bytes(rows.dtype()));
  return pool;
}

// A padded cache (batch, seq_k, kv_heads, head_dim) from packed rows, NaN past each length.
HostTensor as_padded(const Case& c, const HostTensor& rows, const KvLayout& layout) {
  HostTensor cache(rows.dtype(), c.batch, c.seq_k, c.kv_heads, c.head_dim);
  for (std::int64_t i = 0; i < cache.elements(); ++i) cache.set(i, kNaN);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t key = 0; key < c.seq_k_of(b); ++key) {
      for (std::int64_t e = 0; e < cache.row_stride(); ++e) {
        cache.set(cache.offset(b, key, 0) + e, rows.get(rows.offset(0, layout.storage_row(b, key), 0) + e));
      }
    }
  }
  return cache;
}

void expect_same_rows(const Case& c, const InputSource& cache, const InputSource& generated) {
  std::vector<double> got(std::size_t(c.head_dim)), want(std::size_t(c.head_dim));
  for (const TensorId id : {TensorId::q, TensorId::k, TensorId::v}) {
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const std::int64_t rows = id == TensorId::q ? c.seq_q : c.seq_k_of(b);
      for (std::int64_t s = 0; s < rows; ++s) {
        for (std::int64_t h = 0; h < (id == TensorId::q ? c.heads : c.kv_heads); ++h) {
          cache.row(id, b, s, h, got.data());
          generated.row(id, b, s, h, want.data());
          ASSERT_EQ(got, want) << int(id) << " " << b << " " << s << " " << h;
        }
      }
    }
  }
}

TEST(CacheInputs, APoolThroughItsBlockTableGivesTheGeneratedRows) {
  const Case c = decode_case({40, 17, 33, 1}, 16);
  const AttentionInputs inputs = make_inputs(c);
  const HostTensor k_pool = as_pool(inputs.k, 16), v_pool = as_pool(inputs.v, 16);
  const CacheInputs cache(inputs.q, k_pool, v_pool, inputs.layout.block_table, inputs.layout.pages_per_seq);
  EXPECT_TRUE(cache.paged());
  expect_same_rows(c, cache, GeneratedInputs(c));
  EXPECT_EQ(cache.cache_row(0, 19), (std::pair<std::int64_t, std::int64_t>{inputs.layout.block_table[1], 3}));
  EXPECT_FALSE(first_non_finite(c, cache)) << "the pool's NaN padding is never read";

  // A kernel's output checks against these inputs as against the generated ones.
  const auto impl = cpu::make_decode_splitk();
  auto prepared = impl->prepare(c);
  prepared->timed_run();
  const VerifyResult result = check_output(c, cache, prepared->output());
  EXPECT_TRUE(result.passed) << result.note;
}

TEST(CacheInputs, APaddedCacheGivesTheGeneratedRows) {
  const Case c = decode_case({5, 300, 64}, 0);
  const AttentionInputs inputs = make_inputs(c);
  const HostTensor k_cache = as_padded(c, inputs.k, inputs.layout), v_cache = as_padded(c, inputs.v, inputs.layout);
  const CacheInputs cache(inputs.q, k_cache, v_cache);
  EXPECT_FALSE(cache.paged());
  expect_same_rows(c, cache, GeneratedInputs(c));
  EXPECT_EQ(cache.cache_row(2, 63), (std::pair<std::int64_t, std::int64_t>{2, 63}));
  EXPECT_FALSE(first_non_finite(c, cache));
}

TEST(CacheInputs, FirstNonFiniteFindsTheFirstBadInputTheReferenceReads) {
  const Case c = decode_case({40, 17, 33}, 16);
  AttentionInputs inputs = make_inputs(c);
  HostTensor k_pool = as_pool(inputs.k, 16), v_pool = as_pool(inputs.v, 16);
  const std::vector<std::int32_t>& table = inputs.layout.block_table;
  const CacheInputs cache(inputs.q, k_pool, v_pool, table, inputs.layout.pages_per_seq);
  // Entry 1's key 16 is row 0 of its second page; V's Inf comes after K's NaN in the scan's order.
  v_pool.set(v_pool.offset(table[0], 2, 0), std::numeric_limits<float>::infinity());
  k_pool.set(k_pool.offset(table[1 * 3 + 1], 0, 1) + 9, kNaN);
  auto bad = first_non_finite(c, cache);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->tensor, TensorId::k);
  EXPECT_EQ((std::vector<std::int64_t>{bad->b, bad->s, bad->h, bad->d}), (std::vector<std::int64_t>{1, 16, 1, 9}));
  k_pool.set(k_pool.offset(table[1 * 3 + 1], 0, 1) + 9, 0.5f);
  bad = first_non_finite(c, cache);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->tensor, TensorId::v);
  EXPECT_EQ((std::vector<std::int64_t>{bad->b, bad->s, bad->h, bad->d}), (std::vector<std::int64_t>{0, 2, 0, 0}));
  EXPECT_TRUE(std::isinf(bad->value));
  inputs.q.set(inputs.q.offset(2, 0, 5) + 15, kNaN);
  bad = first_non_finite(c, cache);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->tensor, TensorId::q);
  EXPECT_EQ((std::vector<std::int64_t>{bad->b, bad->s, bad->h, bad->d}), (std::vector<std::int64_t>{2, 0, 5, 15}));
}

TEST(CacheInputs, ACheckWhoseReferenceIsNotFiniteFails) {
  // A correct output of clean inputs, checked against inputs with one NaN key: the reference rows that read
  // it are NaN, and a NaN difference is no pass.
  Case c;
  c.batch = 1;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 3;
  c.seq_k = 5;
  c.head_dim = 8;
  AttentionInputs inputs = make_inputs(c);
  const auto impl = cpu::make_naive();
  auto prepared = impl->prepare(c);
  prepared->timed_run();
  const HostTensor& output = prepared->output();
  EXPECT_TRUE(check_output(c, TensorInputs(inputs.q, inputs.k, inputs.v), output).passed);
  inputs.k.set(inputs.k.offset(0, 4, 1) + 2, kNaN);
  const VerifyResult result = check_output(c, TensorInputs(inputs.q, inputs.k, inputs.v), output);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.note.find("non-finite reference at batch 0 head 1 row 0"), std::string::npos) << result.note;
}

}  // namespace
}  // namespace faprobe
