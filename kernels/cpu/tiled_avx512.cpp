// cpu.tiled's inner loop on AVX-512: one panel of 32 query rows against one block of keys. Lanes are query
// rows (two 16-lane vectors per panel), so S = Q·Kᵀ is computed transposed, Sᵀ[j][r], as a sum of outer
// products of a Qᵀ column (16 rows) with a broadcast key element; the online softmax is then vertical
// arithmetic (row max = max over the key registers, no horizontal reduction), and O += P·V is again outer
// products, of a Pᵀ column with a broadcast value element, into Oᵀ[d][r].
//
// Register tiles (32 zmm registers): S·Kᵀ takes 12 keys × 2 row vectors = 24 accumulators, fed per head_dim
// step by 2 loads of Qᵀ and 12 broadcasts of key elements (14 loads for 24 FMAs; Zen 4 and Intel cores load
// two vectors per cycle and issue one or two FMAs). O += P·V takes 12 head_dim columns × 2 row vectors,
// fed per key by 2 loads of Pᵀ and 12 broadcasts of value elements. K and V rows are what the broadcasts
// need, read in place or from the dense copy tiled.cpp makes (key_stride, value_stride), except that bf16
// V is interleaved by key pairs first (pack_value_pairs), because vdpbf16ps sums adjacent pairs:
// acc[r] += a[2r]·b[2r] + a[2r+1]·b[2r+1].
//
// bf16: S = Q·Kᵀ with vdpbf16ps over pairs of head_dim (Qᵀ packed as pairs of one row, a key's two
// elements broadcast as one 32-bit word), exact products summed in fp32; P rounded to bf16 for P·V as
// FlashAttention-2 does on tensor cores (and as the checker's "plain" computation does), row sums from the
// fp32 P; vdpbf16ps does twice the multiply-adds of an fp32 FMA per instruction.
//
// Napkin math (batch 1, heads 8, head_dim 64, seq 4096, causal: 17.2 GFLOP): per 16 scores the two products
// are 128 FMAs in fp32 (64 vdpbf16ps in bf16) against ~12 instructions of softmax (the exp2 polynomial
// is 6 of them), so the softmax costs ~9 % of the fp32 product time and ~19 % of bf16's. On the 2-core
// Zen 4 development machine (2 × 16 fp32 FMA lanes × 2.6 GHz = 166 GFLOP/s peak; calibrate's Eigen GEMM
// measures 164–175) the bound is ~150 GFLOP/s in fp32 and ~280 in bf16, before the causal diagonal's waste.
// Measured: 164–181 in fp32 and 287–322 in bf16 over several runs, above that bound: the cores clock above
// 2.6 GHz under this load, and the softmax's instructions share the cycles with the FMAs.
//
// The head_dim sum of each score is taken in pieces of 64 that are added afterwards (kDotPiece in
// common.hpp: a serial sum over 256 sat at the fp32 tolerance). exp2 is a degree-5 polynomial on
// [−0.5, 0.5] after rounding to the nearest integer (relative error ≤ 3.1e-7, ~3 ulp), scaled by vscalefps;
// arguments below −126 (weights under FLT_MIN, masked keys at −inf, NaN from −inf − −inf) give exactly 0.
#include "cpu/tiled_avx512.hpp"

#include <algorithm>
#include <stdexcept>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FAPROBE_HAVE_AVX512_PATHS 1
#include "model/intrinsics_warnings.hpp"
FAPROBE_INTRINSICS_WARNINGS_OFF  // GCC 12's false -W(maybe-)uninitialized inside the intrinsics (bug 105593)
#include <immintrin.h>
FAPROBE_INTRINSICS_WARNINGS_ON
#endif

