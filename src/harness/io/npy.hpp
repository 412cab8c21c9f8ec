// NumPy .npy files for attention tensors: `faprobe run --save` writes q/k/v/o (or, for a paged or
// variable-length case, the KV cache and its index arrays: kv_cache_files.hpp), and `faprobe verify --q F
// --k F --v F --o F` reads outputs produced elsewhere. Written by hand against the format specification
// (numpy.lib.format): the magic "\x93NUMPY", a major and a minor version byte, the header length
// (little-endian uint16 in version 1.0, uint32 in 2.0 and 3.0), then a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 17, 4, 64), }
// padded with spaces and ending in '\n' so that the data starts at a multiple of 64 bytes, then the data
// in C order.
//
// Tensors: only 4-D (batch, seq, heads, head_dim) little-endian float32, float16 and float64 arrays are read
// (float64 rounded to float32). Index arrays (a block table, cache lengths): only 1-D or 2-D little-endian
// int32, by a reader of their own, so that neither reader takes what the other expects. Everything else, and
// any malformed file, is a UsageError naming the flag and the file. Both readers bound the header, check every field against the
// file's size and the data's size against the shape before they allocate, so garbage input never crashes
// them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/tensor.hpp"

namespace faprobe {

// Writes a version 1.0 .npy file with shape (batch, seq, heads, head_dim): fp32 as '<f4', fp16 as '<f2',
// bf16 widened (exactly) to '<f4' because NumPy has no bfloat16, and fp8_e4m3 as its dequantized values
// (code · scale, exact) in '<f4', since NumPy has no e4m3 either. Throws std::runtime_error naming the
// file when it cannot be written.
void write_npy(const std::string& path, const HostTensor& tensor);
// The same data under another 4-D shape of as many elements: a paged pool, stored as (1, pages · page_size,
// kv_heads, head_dim) rows, is written as (pages, page_size, kv_heads, head_dim).
void write_npy(const std::string& path, const HostTensor& tensor, const std::vector<std::int64_t>& shape);

// A C-order int32 array: block tables and lengths, which flash-attention takes as torch.int32.
struct Int32Array {
  std::vector<std::int64_t> shape;  // 1 or 2 dimensions
  std::vector<std::int32_t> values;
};
// Writes `array` as '<i4'; throws std::runtime_error naming the file when it cannot be written.
void write_npy_int32(const std::string& path, const Int32Array& array);

// Reads a 4-D C-order '<f4' (-> fp32), '<f2' (-> fp16) or '<f8' array; float64 (what NumPy users keep a
// reference in) is rounded to the nearest float32, and `narrowed_from_float64`, when given, says whether it
// was. `flag` is the command-line flag the path came from ("--q"); it and the path start every error message:
// "--q q.npy: <what is wrong>".
HostTensor read_npy(const std::string& path, std::string_view flag, bool* narrowed_from_float64 = nullptr);

// Reads a C-order '<i4' array of exactly `dims` (1 or 2) dimensions, none of them zero; `axes` names them
// in the message for a wrong shape ("(batch,)"). Errors start like read_npy's: "--block-table F: ...".
Int32Array read_npy_int32(const std::string& path, std::string_view flag, std::size_t dims, std::string_view axes);

// Checks that the four tensors of `faprobe verify` describe one attention problem: q (B, Sq, H, D);
// k and v (B, Sk, Hkv, D), identical; o shaped like q; H % Hkv == 0. Throws UsageError naming the flags
// (--q, --k, --v, --o) and both shapes. Dtypes may differ (an fp32 output of fp16 inputs is fine).
void check_attention_shapes(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& o);

// A shape as Python prints a tuple, as every message about a shape shows it: (2, 17, 4, 64), (3,), ().
std::string shape_text(const std::vector<std::int64_t>& dims);
std::string shape_text(const HostTensor& tensor);

}  // namespace faprobe
