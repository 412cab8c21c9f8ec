// The CuTe oracle's layouts as data: each instruction family's mapping (which register of which thread holds
// which matrix element, where a byte of a tile lives) as a table from a domain to an image, built twice: by
// the emulator side (cute_oracle_emulator.cpp), which recovers it by driving the emulator with inputs that
// encode positions, and by the CuTe side (cute_oracle_cute.cpp), which evaluates NVIDIA CuTe's layout
// definitions on the host. compare_layouts() then checks them element by element; because the emulator's
// table is plain data, a test can plant a defect in it (swap two entries, flip a swizzle bit) and show that
// the comparison names the family and the first element that differs.
//
// Tables are indexed row-major over their named axes: the domain (thread, value), (row, k), ... and the
// image the same way, so that a mismatch is reported as "thread 5, value 3: CuTe (m 2, k 6), emulator
// (m 10, k 6)". An image entry of -1 is an element the emulator side could not recover (nothing landed
// there, or it landed twice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace faprobe::cute_oracle {

struct Axis {
  std::string name;
  long extent = 0;
};
using Axes = std::vector<Axis>;

// The number of points of the axes (their extents multiplied).
long axes_size(const Axes& axes);
// The row-major index of the coordinates (one per axis, the last fastest).
long flat_index(const Axes& axes, const std::vector<long>& coordinates);
// "thread 5, value 3" for the point of the axes at index; "none" for -1; the plain number when it is past
// the axes (an image the other side does not have).
std::string describe_point(const Axes& axes, long index);

struct LayoutTable {
  std::string family;     // the instruction family and variant: "mma.m16n8k16 f16 A", "ldmatrix.x4.trans"
  Axes domain;            // what is mapped: (thread, value), (row, k), (byte of the box) ...
  Axes image_axes;        // what it maps to: (m, k), (byte offset) ...
  std::vector<long> image;  // image[domain index]: a point of image_axes, or -1
};

// A table of the given family and axes, every entry -1.
LayoutTable empty_table(std::string family, Axes domain, Axes image_axes);

struct LayoutComparison {
  std::size_t compared = 0;    // domain elements compared
  std::size_t mismatches = 0;  // of them, those whose images differ
  std::string report;          // "" when equal; else the family, the count and the first differing element
  bool equal() const { return report.empty(); }
};

// Compares the emulator's table with CuTe's, every element; an element that either side left at -1 is a
// mismatch. Tables of different families or axes are a mismatch in themselves (reported as such, nothing
// compared).
LayoutComparison compare_layouts(const LayoutTable& cute, const LayoutTable& emulator);

// --- mma.sync m16n8k16: A (thread, value) -> (m, k), B (thread, value) -> (n, k), C (thread, value) -> (m, n).
// A value index v is register v / 2, half v % 2 (the lower half first), as CuTe counts the half_t values of a
// fragment; for C it is the register. ---
struct MmaLayouts {
  LayoutTable a, b, c;
};
enum class MmaElement { f16, bf16 };
const char* mma_element_name(MmaElement element);

// A matrix product fixes its fragment layouts only up to renaming the rows m (in A and C together), the
// columns n (B and C) and the k index (A and B): the product is the same function of the fragments after
// any such renaming. The emulator side therefore recovers labels, not coordinates; this renames them to
// CuTe's: each emulator label takes CuTe's coordinate at its first occurrence (m and k in A's table, in
// domain order; n in B's). When the emulator's layouts are CuTe's up to renaming, the renamed tables are
// CuTe's exactly; when they are not, compare_layouts() reports where they differ.
MmaLayouts rename_mma_labels_to(const MmaLayouts& cute, const MmaLayouts& emulator);

// --- ldmatrix / stmatrix .m8n8.x<matrices>[.trans].b16: (thread, register, half) -> (row, element): the
// element-th 16-bit element of the 16-byte row whose address lane `row` supplied. ---
std::string ldmatrix_family(const char* instruction, unsigned matrices, bool transpose);

