// NumPy .npy files for attention tensors: `faprobe run --save` writes q/k/v/o, and `faprobe verify --q F
// --k F --v F --o F` reads outputs produced elsewhere. Written by hand against the format specification
// (numpy.lib.format): the magic "\x93NUMPY", a major and a minor version byte, the header length
// (little-endian uint16 in version 1.0, uint32 in 2.0 and 3.0), then a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 17, 4, 64), }
// padded with spaces and ending in '\n' so that the data starts at a multiple of 64 bytes, then the data
// in C order.
//
// Only 4-D (batch, seq, heads, head_dim) little-endian float32 and float16 arrays are read; everything
// else, and any malformed file, is a UsageError naming the flag and the file. The reader bounds-checks
// every field against the file's size before it allocates, so garbage input never crashes it.
#pragma once
#include <string>
#include <string_view>

#include "model/tensor.hpp"

namespace faprobe {

// Writes a version 1.0 .npy file with shape (batch, seq, heads, head_dim): fp32 as '<f4', fp16 as '<f2',
// bf16 widened (exactly) to '<f4' because NumPy has no bfloat16, and fp8_e4m3 as its dequantized values
// (code · scale, exact) in '<f4', since NumPy has no e4m3 either. Throws std::runtime_error naming the
// file when it cannot be written.
void write_npy(const std::string& path, const HostTensor& tensor);

// Reads a 4-D C-order '<f4' (-> fp32) or '<f2' (-> fp16) array. `flag` is the command-line flag the
// path came from ("--q"); it and the path start every error message: "--q q.npy: <what is wrong>".
HostTensor read_npy(const std::string& path, std::string_view flag);

// Checks that the four tensors of `faprobe verify` describe one attention problem: q (B, Sq, H, D);
// k and v (B, Sk, Hkv, D), identical; o shaped like q; H % Hkv == 0. Throws UsageError naming the flags
// (--q, --k, --v, --o) and both shapes. Dtypes may differ (an fp32 output of fp16 inputs is fine).
void check_attention_shapes(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& o);

}  // namespace faprobe
