// NVIDIA CuTe as an oracle for the emulator's layouts: for every instruction family whose data layout the
// emulator implements, the layout recovered from the emulator by running the instruction on inputs that
// encode positions (cute_oracle_emulator.cpp) must equal, element by element, the one CuTe's own layout
// definitions give (cute_oracle_cute.cpp, compiled on the host from the nvidia-cutlass wheel's headers):
//   mma.sync m16n8k16 A, B, C (f16, bf16)          ldmatrix / stmatrix .x1 .x2 .x4, plain and .trans
//   wgmma descriptors and canonical layouts (every swizzle, K- and MN-major, both atom orders)
//   wgmma D for every N in 8..256, A from registers (f16, bf16, e4m3)      TMA boxes under every swizzle
// Each test prints how many elements it compared. Where the headers are missing (scripts/test downloads
// them), every test that needs them skips with the reason. The planted tests change one entry of an
// emulator-side table (two swapped entries, one flipped swizzle bit) and require the comparison to name
// the family and the first element that differs.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cuda/common/isa_wgmma.hpp"
#include "cute_oracle_tables.hpp"

namespace faprobe::cute_oracle {
namespace {

#if FAPROBE_HAVE_CUTE
#define FAPROBE_REQUIRE_CUTE() (void)0
#else
#define FAPROBE_REQUIRE_CUTE() GTEST_SKIP() << FAPROBE_CUTE_MISSING
#endif

// Counts what a test compared and reports every mismatch; prints "<what>: N elements compared" at the end.
class ComparedElements {
 public:
  explicit ComparedElements(std::string what) : what_(std::move(what)) {}
  ~ComparedElements() { std::printf("[ compared ] %s: %zu elements\n", what_.c_str(), count_); }
  ComparedElements(const ComparedElements&) = delete;
  ComparedElements& operator=(const ComparedElements&) = delete;
  void expect_same(const LayoutTable& cute, const LayoutTable& emulator) {
    const LayoutComparison result = compare_layouts(cute, emulator);
    count_ += result.compared;
    EXPECT_TRUE(result.equal()) << result.report;
    EXPECT_GT(result.compared, 0u) << cute.family << ": nothing compared";
  }

