// The CuTe oracle's tables that neither side owns: axes, the element-by-element comparison and its report,
// the renaming of mma labels, and the lists of tiles, widths and boxes that both sides build tables for.
#include "cute_oracle_tables.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

namespace faprobe::cute_oracle {

long axes_size(const Axes& axes) {
  long size = 1;
  for (const Axis& axis : axes) size *= axis.extent;
  return size;
}

long flat_index(const Axes& axes, const std::vector<long>& coordinates) {
  if (coordinates.size() != axes.size()) throw std::invalid_argument("flat_index: one coordinate per axis");
  long index = 0;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (coordinates[i] < 0 || coordinates[i] >= axes[i].extent)
      throw std::out_of_range("flat_index: " + axes[i].name + " " + std::to_string(coordinates[i]) + " outside 0.." +
                              std::to_string(axes[i].extent - 1));
    index = index * axes[i].extent + coordinates[i];
  }
  return index;
}

std::string describe_point(const Axes& axes, long index) {
  if (index == -1) return "none";
  if (index < 0 || index >= axes_size(axes)) return std::to_string(index);
  std::vector<long> coordinates(axes.size());
  for (std::size_t i = axes.size(); i-- > 0;) {
    coordinates[i] = index % axes[i].extent;
    index /= axes[i].extent;
  }
  std::string text;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (i > 0) text += ", ";
    text += axes[i].name + " " + std::to_string(coordinates[i]);
  }
  return text;
}

LayoutTable empty_table(std::string family, Axes domain, Axes image_axes) {
  LayoutTable table{std::move(family), std::move(domain), std::move(image_axes), {}};
  table.image.assign(static_cast<std::size_t>(axes_size(table.domain)), -1);
  return table;
}

namespace {
std::string axes_text(const Axes& axes) {
  std::string text = "(";
  for (std::size_t i = 0; i < axes.size(); ++i) text += (i > 0 ? ", " : "") + axes[i].name + " " + std::to_string(axes[i].extent);
  return text + ")";
}
bool same_axes(const Axes& x, const Axes& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i].name != y[i].name || x[i].extent != y[i].extent) return false;
  return true;
}
}  // namespace

LayoutComparison compare_layouts(const LayoutTable& cute, const LayoutTable& emulator) {
  LayoutComparison result;
  if (cute.family != emulator.family || !same_axes(cute.domain, emulator.domain) ||
      !same_axes(cute.image_axes, emulator.image_axes) || cute.image.size() != emulator.image.size() ||
      cute.image.size() != static_cast<std::size_t>(axes_size(cute.domain))) {
    result.report = "not the same layout: CuTe's " + cute.family + " " + axes_text(cute.domain) + " -> " +
                    axes_text(cute.image_axes) + " against the emulator's " + emulator.family + " " +
                    axes_text(emulator.domain) + " -> " + axes_text(emulator.image_axes);
    return result;
  }
  std::size_t first = cute.image.size();
  for (std::size_t i = 0; i < cute.image.size(); ++i) {
    ++result.compared;
    // An element either side could not map (-1) never matches, not even another -1.
    if (cute.image[i] != emulator.image[i] || cute.image[i] < 0) {
      if (result.mismatches++ == 0) first = i;
    }
  }
  if (result.mismatches > 0) {
    const long index = static_cast<long>(first);
    result.report = cute.family + ": " + std::to_string(result.mismatches) + " of " + std::to_string(result.compared) +
                    " elements differ; the first is " + describe_point(cute.domain, index) + ": CuTe (" +
                    describe_point(cute.image_axes, cute.image[first]) + "), emulator (" +
                    describe_point(emulator.image_axes, emulator.image[first]) + ")";
  }
  return result;
}

const char* mma_element_name(MmaElement element) { return element == MmaElement::f16 ? "f16" : "bf16"; }

MmaLayouts rename_mma_labels_to(const MmaLayouts& cute, const MmaLayouts& emulator) {
  // Image coordinates: A (m, k), B (n, k), C (m, n); each label axis has the extent of CuTe's.
  std::map<long, long> m_name, n_name, k_name;
  const auto split = [](const LayoutTable& table, long image, long& first, long& second) {
    first = image / table.image_axes[1].extent;
    second = image % table.image_axes[1].extent;
  };
  const auto learn = [](std::map<long, long>& names, long label, long coordinate) { names.emplace(label, coordinate); };
  if (cute.a.image.size() == emulator.a.image.size())
    for (std::size_t i = 0; i < cute.a.image.size(); ++i) {
      if (cute.a.image[i] < 0 || emulator.a.image[i] < 0) continue;
      long cm, ck, em, ek;
      split(cute.a, cute.a.image[i], cm, ck);
      split(emulator.a, emulator.a.image[i], em, ek);
      learn(m_name, em, cm);
      learn(k_name, ek, ck);
    }
  if (cute.b.image.size() == emulator.b.image.size())
    for (std::size_t i = 0; i < cute.b.image.size(); ++i) {
      if (cute.b.image[i] < 0 || emulator.b.image[i] < 0) continue;
      long cn, ck, en, ek;
      split(cute.b, cute.b.image[i], cn, ck);
      split(emulator.b, emulator.b.image[i], en, ek);
      learn(n_name, en, cn);
    }
  const auto rename = [&split](const LayoutTable& table, const std::map<long, long>& first_names,
                               const std::map<long, long>& second_names) {
    LayoutTable renamed = table;
    for (long& image : renamed.image) {
      if (image < 0) continue;
      long first, second;
      split(table, image, first, second);
      const auto f = first_names.find(first), s = second_names.find(second);
      image = f == first_names.end() || s == second_names.end()
                  ? -1
                  : f->second * table.image_axes[1].extent + s->second;
    }
    return renamed;
  };
  return {rename(emulator.a, m_name, k_name), rename(emulator.b, n_name, k_name), rename(emulator.c, m_name, n_name)};
}

