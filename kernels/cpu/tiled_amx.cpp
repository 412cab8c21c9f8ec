// cpu.tiled's bf16 step on AMX. A tile register holds up to 16 rows of 64 bytes; tdpbf16ps multiplies a
// 16 × 32 bf16 tile A by a 16 × (16 pairs) bf16 tile B, B's row p holding for each output column n the pair
// (B[2p][n], B[2p + 1][n]), into a 16 × 16 fp32 tile C: C[m][n] += Σ_p A[m][2p]·B[2p][n] + A[m][2p+1]·B[2p+1][n].
// The panel buffers of tiled_avx512.cpp are already what B needs:
//   Sᵀ = K · Qᵀ   A = 16 keys × 32 head_dim elements (K rows as they are), B = Qᵀ pairs [head_dim / 2][32]
//                 (16 pair rows × 16 query rows); C = Sᵀ [keys][32] in place, 16 keys × 16 rows.
//   Oᵀ += Vᵀ · Pᵀ  A = 16 head_dim rows × 32 keys of Vᵀ (transposed once per key block, shared by the item's
//                 panels), B = P pairs [keys / 2][32]; C = Oᵀ [head_dim][32], loaded, accumulated, stored.
// So the online softmax between them, with P's packing into bf16 pairs, is tiled_avx512.cpp's, unchanged.
//
// Tiles: each step is a 2 × 2 block of C tiles (tmm0–3: two chunks of 16 along M, the two 16-row halves of
// the panel along N), with two A tiles (tmm4–5) and two B tiles (tmm6–7): 4 loads per 4 tdpbf16ps, and all
// 8 tile registers in use.
//
// Napkin math (b1 h8 d64 causal s4096, 17.2 GFLOP): a tdpbf16ps is 16·16·32 multiply-adds = 16,384 FLOP, one
// every 16 cycles on Sapphire/Emerald Rapids (1,024 FLOP per cycle per core, 16× an AVX-512 core's 64), so
// the two products need ~2.8 ms of 2 cores at 3 GHz; the work left is on the vector units: the softmax
// (~25 instructions per 16 scores over 67 M visible scores, ~10 ms at 2 vector instructions per cycle), the
// tile loads and stores of Sᵀ and Oᵀ, and Vᵀ's transposition. AMX makes the softmax the bound.
#include "cpu/tiled_amx.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FAPROBE_HAVE_AMX_PATH 1
#include "model/intrinsics_warnings.hpp"
FAPROBE_INTRINSICS_WARNINGS_OFF
#include <immintrin.h>
FAPROBE_INTRINSICS_WARNINGS_ON
#endif

namespace faprobe::cpu::amx {

#if FAPROBE_HAVE_AMX_PATH

#define FAPROBE_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))
#define FAPROBE_AVX512_ONLY __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
// The AMX intrinsics are asm statements that name no memory: this barrier keeps the compiler from moving the
// buffers' loads and stores across them.
#define FAPROBE_MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

namespace {

constexpr std::int64_t kRows = avx512::kPanelRows;
constexpr std::int64_t kPanelStrideBytes = kRows * 4;  // a row of Sᵀ, Oᵀ, Qᵀ pairs or P pairs: 32 × 4 bytes

// ldtilecfg's 64-byte operand (palette 1): 8 tiles of 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);

// The 2 × 2 block of C tiles (tmm0–3) at `c`, a panel buffer ([rows][32] 4-byte words): tmm0 and tmm1 the
// two 16-row halves of rows 0–15, tmm2 and tmm3 those of rows 16–31.
FAPROBE_AMX inline __attribute__((always_inline)) void load_block(const char* c) {
  _tile_loadd(0, c, kPanelStrideBytes);
  _tile_loadd(1, c + 64, kPanelStrideBytes);
  _tile_loadd(2, c + 16 * kPanelStrideBytes, kPanelStrideBytes);
  _tile_loadd(3, c + 16 * kPanelStrideBytes + 64, kPanelStrideBytes);
}
FAPROBE_AMX inline __attribute__((always_inline)) void store_block(char* c) {
  _tile_stored(0, c, kPanelStrideBytes);
  _tile_stored(1, c + 64, kPanelStrideBytes);
  _tile_stored(2, c + 16 * kPanelStrideBytes, kPanelStrideBytes);
  _tile_stored(3, c + 16 * kPanelStrideBytes + 64, kPanelStrideBytes);
}

// One k-step of 32 bf16 of the block: A's rows 0–15 and 16–31 (tmm4, tmm5) from `a`, `a_stride` bytes
// apart; B's two 16-column halves (tmm6, tmm7) from `b`, a panel buffer of 16 pair rows; C += A · B.
FAPROBE_AMX inline __attribute__((always_inline)) void product_step(const char* a, std::int64_t a_stride,
                                                                    const char* b) {
  _tile_loadd(4, a, a_stride);
  _tile_loadd(5, a + 16 * a_stride, a_stride);
  _tile_loadd(6, b, kPanelStrideBytes);
  _tile_loadd(7, b + 64, kPanelStrideBytes);
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

}  // namespace

FAPROBE_AMX void configure_tiles() {
  static const TileConfig config;
  _tile_loadconfig(&config);
}

FAPROBE_AMX void release_tiles() { _tile_release(); }

FAPROBE_AMX void attend_block(const avx512::PanelBlock& block) {
  const auto* query_pairs = static_cast<const char*>(block.query_panel);
  const auto* keys = static_cast<const char*>(block.keys);
  const auto* values = static_cast<const char*>(block.values);
  const std::int64_t key_bytes = block.key_stride * 2, value_bytes = block.value_stride * 2;
  const std::int64_t chunks = padded_keys(block.cols) / kKeyChunk;
  auto* scores = reinterpret_cast<char*>(block.scores);
  FAPROBE_MEMORY_BARRIER();

  // Sᵀ: 32 keys × 32 rows per step, over head_dim in steps of 32.
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const char* key_rows = keys + chunk * kKeyChunk * key_bytes;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (std::int64_t d = 0; d < block.head_dim; d += kHeadDimStep) {
      product_step(key_rows + d * 2, key_bytes, query_pairs + d / 2 * kPanelStrideBytes);
    }
    store_block(scores + chunk * kKeyChunk * kPanelStrideBytes);
  }
  FAPROBE_MEMORY_BARRIER();

