// The instruction layer's TMA (isa_tma.hpp) under the emulator: tensor loads of 2-D and 4-D boxes into shared
// memory, out-of-bounds elements as zeros, the three swizzle modes, the mbarrier completing on the box's
// transaction bytes (and a wrong expect_tx reported as a deadlock), tensor stores that write only inside
// the tensor, and the tensor-map checks of cuTensorMapEncodeTiled. Every expectation is computed on the
// host from the PTX ISA ("Tensors": bounding box, out-of-boundary access, swizzling modes) and the CUDA
// driver's rules, not from the emulator's code.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/emu/tma.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/isa_tma.hpp"
#include "cuda/common/tensor_map.hpp"
#include "emulator_test_support.hpp"

namespace faprobe::emu {
namespace {

namespace isa = cuda::isa;
using cuda::TensorMapShape;
using testing::expect_mentions;
using testing::launch_error;
using testing::within_deadline;

constexpr std::size_t kBarrier = 0;    // the mbarrier's shared offset
constexpr std::size_t kTile = 1024;    // the first tile: 1024-byte aligned, as swizzled tiles must be
constexpr unsigned kThreads = 64;

// A row-major rows x cols matrix of 16-bit elements, every element distinct: (r, c) holds r·cols + c + 1
// (never 0, so a zero is an out-of-bounds fill).
std::vector<std::uint16_t> numbered_matrix(std::size_t rows, std::size_t cols) {
  std::vector<std::uint16_t> m(rows * cols);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<std::uint16_t>(i + 1);
  return m;
}

// The map of such a matrix (2-byte elements, dims (cols, rows)) with a box of box_cols x box_rows.
TensorMapShape matrix_shape(std::size_t rows, std::size_t cols, std::uint32_t box_cols, std::uint32_t box_rows,
                            isa::TmaSwizzle swizzle = isa::TmaSwizzle::none) {
  return cuda::matrix_shape(rows, cols, 2, box_cols, box_rows, swizzle);
}

// The box of `matrix` at (c0, c1) as PTX's bounding box defines it, box order, zeros outside the matrix.
std::vector<std::uint16_t> expected_box(const std::vector<std::uint16_t>& matrix, long rows, long cols, int c0, int c1,
                                        long box_cols, long box_rows) {
  std::vector<std::uint16_t> box;
  for (long r = 0; r < box_rows; ++r)
    for (long c = 0; c < box_cols; ++c) {
      const long row = c1 + r, col = c0 + c;
      const bool inside = row >= 0 && row < rows && col >= 0 && col < cols;
      box.push_back(inside ? matrix[std::size_t(row * cols + col)] : std::uint16_t{0});
    }
  return box;
}

// One CTA of kThreads: thread 0 initializes the mbarrier, announces `expected_tx` bytes and issues one
// tma_load<Rank> of the map's box at coords into shared memory at tile_offset; every thread waits for phase 0
// and then reads the shared bytes [tile_offset, tile_offset + bytes) into the result.
template <int Rank>
std::vector<std::uint8_t> load_box(const isa::TensorMap& map, const int (&coords)[Rank], std::size_t bytes,
                                   std::size_t tile_offset = kTile) {
  std::vector<std::uint8_t> shared(bytes, 0xee);
  within_deadline([&] {
    launch({"tma_load", {1, 1, 1}, {kThreads, 1, 1}, tile_offset + bytes}, [&] {
      const unsigned tid = isa::thread_linear_idx();
      if (tid == 0) {
        isa::mbarrier_init(kBarrier, 1);
        isa::fence_mbarrier_init();
      }
      isa::sync_threads();  // the barrier exists before anyone waits on it
      if (tid == 0) {
        isa::mbarrier_arrive(kBarrier, static_cast<std::uint32_t>(bytes));
        isa::tma_load<Rank>(tile_offset, map, kBarrier, coords);
      }
      isa::mbarrier_wait_parity(kBarrier, 0);
      const auto tile = isa::shared_array<std::uint8_t>(tile_offset, bytes);
      for (std::size_t i = tid; i < bytes; i += kThreads) shared[i] = tile[i];
    });
  });
  return shared;
}

// The 16-bit elements of a byte image (little-endian, as on the GPU).
std::vector<std::uint16_t> halves(const std::vector<std::uint8_t>& bytes) {
  std::vector<std::uint16_t> out(bytes.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
  return out;
}

TEST(EmulatorTma, Load2dBoxIsTheGlobalSubMatrix) {
  const std::vector<std::uint16_t> matrix = numbered_matrix(40, 72);
  const isa::TensorMap map = cuda::emulated_tensor_map(matrix.data(), matrix_shape(40, 72, 16, 8));
  const std::vector<std::uint16_t> got = halves(load_box<2>(map, {24, 10}, 16 * 8 * 2));
  EXPECT_EQ(got, expected_box(matrix, 40, 72, 24, 10, 16, 8));
  EXPECT_EQ(got[0], matrix[10 * 72 + 24]);  // box element (0, 0) is matrix (row 10, col 24)
}

TEST(EmulatorTma, OutOfBoundsElementsLoadAsZeros) {
  const std::vector<std::uint16_t> matrix = numbered_matrix(40, 72);
  const isa::TensorMap map = cuda::emulated_tensor_map(matrix.data(), matrix_shape(40, 72, 32, 16));
  struct Case {
    int c0, c1;
    std::size_t zeros;  // elements outside the matrix, counted by hand
  };
  for (const Case& test : {Case{56, 32, 32 * 16 - 16 * 8},   // off the right (cols 72..87) and bottom (rows 40..47)
                           Case{-8, -5, 32 * 16 - 24 * 11},  // negative: cols -8..-1 and rows -5..-1 are outside
                           Case{200, 3, 32 * 16},            // wholly outside: all zeros, the bytes still complete_tx
                           Case{40, 24, 0}}) {               // touching the corner from inside
    SCOPED_TRACE(std::to_string(test.c0) + ", " + std::to_string(test.c1));
    const std::vector<std::uint16_t> got = halves(load_box<2>(map, {test.c0, test.c1}, 32 * 16 * 2));
    const std::vector<std::uint16_t> want = expected_box(matrix, 40, 72, test.c0, test.c1, 32, 16);
    EXPECT_EQ(got, want);
    std::size_t zeros = 0;
    for (std::uint16_t v : got) zeros += v == 0;
    EXPECT_EQ(zeros, test.zeros);
  }
}

// Where the swizzle puts the 16-byte chunk c of row r of a box whose rows are `span` bytes (the swizzle's
// span, as box[0] · element size is for the kernels' tiles): PTX ISA "Shared Memory Swizzling Modes" for a
// 1024-byte aligned tile: the pattern repeats every 8 rows of 128 bytes, and within that the chunk index
// is XORed with the 128-byte line the row starts in (r · span / 128), modulo the chunks per span.
std::size_t swizzled_chunk_position(std::size_t r, std::size_t c, std::size_t span) {
  const std::size_t chunks = span / 16;       // 2, 4 or 8: also the XOR mask + 1
  const std::size_t line = r * span / 128;    // which 128-byte line the row starts in
  return r * span + ((c ^ (line % 8 % chunks)) * 16);
}

TEST(EmulatorTma, EachSwizzleModePlacesChunksAtTheXorPosition) {
  struct Mode {
    isa::TmaSwizzle swizzle;
    std::uint32_t span;
  };
  const std::vector<std::uint16_t> matrix = numbered_matrix(64, 128);
  for (const Mode& mode : {Mode{isa::TmaSwizzle::bytes32, 32}, Mode{isa::TmaSwizzle::bytes64, 64},
                           Mode{isa::TmaSwizzle::bytes128, 128}}) {
    SCOPED_TRACE(std::to_string(mode.span) + "B swizzle");
    const std::uint32_t box_cols = mode.span / 2, box_rows = 16;  // two repeats of the pattern for 32B and 64B
    const isa::TensorMap map =
        cuda::emulated_tensor_map(matrix.data(), matrix_shape(64, 128, box_cols, box_rows, mode.swizzle));
    const std::vector<std::uint16_t> got = halves(load_box<2>(map, {8, 4}, std::size_t{box_cols} * box_rows * 2));
    const std::vector<std::uint16_t> logical = expected_box(matrix, 64, 128, 8, 4, box_cols, box_rows);
    for (std::size_t r = 0; r < box_rows; ++r)
      for (std::size_t c = 0; c < mode.span / 16; ++c)
        for (std::size_t e = 0; e < 8; ++e)  // the chunk's 8 elements move together
          ASSERT_EQ(got[(swizzled_chunk_position(r, c, mode.span)) / 2 + e], logical[r * box_cols + c * 8 + e])
              << "row " << r << " chunk " << c << " element " << e;
  }
}

TEST(EmulatorTma, Swizzle128OfAn8x64TileMatchesTheXorFormula) {
  // The FA-3 tile: 8 rows of 64 16-bit elements, 128B swizzle: chunk c of row r lands at
  // r·128 + (c ^ (r % 8))·16.
  const std::vector<std::uint16_t> matrix = numbered_matrix(8, 64);
  const isa::TensorMap map =
      cuda::emulated_tensor_map(matrix.data(), matrix_shape(8, 64, 64, 8, isa::TmaSwizzle::bytes128));
  const std::vector<std::uint16_t> got = halves(load_box<2>(map, {0, 0}, 8 * 128));
  for (std::size_t r = 0; r < 8; ++r)
    for (std::size_t c = 0; c < 8; ++c)
      for (std::size_t e = 0; e < 8; ++e)
        ASSERT_EQ(got[(r * 128 + ((c ^ (r % 8)) * 16)) / 2 + e], matrix[r * 64 + c * 8 + e]) << r << " " << c;
  // The same box at a tile 128 bytes past a 1024-byte boundary: hardware swizzles the address, so row r
  // takes the XOR of line r + 1 (the emulator applies the pattern to the shared offset, likewise).
  const std::vector<std::uint16_t> shifted = halves(load_box<2>(map, {0, 0}, 8 * 128, kTile + 128));
  for (std::size_t r = 0; r < 8; ++r)
    for (std::size_t c = 0; c < 8; ++c)
      ASSERT_EQ(shifted[(r * 128 + ((c ^ ((r + 1) % 8)) * 16)) / 2], matrix[r * 64 + c * 8]) << r << " " << c;
  EXPECT_EQ(swizzle_offset(3 * 128 + 5 * 16 + 7, 3), 3 * 128 + (5 ^ 3) * 16 + 7);
  EXPECT_EQ(swizzle_offset(swizzle_offset(1000, 2), 2), 1000u) << "an involution";
}

TEST(EmulatorTma, TheMbarrierCompletesOnTheLoadsBytes) {
  const std::vector<std::uint16_t> matrix = numbered_matrix(40, 72);
  const isa::TensorMap map = cuda::emulated_tensor_map(matrix.data(), matrix_shape(40, 72, 32, 8));
  constexpr std::uint32_t bytes = 32 * 8 * 2;
  // Warp 0 produces (lane 0 issues); warp 1 consumes, waiting on phase 0 before reading the tile. The
  // producer records whether phase 0 had completed after the expect_tx and after the load.
  std::vector<int> phase_done(2, -1);
  std::vector<std::uint16_t> consumed(32 * 8, 0xeeee);
  within_deadline([&] {
    launch({"tma_producer_consumer", {1, 1, 1}, {64, 1, 1}, kTile + bytes}, [&] {
      const unsigned tid = isa::thread_linear_idx();
      if (tid == 0) {
        isa::mbarrier_init(kBarrier, 1);
        isa::fence_mbarrier_init();
      }
      isa::sync_threads();  // the barrier exists before anyone waits on it
      if (isa::warp_id() == 0) {
        if (isa::elect_sync()) {
          isa::prefetch_tensor_map(map);
          isa::mbarrier_arrive(kBarrier, bytes);
          phase_done[0] = mbarrier_test_parity(kBarrier, 0);  // the arrival is in, the bytes are not
          isa::tma_load<2>(kTile, map, kBarrier, {8, 20});
          phase_done[1] = mbarrier_test_parity(kBarrier, 0);
        }
      } else {
        isa::mbarrier_wait_parity(kBarrier, 0);
        const auto tile = isa::shared_array<std::uint16_t>(kTile, 32 * 8);
        for (std::size_t i = isa::lane_id(); i < tile.size(); i += 32) consumed[i] = tile[i];
      }
    });
  });
  EXPECT_EQ(phase_done, (std::vector<int>{0, 1}));
  EXPECT_EQ(consumed, expected_box(matrix, 40, 72, 8, 20, 32, 8));
}

TEST(EmulatorTma, AWrongExpectTxIsReportedAsADeadlock) {
  const std::vector<std::uint16_t> matrix = numbered_matrix(40, 72);
  const isa::TensorMap map = cuda::emulated_tensor_map(matrix.data(), matrix_shape(40, 72, 32, 8));
  constexpr std::uint32_t bytes = 32 * 8 * 2;
  for (const std::int64_t announced : {std::int64_t{bytes} + 128, std::int64_t{bytes} - 128}) {
    SCOPED_TRACE(announced);
    const std::string message = launch_error({"tma_wrong_expect_tx", {1, 1, 1}, {32, 1, 1}, kTile + bytes}, [&] {
      if (isa::thread_linear_idx() == 0) isa::mbarrier_init(kBarrier, 1);
      isa::sync_threads();
      if (isa::thread_linear_idx() == 0) {
        isa::mbarrier_arrive(kBarrier, static_cast<std::uint32_t>(announced));
        isa::tma_load<2>(kTile, map, kBarrier, {0, 0});
      }
      isa::mbarrier_wait_parity(kBarrier, 0);
    });
    // More announced than delivered: 128 bytes stay pending. Fewer: the count goes 128 below zero and the
    // phase never completes either.
    expect_mentions(message, {"kernel 'tma_wrong_expect_tx'", "deadlock",
                              "wait on the mbarrier at shared offset 0 for its phase of parity 0",
                              std::to_string(announced - bytes) + " transaction bytes pending"});
  }
}

TEST(EmulatorTma, Load4dBoxOfAnAttentionTensor) {
  // K as the attention kernels hold it: [batch 2][seq 100][heads 3][head_dim 64] of 16-bit values. The map
  // walks head_dim, seq, heads, batch (dims (64, 100, 3, 2)); a box of (64, 32, 1, 1) is 32 keys of one
  // head. Rows 96..127 of head 1, batch 1: rows 96..99 exist, the rest load as zeros. 128B swizzle, as
  // the kernels use for 64-wide 16-bit rows.
  constexpr std::size_t batch = 2, seq = 100, heads = 3, dim = 64;
  std::vector<std::uint16_t> k(batch * seq * heads * dim);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::uint16_t>(i % 65521 + 1);
  TensorMapShape shape;
  shape.rank = 4;
  shape.element_bytes = 2;
  const std::uint64_t dims[4] = {dim, seq, heads, batch};
  const std::uint64_t strides[4] = {2, heads * dim * 2, dim * 2, seq * heads * dim * 2};
  const std::uint32_t box[4] = {64, 32, 1, 1};
  for (int d = 0; d < 4; ++d) {
    shape.dims[d] = dims[d];
    shape.strides_bytes[d] = strides[d];
    shape.box[d] = box[d];
  }
  shape.swizzle = isa::TmaSwizzle::bytes128;
  ASSERT_EQ(cuda::box_bytes(shape), 64u * 32u * 2u);
  const isa::TensorMap map = cuda::emulated_tensor_map(k.data(), shape);
  const std::vector<std::uint16_t> got = halves(load_box<4>(map, {0, 96, 1, 1}, cuda::box_bytes(shape)));
  for (std::size_t row = 0; row < 32; ++row)
    for (std::size_t d = 0; d < dim; ++d) {
      const std::size_t s = 96 + row;
      const std::uint16_t want = s < seq ? k[((1 * seq + s) * heads + 1) * dim + d] : std::uint16_t{0};
      const std::size_t chunk = d / 8;
      const std::size_t at = (row * 128 + ((chunk ^ (row % 8)) * 16)) / 2 + d % 8;
      ASSERT_EQ(got[at], want) << "row " << row << " d " << d;
    }
}

TEST(EmulatorTma, StoreRoundTripAndStoresOnlyInsideTheTensor) {
  const std::vector<std::uint16_t> source = numbered_matrix(40, 72);
  constexpr std::uint16_t untouched = 0xabab;
  std::vector<std::uint16_t> destination(40 * 72, untouched);
  for (isa::TmaSwizzle swizzle : {isa::TmaSwizzle::none, isa::TmaSwizzle::bytes128}) {
    SCOPED_TRACE(static_cast<int>(swizzle));
    std::fill(destination.begin(), destination.end(), untouched);
    const isa::TensorMap load_map = cuda::emulated_tensor_map(source.data(), matrix_shape(40, 72, 64, 16, swizzle));
    const isa::TensorMap store_map =
        cuda::emulated_tensor_map(destination.data(), matrix_shape(40, 72, 64, 16, swizzle));
    constexpr std::uint32_t bytes = 64 * 16 * 2;
    // Load the box at (4, 2) and store it back at (4, 2); load the box at (0, 30) and store it at (40, 30),
    // where it hangs off the right edge (cols 72..103) and the bottom (rows 40..45): only the 32 x 10
    // elements inside may be written.
    within_deadline([&] {
      launch({"tma_store", {1, 1, 1}, {32, 1, 1}, kTile + 2 * bytes}, [&] {
        if (isa::thread_linear_idx() == 0) {
          isa::mbarrier_init(kBarrier, 1);
          isa::fence_mbarrier_init();
        }
        isa::sync_threads();
        if (isa::thread_linear_idx() == 0) {
          isa::mbarrier_arrive(kBarrier, 2 * bytes);
          isa::tma_load<2>(kTile, load_map, kBarrier, {4, 2});
          isa::tma_load<2>(kTile + bytes, load_map, kBarrier, {0, 30});
          isa::mbarrier_wait_parity(kBarrier, 0);
          isa::tma_store<2>(store_map, kTile, {4, 2});
          isa::tma_store<2>(store_map, kTile + bytes, {40, 30});
          isa::tma_store_commit_group();
          isa::tma_store_wait_group_read<0>();
          isa::tma_store_wait_group<0>();
        }
      });
    });
    for (long r = 0; r < 40; ++r)
      for (long c = 0; c < 72; ++c) {
        std::uint16_t want = untouched;
        if (r >= 2 && r < 18 && c >= 4 && c < 68) want = source[std::size_t(r * 72 + c)];  // the round trip
        if (r >= 30 && c >= 40) want = source[std::size_t(r * 72 + (c - 40))];            // the shifted box
        ASSERT_EQ(destination[std::size_t(r * 72 + c)], want) << "row " << r << " col " << c;
      }
  }
}

TEST(EmulatorTma, StoreWritesWhatThreadsPutInSharedMemory) {
  // The epilogue's use: threads write the tile (no swizzle) and one thread stores it; a 1-D map of 256
  // 32-bit values stored at 160 writes elements 160..255 only (the box's last 32 hang off the end).
  std::vector<std::uint32_t> out(256, 0xabababab);
  TensorMapShape shape;
  shape.rank = 1;
  shape.element_bytes = 4;
  shape.dims[0] = out.size();
  shape.strides_bytes[0] = 4;
  shape.box[0] = 128;
  const isa::TensorMap map = cuda::emulated_tensor_map(out.data(), shape);
  within_deadline([&] {
    launch({"tma_store_1d", {1, 1, 1}, {128, 1, 1}, kTile + 512}, [&] {
      const unsigned tid = isa::thread_linear_idx();
      isa::shared_array<std::uint32_t>(kTile, 128)[tid] = 1000 + tid;
      isa::fence_proxy_async();
      isa::sync_threads();  // the whole tile is written before it is stored
      if (tid == 0) {
        isa::tma_store<1>(map, kTile, {160});
        isa::tma_store_commit_group();
        isa::tma_store_wait_group<0>();
      }
    });
  });
  for (std::size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], i >= 160 ? 1000 + (i - 160) : 0xababababu) << i;
}

// The message of emulated_tensor_map's std::invalid_argument ("" if it accepted the shape).
std::string rejection(const void* base, const TensorMapShape& shape) {
  try {
    (void)cuda::emulated_tensor_map(base, shape);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(EmulatorTma, TensorMapsFollowTheDriversRules) {
  alignas(16) static std::uint16_t matrix[64 * 128];
  const TensorMapShape good = matrix_shape(64, 128, 64, 8, isa::TmaSwizzle::bytes128);
  EXPECT_EQ(rejection(matrix, good), "");
  const auto* bytes = reinterpret_cast<const unsigned char*>(matrix);
  expect_mentions(rejection(bytes + 8, good), {"tensor map:", "not 16-byte aligned"});
  TensorMapShape stride = good;
  stride.strides_bytes[1] = 2 * 128 + 8;
  expect_mentions(rejection(matrix, stride), {"strides_bytes[1] = 264", "not a multiple of 16"});
  TensorMapShape huge_stride = good;
  huge_stride.strides_bytes[1] = std::uint64_t{1} << 40;
  expect_mentions(rejection(matrix, huge_stride), {"below 2^40"});
  TensorMapShape box = good;
  box.swizzle = isa::TmaSwizzle::none;
  box.box[1] = 257;
  expect_mentions(rejection(matrix, box), {"box[1] = 257", "outside 1..256"});
  TensorMapShape wide = good;
  wide.box[0] = 128;  // 256 bytes per row
  expect_mentions(rejection(matrix, wide), {"256 bytes exceeds the 128-byte swizzle span"});
  TensorMapShape wide64 = matrix_shape(64, 128, 64, 8, isa::TmaSwizzle::bytes64);
  expect_mentions(rejection(matrix, wide64), {"128 bytes exceeds the 64-byte swizzle span"});
  TensorMapShape odd_row = matrix_shape(64, 128, 12, 8);  // 24 bytes
  expect_mentions(rejection(matrix, odd_row), {"24 bytes is not a multiple of 16"});
  TensorMapShape rank = good;
  rank.rank = 6;
  expect_mentions(rejection(matrix, rank), {"rank 6 is outside 1..5"});
  TensorMapShape empty = good;
  empty.dims[1] = 0;
  expect_mentions(rejection(matrix, empty), {"dims[1] = 0", "outside 1..2^32"});
  TensorMapShape strided = good;
  strided.strides_bytes[0] = 4;
  expect_mentions(rejection(matrix, strided), {"strides_bytes[0] = 4 is not the element size 2"});
  TensorMapShape element = good;
  element.element_bytes = 8;
  expect_mentions(rejection(matrix, element), {"element size 8 bytes"});
}

TEST(EmulatorTma, MisuseIsReported) {
  const std::vector<std::uint16_t> matrix = numbered_matrix(40, 72);
  const isa::TensorMap map = cuda::emulated_tensor_map(matrix.data(), matrix_shape(40, 72, 64, 8));
  const auto issue = [&](const isa::TensorMap& m, std::size_t tile, auto copy) {
    return [&m, tile, copy] {
      isa::mbarrier_init(kBarrier, 1);
      copy(m, tile);
    };
  };
  const auto load_2d = [](const isa::TensorMap& m, std::size_t tile) { isa::tma_load<2>(tile, m, kBarrier, {0, 0}); };
  // A map never made by emulated_tensor_map (zeroed, or a GPU encoding): refused, naming the instruction.
  const isa::TensorMap zeroed{};
  expect_mentions(launch_error({"tma_zeroed_map", {1, 1, 1}, {1, 1, 1}, 4096}, issue(zeroed, kTile, load_2d)),
                  {"kernel 'tma_zeroed_map'", "cp.async.bulk.tensor.2d.shared::cluster.global",
                   "not made by emulated_tensor_map"});
  const auto store_2d = [](const isa::TensorMap& m, std::size_t tile) { isa::tma_store<2>(m, tile, {0, 0}); };
  expect_mentions(launch_error({"tma_zeroed_store", {1, 1, 1}, {1, 1, 1}, 4096}, issue(zeroed, kTile, store_2d)),
                  {"cp.async.bulk.tensor.2d.global.shared::cta", "not made by emulated_tensor_map"});
  // A store whose box starts before the tensor (an illegal instruction on an H200), where a load is fine.
  const auto store_negative = [](const isa::TensorMap& m, std::size_t tile) { isa::tma_store<2>(m, tile, {0, -1}); };
  expect_mentions(launch_error({"tma_negative_store", {1, 1, 1}, {1, 1, 1}, 4096}, issue(map, kTile, store_negative)),
                  {"cp.async.bulk.tensor.2d.global.shared::cta", "coordinate 1 = -1 < 0", "illegal instruction"});
  // A 3-D copy with a 2-D map.
  const auto load_3d = [](const isa::TensorMap& m, std::size_t tile) {
    isa::tma_load<3>(tile, m, kBarrier, {0, 0, 0});
  };
  expect_mentions(launch_error({"tma_rank", {1, 1, 1}, {1, 1, 1}, 4096}, issue(map, kTile, load_3d)),
                  {"a 3d copy with a tensor map of rank 2"});
  // Shared memory not 128-byte aligned, and a box past the launch's shared memory.
  expect_mentions(launch_error({"tma_misaligned", {1, 1, 1}, {1, 1, 1}, 4096}, issue(map, 64, load_2d)),
                  {"shared memory at byte offset 64 is not aligned to 128 bytes"});
  expect_mentions(launch_error({"tma_outside", {1, 1, 1}, {1, 1, 1}, 1024 + 512}, issue(map, kTile, load_2d)),
                  {"exceed the launch's 1536 bytes of shared memory"});
  // The mbarrier must exist.
  expect_mentions(launch_error({"tma_no_barrier", {1, 1, 1}, {1, 1, 1}, 4096},
                               [&] { isa::tma_load<2>(kTile, map, 8, {0, 0}); }),
                  {"cp.async.bulk.tensor on shared offset 8: no mbarrier was initialized there"});
  // Outside a launch.
  EXPECT_THROW(isa::tma_store_commit_group(), EmulationError);
}

}  // namespace
}  // namespace faprobe::emu
