// cpu.tiled's bf16 step on AMX (tiled_amx.cpp): the same panel of 32 query rows against one block of keys as
// tiled_avx512.hpp's steps, and the same transposed buffers (Qᵀ pairs, Sᵀ, P pairs, Oᵀ), with both products
// on the tile unit and the online softmax between them on AVX-512. Compiled into every x86-64 build through
// function attributes; tiled.cpp calls it only where cpu_isa() is amx (the CPU has AMX-TILE and AMX-BF16 and
// Linux granted the process the tile state).
#pragma once
#include <cstdint>

#include "cpu/tiled_avx512.hpp"

namespace faprobe::cpu::amx {

constexpr std::int64_t kKeyChunk = 32;    // keys per tile product step: the step pads a block's keys to this
constexpr std::int64_t kHeadDimStep = 32;  // head_dim elements per step: head_dim must be a multiple of it

// Keys, rounded up to whole tile steps: the rows of the packed K block and the columns of Vᵀ.
constexpr std::int64_t padded_keys(std::int64_t cols) { return (cols + kKeyChunk - 1) / kKeyChunk * kKeyChunk; }

// The tile shapes every step uses (8 tiles of 16 rows × 64 bytes), loaded on the calling thread; and the tile
// state handed back, so that a thread that is done with AMX does not carry 8 KiB more on every context switch.
void configure_tiles();
void release_tiles();

// One panel at one key block, as avx512::attend_block_bf16, with:
//   keys    bf16 rows [padded_keys(block cols)][head_dim], dense (key_stride = head_dim), rows past the key
//           block's last zero;
//   values  Vᵀ, bf16 [head_dim][value_stride] with value_stride ≥ padded_keys(cols), keys past the key block's
//           last zero;
//   scores  [padded_keys(cols)][32] floats; probability_pairs [padded_keys(cols) / 2][32] words.
void attend_block(const avx512::PanelBlock& block);

// Rows [0, count) of a query panel (bf16, `stride` elements between rows, count ≤ 32, head_dim even) as the
// bf16 products' Qᵀ pairs [head_dim / 2][32] words (64-byte aligned), word [p][r] = (Q[r][2p], Q[r][2p + 1]),
// rows from count on zero: a 16 × 16 word transpose per 16 rows and 16 pairs. AVX-512 only, so both bf16
// paths (AMX and AVX512_BF16) use it.
void pack_query_pairs(const std::uint16_t* rows, std::int64_t stride, std::int64_t count, std::int64_t head_dim,
                      std::uint32_t* pairs);

// The key rows [0, cols) (bf16, `stride` elements between rows) copied dense into `packed` [padded_keys(cols)]
// [head_dim], the rows from cols on zero.
void pack_keys(const std::uint16_t* keys, std::int64_t stride, std::int64_t cols, std::int64_t head_dim,
               std::uint16_t* packed);

// Vᵀ of the value rows [0, cols) (bf16, `stride` elements between rows) into `transposed` [head_dim][
// transposed_stride], the keys from cols to padded_keys(cols) zero.
void transpose_values(const std::uint16_t* values, std::int64_t stride, std::int64_t cols, std::int64_t head_dim,
                      std::uint16_t* transposed, std::int64_t transposed_stride);

}  // namespace faprobe::cpu::amx