std::string ldmatrix_family(const char* instruction, unsigned matrices, bool transpose) {
  return std::string(instruction) + ".m8n8.x" + std::to_string(matrices) + (transpose ? ".trans" : "") + ".b16";
}

std::vector<GmmaTile> gmma_tiles() {
  std::vector<GmmaTile> tiles;
  for (unsigned bytes : {2u, 1u})
    for (bool mn_major : {false, true}) {
      if (mn_major && bytes == 1) continue;  // wgmma transposes 16-bit operands only
      for (GmmaSwizzle swizzle : {GmmaSwizzle::interleave, GmmaSwizzle::bytes32, GmmaSwizzle::bytes64, GmmaSwizzle::bytes128})
        for (bool k_first : {false, true}) {
          GmmaTile tile;
          tile.element_bytes = bytes;
          tile.mn_major = mn_major;
          tile.swizzle = swizzle;
          tile.k_atoms_first = k_first;
          const unsigned width_bytes = 16u << static_cast<unsigned>(swizzle);  // 16, 32, 64, 128
          const unsigned atom_elements = width_bytes / bytes;                 // along the contiguous mode
          // K-major: two atoms wide in K (and at least two k-steps); MN-major: two atoms along MN, two k-steps.
          tile.rows = mn_major ? 2 * atom_elements : 128;
          tile.depth = mn_major ? 2 * (32 / bytes) : std::max(2 * atom_elements, 2 * (32 / bytes));
          if (tile.rows < 64) tile.rows = 64;
          tiles.push_back(tile);
        }
    }
  return tiles;
}

std::string gmma_tile_name(const GmmaTile& tile) {
  static const char* const names[] = {"INTER", "SW32", "SW64", "SW128"};
  return std::string("Layout_") + (tile.mn_major ? "MN_" : "K_") + names[static_cast<int>(tile.swizzle)] + "_Atom<" +
         (tile.element_bytes == 2 ? "16-bit" : "8-bit") + "> tiled " + std::to_string(tile.rows) + "x" +
         std::to_string(tile.depth) + (tile.k_atoms_first ? " K first" : " rows first");
}

unsigned gmma_k_per_step(const GmmaTile& tile) { return 32 / tile.element_bytes; }

LayoutTable descriptor_field_table(const GmmaTile& tile, const std::vector<std::uint64_t>& descriptors) {
  constexpr long field_count = sizeof gmma_descriptor_fields / sizeof gmma_descriptor_fields[0];
  Axes fields{{"step", static_cast<long>(descriptors.size())}, {"field", field_count}};
  LayoutTable table = empty_table("wgmma descriptor of " + gmma_tile_name(tile), fields, {{"value", 1L << 62}});
  // PTX ISA "Matrix Descriptor Format": start address bits 0-13, leading byte offset 16-29, stride byte
  // offset 32-45, base offset 49-51, swizzle / layout type 62-63; the other bits are reserved (zero).
  constexpr std::uint64_t known = 0x3fffull | (0x3fffull << 16) | (0x3fffull << 32) | (0x7ull << 49) | (0x3ull << 62);
  for (std::size_t s = 0; s < descriptors.size(); ++s) {
    const std::uint64_t d = descriptors[s];
    const std::uint64_t values[field_count] = {d & 0x3fff, (d >> 16) & 0x3fff, (d >> 32) & 0x3fff, (d >> 49) & 0x7,
                                               d >> 62, d & ~known};
    for (long f = 0; f < field_count; ++f) table.image[s * field_count + static_cast<std::size_t>(f)] = static_cast<long>(values[f]);
  }
  return table;
}

const char* wgmma_element_name(WgmmaElement element) {
  switch (element) {
    case WgmmaElement::f16: return "f16";
    case WgmmaElement::bf16: return "bf16";
    case WgmmaElement::e4m3: return "e4m3";
  }
  return "?";
}

unsigned wgmma_k(WgmmaElement element) { return element == WgmmaElement::e4m3 ? 32 : 16; }

std::vector<unsigned> wgmma_widths() {
  std::vector<unsigned> widths;
  for (unsigned n = 8; n <= 256; n += 8) widths.push_back(n);
  return widths;
}

std::vector<TmaBox> tma_boxes() {
  std::vector<TmaBox> boxes;
  for (unsigned bytes : {1u, 2u, 4u}) {
    // Without a swizzle: rows of 16 bytes, of 48 (not a power of two) and of 256.
    for (unsigned row_bytes : {16u, 48u, 256u}) boxes.push_back({0, bytes, row_bytes, 5, 1});
    // With one, rows exactly the span (what the kernels use), 2-D and 3-D, more rows than a swizzle period.
    for (unsigned bits : {1u, 2u, 3u}) {
      const unsigned span = 16u << bits;
      boxes.push_back({bits, bytes, span, 64, 1});
      boxes.push_back({bits, bytes, span, 8, 3});
    }
  }
  return boxes;
}

std::string tma_box_name(const TmaBox& box) {
  static const char* const names[] = {"no swizzle", "32B swizzle", "64B swizzle", "128B swizzle"};
  std::string name = std::string("tma box ") + names[box.swizzle_bits] + ", " + std::to_string(box.element_bytes) +
                     "-byte elements, " + std::to_string(box.row_bytes / box.element_bytes) + "x" +
                     std::to_string(box.box_rows);
  if (box.box_depth > 1) name += "x" + std::to_string(box.box_depth);
  return name;
}

}  // namespace faprobe::cute_oracle
