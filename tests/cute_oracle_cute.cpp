// The CuTe side of the CuTe oracle: the same tables as cute_oracle_emulator.cpp, evaluated from NVIDIA CuTe's
// own layout definitions (the nvidia-cutlass wheel's headers, compiled here with the host compiler; nothing
// of CuTe is copied into faprobe). What each table reads:
//   mma.sync m16n8k16     MMA_Traits<SM80_16x8x16_F32F16F16F32_TN> and <..._F32BF16BF16F32_TN>: ALayout,
//                         BLayout, CLayout, (thread, value) -> m + 16·k, n + 8·k, m + 16·n (cute/atom/mma_traits_sm80.hpp)
//   ldmatrix / stmatrix   Copy_Traits<SM75_U32x{1,2,4}_LDSM_N>, <SM75_U16x{2,4,8}_LDSM_T>, <SM90_U32x{1,2,4}_STSM_N>,
//                         <SM90_U16x{2,4,8}_STSM_T>: (thread, bit) -> bit of the copied rows for the registers and
//                         for the row addresses (cute/atom/copy_traits_sm75.hpp, copy_traits_sm90.hpp)
//   wgmma smem operands   GMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom, tile_to_shape, make_gmma_desc
//                         (cute/atom/mma_traits_sm90_gmma.hpp)
//   wgmma fragments       GMMA::CLayout_64xN (m + 64·n), GMMA::ALayout_64x16 and ALayout_64x32 (m + 64·k), the
//                         layouts of MMA_Traits<SM90_64xNx16_F32F16F16_RS> and the others (checked below)
//   TMA boxes             composition(Swizzle<B, 4, 3>, the box's dense byte layout) (cute/swizzle.hpp)
#include <cute/atom/copy_traits_sm75.hpp>
#include <cute/atom/copy_traits_sm90.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/swizzle.hpp>
#include <cute/tensor.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cute_oracle_tables.hpp"