 private:
  std::string what_;
  std::size_t count_ = 0;
};

TEST(CuteOracleComparison, ReportsTheFamilyTheCountAndTheFirstDifferingElement) {
  // Needs no CuTe: two hand-made tables that differ in two places.
  LayoutTable expected = empty_table("demo family", {{"thread", 2}, {"value", 3}}, {{"m", 4}, {"k", 2}});
  for (std::size_t i = 0; i < expected.image.size(); ++i) expected.image[i] = static_cast<long>(i);
  LayoutTable changed = expected;
  std::swap(changed.image[4], changed.image[5]);  // thread 1, values 1 and 2
  const LayoutComparison result = compare_layouts(expected, changed);
  EXPECT_FALSE(result.equal());
  EXPECT_EQ(result.compared, 6u);
  EXPECT_EQ(result.mismatches, 2u);
  EXPECT_EQ(result.report,
            "demo family: 2 of 6 elements differ; the first is thread 1, value 1: CuTe (m 2, k 0), emulator (m 2, k 1)");
  EXPECT_TRUE(compare_layouts(expected, expected).equal());
  // Another family or other axes is a mismatch in itself.
  LayoutTable renamed = expected;
  renamed.family = "other family";
  EXPECT_NE(compare_layouts(expected, renamed).report.find("not the same layout"), std::string::npos);
  LayoutTable narrower = empty_table("demo family", {{"thread", 2}, {"value", 2}}, {{"m", 4}, {"k", 2}});
  EXPECT_NE(compare_layouts(expected, narrower).report.find("not the same layout"), std::string::npos);
  // An unrecovered element (-1) is named as such, and two of them do not make a match.
  changed = expected;
  changed.image[0] = -1;
  EXPECT_NE(compare_layouts(expected, changed).report.find("thread 0, value 0: CuTe (m 0, k 0), emulator (none)"),
            std::string::npos);
  const LayoutComparison both_unknown = compare_layouts(changed, changed);
  EXPECT_EQ(both_unknown.mismatches, 1u);
  EXPECT_NE(both_unknown.report.find("CuTe (none), emulator (none)"), std::string::npos) << both_unknown.report;
}

TEST(CuteOracle, MmaM16n8k16FragmentsMatchCute) {
  FAPROBE_REQUIRE_CUTE();
  ComparedElements compared("mma.m16n8k16 A, B, C (f16, bf16)");
  for (MmaElement element : {MmaElement::f16, MmaElement::bf16}) {
    const MmaLayouts cute = cute_side::mma_layouts(element);
    const MmaLayouts emulator = rename_mma_labels_to(cute, emulator_side::mma_layouts(element));
    compared.expect_same(cute.a, emulator.a);
    compared.expect_same(cute.b, emulator.b);
    compared.expect_same(cute.c, emulator.c);
  }
}

TEST(CuteOracle, LdmatrixAndStmatrixMatchCute) {
  FAPROBE_REQUIRE_CUTE();
  ComparedElements compared("ldmatrix and stmatrix .x1 .x2 .x4, plain and .trans");
  for (unsigned matrices : {1u, 2u, 4u})
    for (bool transpose : {false, true}) {
      compared.expect_same(cute_side::ldmatrix_layout(matrices, transpose), emulator_side::ldmatrix_layout(matrices, transpose));
      compared.expect_same(cute_side::stmatrix_layout(matrices, transpose), emulator_side::stmatrix_layout(matrices, transpose));
    }
}

TEST(CuteOracle, WgmmaDescriptorsAndCanonicalLayoutsMatchCute) {
  FAPROBE_REQUIRE_CUTE();
  ComparedElements compared("wgmma descriptor fields and operand byte offsets (" + std::to_string(gmma_tiles().size()) +
                            " tiles)");
  for (const GmmaTile& tile : gmma_tiles()) {
    SCOPED_TRACE(gmma_tile_name(tile));
    const std::vector<std::uint64_t> project = emulator_side::gmma_descriptors(tile);
    compared.expect_same(descriptor_field_table(tile, cute_side::gmma_descriptors(tile)), descriptor_field_table(tile, project));
    compared.expect_same(cute_side::gmma_offsets(tile), emulator_side::gmma_offsets(tile, project));
  }
}

TEST(CuteOracle, WgmmaAccumulatorLayoutMatchesCuteForEveryWidth) {
  FAPROBE_REQUIRE_CUTE();
  ComparedElements compared("wgmma D, N = 8..256 (f16, bf16, e4m3)");
  for (WgmmaElement element : {WgmmaElement::f16, WgmmaElement::bf16, WgmmaElement::e4m3})
    for (unsigned n : wgmma_widths()) compared.expect_same(cute_side::wgmma_d_layout(element, n), emulator_side::wgmma_d_layout(element, n));
}

TEST(CuteOracle, WgmmaRegisterALayoutMatchesCute) {
  FAPROBE_REQUIRE_CUTE();
  ComparedElements compared("wgmma A from registers (f16, bf16, e4m3)");
  for (WgmmaElement element : {WgmmaElement::f16, WgmmaElement::bf16, WgmmaElement::e4m3})
    compared.expect_same(cute_side::wgmma_a_layout(element), emulator_side::wgmma_a_layout(element));
}

TEST(CuteOracle, TmaBoxPlacementMatchesCuteSwizzle) {
  FAPROBE_REQUIRE_CUTE();
  ComparedElements compared("TMA box bytes (" + std::to_string(tma_boxes().size()) + " boxes)");
  for (const TmaBox& box : tma_boxes()) compared.expect_same(cute_side::tma_box_layout(box), emulator_side::tma_box_layout(box));
}

// --- Planted layout changes: each must be reported with the family and the first differing element. ---

bool mentions(const std::string& report, const std::string& part) { return report.find(part) != std::string::npos; }

TEST(CuteOraclePlanted, SwappedMmaAccumulatorEntriesAreReported) {
  FAPROBE_REQUIRE_CUTE();
  const MmaLayouts cute = cute_side::mma_layouts(MmaElement::f16);
  MmaLayouts emulator = emulator_side::mma_layouts(MmaElement::f16);
  // Thread 0's C registers 0 and 1 (columns 0 and 1 of row 0) trade places. The renaming is learnt from A
  // and B, so it cannot absorb the swap.
  std::swap(emulator.c.image[0], emulator.c.image[1]);
  const LayoutComparison result = compare_layouts(cute.c, rename_mma_labels_to(cute, emulator).c);
  EXPECT_EQ(result.mismatches, 2u);
  EXPECT_TRUE(mentions(result.report, "mma.m16n8k16 f16 C: 2 of 128 elements differ; the first is thread 0, value 0"))
      << result.report;
}

TEST(CuteOraclePlanted, SwappedMmaOperandEntriesAreReported) {
  FAPROBE_REQUIRE_CUTE();
  const MmaLayouts cute = cute_side::mma_layouts(MmaElement::bf16);
  MmaLayouts emulator = emulator_side::mma_layouts(MmaElement::bf16);
  // Two A elements of thread 31 (its last two values) trade places: no renaming of rows or k makes that
  // the same layout again.
  std::swap(emulator.a.image[31 * 8 + 6], emulator.a.image[31 * 8 + 7]);
  const LayoutComparison result = compare_layouts(cute.a, rename_mma_labels_to(cute, emulator).a);
  EXPECT_FALSE(result.equal());
  EXPECT_TRUE(mentions(result.report, "mma.m16n8k16 bf16 A: ")) << result.report;
  EXPECT_TRUE(mentions(result.report, "the first is thread 31, value 6")) << result.report;
}

TEST(CuteOraclePlanted, SwappedLdmatrixEntriesAreReported) {
  FAPROBE_REQUIRE_CUTE();
  LayoutTable emulator = emulator_side::ldmatrix_layout(4, true);
  std::swap(emulator.image[(3 * 4 + 1) * 2 + 0], emulator.image[(17 * 4 + 2) * 2 + 1]);
  const LayoutComparison result = compare_layouts(cute_side::ldmatrix_layout(4, true), emulator);
  EXPECT_EQ(result.mismatches, 2u);
  EXPECT_TRUE(mentions(result.report, "ldmatrix.m8n8.x4.trans.b16: 2 of 256 elements differ; the first is thread 3, "
                                      "register 1, half 0"))
      << result.report;
}

TEST(CuteOraclePlanted, FlippedDescriptorSwizzleBitIsReported) {
  FAPROBE_REQUIRE_CUTE();
  GmmaTile tile;
  for (const GmmaTile& candidate : gmma_tiles())
    if (candidate.element_bytes == 2 && !candidate.mn_major && candidate.swizzle == GmmaSwizzle::bytes128 &&
        !candidate.k_atoms_first)
      tile = candidate;
  ASSERT_EQ(tile.swizzle, GmmaSwizzle::bytes128);
  // The project's descriptors with bit 63 flipped: layout type 1 (128B) becomes 3 (32B), the FA-3 kernels'
  // planted TMA / wgmma swizzle mismatch in one bit.
  std::vector<std::uint64_t> project = emulator_side::gmma_descriptors(tile);
  for (std::uint64_t& descriptor : project) descriptor ^= std::uint64_t{1} << 63;
  const LayoutComparison fields = compare_layouts(descriptor_field_table(tile, cute_side::gmma_descriptors(tile)),
                                                  descriptor_field_table(tile, project));
  EXPECT_TRUE(mentions(fields.report, "wgmma descriptor of " + gmma_tile_name(tile))) << fields.report;
  EXPECT_TRUE(mentions(fields.report, "the first is step 0, field 4: CuTe (value 1), emulator (value 3)")) << fields.report;
  // The offsets the emulator reads with them: row 0 lies at the same bytes under both (no XOR in a tile's
  // first 128 bytes); row 1 does not, a 32B row being 32 bytes long instead of 128.
  const LayoutTable cute = cute_side::gmma_offsets(tile);
  const LayoutTable emulator = emulator_side::gmma_offsets(tile, project);
  std::size_t first = 0;
  while (first < cute.image.size() && cute.image[first] == emulator.image[first]) ++first;
  ASSERT_LT(first, cute.image.size()) << "the flipped bit changed no offset";
  const LayoutComparison offsets = compare_layouts(cute, emulator);
  EXPECT_TRUE(mentions(offsets.report, "wgmma operand offsets of " + gmma_tile_name(tile))) << offsets.report;
  EXPECT_TRUE(mentions(offsets.report, "the first is " + describe_point(cute.domain, static_cast<long>(first)) + ":"))
      << offsets.report;
  EXPECT_EQ(first / tile.depth, 1u) << "row 0 reads the same under both swizzles";
}

TEST(CuteOraclePlanted, FlippedTmaSwizzleBitIsReported) {
  FAPROBE_REQUIRE_CUTE();
  const TmaBox box{3, 2, 128, 64, 1};  // 128B swizzle, 64 x 64 16-bit elements
  LayoutTable emulator = emulator_side::tma_box_layout(box);
  // An emulator whose swizzle forgot one XOR term (address bit 7 into bit 4): undo it where bit 7 is set.
  for (long& offset : emulator.image)
    if (offset >= 0 && (offset & 0x80) != 0) offset ^= 0x10;
  const LayoutComparison result = compare_layouts(cute_side::tma_box_layout(box), emulator);
  // Row 0 lies below byte 128 (bit 7 clear); row 1 starts at 128, whose chunk 0 lands at 144 and now at 128.
  EXPECT_TRUE(mentions(result.report, tma_box_name(box) + ": ")) << result.report;
  EXPECT_TRUE(mentions(result.report, "the first is row 1, byte 0: CuTe (byte offset 144), emulator (byte offset 128)"))
      << result.report;
}

}  // namespace
}  // namespace faprobe::cute_oracle