  avx512::online_softmax_pairs(block);
  // The pairs past the block's keys, up to the padded chunk, are zero: Vᵀ's columns there may be real keys
  // (a panel that stops before the block's end under the causal mask) or the zeros of the padding.
  const std::int64_t written = (block.cols + 1) / 2, padded = chunks * kKeyChunk / 2;
  std::memset(block.probability_pairs + written * kRows, 0, std::size_t((padded - written) * kPanelStrideBytes));
  FAPROBE_MEMORY_BARRIER();

  // Oᵀ += Vᵀ · Pᵀ: 32 head_dim rows × 32 query rows per step, over the keys in steps of 32.
  const auto* probability_pairs = reinterpret_cast<const char*>(block.probability_pairs);
  auto* acc = reinterpret_cast<char*>(block.acc);
  for (std::int64_t d = 0; d < block.head_dim; d += 32) {
    char* out = acc + d * kPanelStrideBytes;
    load_block(out);
    const char* value_rows = values + d * value_bytes;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      product_step(value_rows + chunk * kKeyChunk * 2, value_bytes,
                   probability_pairs + chunk * kKeyChunk / 2 * kPanelStrideBytes);
    }
    store_block(out);
  }
  FAPROBE_MEMORY_BARRIER();
}

namespace {

// A 16 × 16 matrix of 32-bit words transposed in registers: 4 × 4 blocks inside each 128-bit lane (unpack by
// 32 and 64 bits), then the 4 × 4 matrix of lanes (two rounds of vshufi32x4). 64 shuffles for 256 words.
FAPROBE_AVX512_ONLY void transpose_words(const __m512i (&rows)[16], __m512i (&columns)[16]) {
  __m512i column_of[16];  // [4g + c]: lane L holds column 4L + c of rows 4g .. 4g + 3
  for (int g = 0; g < 4; ++g) {
    const __m512i* r = rows + 4 * g;
    const __m512i t0 = _mm512_unpacklo_epi32(r[0], r[1]), t1 = _mm512_unpackhi_epi32(r[0], r[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(r[2], r[3]), t3 = _mm512_unpackhi_epi32(r[2], r[3]);
    column_of[4 * g + 0] = _mm512_unpacklo_epi64(t0, t2);
    column_of[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
    column_of[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
    column_of[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  for (int c = 0; c < 4; ++c) {  // lane L of column 4L + c gathers lane L of column_of[4g + c], g = 0..3
    const __m512i x0 = _mm512_shuffle_i32x4(column_of[c], column_of[4 + c], 0x44);
    const __m512i x1 = _mm512_shuffle_i32x4(column_of[c], column_of[4 + c], 0xEE);
    const __m512i x2 = _mm512_shuffle_i32x4(column_of[8 + c], column_of[12 + c], 0x44);
    const __m512i x3 = _mm512_shuffle_i32x4(column_of[8 + c], column_of[12 + c], 0xEE);
    columns[c] = _mm512_shuffle_i32x4(x0, x2, 0x88);
    columns[4 + c] = _mm512_shuffle_i32x4(x0, x2, 0xDD);
    columns[8 + c] = _mm512_shuffle_i32x4(x1, x3, 0x88);
    columns[12 + c] = _mm512_shuffle_i32x4(x1, x3, 0xDD);
  }
}

}  // namespace

FAPROBE_AVX512_ONLY void pack_query_pairs(const std::uint16_t* rows, std::int64_t stride, std::int64_t count,
                                          std::int64_t head_dim, std::uint32_t* pairs) {
  const std::int64_t pair_count = head_dim / 2;
  __m512i in[16], out[16];
  for (std::int64_t half = 0; half < 2; ++half) {
    for (std::int64_t p0 = 0; p0 < pair_count; p0 += 16) {
      const int width = int(std::min<std::int64_t>(16, pair_count - p0));
      const __mmask16 lanes = __mmask16((1u << width) - 1u);
      for (int r = 0; r < 16; ++r) {
        const std::int64_t row = 16 * half + r;
        in[r] = row < count ? _mm512_maskz_loadu_epi32(lanes, rows + row * stride + 2 * p0) : _mm512_setzero_si512();
      }
      transpose_words(in, out);
      for (int c = 0; c < width; ++c) _mm512_store_si512(pairs + (p0 + c) * kRows + 16 * half, out[c]);
    }
  }
}

// K rows copied dense (head_dim a multiple of 32: whole 64-byte pieces), the padding rows zero.
FAPROBE_AVX512_ONLY void pack_keys(const std::uint16_t* keys, std::int64_t stride, std::int64_t cols,
                                   std::int64_t head_dim, std::uint16_t* packed) {
  for (std::int64_t j = 0; j < cols; ++j) {
    const std::uint16_t* row = keys + j * stride;
    std::uint16_t* out = packed + j * head_dim;
    for (std::int64_t d = 0; d < head_dim; d += 32) _mm512_storeu_si512(out + d, _mm512_loadu_si512(row + d));
  }
  for (std::int64_t j = cols; j < padded_keys(cols); ++j) {
    for (std::int64_t d = 0; d < head_dim; d += 32) _mm512_storeu_si512(packed + j * head_dim + d, _mm512_setzero_si512());
  }
}

// 16 elements of value row `key` from d, zero-extended to words; zeros past the block's keys. (A function,
// not a lambda: a lambda does not inherit its enclosing function's target attribute.)
FAPROBE_AVX512_ONLY static inline __m512i value_piece(const std::uint16_t* values, std::int64_t stride,
                                                      std::int64_t cols, std::int64_t key, std::int64_t d) {
  if (key >= cols) return _mm512_setzero_si512();
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + key * stride + d)));
}

// Vᵀ by words: the word (V[2p][d], V[2p + 1][d]) is both element pair p of Vᵀ's row d and, for a fixed p and
// 16 consecutive d, one vector built from two value rows; a 16 × 16 word transpose turns 16 such vectors
// (32 keys) into 32-key pieces of 16 rows of Vᵀ. head_dim is a multiple of 16 (of 32 on this path).
FAPROBE_AVX512_ONLY void transpose_values(const std::uint16_t* values, std::int64_t stride, std::int64_t cols,
                                          std::int64_t head_dim, std::uint16_t* transposed,
                                          std::int64_t transposed_stride) {
  __m512i rows[16], columns[16];
  for (std::int64_t j0 = 0; j0 < padded_keys(cols); j0 += kKeyChunk) {
    for (std::int64_t d0 = 0; d0 < head_dim; d0 += 16) {
      for (int p = 0; p < 16; ++p) {
        rows[p] = _mm512_or_si512(value_piece(values, stride, cols, j0 + 2 * p, d0),
                                  _mm512_slli_epi32(value_piece(values, stride, cols, j0 + 2 * p + 1, d0), 16));
      }
      transpose_words(rows, columns);
      for (int c = 0; c < 16; ++c) _mm512_storeu_si512(transposed + (d0 + c) * transposed_stride + j0, columns[c]);
    }
  }
}

#else  // not x86-64: tiled.cpp never takes this path (cpu_isa() is portable)

void configure_tiles() { throw std::logic_error("cpu.tiled: AMX path on a CPU without it"); }
void release_tiles() { throw std::logic_error("cpu.tiled: AMX path on a CPU without it"); }
void attend_block(const avx512::PanelBlock&) { throw std::logic_error("cpu.tiled: AMX path on a CPU without it"); }
void transpose_values(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, std::uint16_t*, std::int64_t) {
  throw std::logic_error("cpu.tiled: AMX path on a CPU without it");
}
void pack_keys(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, std::uint16_t*) {
  throw std::logic_error("cpu.tiled: AMX path on a CPU without it");
}
void pack_query_pairs(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, std::uint32_t*) {
  throw std::logic_error("cpu.tiled: AVX-512 path on a CPU without it");
}

#endif

}  // namespace faprobe::cpu::amx