// --- wgmma shared-memory operands: a tile of `rows` (M or N) by `depth` (K) elements built from one
// canonical layout atom (CuTe's GMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom), repeated over the tile
// along rows first (CuTe's tile_to_shape default) or along K first, 1024-byte aligned. ---
enum class GmmaSwizzle { interleave, bytes32, bytes64, bytes128 };  // CuTe's names: INTER, SW32, SW64, SW128
struct GmmaTile {
  unsigned element_bytes = 2;  // 2 (f16, bf16) or 1 (e4m3, K-major only)
  bool mn_major = false;
  GmmaSwizzle swizzle = GmmaSwizzle::interleave;
  bool k_atoms_first = false;  // atoms repeated along K first (the FA-3 kernel's V tile), else along rows
  unsigned rows = 128;
  unsigned depth = 64;
};
// The tiles compared: every swizzle, both majors (MN-major for 16-bit elements only, as wgmma allows), both
// atom orders.
std::vector<GmmaTile> gmma_tiles();
std::string gmma_tile_name(const GmmaTile& tile);
unsigned gmma_k_per_step(const GmmaTile& tile);  // K of one wgmma: 32 bytes of it (16 or 32 elements)
// The descriptor fields of each k-step's descriptor, (step, field) -> value, fields in this order:
inline constexpr const char* gmma_descriptor_fields[] = {"start address >> 4", "leading byte offset >> 4",
                                                          "stride byte offset >> 4", "base offset",
                                                          "layout type", "other bits"};
LayoutTable descriptor_field_table(const GmmaTile& tile, const std::vector<std::uint64_t>& descriptors);

// --- wgmma register fragments: D (thread, value) -> (m, n) for m64nNk*, and A from registers (thread,
// value) -> (m, k); a value index is the accumulator register for D, and for A register v / 2, half v % 2
// (16-bit) or register v / 4, byte v % 4 (e4m3). ---
enum class WgmmaElement { f16, bf16, e4m3 };
const char* wgmma_element_name(WgmmaElement element);
unsigned wgmma_k(WgmmaElement element);  // 16 or 32
std::vector<unsigned> wgmma_widths();   // every N: 8, 16, ..., 256

// --- TMA boxes: every byte of a box (row, byte of the row) -> its byte offset in the shared tile. A box of
// `rows` rows (the box's dimensions past the first, packed) of row_bytes bytes. ---
struct TmaBox {
  unsigned swizzle_bits = 0;  // B of Swizzle<B, 4, 3>: 0 none, 1 32B, 2 64B, 3 128B
  unsigned element_bytes = 2;
  unsigned row_bytes = 128;   // box[0] · element_bytes: the swizzle span with a swizzle
  unsigned box_rows = 8;      // box[1]
  unsigned box_depth = 1;     // box[2]: 1 for a 2-D box
};
std::vector<TmaBox> tma_boxes();
std::string tma_box_name(const TmaBox& box);

// ================================ The emulator side (cute_oracle_emulator.cpp) ================================
namespace emulator_side {
MmaLayouts mma_layouts(MmaElement element);
LayoutTable ldmatrix_layout(unsigned matrices, bool transpose);
LayoutTable stmatrix_layout(unsigned matrices, bool transpose);
// The descriptors faprobe's kernels would build for the tile (isa::wgmma_descriptor, one per k-step), and
// (row, k) -> byte offset that emu::wgmma_element_offset gives for them.
std::vector<std::uint64_t> gmma_descriptors(const GmmaTile& tile);
LayoutTable gmma_offsets(const GmmaTile& tile, const std::vector<std::uint64_t>& descriptors);
LayoutTable wgmma_d_layout(WgmmaElement element, unsigned n);
LayoutTable wgmma_a_layout(WgmmaElement element);
LayoutTable tma_box_layout(const TmaBox& box);
}  // namespace emulator_side

// ================================ The CuTe side (cute_oracle_cute.cpp, built with CuTe's headers) ============
namespace cute_side {
MmaLayouts mma_layouts(MmaElement element);   // MMA_Traits<SM80_16x8x16_F32{F16F16,BF16BF16}F32_TN>
LayoutTable ldmatrix_layout(unsigned matrices, bool transpose);  // Copy_Traits<SM75_U32x{1,2,4}_LDSM_N / U16x{2,4,8}_LDSM_T>
LayoutTable stmatrix_layout(unsigned matrices, bool transpose);  // Copy_Traits<SM90_U32x{1,2,4}_STSM_N / U16x{2,4,8}_STSM_T>
// make_gmma_desc of each k-step's slice of the tile, with the start address filled in (CuTe leaves it 0
// on the host: cast_smem_ptr_to_uint is GPU-only), and (row, k) -> byte offset of the tile's layout.
std::vector<std::uint64_t> gmma_descriptors(const GmmaTile& tile);
LayoutTable gmma_offsets(const GmmaTile& tile);
LayoutTable wgmma_d_layout(WgmmaElement element, unsigned n);  // GMMA::CLayout_64xN
LayoutTable wgmma_a_layout(WgmmaElement element);              // GMMA::ALayout_64x16 / ALayout_64x32
LayoutTable tma_box_layout(const TmaBox& box);                 // Swizzle<B, 4, 3> o the box's layout
}  // namespace cute_side

}  // namespace faprobe::cute_oracle
