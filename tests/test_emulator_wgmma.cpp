// The instruction layer's part 6 under the emulator: wgmma.mma_async with A from shared memory or registers,
// B K-major or N-major, each swizzle mode, f16 / bf16 / e4m3, and stmatrix. Every expectation is computed
// on the host: tiles are placed in shared memory by placement formulas written here from the definition of
// each layout (rows, 16-byte chunks, the XOR of address bits [4, 4+B) with [7, 7+B)), independently of
// the emulator's descriptor decoding, and D is compared with a host matrix product of small integers (exact
// in fp32 in any order). A descriptor that disagrees with the placement (a swizzle mismatch) must give a
// different D, and misuse must be reported.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/isa_wgmma.hpp"
#include "emulator_test_support.hpp"

namespace faprobe::emu {
namespace {

namespace isa = cuda::isa;
using testing::expect_mentions;
using testing::launch_error;
using testing::within_deadline;

// Small integers, exact in every input type (e4m3 holds the integers -16..16 exactly).
float small_integer(unsigned seed, unsigned i) { return static_cast<float>(static_cast<int>((seed * 7919u + i * 104729u) % 7u) - 3); }

// The e4m3 code of a small integer, found by decoding all 256 codes (value = 2^(e-7)·(1 + m/8), e > 0).
std::uint8_t e4m3_code(float value) {
  for (unsigned code = 0; code < 256; ++code) {
    const unsigned e = (code >> 3) & 0xfu, m = code & 7u;
    const float magnitude = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, static_cast<int>(e) - 7);
    if (((code & 0x80u) != 0 ? -magnitude : magnitude) == value && !(e == 15 && m == 7)) return static_cast<std::uint8_t>(code);
  }
  ADD_FAILURE() << value << " has no e4m3 code";
  return 0;
}

struct Operand {
  unsigned rows = 0;  // M for A, N for B
  unsigned depth = 0;  // K, over all k-steps
  std::vector<float> values;  // [row][k]
  float at(unsigned row, unsigned k) const { return values[std::size_t{row} * depth + k]; }
};

Operand make_operand(unsigned rows, unsigned depth, unsigned seed) {
  Operand o{rows, depth, std::vector<float>(std::size_t{rows} * depth)};
  for (unsigned i = 0; i < o.values.size(); ++i) o.values[i] = small_integer(seed, i);
  return o;
}

// Where the test puts element (row, k) of an operand in shared memory, and the bytes of a value.
using Placement = std::function<std::size_t(unsigned row, unsigned k)>;

void store_element(std::vector<std::uint8_t>& shared, std::size_t offset, float value, WgmmaInput input) {
  if (input == WgmmaInput::e4m3) {
    shared.at(offset) = e4m3_code(value);
    return;
  }
  const std::uint16_t bits = input == WgmmaInput::bf16 ? isa::float_to_bfloat16(value) : isa::float_to_half(value);
  std::memcpy(&shared.at(offset), &bits, 2);
}

struct WgmmaRun {
  WgmmaInput input = WgmmaInput::f16;
  unsigned n = 64;
  bool a_in_registers = false;
  bool b_mn_major = false;
  unsigned k_steps = 1;
  std::size_t shared_bytes = 0;
  Placement place_a;  // unused with a_in_registers
  Placement place_b;
  // The descriptors of k-step s.
  std::function<std::uint64_t(unsigned s)> desc_a;
  std::function<std::uint64_t(unsigned s)> desc_b;
};

// The thread's N/2 accumulators for a given N, as the layer's templates take them.
template <int N>
void issue(const WgmmaRun& run, unsigned step, float* d, const std::uint32_t (&a)[4]) {
  float (&acc)[N / 2] = *reinterpret_cast<float (*)[N / 2]>(d);
  const bool accumulate = step > 0;
  auto go = [&](auto element) {
    using E = decltype(element);
    if (run.a_in_registers) {
      if (run.b_mn_major) {
        if constexpr (!std::is_same_v<E, isa::E4M3>) isa::wgmma_rs<N, E, true>(acc, a, run.desc_b(step), accumulate);
      } else {
        isa::wgmma_rs<N, E, false>(acc, a, run.desc_b(step), accumulate);
      }
    } else if (run.b_mn_major) {
      if constexpr (!std::is_same_v<E, isa::E4M3>) isa::wgmma_ss<N, E, true>(acc, run.desc_a(step), run.desc_b(step), accumulate);
    } else {
      isa::wgmma_ss<N, E, false>(acc, run.desc_a(step), run.desc_b(step), accumulate);
    }
  };
  switch (run.input) {
    case WgmmaInput::f16: go(isa::Half{}); break;
    case WgmmaInput::bf16: go(isa::BFloat16{}); break;
    case WgmmaInput::e4m3: go(isa::E4M3{}); break;
  }
}

// Runs the wgmma k-steps on one warpgroup and returns D (64 × N, row-major) gathered through the documented
// accumulator layout: thread (warp w, lane l) holds d[4j + 2h + c] = D[16w + l/4 + 8h][8j + 2(l%4) + c].
std::vector<float> run_wgmma(const WgmmaRun& run, const Operand& a, const Operand& b) {
  const unsigned k_extent = run.input == WgmmaInput::e4m3 ? 32 : 16;
  std::vector<std::uint8_t> image(run.shared_bytes, 0);
  for (unsigned k = 0; k < a.depth && !run.a_in_registers; ++k)
    for (unsigned r = 0; r < 64; ++r) store_element(image, run.place_a(r, k), a.at(r, k), run.input);
  for (unsigned k = 0; k < b.depth; ++k)
    for (unsigned r = 0; r < run.n; ++r) store_element(image, run.place_b(r, k), b.at(r, k), run.input);
  std::vector<float> out(64 * std::size_t{run.n}, NAN);
  within_deadline([&] {
    launch({"wgmma", {1, 1, 1}, {128, 1, 1}, run.shared_bytes}, [&] {
      const unsigned t = isa::thread_linear_idx();
      if (t == 0) std::memcpy(isa::shared_array<std::uint8_t>(0, run.shared_bytes).data(), image.data(), image.size());
      isa::sync_threads();
      float d[128] = {};
      for (unsigned s = 0; s < run.k_steps; ++s) {
        std::uint32_t regs[4] = {};
        if (run.a_in_registers) {
          const unsigned warp = t / 32, lane = t % 32;
          for (unsigned reg = 0; reg < 4; ++reg) {
            const unsigned row = 16 * warp + lane / 4 + (reg % 2) * 8;
            if (run.input == WgmmaInput::e4m3) {
              for (unsigned e = 0; e < 4; ++e)
                regs[reg] |= std::uint32_t{e4m3_code(a.at(row, s * k_extent + (lane % 4) * 4 + e + (reg / 2) * 16))} << (8 * e);
            } else {
              for (unsigned e = 0; e < 2; ++e) {
                const float v = a.at(row, s * k_extent + (lane % 4) * 2 + e + (reg / 2) * 8);
                const std::uint16_t bits = run.input == WgmmaInput::bf16 ? isa::float_to_bfloat16(v) : isa::float_to_half(v);
                regs[reg] |= std::uint32_t{bits} << (16 * e);
              }
            }
          }
        }
        isa::wgmma_fence();
        switch (run.n) {
          case 16: issue<16>(run, s, d, regs); break;
          case 64: issue<64>(run, s, d, regs); break;
          case 128: issue<128>(run, s, d, regs); break;
          case 256: issue<256>(run, s, d, regs); break;
          default: FAIL() << "no width " << run.n;
        }
        isa::wgmma_commit_group();
        isa::wgmma_wait_group<0>();  // regs (the A registers) change with the next step: retire this one first
      }
      const unsigned warp = t / 32, lane = t % 32;
      for (unsigned i = 0; i < run.n / 2; ++i) {
        const unsigned row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
        const unsigned col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        out[std::size_t{row} * run.n + col] = d[i];
      }
    });
  });
  return out;
}

std::vector<float> host_product(const Operand& a, const Operand& b) {
  std::vector<float> d(std::size_t{a.rows} * b.rows, 0.0f);
  for (unsigned m = 0; m < a.rows; ++m)
    for (unsigned n = 0; n < b.rows; ++n)
      for (unsigned k = 0; k < a.depth; ++k) d[std::size_t{m} * b.rows + n] += a.at(m, k) * b.at(n, k);
  return d;
}

// K-major with 128-byte swizzle, 16-bit elements: row r at r·128 bytes, its 16-byte chunk c at chunk
// c ^ (r % 8); K = 64 elements per row; 8-row groups 1024 bytes apart (SBO); k-step s starts 32·s bytes in.
std::size_t k_major_sw128(std::size_t base, unsigned r, unsigned k) {
  return base + r * 128u + (((k / 8) ^ (r % 8)) * 16u) + (k % 8) * 2u;
}

TEST(EmulatorWgmma, SharedSharedKMajorSwizzle128MatchesTheHostProduct) {
  for (WgmmaInput input : {WgmmaInput::f16, WgmmaInput::bf16}) {
    const Operand a = make_operand(64, 64, 1), b = make_operand(128, 64, 2);
    WgmmaRun run;
    run.input = input;
    run.n = 128;
    run.k_steps = 4;
    run.shared_bytes = 64 * 128 + 128 * 128;
    const std::size_t b_base = 64 * 128;
    run.place_a = [](unsigned r, unsigned k) { return k_major_sw128(0, r, k); };
    run.place_b = [&](unsigned r, unsigned k) { return k_major_sw128(b_base, r, k); };
    run.desc_a = [](unsigned s) { return isa::wgmma_descriptor(32 * s, 16, 1024, isa::WgmmaSwizzle::bytes128); };
    run.desc_b = [&](unsigned s) { return isa::wgmma_descriptor(b_base + 32 * s, 16, 1024, isa::WgmmaSwizzle::bytes128); };
    EXPECT_EQ(run_wgmma(run, a, b), host_product(a, b)) << "input " << static_cast<int>(input);
  }
}

TEST(EmulatorWgmma, RegistersTimesNMajorSwizzle128MatchesTheHostProduct) {
  // B (K × N) stored N-major as P·V's V tile: K row k at k·128 bytes of a 64-column block, chunk c of N at
  // c ^ (k % 8); N = 256 is four such blocks, 32·128 bytes apart (LBO); 8-row K groups 1024 apart (SBO).
  for (WgmmaInput input : {WgmmaInput::f16, WgmmaInput::bf16}) {
    const Operand a = make_operand(64, 32, 3), b = make_operand(256, 32, 4);
    const std::size_t block = 32 * 128;
    WgmmaRun run;
    run.input = input;
    run.n = 256;
    run.a_in_registers = true;
    run.b_mn_major = true;
    run.k_steps = 2;
    run.shared_bytes = 4 * block;
    run.place_b = [&](unsigned n, unsigned k) {
      return (n / 64) * block + k * 128u + ((((n % 64) / 8) ^ (k % 8)) * 16u) + (n % 8) * 2u;
    };
    run.desc_b = [&](unsigned s) {
      return isa::wgmma_descriptor(16 * 128 * s, static_cast<std::uint32_t>(block), 1024, isa::WgmmaSwizzle::bytes128);
    };
    EXPECT_EQ(run_wgmma(run, a, b), host_product(a, b)) << "input " << static_cast<int>(input);
  }
}

TEST(EmulatorWgmma, NoSwizzleCoreMatricesFollowLeadingAndStrideOffsets) {
  // Core matrices of 8 rows × 16 bytes, contiguous; K chunks 128 bytes apart (LBO), 8-row groups 256 (SBO).
  const Operand a = make_operand(64, 16, 5), b = make_operand(64, 16, 6);
  auto place = [](std::size_t base, unsigned r, unsigned k) { return base + (r / 8) * 256u + (k / 8) * 128u + (r % 8) * 16u + (k % 8) * 2u; };
  WgmmaRun run;
  run.n = 64;
  run.shared_bytes = 2 * 8 * 256;
  run.place_a = [&](unsigned r, unsigned k) { return place(0, r, k); };
  run.place_b = [&](unsigned r, unsigned k) { return place(2048, r, k); };
  run.desc_a = [](unsigned) { return isa::wgmma_descriptor(0, 128, 256, isa::WgmmaSwizzle::none); };
  run.desc_b = [](unsigned) { return isa::wgmma_descriptor(2048, 128, 256, isa::WgmmaSwizzle::none); };
  EXPECT_EQ(run_wgmma(run, a, b), host_product(a, b));
}

TEST(EmulatorWgmma, E4m3WithSwizzle64FromSharedMemoryAndRegisters) {
  // e4m3 K-major with 64-byte swizzle: 64 one-byte elements per row at r·64, chunk c at c ^ ((r / 2) % 4)
  // (address bits 7-8 of the row); 8-row groups 512 bytes apart (SBO); k-step s (32 elements) 32·s bytes in.
  const Operand a = make_operand(64, 64, 7), b = make_operand(64, 64, 8);
  auto place = [](std::size_t base, unsigned r, unsigned k) { return base + r * 64u + (((k / 16) ^ ((r / 2) % 4)) * 16u) + k % 16; };
  for (bool registers : {false, true}) {
    WgmmaRun run;
    run.input = WgmmaInput::e4m3;
    run.n = 64;
    run.a_in_registers = registers;
    run.k_steps = 2;
    run.shared_bytes = 2 * 64 * 64;
    run.place_a = [&](unsigned r, unsigned k) { return place(0, r, k); };
    run.place_b = [&](unsigned r, unsigned k) { return place(4096, r, k); };
    run.desc_a = [](unsigned s) { return isa::wgmma_descriptor(32 * s, 16, 512, isa::WgmmaSwizzle::bytes64); };
    run.desc_b = [](unsigned s) { return isa::wgmma_descriptor(4096 + 32 * s, 16, 512, isa::WgmmaSwizzle::bytes64); };
    EXPECT_EQ(run_wgmma(run, a, b), host_product(a, b)) << (registers ? "A in registers" : "A in shared memory");
  }
}

TEST(EmulatorWgmma, Swizzle32KMajorMatches) {
  // 32-byte swizzle, 16-bit: 16 elements per row at r·32, chunk c at c ^ ((r / 4) % 2); SBO 256.
  const Operand a = make_operand(64, 16, 9), b = make_operand(16, 16, 10);
  auto place = [](std::size_t base, unsigned r, unsigned k) { return base + r * 32u + (((k / 8) ^ ((r / 4) % 2)) * 16u) + (k % 8) * 2u; };
  WgmmaRun run;
  run.n = 16;
  run.shared_bytes = 64 * 32 + 16 * 32;
  run.place_a = [&](unsigned r, unsigned k) { return place(0, r, k); };
  run.place_b = [&](unsigned r, unsigned k) { return place(2048, r, k); };
  run.desc_a = [](unsigned) { return isa::wgmma_descriptor(0, 16, 256, isa::WgmmaSwizzle::bytes32); };
  run.desc_b = [](unsigned) { return isa::wgmma_descriptor(2048, 16, 256, isa::WgmmaSwizzle::bytes32); };
  EXPECT_EQ(run_wgmma(run, a, b), host_product(a, b));
}

TEST(EmulatorWgmma, ADescriptorWhoseSwizzleDisagreesWithThePlacementGivesADifferentProduct) {
  // Tiles placed with the 128B pattern (as TMA writes them) but described as 64B: the planted mismatch
  // between a copy's swizzle and the descriptor's that the FA-3 kernel's tests also plant.
  const Operand a = make_operand(64, 64, 11), b = make_operand(64, 64, 12);
  WgmmaRun run;
  run.n = 64;
  run.k_steps = 4;
  run.shared_bytes = 2 * 64 * 128;
  run.place_a = [](unsigned r, unsigned k) { return k_major_sw128(0, r, k); };
  run.place_b = [](unsigned r, unsigned k) { return k_major_sw128(8192, r, k); };
  run.desc_a = [](unsigned s) { return isa::wgmma_descriptor(32 * s, 16, 1024, isa::WgmmaSwizzle::bytes128); };
  run.desc_b = [](unsigned s) { return isa::wgmma_descriptor(8192 + 32 * s, 16, 1024, isa::WgmmaSwizzle::bytes64); };
  EXPECT_NE(run_wgmma(run, a, b), host_product(a, b));
}

TEST(EmulatorWgmma, MisuseIsReported) {
  // A warp of the warpgroup passing another descriptor.
  expect_mentions(launch_error({"wgmma_mismatch", {1, 1, 1}, {128, 1, 1}, 8192}, [] {
                    float d[32] = {};
                    isa::wgmma_fence();
                    const std::size_t start = isa::warp_id() == 3 ? 1024 : 0;
                    isa::wgmma_ss<64, isa::Half>(d, isa::wgmma_descriptor(start, 16, 1024, isa::WgmmaSwizzle::bytes128),
                                                 isa::wgmma_descriptor(4096, 16, 1024, isa::WgmmaSwizzle::bytes128), false);
                  }),
                  {"mismatched wgmma", "warpgroup 0"});
  // A CTA that is not whole warpgroups.
  expect_mentions(launch_error({"wgmma_partial", {1, 1, 1}, {96, 1, 1}, 8192}, [] {
                    float d[32] = {};
                    isa::wgmma_fence();
                    isa::wgmma_ss<64, isa::Half>(d, 0, 0, false);
                  }),
                  {"whole warpgroups", "96 threads"});
  // B read past the launch's shared memory.
  expect_mentions(launch_error({"wgmma_bounds", {1, 1, 1}, {128, 1, 1}, 8192}, [] {
                    float d[32] = {};
                    isa::wgmma_fence();
                    isa::wgmma_ss<64, isa::Half>(d, isa::wgmma_descriptor(0, 16, 1024, isa::WgmmaSwizzle::bytes128),
                                                 isa::wgmma_descriptor(6144, 16, 1024, isa::WgmmaSwizzle::bytes128), false);
                  }),
                  {"outside the launch's 8192 bytes", "of B"});
  // Part of a warpgroup that never arrives: a deadlock naming the wgmma.
  expect_mentions(launch_error({"wgmma_divergent", {1, 1, 1}, {128, 1, 1}, 8192}, [] {
                    float d[32] = {};
                    isa::wgmma_fence();
                    if (isa::warp_id() != 2)
                      isa::wgmma_ss<64, isa::Half>(d, isa::wgmma_descriptor(0, 16, 1024, isa::WgmmaSwizzle::bytes128),
                                                   isa::wgmma_descriptor(0, 16, 1024, isa::WgmmaSwizzle::bytes128), false);
                  }),
                  {"deadlock", "wgmma of warpgroup 0 (96 of 128 threads arrived)"});
}

TEST(EmulatorE4m3, ConversionRoundsToNearestEvenAndSaturates) {
  // Every code's value converts back to the code; a midpoint between neighbours goes to the even code;
  // past ±448 saturates; NaN is 0x7F (cvt.rn.satfinite.e4m3x2.f32).
  std::vector<std::uint8_t> codes;
  std::vector<float> values;
  for (unsigned code = 0; code < 0x7f; ++code) {
    const float magnitude = static_cast<float>(code >> 3) == 0.0f ? std::ldexp(static_cast<float>(code & 7u), -9)
                                                                   : std::ldexp(1.0f + static_cast<float>(code & 7u) / 8.0f,
                                                                                static_cast<int>(code >> 3) - 7);
    EXPECT_EQ(e4m3_from_float(magnitude), code);
    EXPECT_EQ(e4m3_from_float(-magnitude), code == 0 ? 0x80u : (code | 0x80u));
    codes.push_back(static_cast<std::uint8_t>(code));
    values.push_back(magnitude);
  }
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const float midpoint = (values[i] + values[i + 1]) / 2;
    EXPECT_EQ(e4m3_from_float(midpoint), codes[i] % 2 == 0 ? codes[i] : codes[i + 1]) << midpoint;
  }
  EXPECT_EQ(e4m3_from_float(1000.0f), 0x7e);
  EXPECT_EQ(e4m3_from_float(-1e30f), 0xfe);
  EXPECT_EQ(e4m3_from_float(std::nanf("")), 0x7f);
}