namespace faprobe::cpu::avx512 {

#if FAPROBE_HAVE_AVX512_PATHS

// Every function below is compiled for AVX-512 whatever -march says; tiled.cpp calls them only on CPUs that
// have it. (A function attribute, not a -m flag on the file: templates and inline functions of the standard
// library instantiated here must not be compiled for AVX-512 and then picked by the linker for other files.)
#define FAPROBE_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define FAPROBE_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))
#define FAPROBE_INLINE inline __attribute__((always_inline))

namespace {

constexpr std::int64_t kRows = kPanelRows;
constexpr int kKeyTile = 12;     // keys per S·Kᵀ register tile
constexpr int kColumnTile = 12;  // head_dim columns per P·V register tile
constexpr std::int64_t kPiece = 64;  // head_dim elements summed before they are added to a score

// Degree 5 by default; degree 4 (5.3e-6 at most, one FMA less) where the result is rounded to bf16 next
// (P for the bf16 and AMX products: bf16 keeps 2^-9, and the row sums taken from it err by 5.3e-6 at most).
template <int Degree = 5> FAPROBE_AVX512 FAPROBE_INLINE __m512 exp2_flushed(__m512 x) {
  static_assert(Degree == 4 || Degree == 5);
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);  // false for NaN
  const __m512 whole = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, whole);  // in [-0.5, 0.5]
  __m512 p;
  if constexpr (Degree == 5) {
    // 2^f to degree 5: a least-squares fit of the relative error on [-0.5, 0.5] (Chebyshev weights), 1.7e-7
    // at most in exact arithmetic and 3.1e-7 evaluated in fp32 (Taylor to degree 6 gave 2.4e-7 with one FMA
    // more).
    p = _mm512_set1_ps(1.3260921696200967e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.670175611972809e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5507123470306396e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402222454547882e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931470036506653e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  } else {  // the same fit to degree 4
    p = _mm512_set1_ps(9.554110904776023e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.587037592410502e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402469623516013e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.93128031557978e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999994399428239e-1f));
  }
  return _mm512_maskz_scalef_ps(live, p, whole);
}

