// The emulator side of the CuTe oracle: each layout recovered from what the emulator does, never from its
// code. Fragments and shared memory are filled with values that encode their own positions (one-hot
// fragments, small integers and powers of two, exact in fp16, bf16, e4m3 and in every fp32 sum), the
// instruction runs under emu::launch, and where each value came out says which element it was. Descriptors
// are the ones faprobe's kernels build (isa::wgmma_descriptor with their leading and stride byte offsets).
// PTX ISA sections whose layouts these are: "Matrix Fragments for mma.m16n8k16 with floating point type",
// "ldmatrix", "stmatrix", "Matrix Descriptor Format" and "Shared Memory Matrix Layout" (wgmma), "Register
// Fragments" of "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma D and A), and "Tensors:
// Shared Memory Swizzling Modes" (TMA).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/emu/tma.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/isa_tma.hpp"
#include "cuda/common/isa_wgmma.hpp"
#include "cuda/common/tensor_map.hpp"
#include "cute_oracle_tables.hpp"

namespace faprobe::cute_oracle::emulator_side {
namespace {

namespace isa = cuda::isa;

// Runs body on every thread of one CTA of `threads` threads with shared_bytes of shared memory.
void launch_cta(const char* name, unsigned threads, std::size_t shared_bytes, const std::function<void()>& body) {
  emu::launch({name, {1, 1, 1}, {threads, 1, 1}, shared_bytes}, body);
}

// Copies bytes into the CTA's shared memory from offset 0 (one thread), then waits for every thread.
void fill_shared(const std::vector<std::uint8_t>& bytes) {
  if (emu::thread_linear_idx() == 0 && !bytes.empty())
    std::memcpy(emu::shared_memory(0, bytes.size(), 1), bytes.data(), bytes.size());
  emu::bar_sync(0, 0);
}

std::vector<std::uint8_t> read_shared(std::size_t offset, std::size_t size) {
  std::vector<std::uint8_t> bytes(size);
  std::memcpy(bytes.data(), emu::shared_memory(offset, size, 1), size);
  return bytes;
}

// An exactly representable value as the input type's bits (binary16, bfloat16 or e4m3).
std::uint32_t mma_bits(MmaElement element, float value) {
  return element == MmaElement::f16 ? isa::float_to_half(value) : isa::float_to_bfloat16(value);
}
std::uint32_t wgmma_bits(WgmmaElement element, float value) {
  switch (element) {
    case WgmmaElement::f16: return isa::float_to_half(value);
    case WgmmaElement::bf16: return isa::float_to_bfloat16(value);
    case WgmmaElement::e4m3: return emu::e4m3_from_float(value);
  }
  return 0;
}
emu::WgmmaInput wgmma_input(WgmmaElement element) {
  switch (element) {
    case WgmmaElement::f16: return emu::WgmmaInput::f16;
    case WgmmaElement::bf16: return emu::WgmmaInput::bf16;
    case WgmmaElement::e4m3: return emu::WgmmaInput::e4m3;
  }
  return emu::WgmmaInput::f16;
}

// A float that is exactly the integer `code` (0 < code < 2^24), else -1.
long exact_code(float value) {
  if (!(value > 0.0f) || value >= 16777216.0f || std::floor(value) != value) return -1;
  return static_cast<long>(value);
}

// Labels in order of first appearance of a key (a set of positions).
struct FirstAppearance {
  std::map<std::vector<long>, long> labels;
  long label(const std::vector<long>& key) { return labels.emplace(key, static_cast<long>(labels.size())).first->second; }
};

}  // namespace

// mma.sync m16n8k16. Trials, all in one launch of one warp (positions: A a = thread·8 + value, B b =
// thread·4 + value, C/D p = thread·4 + register):
//   A trial a: A one-hot at a, B holding b + 1 at b, C = 0. D is nonzero exactly in a's row, and there holds
//     the code of the B element in a's k and that column: a's row is the set of D positions lit, its k the
//     set of B codes seen.
//   B trial b: B one-hot at b, A = 1 everywhere, C = 0: D is 1 exactly in b's column.
//   C trial: A = B = 0, C holding p + 1 at p: D = C shows where each C position goes.
// Labels are numbered in order of first appearance (rename_mma_labels_to gives them CuTe's names).
MmaLayouts mma_layouts(MmaElement element) {
  const emu::MmaInput input = element == MmaElement::f16 ? emu::MmaInput::f16 : emu::MmaInput::bf16;
  std::vector<std::vector<float>> a_trials(256, std::vector<float>(128)), b_trials(128, std::vector<float>(128));
  std::vector<float> c_trial(128);
  launch_cta("cute_oracle_mma", 32, 0, [&] {
    const unsigned t = emu::lane_id();
    const auto pack = [&](float low, float high) { return mma_bits(element, low) | (mma_bits(element, high) << 16); };
    const float zero[4] = {0, 0, 0, 0};
    float d[4];
    for (unsigned a = 0; a < 256; ++a) {
      std::uint32_t ra[4], rb[2];
      for (unsigned r = 0; r < 4; ++r) ra[r] = pack(t * 8 + 2 * r == a ? 1.0f : 0.0f, t * 8 + 2 * r + 1 == a ? 1.0f : 0.0f);
      for (unsigned r = 0; r < 2; ++r)
        rb[r] = pack(static_cast<float>(t * 4 + 2 * r + 1), static_cast<float>(t * 4 + 2 * r + 2));
      emu::mma_m16n8k16(input, ra, rb, zero, d);
      for (unsigned r = 0; r < 4; ++r) a_trials[a][t * 4 + r] = d[r];
    }
    for (unsigned b = 0; b < 128; ++b) {
      std::uint32_t ra[4], rb[2];
      for (unsigned r = 0; r < 4; ++r) ra[r] = pack(1.0f, 1.0f);
      for (unsigned r = 0; r < 2; ++r) rb[r] = pack(t * 4 + 2 * r == b ? 1.0f : 0.0f, t * 4 + 2 * r + 1 == b ? 1.0f : 0.0f);
      emu::mma_m16n8k16(input, ra, rb, zero, d);
      for (unsigned r = 0; r < 4; ++r) b_trials[b][t * 4 + r] = d[r];
    }
    const std::uint32_t ra[4] = {0, 0, 0, 0}, rb[2] = {0, 0};
    float c[4];
    for (unsigned r = 0; r < 4; ++r) c[r] = static_cast<float>(t * 4 + r + 1);
    emu::mma_m16n8k16(input, ra, rb, c, d);
    for (unsigned r = 0; r < 4; ++r) c_trial[t * 4 + r] = d[r];
  });

  const std::string family = std::string("mma.m16n8k16 ") + mma_element_name(element);
  MmaLayouts layouts{empty_table(family + " A", {{"thread", 32}, {"value", 8}}, {{"m", 16}, {"k", 16}}),
                     empty_table(family + " B", {{"thread", 32}, {"value", 4}}, {{"n", 8}, {"k", 16}}),
                     empty_table(family + " C", {{"thread", 32}, {"value", 4}}, {{"m", 16}, {"n", 8}})};
  FirstAppearance rows, columns, ks;
  std::vector<long> row_of_d(128, -1), column_of_d(128, -1), k_of_b(128, -1), m_of_a(256, -1), k_of_a(256, -1);
  for (unsigned a = 0; a < 256; ++a) {
    std::vector<long> lit, codes;
    for (long p = 0; p < 128; ++p) {
      const float v = a_trials[a][static_cast<std::size_t>(p)];
      if (v == 0.0f) continue;
      lit.push_back(p);
      const long code = exact_code(v);
      codes.push_back(code >= 1 && code <= 128 ? code - 1 : -1);
    }
    if (lit.empty()) continue;  // an A element that reaches nothing: left unrecovered (-1)
    m_of_a[a] = rows.label(lit);
    for (long p : lit) row_of_d[static_cast<std::size_t>(p)] = m_of_a[a];
    std::sort(codes.begin(), codes.end());
    k_of_a[a] = ks.label(codes);
    for (long b : codes)
      if (b >= 0) k_of_b[static_cast<std::size_t>(b)] = k_of_a[a];
  }
  for (unsigned b = 0; b < 128; ++b) {
    std::vector<long> lit;
    for (long p = 0; p < 128; ++p)
      if (b_trials[b][static_cast<std::size_t>(p)] != 0.0f) lit.push_back(p);
    if (lit.empty()) continue;
    const long n = columns.label(lit);
    for (long p : lit) column_of_d[static_cast<std::size_t>(p)] = n;
    if (n < 8 && k_of_b[b] >= 0 && k_of_b[b] < 16) layouts.b.image[b] = n * 16 + k_of_b[b];
  }
  for (unsigned a = 0; a < 256; ++a)
    if (m_of_a[a] >= 0 && m_of_a[a] < 16 && k_of_a[a] >= 0 && k_of_a[a] < 16) layouts.a.image[a] = m_of_a[a] * 16 + k_of_a[a];
  for (std::size_t p = 0; p < 128; ++p) {
    const long q = exact_code(c_trial[p]) - 1;  // C position q went to D position p
    if (q < 0 || q >= 128) continue;
    const long m = row_of_d[p], n = column_of_d[p];
    if (m >= 0 && m < 16 && n >= 0 && n < 8) layouts.c.image[static_cast<std::size_t>(q)] = m * 8 + n;
  }
  return layouts;
}

namespace {
// Rows of the ldmatrix / stmatrix tests: lane s's row at shared offset 16·((5s + 3) mod rows), so that
// the row a lane names is not the row its number would suggest.
std::size_t row_offset(unsigned lane, unsigned rows) { return 16u * ((5u * lane + 3u) % rows); }
}  // namespace

// ldmatrix: element e of the row that lane s addresses holds s·8 + e; each lane's registers then say which.
LayoutTable ldmatrix_layout(unsigned matrices, bool transpose) {
  const unsigned rows = 8 * matrices;
  LayoutTable table = empty_table(ldmatrix_family("ldmatrix", matrices, transpose),
                                  {{"thread", 32}, {"register", matrices}, {"half", 2}}, {{"row of lane", 32}, {"element", 8}});
  std::vector<std::uint8_t> image(16u * rows);
  for (unsigned s = 0; s < rows; ++s)
    for (unsigned e = 0; e < 8; ++e) {
      const std::uint16_t code = static_cast<std::uint16_t>(s * 8 + e);
      std::memcpy(&image[row_offset(s, rows) + 2 * e], &code, 2);
    }
  launch_cta("cute_oracle_ldmatrix", 32, image.size(), [&] {
    fill_shared(image);
    const unsigned lane = emu::lane_id();
    std::uint32_t d[4] = {};
    emu::ldmatrix(matrices, transpose, lane < rows ? row_offset(lane, rows) : 0, d);
    for (unsigned r = 0; r < matrices; ++r)
      for (unsigned h = 0; h < 2; ++h)
        table.image[(lane * matrices + r) * 2 + h] = static_cast<long>((d[r] >> (16 * h)) & 0xffffu);
  });
  return table;
}

// stmatrix: lane t's half h of register r holds its own position + 1; where each code lands says where it went.
LayoutTable stmatrix_layout(unsigned matrices, bool transpose) {
  const unsigned rows = 8 * matrices;
  LayoutTable table = empty_table(ldmatrix_family("stmatrix", matrices, transpose),
                                  {{"thread", 32}, {"register", matrices}, {"half", 2}}, {{"row of lane", 32}, {"element", 8}});
  std::vector<std::uint8_t> stored;
  launch_cta("cute_oracle_stmatrix", 32, 16u * rows, [&] {
    fill_shared(std::vector<std::uint8_t>(16u * rows, 0));
    const unsigned lane = emu::lane_id();
    std::uint32_t r[4] = {};
    for (unsigned i = 0; i < matrices; ++i)
      for (unsigned h = 0; h < 2; ++h) r[i] |= ((lane * matrices + i) * 2 + h + 1) << (16 * h);
    emu::stmatrix(matrices, transpose, lane < rows ? row_offset(lane, rows) : 0, r);
    emu::bar_sync(0, 0);
    if (lane == 0) stored = read_shared(0, 16u * rows);
  });
  std::vector<int> landings(table.image.size(), 0);
  for (unsigned s = 0; s < rows; ++s)
    for (unsigned e = 0; e < 8; ++e) {
      std::uint16_t code = 0;
      std::memcpy(&code, &stored[row_offset(s, rows) + 2 * e], 2);
      if (code == 0 || code > table.image.size()) continue;
      const std::size_t position = code - 1u;
      table.image[position] = ++landings[position] == 1 ? static_cast<long>(s * 8 + e) : -1;  // twice: unrecovered
    }
  return table;
}

std::vector<std::uint64_t> gmma_descriptors(const GmmaTile& tile) {
  // The canonical layouts of isa_wgmma.hpp (PTX ISA "Matrix Descriptor Format", "Shared Memory Matrix
  // Layout"), in the kernels' terms: an atom is 8 rows (K-major) or 8 K rows (MN-major) of one swizzle row
  // of 16·W bytes (W = 1, 2, 4, 8), 128·W bytes; the tile is a grid of atoms, `along_rows` by `along_k`.
  const unsigned width = 1u << static_cast<unsigned>(tile.swizzle);
  const std::size_t atom_bytes = 128u * width;
  const std::size_t along_rows = tile.mn_major ? tile.rows / (16u * width / tile.element_bytes) : tile.rows / 8u;
  const std::size_t along_k = tile.mn_major ? tile.depth / 8u : std::size_t{tile.depth} * tile.element_bytes / (16u * width);
  const std::size_t row_step = tile.k_atoms_first ? along_k * atom_bytes : atom_bytes;  // next atom along rows
  const std::size_t k_step = tile.k_atoms_first ? atom_bytes : along_rows * atom_bytes;  // next atom along K
  const isa::WgmmaSwizzle swizzle = tile.swizzle == GmmaSwizzle::interleave ? isa::WgmmaSwizzle::none
                                    : tile.swizzle == GmmaSwizzle::bytes32  ? isa::WgmmaSwizzle::bytes32
                                    : tile.swizzle == GmmaSwizzle::bytes64  ? isa::WgmmaSwizzle::bytes64
                                                                            : isa::WgmmaSwizzle::bytes128;
  std::vector<std::uint64_t> descriptors;
  for (unsigned s = 0; s < tile.depth / gmma_k_per_step(tile); ++s) {
    std::size_t start = 0;
    std::size_t leading = 0, stride = 0;
    if (!tile.mn_major) {
      // A k-step is 32 bytes of each row: two core matrices without a swizzle (LBO apart), else 32 bytes into
      // one swizzled row (FA-3's Q and K: start += 32 per step, LBO 16, SBO the 8-row group).
      const std::size_t byte = 32u * s;
      if (width == 1) {
        start = (byte / 16u) * k_step;
        leading = k_step;
      } else {
        start = (byte / (16u * width)) * k_step + byte % (16u * width);
        leading = 16;
      }
      stride = row_step;
    } else {
      // A k-step is 16 K rows, two atoms along K. Without a swizzle SBO steps between groups of 16 bytes of
      // rows and LBO between 8-row K groups; with one LBO steps between atoms along rows and SBO along K
      // (FA-3's V: LBO the column block, SBO 1024).
      start = 2u * s * k_step;
      leading = width == 1 ? k_step : row_step;
      stride = width == 1 ? row_step : k_step;
    }
    descriptors.push_back(isa::wgmma_descriptor(start, static_cast<std::uint32_t>(leading),
                                                static_cast<std::uint32_t>(stride), swizzle));
  }
  return descriptors;
}

LayoutTable gmma_offsets(const GmmaTile& tile, const std::vector<std::uint64_t>& descriptors) {
  LayoutTable table = empty_table("wgmma operand offsets of " + gmma_tile_name(tile), {{"row", tile.rows}, {"k", tile.depth}},
                                  {{"byte offset", 1L << 40}});
  const unsigned per_step = gmma_k_per_step(tile);
  for (unsigned row = 0; row < tile.rows; ++row)
    for (unsigned k = 0; k < tile.depth; ++k) {
      const std::size_t step = k / per_step;
      if (step >= descriptors.size()) continue;
      table.image[std::size_t{row} * tile.depth + k] = static_cast<long>(
          emu::wgmma_element_offset(descriptors[step], tile.mn_major, tile.element_bytes, row, k % per_step));
    }
  return table;
}

namespace {
// A and B in shared memory, K-major without a swizzle: core matrices of 8 rows x 16 bytes, rows 16 bytes
// apart in a core matrix, 8-row groups 128 bytes apart (SBO), 16-byte K chunks rows·16 bytes apart (LBO).
std::uint64_t plain_k_major(std::size_t start, unsigned rows) {
  return isa::wgmma_descriptor(start, rows * 16u, 128u, isa::WgmmaSwizzle::none);
}
void place(std::vector<std::uint8_t>& image, std::uint64_t descriptor, WgmmaElement element, unsigned row, unsigned k,
           float value) {
  const unsigned bytes = element == WgmmaElement::e4m3 ? 1 : 2;
  const std::uint32_t bits = wgmma_bits(element, value);
  std::memcpy(&image.at(emu::wgmma_element_offset(descriptor, false, bytes, row, k)), &bits, bytes);
}
// One wgmma on a warpgroup: every thread's accumulators (fresh, accumulate off), thread-major.
std::vector<float> run_wgmma(WgmmaElement element, unsigned n, const std::vector<std::uint8_t>& image, std::uint64_t desc_a,
                             std::uint64_t desc_b, const std::vector<std::uint32_t>& a_registers) {
  std::vector<float> out(128u * (n / 2));
  launch_cta("cute_oracle_wgmma", 128, image.size(), [&] {
    fill_shared(image);
    const unsigned t = emu::thread_linear_idx();
    float d[128] = {};
    const bool registers = !a_registers.empty();
    emu::wgmma_fence();  // wgmma's asynchrony as the emulator models it: fence, issue, commit, wait, then read D
    emu::wgmma({wgmma_input(element), n, registers, false}, desc_a, registers ? &a_registers[4u * t] : nullptr, desc_b, d,
               false);
    emu::wgmma_commit_group();
    emu::wgmma_wait_group(0);
    for (unsigned v = 0; v < n / 2; ++v) out[t * (n / 2) + v] = d[v];
  });
  return out;
}
}  // namespace

// D: A (64 x K) and B (N x K) from shared memory with D[m][n] = m + 64·n: A[m][k] is bit k of m for k < 6 and
// 64 for 6 <= k < 14; B[n][k] is 2^k for k < 6 and bit (k - 6) of n times 2^(k-6) for 6 <= k < 14. Every value
// is 0 or a power of two up to 128 (exact in e4m3 too) and every sum an integer below 2^14.
LayoutTable wgmma_d_layout(WgmmaElement element, unsigned n) {
  LayoutTable table = empty_table(std::string("wgmma m64n") + std::to_string(n) + "k" + std::to_string(wgmma_k(element)) +
                                      " " + wgmma_element_name(element) + " D",
                                  {{"thread", 128}, {"value", n / 2}}, {{"m", 64}, {"n", n}});
  const unsigned k_extent = wgmma_k(element), bytes = element == WgmmaElement::e4m3 ? 1 : 2;
  const std::size_t b_start = 64u * k_extent * bytes;
  const std::uint64_t desc_a = plain_k_major(0, 64), desc_b = plain_k_major(b_start, n);
  std::vector<std::uint8_t> image(b_start + std::size_t{n} * k_extent * bytes, 0);
  for (unsigned k = 0; k < 14; ++k) {
    for (unsigned m = 0; m < 64; ++m) place(image, desc_a, element, m, k, k < 6 ? static_cast<float>((m >> k) & 1u) : 64.0f);
    for (unsigned col = 0; col < n; ++col)
      place(image, desc_b, element, col, k,
            k < 6 ? std::ldexp(1.0f, static_cast<int>(k)) : static_cast<float>(((col >> (k - 6)) & 1u) << (k - 6)));
  }
  const std::vector<float> d = run_wgmma(element, n, image, desc_a, desc_b, {});
  for (std::size_t i = 0; i < d.size(); ++i) {
    const long code = d[i] == 0.0f ? 0 : exact_code(d[i]);  // m = 0, n = 0 sums to 0
    if (code < 0 || code / 64 >= static_cast<long>(n)) continue;
    table.image[i] = (code % 64) * n + code / 64;
  }
  return table;
}

// A from registers: B (N = K) is the identity, so D[m][n] = A[m][n]; thread t's value v holds one base-8 digit
// of its position t·V + v per launch (digits 0..7 are exact in every type), four launches give the position,
// and the emulator's D layout (wgmma_d_layout, itself compared with CuTe's) says which (m, k) showed it.
LayoutTable wgmma_a_layout(WgmmaElement element) {
  const unsigned k_extent = wgmma_k(element), bytes = element == WgmmaElement::e4m3 ? 1 : 2;
  const unsigned per_register = 4 / bytes, values = 4 * per_register;
  LayoutTable table = empty_table(std::string("wgmma m64nNk") + std::to_string(k_extent) + " " + wgmma_element_name(element) +
                                      " A from registers",
                                  {{"thread", 128}, {"value", values}}, {{"m", 64}, {"k", k_extent}});
  const LayoutTable d_layout = wgmma_d_layout(element, k_extent);
  const std::uint64_t desc_b = plain_k_major(0, k_extent);
  std::vector<std::uint8_t> image(std::size_t{k_extent} * k_extent * bytes, 0);
  for (unsigned col = 0; col < k_extent; ++col) place(image, desc_b, element, col, col, 1.0f);
  std::vector<long> codes(128u * (k_extent / 2), 0);
  std::vector<bool> seen(codes.size(), true);
  for (unsigned digit = 0; digit < 4; ++digit) {
    std::vector<std::uint32_t> registers(128u * 4, 0);
    for (unsigned t = 0; t < 128; ++t)
      for (unsigned v = 0; v < values; ++v) {
        const unsigned value_digit = ((t * values + v) >> (3 * digit)) & 7u;
        registers[4u * t + v / per_register] |= wgmma_bits(element, static_cast<float>(value_digit))
                                               << (8 * bytes * (v % per_register));
      }
    const std::vector<float> d = run_wgmma(element, k_extent, image, 0, desc_b, registers);
    for (std::size_t i = 0; i < d.size(); ++i) {
      const long value = d[i] == 0.0f ? 0 : exact_code(d[i]);
      if (value < 0 || value > 7) seen[i] = false;
      else codes[i] |= value << (3 * digit);
    }
  }
  std::vector<int> landings(table.image.size(), 0);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (!seen[i] || d_layout.image[i] < 0 || codes[i] >= static_cast<long>(table.image.size())) continue;
    const std::size_t position = static_cast<std::size_t>(codes[i]);
    table.image[position] = ++landings[position] == 1 ? d_layout.image[i] : -1;  // (m, n = k): the same flat index
  }
  return table;
}