TEST(EmulatorStmatrix, StoresTheLdmatrixFragmentAndItsTranspose) {
  // Each lane stores the fragment ldmatrix would give it for matrix i = element value 64i + 8·row + col;
  // the rows go to lane-supplied addresses 32 bytes apart. With .trans, row and col swap.
  for (bool transpose : {false, true}) {
    std::vector<std::uint16_t> shared_image(4 * 8 * 16, 0);
    within_deadline([&] {
      launch({"stmatrix", {1, 1, 1}, {32, 1, 1}, 4 * 8 * 32}, [&] {
        const unsigned lane = isa::lane_id();
        std::uint32_t r[4];
        for (unsigned i = 0; i < 4; ++i) {
          const unsigned row = lane / 4, col = 2 * (lane % 4);
          r[i] = (64 * i + 8 * row + col) | ((64 * i + 8 * row + col + 1) << 16);
        }
        const std::size_t address = (lane / 8) * 8 * 32 + (lane % 8) * 32;
        if (transpose) {
          isa::stmatrix<true>(address, r);
        } else {
          isa::stmatrix<false>(address, r);
        }
        isa::sync_warp();
        if (lane == 0) {
          auto shared = isa::shared_array<std::uint16_t>(0, 4 * 8 * 16);
          for (std::size_t i = 0; i < shared_image.size(); ++i) shared_image[i] = shared[i];
        }
      });
    });
    for (unsigned i = 0; i < 4; ++i)
      for (unsigned row = 0; row < 8; ++row)
        for (unsigned col = 0; col < 8; ++col) {
          const unsigned expected = transpose ? 64 * i + 8 * col + row : 64 * i + 8 * row + col;
          EXPECT_EQ(shared_image[(i * 8 + row) * 16 + col], expected) << "matrix " << i << " row " << row << " col " << col;
        }
  }
}

}  // namespace
}  // namespace faprobe::emu