namespace faprobe::cute_oracle::cute_side {
namespace {

namespace gmma = cute::SM90::GMMA;

// The layouts faprobe compares against are those the MMA atoms use (a check that the names below are the
// traits' own).
static_assert(std::is_same_v<cute::MMA_Traits<cute::SM90_64x64x16_F32F16F16_RS<gmma::Major::K, gmma::Major::K>>::ALayout,
                             gmma::ALayout_64x16>);
static_assert(std::is_same_v<cute::MMA_Traits<cute::SM90_64x64x16_F32BF16BF16_RS<gmma::Major::K, gmma::Major::K>>::ALayout,
                             gmma::ALayout_64x16>);
static_assert(std::is_same_v<cute::MMA_Traits<cute::SM90_64x64x32_F32E4M3E4M3_RS_TN<>>::ALayout, gmma::ALayout_64x32>);
static_assert(std::is_same_v<cute::MMA_Traits<cute::SM90_64x64x16_F32F16F16_SS<gmma::Major::K, gmma::Major::K>>::CLayout,
                             gmma::CLayout_64xN<64>>);
static_assert(std::is_same_v<cute::MMA_Traits<cute::SM90_64x256x16_F32BF16BF16_SS<gmma::Major::K, gmma::Major::MN>>::CLayout,
                             gmma::CLayout_64xN<256>>);

template <class Layout>
long at(const Layout& layout, int thread, int value) {
  return static_cast<long>(layout(thread, value));
}

template <class Op>
MmaLayouts mma_from_traits(const std::string& family) {
  using Traits = cute::MMA_Traits<Op>;
  const typename Traits::ALayout a{};
  const typename Traits::BLayout b{};
  const typename Traits::CLayout c{};
  MmaLayouts layouts{empty_table(family + " A", {{"thread", 32}, {"value", 8}}, {{"m", 16}, {"k", 16}}),
                     empty_table(family + " B", {{"thread", 32}, {"value", 4}}, {{"n", 8}, {"k", 16}}),
                     empty_table(family + " C", {{"thread", 32}, {"value", 4}}, {{"m", 16}, {"n", 8}})};
  for (int t = 0; t < 32; ++t) {
    for (int v = 0; v < 8; ++v) {
      const long mk = at(a, t, v);  // m + 16·k
      layouts.a.image[static_cast<std::size_t>(t * 8 + v)] = (mk % 16) * 16 + mk / 16;
    }
    for (int v = 0; v < 4; ++v) {
      const long nk = at(b, t, v);  // n + 8·k
      layouts.b.image[static_cast<std::size_t>(t * 4 + v)] = (nk % 8) * 16 + nk / 8;
      const long mn = at(c, t, v);  // m + 16·n
      layouts.c.image[static_cast<std::size_t>(t * 4 + v)] = (mn % 16) * 8 + mn / 16;
    }
  }
  return layouts;
}

// A copy atom's two sides in CuTe's bit space (the rows copied, 128 bits each): the registers, (thread, bit
// of the thread's registers) -> bit, and the addresses, (thread, bit of the row it names) -> bit.
template <class RegisterLayout, class AddressLayout>
LayoutTable copy_table(const std::string& family, unsigned matrices) {
  const RegisterLayout registers{};
  const AddressLayout addresses{};
  LayoutTable table = empty_table(family, {{"thread", 32}, {"register", matrices}, {"half", 2}},
                                  {{"row of lane", 32}, {"element", 8}});
  // Which lane names each row: the first thread whose address side maps bit 0 of its row there (CuTe maps
  // the lanes whose addresses the instruction ignores onto the same rows, with stride 0).
  std::vector<long> lane_of_row(8u * matrices, -1);
  for (int t = 31; t >= 0; --t) {
    const long bit = at(addresses, t, 0);
    bool whole_row = bit % 128 == 0 && bit / 128 < static_cast<long>(lane_of_row.size());
    for (int j = 1; j < 128 && whole_row; ++j) whole_row = at(addresses, t, j) == bit + j;
    if (whole_row) lane_of_row[static_cast<std::size_t>(bit / 128)] = t;
  }
  for (int t = 0; t < 32; ++t)
    for (unsigned r = 0; r < matrices; ++r)
      for (unsigned h = 0; h < 2; ++h) {
        const int value = static_cast<int>(32 * r + 16 * h);
        const long bit = at(registers, t, value);
        bool whole_element = bit % 16 == 0;
        for (int j = 1; j < 16 && whole_element; ++j) whole_element = at(registers, t, value + j) == bit + j;
        const long row = bit / 128;
        if (!whole_element || row >= static_cast<long>(lane_of_row.size()) || lane_of_row[static_cast<std::size_t>(row)] < 0)
          continue;
        table.image[(static_cast<std::size_t>(t) * matrices + r) * 2 + h] =
            lane_of_row[static_cast<std::size_t>(row)] * 8 + (bit % 128) / 16;
      }
  return table;
}

template <class Op>
LayoutTable load_table(const std::string& family, unsigned matrices) {
  using Traits = cute::Copy_Traits<Op>;
  return copy_table<typename Traits::DstLayout, typename Traits::SrcLayout>(family, matrices);
}
template <class Op>
LayoutTable store_table(const std::string& family, unsigned matrices) {
  using Traits = cute::Copy_Traits<Op>;
  return copy_table<typename Traits::SrcLayout, typename Traits::DstLayout>(family, matrices);
}

// --- wgmma shared-memory operands. The tile's memory: 1024-byte aligned (the swizzle acts on address bits)
// and large enough for every tile of gmma_tiles(). Only addresses are formed; nothing is read or written.
alignas(1024) unsigned char tile_memory[1 << 16];

constexpr int atom_contiguous_elements(int bytes, int swizzle) { return (16 << swizzle) / bytes; }
constexpr int tile_rows(int bytes, bool mn_major, int swizzle) {
  return mn_major ? (2 * atom_contiguous_elements(bytes, swizzle) < 64 ? 64 : 2 * atom_contiguous_elements(bytes, swizzle))
                  : 128;
}
constexpr int tile_depth(int bytes, bool mn_major, int swizzle) {
  return mn_major ? 2 * (32 / bytes)
                  : (2 * atom_contiguous_elements(bytes, swizzle) > 2 * (32 / bytes) ? 2 * atom_contiguous_elements(bytes, swizzle)
                                                                                   : 2 * (32 / bytes));
}

template <class Element, gmma::Major Major, int Swizzle>
auto gmma_atom() {
  if constexpr (Swizzle == 0) return gmma::Layout_INTER_Atom<Element, Major>{};
  else if constexpr (Swizzle == 1) return gmma::Layout_SW32_Atom<Element, Major>{};
  else if constexpr (Swizzle == 2) return gmma::Layout_SW64_Atom<Element, Major>{};
  else return gmma::Layout_SW128_Atom<Element, Major>{};
}

// Off the GPU, CuTe's cast_smem_ptr_to_uint (which make_gmma_desc calls for the start address) prints an
// error line to stdout and returns 0; the start address is filled in afterwards, so the line is only noise
// in the test's output and goes to /dev/null while a descriptor is made.
class QuietStdout {
 public:
  QuietStdout() {
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (saved_ >= 0 && null >= 0) dup2(null, STDOUT_FILENO);
    if (null >= 0) close(null);
  }
  ~QuietStdout() {
    std::fflush(stdout);
    if (saved_ >= 0) {
      dup2(saved_, STDOUT_FILENO);
      close(saved_);
    }
  }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;