// TMA: a tensor larger than the box whose bytes inside the box hold (two loads: the low, then the high byte
// of) their index in the box, loaded with the box's swizzle into a 1024-byte aligned tile; each byte of the
// tile then says which box byte landed there.
LayoutTable tma_box_layout(const TmaBox& box) {
  const unsigned rows = box.box_rows * box.box_depth;
  LayoutTable table = empty_table(tma_box_name(box), {{"row", rows}, {"byte", box.row_bytes}}, {{"byte offset", 1L << 40}});
  const std::size_t box_bytes = std::size_t{rows} * box.row_bytes;
  const unsigned box_cols = box.row_bytes / box.element_bytes;
  const unsigned cols = 2 * box_cols, tensor_rows = box.box_rows + 3, tensor_depth = box.box_depth + 1;
  const int origin[3] = {static_cast<int>(box_cols / 2), 2, box.box_depth > 1 ? 1 : 0};
  cuda::TensorMapShape shape;
  shape.rank = box.box_depth > 1 ? 3 : 2;
  shape.element_bytes = box.element_bytes;
  shape.dims[0] = cols;
  shape.dims[1] = tensor_rows;
  shape.dims[2] = tensor_depth;
  shape.strides_bytes[0] = box.element_bytes;
  shape.strides_bytes[1] = std::uint64_t{cols} * box.element_bytes;
  shape.strides_bytes[2] = shape.strides_bytes[1] * tensor_rows;
  shape.box[0] = box_cols;
  shape.box[1] = box.box_rows;
  shape.box[2] = box.box_depth;
  shape.swizzle = static_cast<isa::TmaSwizzle>(box.swizzle_bits);
  const std::size_t row_pitch = std::size_t{cols} * box.element_bytes;
  std::vector<std::uint16_t> landed(box_bytes, 0);
  constexpr std::size_t tile = 1024, barrier = 0;
  for (unsigned high = 0; high < 2; ++high) {
    std::vector<std::uint8_t> tensor(row_pitch * tensor_rows * tensor_depth, 0xee);
    for (unsigned z = 0; z < box.box_depth; ++z)
      for (unsigned y = 0; y < box.box_rows; ++y)
        for (unsigned x = 0; x < box.row_bytes; ++x) {
          const std::size_t index = (std::size_t{z} * box.box_rows + y) * box.row_bytes + x;
          const std::size_t global = ((origin[2] + z) * std::size_t{tensor_rows} + origin[1] + y) * row_pitch +
                                     std::size_t(origin[0]) * box.element_bytes + x;
          tensor[global] = static_cast<std::uint8_t>(high != 0 ? index >> 8 : index & 0xffu);
        }
    const isa::TensorMap map = cuda::emulated_tensor_map(tensor.data(), shape);
    std::vector<std::uint8_t> shared;
    launch_cta("cute_oracle_tma", 32, tile + box_bytes, [&] {
      if (emu::thread_linear_idx() == 0) isa::mbarrier_init(barrier, 1);
      emu::bar_sync(0, 0);
      if (emu::thread_linear_idx() == 0) {
        isa::mbarrier_arrive(barrier, static_cast<std::uint32_t>(box_bytes));
        if (shape.rank == 3) isa::tma_load<3>(tile, map, barrier, {origin[0], origin[1], origin[2]});
        else isa::tma_load<2>(tile, map, barrier, {origin[0], origin[1]});
      }
      isa::mbarrier_wait_parity(barrier, 0);
      if (emu::thread_linear_idx() == 0) shared = read_shared(tile, box_bytes);
    });
    for (std::size_t o = 0; o < box_bytes; ++o) landed[o] = static_cast<std::uint16_t>(landed[o] | (shared[o] << (8 * high)));
  }
  std::vector<int> landings(box_bytes, 0);
  for (std::size_t o = 0; o < box_bytes; ++o) {
    const std::size_t index = landed[o];
    if (index >= box_bytes) continue;
    table.image[index] = ++landings[index] == 1 ? static_cast<long>(o) : -1;
  }
  return table;
}

}  // namespace faprobe::cute_oracle::emulator_side