// Sᵀ[j][·] = Σ_d Qᵀ[d][·] · K[j][d] for Keys keys (fp32).
template <int Keys>
FAPROBE_AVX512 void scores_fp32(const float* query_panel, const float* keys, std::int64_t key_stride,
                                std::int64_t head_dim, float* scores) {
  const float* key[Keys];
#pragma GCC unroll 16
  for (int j = 0; j < Keys; ++j) key[j] = keys + j * key_stride;
  for (std::int64_t d0 = 0; d0 < head_dim; d0 += kPiece) {
    const std::int64_t d1 = std::min(head_dim, d0 + kPiece);
    __m512 acc[Keys][2];
#pragma GCC unroll 16
    for (int j = 0; j < Keys; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    for (std::int64_t d = d0; d < d1; ++d) {
      const __m512 q0 = _mm512_load_ps(query_panel + d * kRows), q1 = _mm512_load_ps(query_panel + d * kRows + 16);
#pragma GCC unroll 16
      for (int j = 0; j < Keys; ++j) {
        const __m512 k = _mm512_set1_ps(key[j][d]);
        acc[j][0] = _mm512_fmadd_ps(q0, k, acc[j][0]);
        acc[j][1] = _mm512_fmadd_ps(q1, k, acc[j][1]);
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < Keys; ++j) {
      float* row = scores + j * kRows;
      if (d0 > 0) {  // a later piece of head_dim: added to the earlier ones
        acc[j][0] = _mm512_add_ps(acc[j][0], _mm512_load_ps(row));
        acc[j][1] = _mm512_add_ps(acc[j][1], _mm512_load_ps(row + 16));
      }
      _mm512_store_ps(row, acc[j][0]);
      _mm512_store_ps(row + 16, acc[j][1]);
    }
  }
}

// The same with bf16 Q and K: vdpbf16ps over pairs of head_dim (head_dim even).
template <int Keys>
FAPROBE_AVX512_BF16 void scores_bf16(const std::uint32_t* query_pairs, const std::uint16_t* keys,
                                     std::int64_t key_stride, std::int64_t head_dim, float* scores) {
  const std::uint16_t* key[Keys];
#pragma GCC unroll 16
  for (int j = 0; j < Keys; ++j) key[j] = keys + j * key_stride;
  const std::int64_t pairs = head_dim / 2;
  for (std::int64_t p0 = 0; p0 < pairs; p0 += kPiece / 2) {
    const std::int64_t p1 = std::min(pairs, p0 + kPiece / 2);
    __m512 acc[Keys][2];
#pragma GCC unroll 16
    for (int j = 0; j < Keys; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    for (std::int64_t p = p0; p < p1; ++p) {
      const __m512bh q0 = (__m512bh)_mm512_load_si512(query_pairs + p * kRows);
      const __m512bh q1 = (__m512bh)_mm512_load_si512(query_pairs + p * kRows + 16);
#pragma GCC unroll 16
      for (int j = 0; j < Keys; ++j) {
        std::uint32_t word;
        __builtin_memcpy(&word, key[j] + 2 * p, sizeof word);  // elements 2p and 2p + 1 of key j
        const __m512bh k = (__m512bh)_mm512_set1_epi32(int(word));
        acc[j][0] = _mm512_dpbf16_ps(acc[j][0], q0, k);
        acc[j][1] = _mm512_dpbf16_ps(acc[j][1], q1, k);
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < Keys; ++j) {
      float* row = scores + j * kRows;
      if (p0 > 0) {
        acc[j][0] = _mm512_add_ps(acc[j][0], _mm512_load_ps(row));
        acc[j][1] = _mm512_add_ps(acc[j][1], _mm512_load_ps(row + 16));
      }
      _mm512_store_ps(row, acc[j][0]);
      _mm512_store_ps(row + 16, acc[j][1]);
    }
  }
}

// Columns columns of Oᵀ (32 rows each, two vectors) into registers and back.
template <int Columns> FAPROBE_AVX512 FAPROBE_INLINE void load_columns(const float* acc, __m512 (&sum)[Columns][2]) {
#pragma GCC unroll 16
  for (int i = 0; i < Columns; ++i) {
    sum[i][0] = _mm512_load_ps(acc + i * kRows);
    sum[i][1] = _mm512_load_ps(acc + i * kRows + 16);
  }
}
template <int Columns> FAPROBE_AVX512 FAPROBE_INLINE void store_columns(const __m512 (&sum)[Columns][2], float* acc) {
#pragma GCC unroll 16
  for (int i = 0; i < Columns; ++i) {
    _mm512_store_ps(acc + i * kRows, sum[i][0]);
    _mm512_store_ps(acc + i * kRows + 16, sum[i][1]);
  }
}

// Oᵀ[d0 + i][·] += Σ_j Pᵀ[j][·] · V[j][d0 + i] for Columns columns i (fp32).
template <int Columns>
FAPROBE_AVX512 void accumulate_fp32(const float* probabilities, const float* values, std::int64_t value_stride,
                                    std::int64_t cols, float* acc) {
  __m512 sum[Columns][2];
  load_columns<Columns>(acc, sum);
  for (std::int64_t j = 0; j < cols; ++j) {
    const __m512 p0 = _mm512_load_ps(probabilities + j * kRows), p1 = _mm512_load_ps(probabilities + j * kRows + 16);
    const float* value = values + j * value_stride;
#pragma GCC unroll 16
    for (int i = 0; i < Columns; ++i) {
      const __m512 v = _mm512_set1_ps(value[i]);
      sum[i][0] = _mm512_fmadd_ps(p0, v, sum[i][0]);
      sum[i][1] = _mm512_fmadd_ps(p1, v, sum[i][1]);
    }
  }
  store_columns<Columns>(sum, acc);
}

// The same with bf16 probability pairs and value pairs (pack_value_pairs): vdpbf16ps over pairs of keys.
template <int Columns>
FAPROBE_AVX512_BF16 void accumulate_bf16(const std::uint32_t* probability_pairs, const std::uint32_t* value_pairs,
                                         std::int64_t head_dim, std::int64_t key_pairs, float* acc) {
  __m512 sum[Columns][2];
  load_columns<Columns>(acc, sum);
  for (std::int64_t p = 0; p < key_pairs; ++p) {
    const __m512bh p0 = (__m512bh)_mm512_load_si512(probability_pairs + p * kRows);
    const __m512bh p1 = (__m512bh)_mm512_load_si512(probability_pairs + p * kRows + 16);
    const std::uint32_t* value = value_pairs + p * head_dim;
#pragma GCC unroll 16
    for (int i = 0; i < Columns; ++i) {
      const __m512bh v = (__m512bh)_mm512_set1_epi32(int(value[i]));
      sum[i][0] = _mm512_dpbf16_ps(sum[i][0], p0, v);
      sum[i][1] = _mm512_dpbf16_ps(sum[i][1], p1, v);
    }
  }
  store_columns<Columns>(sum, acc);
}

// Tiles of at most `tile` spread evenly over `count` (64 columns in 12s: 11, 11, 11, 11, 10, 10), so that
// no tile is left with a handful of accumulators too few to hide the FMA latency.
template <class Fn> FAPROBE_INLINE void for_each_tile(std::int64_t count, int tile, Fn&& fn) {
  const std::int64_t tiles = (count + tile - 1) / tile;
  std::int64_t first = 0;
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t width = (count - first) / (tiles - t);
    fn(first, int(width));
    first += width;
  }
}

// Calls fn(std::integral_constant<int, N>) for N = width (1..12): the register tile's size, a compile-time
// constant inside.
template <class Fn> FAPROBE_INLINE void with_width(int width, Fn&& fn) {
  switch (width) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 5: fn(std::integral_constant<int, 5>{}); break;
    case 6: fn(std::integral_constant<int, 6>{}); break;
    case 7: fn(std::integral_constant<int, 7>{}); break;
    case 8: fn(std::integral_constant<int, 8>{}); break;
    case 9: fn(std::integral_constant<int, 9>{}); break;
    case 10: fn(std::integral_constant<int, 10>{}); break;
    case 11: fn(std::integral_constant<int, 11>{}); break;
    default: fn(std::integral_constant<int, 12>{}); break;
  }
}

}  // namespace

namespace {

// vpermw index for P's bf16 pairs: output word 2r takes P[2p][r] (input word r), word 2r + 1 takes
// P[2p + 1][r] (word 16 + r), after vcvtne2ps2bf16 put the first key's 16 rows in words 0..15.
alignas(64) constexpr std::uint16_t kInterleave[32] = {0, 16, 1,  17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9,  25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// P of two keys (16 rows each) rounded to bf16 as 16 words, (P[first][r], P[second][r]) each.
FAPROBE_AVX512_BF16 FAPROBE_INLINE __m512i pair_words(__m512 first, __m512 second, __m512i interleave) {
  return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(second, first));
}

// The causal mask and the online softmax over Sᵀ [cols][32]: masked keys become −inf, the block's scores
// become P = 2^((s − row_max) · scale_log2), row_sum and row_max are updated and the accumulator is rescaled
// by alpha = 2^((old max − new max) · scale_log2) where the max grew. A row with no key seen yet keeps
// row_max −inf; its exponents use 0 instead, so that its −inf scores give P = 0, never NaN. P goes back to
// Sᵀ's place in fp32, or (Pairs) straight to block.probability_pairs as bf16 key pairs, in the same pass as
// the exponentials: the pairs are what the bf16 and AMX products read, and a second pass over P would cost
// ~15 % of the softmax (measured on the AMX path, Intel Xeon, b1 h8 d64 causal s4096). Row sums are always
// taken from the fp32 P.
// P = 2^(s · scale_log2 + offset) of 16 scores. (A function, not a lambda: a lambda does not inherit its
// enclosing function's target attribute.)
template <int Degree>
FAPROBE_AVX512 FAPROBE_INLINE __m512 weight(const float* scores, __m512 scale_log2, __m512 offset) {
  return exp2_flushed<Degree>(_mm512_fmadd_ps(_mm512_load_ps(scores), scale_log2, offset));
}

template <bool Pairs> FAPROBE_AVX512_BF16 void softmax_pass(const PanelBlock& block) {
  // Both 16-row halves of the panel in one walk over the keys: a key's row of Sᵀ (and of the pairs) is one
  // 128-byte piece read or written whole, half as many passes over Sᵀ as one half at a time (which ran 19 %
  // slower on the AMX path, Intel Xeon, b1 h8 d64 causal s16384, where Sᵀ is 32 KiB per panel).
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 scale_log2 = _mm512_set1_ps(block.scale_log2);
  __m512i interleave = _mm512_setzero_si512();
  if constexpr (Pairs) interleave = _mm512_load_si512(kInterleave);
  float* scores = block.scores;
  __m512 block_max[2] = {minus_inf, minus_inf};
  if (block.masked) {
    // Row first_row + r sees key first_key + j iff first_key + j < first_row + r + diagonal.
    const __m512i limit0 = _mm512_add_epi32(_mm512_set1_epi32(int(block.first_row + block.diagonal - block.first_key)),
                                            _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    const __m512i limit[2] = {limit0, _mm512_add_epi32(limit0, _mm512_set1_epi32(16))};
    for (std::int64_t j = 0; j < block.cols; ++j) {
      const __m512i key = _mm512_set1_epi32(int(j));
      for (int half = 0; half < 2; ++half) {
        float* score = scores + j * kRows + 16 * half;
        const __mmask16 hidden = _mm512_cmp_epi32_mask(key, limit[half], _MM_CMPINT_NLT);
        const __m512 s = _mm512_mask_mov_ps(_mm512_load_ps(score), hidden, minus_inf);
        _mm512_store_ps(score, s);
        block_max[half] = _mm512_max_ps(block_max[half], s);
      }
    }
  } else {
    for (std::int64_t j = 0; j < block.cols; ++j) {
      block_max[0] = _mm512_max_ps(block_max[0], _mm512_load_ps(scores + j * kRows));
      block_max[1] = _mm512_max_ps(block_max[1], _mm512_load_ps(scores + j * kRows + 16));
    }
  }
  __m512 new_max[2], alpha[2], offset[2];
  for (int half = 0; half < 2; ++half) {
    const __m512 old_max = _mm512_load_ps(block.row_max + 16 * half);
    new_max[half] = _mm512_max_ps(old_max, block_max[half]);
    const __mmask16 seen = _mm512_cmp_ps_mask(new_max[half], minus_inf, _CMP_NEQ_OQ);
    const __m512 safe_max = _mm512_maskz_mov_ps(seen, new_max[half]);  // 0 where no key is seen yet
    alpha[half] = exp2_flushed(_mm512_mul_ps(_mm512_sub_ps(old_max, safe_max), scale_log2));
    offset[half] = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(safe_max, scale_log2));
  }
  __m512 sum[2][2] = {{_mm512_setzero_ps(), _mm512_setzero_ps()}, {_mm512_setzero_ps(), _mm512_setzero_ps()}};
  std::int64_t j = 0;
  for (; j + 2 <= block.cols; j += 2) {  // two keys: a row of P's pairs, and two chains per half for the adds
    for (int half = 0; half < 2; ++half) {
      const __m512 p0 = weight<Pairs ? 4 : 5>(scores + j * kRows + 16 * half, scale_log2, offset[half]);
      const __m512 p1 = weight<Pairs ? 4 : 5>(scores + (j + 1) * kRows + 16 * half, scale_log2, offset[half]);
      if constexpr (Pairs) {
        _mm512_store_si512(block.probability_pairs + j / 2 * kRows + 16 * half, pair_words(p0, p1, interleave));
      } else {
        _mm512_store_ps(scores + j * kRows + 16 * half, p0);
        _mm512_store_ps(scores + (j + 1) * kRows + 16 * half, p1);
      }
      sum[half][0] = _mm512_add_ps(sum[half][0], p0);
      sum[half][1] = _mm512_add_ps(sum[half][1], p1);
    }
  }
  if (j < block.cols) {  // the odd last key, paired with 0
    for (int half = 0; half < 2; ++half) {
      const __m512 p0 = weight<Pairs ? 4 : 5>(scores + j * kRows + 16 * half, scale_log2, offset[half]);
      if constexpr (Pairs) {
        _mm512_store_si512(block.probability_pairs + j / 2 * kRows + 16 * half,
                           pair_words(p0, _mm512_setzero_ps(), interleave));
      } else {
        _mm512_store_ps(scores + j * kRows + 16 * half, p0);
      }
      sum[half][0] = _mm512_add_ps(sum[half][0], p0);
    }
  }
  __mmask16 grew = 0;
  for (int half = 0; half < 2; ++half) {
    const __m512 old_sum = _mm512_load_ps(block.row_sum + 16 * half);
    _mm512_store_ps(block.row_sum + 16 * half,
                    _mm512_fmadd_ps(old_sum, alpha[half], _mm512_add_ps(sum[half][0], sum[half][1])));
    _mm512_store_ps(block.row_max + 16 * half, new_max[half]);
    grew |= _mm512_cmp_ps_mask(alpha[half], _mm512_set1_ps(1.0f), _CMP_NEQ_UQ);
  }
  // Rescale what was accumulated where row_max grew (alpha < 1; × 1 elsewhere is exact): most blocks after
  // the first few none.
  if (block.rescale && grew != 0) {
    for (std::int64_t d = 0; d < block.head_dim; ++d) {
      float* column = block.acc + d * kRows;
      _mm512_store_ps(column, _mm512_mul_ps(_mm512_load_ps(column), alpha[0]));
      _mm512_store_ps(column + 16, _mm512_mul_ps(_mm512_load_ps(column + 16), alpha[1]));
    }
  }
}

}  // namespace

FAPROBE_AVX512 void online_softmax(const PanelBlock& block) {
  // The fp32 pass has no bf16 instruction in it (the attribute lets it share its source with the bf16 pass;
  // the compiler does not invent dot products), so it runs on AVX-512 CPUs without AVX512_BF16.
  softmax_pass<false>(block);
}

FAPROBE_AVX512_BF16 void online_softmax_pairs(const PanelBlock& block) { softmax_pass<true>(block); }

FAPROBE_AVX512 void attend_block_fp32(const PanelBlock& block) {
  const auto* query_panel = static_cast<const float*>(block.query_panel);
  const auto* keys = static_cast<const float*>(block.keys);
  const auto* values = static_cast<const float*>(block.values);
  for_each_tile(block.cols, kKeyTile, [&](std::int64_t first, int width) {
    with_width(width, [&](auto tile) {
      scores_fp32<decltype(tile)::value>(query_panel, keys + first * block.key_stride, block.key_stride,
                                         block.head_dim, block.scores + first * kRows);
    });
  });
  online_softmax(block);
  for_each_tile(block.head_dim, kColumnTile, [&](std::int64_t first, int width) {
    with_width(width, [&](auto tile) {
      accumulate_fp32<decltype(tile)::value>(block.scores, values + first, block.value_stride, block.cols,
                                             block.acc + first * kRows);
    });
  });
}

FAPROBE_AVX512_BF16 void attend_block_bf16(const PanelBlock& block) {
  const auto* query_pairs = static_cast<const std::uint32_t*>(block.query_panel);
  const auto* keys = static_cast<const std::uint16_t*>(block.keys);
  const auto* value_pairs = static_cast<const std::uint32_t*>(block.values);
  for_each_tile(block.cols, kKeyTile, [&](std::int64_t first, int width) {
    with_width(width, [&](auto tile) {
      scores_bf16<decltype(tile)::value>(query_pairs, keys + first * block.key_stride, block.key_stride,
                                         block.head_dim, block.scores + first * kRows);
    });
  });
  online_softmax_pairs(block);
  const std::int64_t key_pairs = (block.cols + 1) / 2;
  for_each_tile(block.head_dim, kColumnTile, [&](std::int64_t first, int width) {
    with_width(width, [&](auto tile) {
      accumulate_bf16<decltype(tile)::value>(block.probability_pairs, value_pairs + first, block.head_dim,
                                             key_pairs, block.acc + first * kRows);
    });
  });
}

FAPROBE_AVX512_BF16 void pack_value_pairs(const std::uint16_t* values, std::int64_t stride, std::int64_t cols,
                                          std::int64_t head_dim, std::uint32_t* pairs) {
  for (std::int64_t p = 0; p < (cols + 1) / 2; ++p) {
    const std::uint16_t* first = values + 2 * p * stride;
    const std::uint16_t* second = 2 * p + 1 < cols ? first + stride : nullptr;
    std::uint32_t* out = pairs + p * head_dim;
    std::int64_t d = 0;
    for (; d + 16 <= head_dim; d += 16) {  // 16 elements of each row: zero-extend, shift, or
      const __m512i low = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + d)));
      const __m512i high = second != nullptr
                               ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(second + d)))
                               : _mm512_setzero_si512();
      _mm512_storeu_si512(out + d, _mm512_or_si512(low, _mm512_slli_epi32(high, 16)));
    }
    for (; d < head_dim; ++d) out[d] = std::uint32_t(first[d]) | (second != nullptr ? std::uint32_t(second[d]) << 16 : 0u);
  }
}

#else  // not x86-64: tiled.cpp never takes these paths (cpu_isa() is portable)

void online_softmax(const PanelBlock&) { throw std::logic_error("cpu.tiled: AVX-512 path on a CPU without it"); }
void online_softmax_pairs(const PanelBlock&) { throw std::logic_error("cpu.tiled: AVX-512 path on a CPU without it"); }
void attend_block_fp32(const PanelBlock&) { throw std::logic_error("cpu.tiled: AVX-512 path on a CPU without it"); }
void attend_block_bf16(const PanelBlock&) { throw std::logic_error("cpu.tiled: AVX-512 path on a CPU without it"); }
void pack_value_pairs(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, std::uint32_t*) {
  throw std::logic_error("cpu.tiled: AVX-512 path on a CPU without it");
}

#endif

}  // namespace faprobe::cpu::avx512
