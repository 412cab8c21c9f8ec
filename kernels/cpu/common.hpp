// What the CPU kernels share besides the online softmax: Eigen views of the (batch, seq, heads, head_dim)
// tensors (the rows of one head are head_dim contiguous values, heads·head_dim elements apart, so a block of
// them is a row-major matrix with an outer stride), fp32 matrices over workspace memory, the vectorised
// fp16/bf16 → fp32 conversion of tiles, the score product Q·Kᵀ, and the bytes of Q, K, V and O.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "model/eigen.hpp"
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "model/tensor.hpp"

namespace faprobe::cpu {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;            // contiguous fp32 rows over workspace
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
template <class T>
using ConstHeadRows = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                                 Eigen::OuterStride<>>;
template <class T>
using HeadRows = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                            Eigen::OuterStride<>>;
using RowVectorMap = Eigen::Map<Eigen::RowVectorXf>;

// Rows [first, first + count) of head `head` of batch entry `b`, as a (count × head_dim) strided matrix.
template <class T>
ConstHeadRows<T> head_rows(const HostTensor& t, std::int64_t b, std::int64_t first, std::int64_t count,
                           std::int64_t head) {
  return ConstHeadRows<T>(t.data<T>() + t.offset(b, first, head), Eigen::Index(count),
                          Eigen::Index(t.head_dim()), Eigen::OuterStride<>(Eigen::Index(t.row_stride())));
}
template <class T>
HeadRows<T> head_rows(HostTensor& t, std::int64_t b, std::int64_t first, std::int64_t count, std::int64_t head) {
  return HeadRows<T>(t.data<T>() + t.offset(b, first, head), Eigen::Index(count), Eigen::Index(t.head_dim()),
                     Eigen::OuterStride<>(Eigen::Index(t.row_stride())));
}

// dst[i] = float(src[i]) for i < count. Eigen 3.4 converts half and bfloat16 one scalar at a time (~8
// cycles each, which made fp16 decode run at ~1 GB/s); these loops convert 8 at a time.
inline void to_float(const float* src, float* dst, std::int64_t count) {
  std::copy(src, src + count, dst);
}
inline void to_float(const Eigen::half* src, float* dst, std::int64_t count) {
  std::int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= count; i += 8) {  // vcvtph2ps: 8 halves to 8 floats, exact
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  for (; i < count; ++i) dst[i] = static_cast<float>(src[i]);
}
inline void to_float(const Eigen::bfloat16* src, float* dst, std::int64_t count) {
  // A bfloat16 is the upper half of a float: the exact conversion shifts its bits up by 16 (GCC vectorises).
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, src + i, sizeof bits);
    const std::uint32_t widened = std::uint32_t(bits) << 16;
    std::memcpy(dst + i, &widened, sizeof widened);
  }
}

// Rows [first, first + count) of head `head` of batch entry `b` as a contiguous (count × head_dim) fp32 tile.
template <class T>
void load_rows(const HostTensor& t, std::int64_t b, std::int64_t first, std::int64_t count, std::int64_t head,
               float* dst) {
  const T* src = t.data<T>() + t.offset(b, first, head);
  for (std::int64_t r = 0; r < count; ++r) to_float(src + r * t.row_stride(), dst + r * t.head_dim(), t.head_dim());
}

// A (rows × cols) fp32 matrix over workspace memory.
inline MatrixMap matrix_at(float* data, std::int64_t rows, std::int64_t cols) {
  return MatrixMap(data, Eigen::Index(rows), Eigen::Index(cols));
}

// Bytes of Q, K, V and O (registry.hpp's io_bytes(), which lives in faprobe_core; the kernels library is
// linked without it by the kernel tests).
inline std::uint64_t io_tensor_bytes(const Case& c) { return std::uint64_t(c.min_bytes()); }

// scores = scale · q · kᵀ for (rows × head_dim) q and (cols × head_dim) k, with the head_dim sum taken in
// pieces of kDotPiece that are added afterwards. Eigen's GEMM accumulates every score serially over the
// whole head_dim, and that rounding error grows about linearly with the length: at head_dim 256 it is 3–4×
// that of a blocked dot product and sat right at the checker's fp32 tolerance. Pieces of 64 halve it, for one extra
// pass over the tile per piece beyond the first; head_dim ≤ 64 is a single product. `partial` holds
// rows × cols floats (unused when head_dim ≤ kDotPiece).
constexpr std::int64_t kDotPiece = 64;

template <class Q, class K>
void score_product(MatrixMap scores, const Eigen::MatrixBase<Q>& q, const Eigen::MatrixBase<K>& k, float scale,
                   float* partial) {
  const Eigen::Index head_dim = q.cols(), piece = Eigen::Index(kDotPiece);
  if (head_dim <= piece) {
    scores.noalias() = scale * q * k.transpose();
    return;
  }
  scores.noalias() = scale * q.leftCols(piece) * k.leftCols(piece).transpose();
  MatrixMap part(partial, scores.rows(), scores.cols());
  for (Eigen::Index c0 = piece; c0 < head_dim; c0 += piece) {
    const Eigen::Index width = std::min(piece, head_dim - c0);
    part.noalias() = scale * q.middleCols(c0, width) * k.middleCols(c0, width).transpose();
    scores += part;
  }
}

// Floats rounded up to a whole number of 64-byte cache lines, so that buffers carved out of one workspace
// stay aligned and threads never share a line.
constexpr std::int64_t cache_line_floats(std::int64_t count) { return (count + 15) / 16 * 16; }

}  // namespace faprobe::cpu