 private:
  int saved_ = -1;
};

struct GmmaResult {
  std::vector<std::uint64_t> descriptors;
  LayoutTable offsets;
};

template <int Bytes, bool MnMajor, int Swizzle, bool KFirst>
GmmaResult gmma_from_cute(const GmmaTile& tile) {
  using namespace cute;
  using Element = std::conditional_t<Bytes == 2, half_t, float_e4m3_t>;
  constexpr gmma::Major major = MnMajor ? gmma::Major::MN : gmma::Major::K;
  constexpr int rows = tile_rows(Bytes, MnMajor, Swizzle), depth = tile_depth(Bytes, MnMajor, Swizzle);
  constexpr int k_step = 32 / Bytes;
  static_assert(rows * depth * Bytes <= static_cast<int>(sizeof tile_memory), "the tile fits its memory");
  if (static_cast<int>(tile.rows) != rows || static_cast<int>(tile.depth) != depth)
    throw std::logic_error("gmma_from_cute: " + gmma_tile_name(tile) + " is not the tile instantiated here");
  const auto shape = Shape<Int<rows>, Int<depth>>{};
  const auto layout = [&] {
    if constexpr (KFirst) return tile_to_shape(gmma_atom<Element, major, Swizzle>(), shape, Step<_2, _1>{});
    else return tile_to_shape(gmma_atom<Element, major, Swizzle>(), shape);
  }();
  Element* base = reinterpret_cast<Element*>(tile_memory);
  const auto tensor = make_tensor(make_smem_ptr(base), layout);
  GmmaResult result{{}, empty_table("wgmma operand offsets of " + gmma_tile_name(tile), {{"row", rows}, {"k", depth}},
                                    {{"byte offset", 1L << 40}})};
  for (int row = 0; row < rows; ++row)
    for (int k = 0; k < depth; ++k)
      result.offsets.image[static_cast<std::size_t>(row * depth + k)] =
          static_cast<long>(reinterpret_cast<const unsigned char*>(&tensor(row, k)) - tile_memory);
  const QuietStdout quiet;
  for (int s = 0; s < depth / k_step; ++s) {
    const auto slice = local_tile(tensor, Shape<Int<rows>, Int<k_step>>{}, make_coord(0, s));
    GmmaDescriptor descriptor = gmma::make_gmma_desc<major>(slice);
    // make_gmma_desc takes the start address from cast_smem_ptr_to_uint, which is 0 off the GPU: the
    // slice's first byte, as an offset into the tile's memory, is what it would be in shared memory.
    const auto* first = reinterpret_cast<const unsigned char*>(raw_pointer_cast(slice.data()));
    descriptor.bitfield.start_address_ = static_cast<std::uint16_t>((first - tile_memory) >> 4);
    result.descriptors.push_back(descriptor.desc_);
  }
  return result;
}

GmmaResult gmma_dispatch(const GmmaTile& tile) {
  const int swizzle = static_cast<int>(tile.swizzle);
  const auto pick = [&](auto bytes, auto mn_major) -> GmmaResult {
    constexpr int b = decltype(bytes)::value;
    constexpr bool mn = decltype(mn_major)::value;
    switch (swizzle * 2 + (tile.k_atoms_first ? 1 : 0)) {
      case 0: return gmma_from_cute<b, mn, 0, false>(tile);
      case 1: return gmma_from_cute<b, mn, 0, true>(tile);
      case 2: return gmma_from_cute<b, mn, 1, false>(tile);
      case 3: return gmma_from_cute<b, mn, 1, true>(tile);
      case 4: return gmma_from_cute<b, mn, 2, false>(tile);
      case 5: return gmma_from_cute<b, mn, 2, true>(tile);
      case 6: return gmma_from_cute<b, mn, 3, false>(tile);
      default: return gmma_from_cute<b, mn, 3, true>(tile);
    }
  };
  if (tile.element_bytes == 2)
    return tile.mn_major ? pick(std::integral_constant<int, 2>{}, std::true_type{})
                         : pick(std::integral_constant<int, 2>{}, std::false_type{});
  if (tile.element_bytes == 1 && !tile.mn_major) return pick(std::integral_constant<int, 1>{}, std::false_type{});
  throw std::invalid_argument("gmma tiles: " + gmma_tile_name(tile) + " is not a wgmma operand layout");
}

// --- wgmma register fragments. ---
std::string wgmma_family(WgmmaElement element, const std::string& n, const char* what) {
  return "wgmma m64n" + n + "k" + std::to_string(wgmma_k(element)) + " " + wgmma_element_name(element) + " " + what;
}

template <int N>
LayoutTable d_layout(const std::string& family) {
  const gmma::CLayout_64xN<N> layout{};
  LayoutTable table = empty_table(family, {{"thread", 128}, {"value", N / 2}}, {{"m", 64}, {"n", N}});
  for (int t = 0; t < 128; ++t)
    for (int v = 0; v < N / 2; ++v) {
      const long mn = at(layout, t, v);  // m + 64·n
      table.image[static_cast<std::size_t>(t * (N / 2) + v)] = (mn % 64) * N + mn / 64;
    }
  return table;
}

template <std::size_t... I>
LayoutTable d_layout_of_width(unsigned n, const std::string& family, std::index_sequence<I...>) {
  using Maker = LayoutTable (*)(const std::string&);
  static constexpr Maker makers[] = {&d_layout<8 * static_cast<int>(I + 1)>...};
  if (n == 0 || n % 8 != 0 || n / 8 > sizeof...(I)) throw std::invalid_argument("wgmma N must be a multiple of 8 in 8..256");
  return makers[n / 8 - 1](family);
}

template <class Layout, int K, int Values>
LayoutTable a_layout(const std::string& family) {
  const Layout layout{};
  LayoutTable table = empty_table(family, {{"thread", 128}, {"value", Values}}, {{"m", 64}, {"k", K}});
  for (int t = 0; t < 128; ++t)
    for (int v = 0; v < Values; ++v) {
      const long mk = at(layout, t, v);  // m + 64·k
      table.image[static_cast<std::size_t>(t * Values + v)] = (mk % 64) * K + mk / 64;
    }
  return table;
}

template <int B>
LayoutTable tma_table(const TmaBox& box) {
  using namespace cute;
  const int row_bytes = static_cast<int>(box.row_bytes), rows = static_cast<int>(box.box_rows * box.box_depth);
  // The box lands densely, row after row (box[0] fastest); TMA then swizzles the byte addresses.
  const auto layout = composition(Swizzle<B, 4, 3>{}, make_layout(make_shape(row_bytes, rows), make_stride(Int<1>{}, row_bytes)));
  LayoutTable table = empty_table(tma_box_name(box), {{"row", rows}, {"byte", row_bytes}}, {{"byte offset", 1L << 40}});
  for (int row = 0; row < rows; ++row)
    for (int byte = 0; byte < row_bytes; ++byte)
      table.image[static_cast<std::size_t>(row * row_bytes + byte)] = static_cast<long>(layout(byte, row));
  return table;
}

}  // namespace

MmaLayouts mma_layouts(MmaElement element) {
  const std::string family = std::string("mma.m16n8k16 ") + mma_element_name(element);
  return element == MmaElement::f16 ? mma_from_traits<cute::SM80_16x8x16_F32F16F16F32_TN>(family)
                                    : mma_from_traits<cute::SM80_16x8x16_F32BF16BF16F32_TN>(family);
}

LayoutTable ldmatrix_layout(unsigned matrices, bool transpose) {
  const std::string family = ldmatrix_family("ldmatrix", matrices, transpose);
  switch (matrices * 2 + (transpose ? 1 : 0)) {
    case 2: return load_table<cute::SM75_U32x1_LDSM_N>(family, 1);
    case 3: return load_table<cute::SM75_U16x2_LDSM_T>(family, 1);
    case 4: return load_table<cute::SM75_U32x2_LDSM_N>(family, 2);
    case 5: return load_table<cute::SM75_U16x4_LDSM_T>(family, 2);
    case 8: return load_table<cute::SM75_U32x4_LDSM_N>(family, 4);
    case 9: return load_table<cute::SM75_U16x8_LDSM_T>(family, 4);
    default: throw std::invalid_argument("ldmatrix loads 1, 2 or 4 matrices");
  }
}

LayoutTable stmatrix_layout(unsigned matrices, bool transpose) {
  const std::string family = ldmatrix_family("stmatrix", matrices, transpose);
  switch (matrices * 2 + (transpose ? 1 : 0)) {
    case 2: return store_table<cute::SM90_U32x1_STSM_N>(family, 1);
    case 3: return store_table<cute::SM90_U16x2_STSM_T>(family, 1);
    case 4: return store_table<cute::SM90_U32x2_STSM_N>(family, 2);
    case 5: return store_table<cute::SM90_U16x4_STSM_T>(family, 2);
    case 8: return store_table<cute::SM90_U32x4_STSM_N>(family, 4);
    case 9: return store_table<cute::SM90_U16x8_STSM_T>(family, 4);
    default: throw std::invalid_argument("stmatrix stores 1, 2 or 4 matrices");
  }
}

std::vector<std::uint64_t> gmma_descriptors(const GmmaTile& tile) { return gmma_dispatch(tile).descriptors; }
LayoutTable gmma_offsets(const GmmaTile& tile) { return gmma_dispatch(tile).offsets; }

LayoutTable wgmma_d_layout(WgmmaElement element, unsigned n) {
  return d_layout_of_width(n, wgmma_family(element, std::to_string(n), "D"), std::make_index_sequence<32>{});
}

LayoutTable wgmma_a_layout(WgmmaElement element) {
  const std::string family = wgmma_family(element, "N", "A from registers");
  if (element == WgmmaElement::e4m3) return a_layout<gmma::ALayout_64x32, 32, 16>(family);
  return a_layout<gmma::ALayout_64x16, 16, 8>(family);
}

LayoutTable tma_box_layout(const TmaBox& box) {
  switch (box.swizzle_bits) {
    case 0: return tma_table<0>(box);
    case 1: return tma_table<1>(box);
    case 2: return tma_table<2>(box);
    case 3: return tma_table<3>(box);
    default: throw std::invalid_argument("TMA swizzles 0 to 3 bits");
  }
}

}  // namespace faprobe::cute_oracle::cute_side
