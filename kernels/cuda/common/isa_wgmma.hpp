// The instruction layer, part 6 (sm_90a): Hopper's warpgroup matrix multiply (wgmma) with its shared-memory
// matrix descriptors, and stmatrix. The pattern is isa.hpp's: one function per instruction, the PTX under
// nvcc, the emulator (emu/emulator.hpp) otherwise, the fragment and shared-memory layouts implemented once,
// in the emulator. Like part 4, these compile for every target and trap below sm_90.
//
// wgmma.mma_async (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"): the four
// warps of a warpgroup (128 consecutive threads, the first a multiple of 128) compute D(64×N, fp32) =
// A(64×K)·B(K×N) [+ D] together, K = 16 for f16/bf16 and 32 for e4m3. A comes from shared memory (a
// descriptor) or from registers (the mma.sync m16n8k16 A fragment per warp, warp w holding rows 16w..16w+15);
// B always from shared memory. D is spread over the warpgroup as mma.sync's C fragment repeated every 8
// columns: thread (warp w, lane l) holds d[4j + 2h + c] = D[16w + l/4 + 8h][8j + 2(l%4) + c]. The instruction
// is asynchronous: wgmma_fence() before the first wgmma that touches registers written since (the
// accumulators, A registers), wgmma_commit_group() after a batch, wgmma_wait_group<N>() before reading D.
//
// A shared-memory operand is described by a 64-bit descriptor (PTX ISA "Matrix Descriptor Format"): start
// address >> 4 (bits 0-13), leading byte offset >> 4 (LBO, bits 16-29), stride byte offset >> 4 (SBO, bits
// 32-45), base offset (bits 49-51, 0 here) and the swizzle mode (bits 62-63: 0 none, 1 128B, 2 64B, 3 32B).
// The layouts it describes are the "canonical" ones, in 16-byte units (T = elements per 16 bytes, W = 1, 2,
// 4 or 8 for no, 32B, 64B and 128B swizzle), after CUTLASS's make_gmma_desc (cute/atom/mma_traits_sm90_gmma.hpp):
//   K-major (rows of M or N, K contiguous): row r at (r % 8)·16W + (r / 8)·SBO; 16-byte chunk c of K at
//     c·LBO without swizzle, c·16 with it.
//   MN-major (M or N contiguous): element i of a K row at (i % T)·size + ((i / T) % W)·16 + (i / TW)·LBO with
//     swizzle (without: (i / T)·SBO); K row k at (k % 8)·16W + (k / 8)·SBO with swizzle (without: (k / 8)·LBO).
// The swizzle then XORs address bits [4, 4+B) with bits [7, 7+B) (B = log2 W): the same function TMA applies
// when it writes a tile (isa_tma.hpp), so a tile TMA writes with 128B swizzle is read by a 128B descriptor.
// Tiles are 1024-byte aligned so that the pattern starts with the tile; stepping K inside a swizzled row
// adds the byte step to the start address, as CUTLASS does.
//
// stmatrix (PTX ISA "stmatrix"): the inverse of ldmatrix, a warp storing 1, 2 or 4 8×8 matrices of .b16 to
// rows whose addresses lanes 0..8N-1 supply; the registers hold the ldmatrix fragment.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"

namespace faprobe::cuda::isa {

// ======================================== Part 6 ========================================

// The descriptor's swizzle field (bits 62-63).
enum class WgmmaSwizzle : std::uint64_t { none = 0, bytes128 = 1, bytes64 = 2, bytes32 = 3 };

// The descriptor of a shared-memory operand starting at dynamic-shared-memory byte offset offset_bytes
// (16-byte aligned), with the canonical layout's leading and stride byte offsets (multiples of 16).
FAPROBE_DEVICE std::uint64_t wgmma_descriptor(std::size_t offset_bytes, std::uint32_t leading_byte_offset,
                                              std::uint32_t stride_byte_offset, WgmmaSwizzle swizzle) {
#if defined(__CUDACC__)
  const std::uint64_t address = detail::shared_address(offset_bytes);
#else
  const std::uint64_t address = offset_bytes;  // the emulator addresses shared memory by offset
#endif
  return ((address >> 4) & 0x3fffu) | (std::uint64_t{(leading_byte_offset >> 4) & 0x3fffu} << 16) |
         (std::uint64_t{(stride_byte_offset >> 4) & 0x3fffu} << 32) | (static_cast<std::uint64_t>(swizzle) << 62);
}
// The same descriptor moved by byte_step (a multiple of 16) along its operand: a later K step or row block.
FAPROBE_DEVICE std::uint64_t wgmma_descriptor_advance(std::uint64_t descriptor, std::uint32_t byte_step) {
  return descriptor + (byte_step >> 4);
}

#if defined(__CUDACC__)
namespace ptx {
#if FAPROBE_SM90_PTX
#include "cuda/common/wgmma_ptx.inc"
#endif
}  // namespace ptx
#endif

// The input type of a wgmma: isa::Half, isa::BFloat16 (K = 16) or isa::E4M3 (K = 32, both operands K-major).
// pack4: four fp32 values rounded to e4m3 (cvt.rn.satfinite.e4m3x2.f32, PTX ISA "cvt": round to nearest
// even, saturating to ±448) in one register, the first in bits 0-7, as the e4m3 wgmma A fragment holds them.
struct E4M3 {
  using Storage = std::uint8_t;
  static FAPROBE_DEVICE std::uint32_t pack4(float b0, float b1, float b2, float b3) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
    // cvt d, a, b puts a in the upper byte of d; mov.b32 joins the two halves without a shift and an or.
    std::uint32_t packed;
    asm("{\n\t.reg .b16 low, high;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 low, %2, %1;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 high, %4, %3;\n\t"
        "mov.b32 %0, {low, high};\n}"
        : "=r"(packed) : "f"(b0), "f"(b1), "f"(b2), "f"(b3));
    return packed;
#else
    (void)b0, (void)b1, (void)b2, (void)b3;
    __trap();
    return 0;
#endif
#else
    return std::uint32_t{emu::e4m3_from_float(b0)} | (std::uint32_t{emu::e4m3_from_float(b1)} << 8) |
           (std::uint32_t{emu::e4m3_from_float(b2)} << 16) | (std::uint32_t{emu::e4m3_from_float(b3)} << 24);
#endif
  }
};

namespace detail {
template <class Element>
constexpr int wgmma_k() {
  return std::is_same_v<Element, E4M3> ? 32 : 16;
}
#if !defined(__CUDACC__)
template <class Element>
constexpr emu::WgmmaInput wgmma_input() {
  if constexpr (std::is_same_v<Element, Half>) return emu::WgmmaInput::f16;
  else if constexpr (std::is_same_v<Element, BFloat16>) return emu::WgmmaInput::bf16;
  else return emu::WgmmaInput::e4m3;
}
#endif
template <class Element>
constexpr void check_wgmma_element() {
  static_assert(std::is_same_v<Element, Half> || std::is_same_v<Element, BFloat16> || std::is_same_v<Element, E4M3>,
                "wgmma takes isa::Half, isa::BFloat16 or isa::E4M3");
}
}  // namespace detail

// wgmma.mma_async with A and B in shared memory: D(64×N) = A·B (+ D when accumulate). N is one that
// wgmma_ptx.inc instantiates (16, 32, 64, 96, 128, 192, 256); BMnMajor: B is N-major (imm-tnsp-b, f16 and
// bf16 only), else K-major; A is K-major. Every thread of the warpgroup calls it with the same descriptors.
template <int N, class Element, bool BMnMajor = false>
FAPROBE_DEVICE void wgmma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, bool accumulate) {
  detail::check_wgmma_element<Element>();
  static_assert(!(BMnMajor && std::is_same_v<Element, E4M3>), "e4m3 wgmma takes K-major operands only");
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  if constexpr (std::is_same_v<Element, Half>) {
    ptx::wgmma_f16_ss<BMnMajor>(d, desc_a, desc_b, accumulate);
  } else if constexpr (std::is_same_v<Element, BFloat16>) {
    ptx::wgmma_bf16_ss<BMnMajor>(d, desc_a, desc_b, accumulate);
  } else {
    ptx::wgmma_e4m3_ss(d, desc_a, desc_b, accumulate);
  }
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  __trap();
#endif
#else
  emu::wgmma({detail::wgmma_input<Element>(), N, false, BMnMajor}, desc_a, nullptr, desc_b, d, accumulate);
#endif
}

// The same with A from registers (wgmma's "A in registers" form): a holds the thread's A fragment, laid out
// as mma.sync m16n8k16's A for f16 / bf16 (warp w: rows 16w + l/4 and +8, columns 2(l%4) and +8 in pairs) and
// as m16n8k32's for e4m3 (four bytes per register: columns 4(l%4)..+3, rows l/4 and +8, then columns +16).
template <int N, class Element, bool BMnMajor = false>
FAPROBE_DEVICE void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b, bool accumulate) {
  detail::check_wgmma_element<Element>();
  static_assert(!(BMnMajor && std::is_same_v<Element, E4M3>), "e4m3 wgmma takes K-major operands only");
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  if constexpr (std::is_same_v<Element, Half>) {
    ptx::wgmma_f16_rs<BMnMajor>(d, a, desc_b, accumulate);
  } else if constexpr (std::is_same_v<Element, BFloat16>) {
    ptx::wgmma_bf16_rs<BMnMajor>(d, a, desc_b, accumulate);
  } else {
    ptx::wgmma_e4m3_rs(d, a, desc_b, accumulate);
  }
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
  __trap();
#endif
#else
  emu::wgmma({detail::wgmma_input<Element>(), N, true, BMnMajor}, 0, a, desc_b, d, accumulate);
#endif
}

// wgmma.fence.sync.aligned: orders the warpgroup's earlier register writes (accumulators, A fragments)
// before the wgmma operations that follow. wgmma.commit_group.sync.aligned: the uncommitted wgmma operations
// become a group. wgmma.wait_group.sync.aligned Pending: waits until at most Pending groups are in flight.
// The emulator models the asynchrony (emu/emulator.hpp): D is poison until the wait retires the wgmma, a
// wgmma needs a fence since the thread's last wait, and writes to in-flight accumulators are reported.
FAPROBE_DEVICE void wgmma_fence() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#else
  __trap();
#endif
#else
  emu::wgmma_fence();
#endif
}
FAPROBE_DEVICE void wgmma_commit_group() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#else
  __trap();
#endif
#else
  emu::wgmma_commit_group();
#endif
}
template <unsigned Pending>
FAPROBE_DEVICE void wgmma_wait_group() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
#else
  __trap();
#endif
#else
  emu::wgmma_wait_group(Pending);
#endif
}
// Keeps the compiler from moving reads or writes of the accumulators across an asynchronous wgmma (an empty
// asm that "changes" each register; CUTLASS's warpgroup_fence_operand). Nothing under emulation.
template <std::size_t Count>
FAPROBE_DEVICE void wgmma_fence_operand(float (&registers)[Count]) {
#if defined(__CUDACC__)
  for (std::size_t i = 0; i < Count; ++i) asm volatile("" : "+f"(registers[i])::"memory");
#else
  (void)registers;
#endif
}

// The same for A fragments in registers (wgmma_rs): the hardware reads them while the wgmma is in flight, but
// to the compiler they are dead once the instruction is issued, and ptxas then hands them to other values
// (a softmax's temporaries, the next block's P) and must wait for the wgmma before the first such write,
// which serializes what was meant to overlap. Fenced after the wait that retires the wgmma, they stay live
// (and untouchable) until then.
template <std::size_t Count>
FAPROBE_DEVICE void wgmma_fence_operand(std::uint32_t (&registers)[Count]) {
#if defined(__CUDACC__)
  for (std::size_t i = 0; i < Count; ++i) asm volatile("" : "+r"(registers[i])::"memory");
#else
  (void)registers;
#endif
}

// Pins the next wgmma_wait_group after the computation of a and b. ptxas schedules WARPGROUP.DEPBAR (the wait)
// as early as its dependences allow, and work that does not touch the in-flight wgmma's registers gives it
// none: a wait written after a softmax is hoisted above it, so the softmax no longer overlaps the wgmma (the
// point of FA-3's intra-warpgroup pipelining). A shared-memory store stays ordered with the wait; one that
// reads a and b (values the work computes last, such as its row sums) and is predicated off at run time by
// `never` (non-zero never, but the compiler cannot know) costs one instruction and keeps the wait after them.
// Nothing under emulation, where nothing is scheduled. tests/test_static_checks.cpp counts the MUFU.EX2 that
// end up between the two waits of each FA-3 loop.
FAPROBE_DEVICE void wgmma_wait_after(float a, float b, std::uint32_t never) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %0, 0;\n\t@q st.shared.v2.f32 [%1], {%2, %3};\n}" ::"r"(never), "r"(0u),
               "f"(a), "f"(b) : "memory");
#else
  (void)a, (void)b, (void)never;
  __trap();
#endif
#else
  (void)a, (void)b, (void)never;
#endif
}

// --- stmatrix.sync.aligned.m8n8.x<N>[.trans].shared.b16 (sm_90): lanes 8i + r (i < N) pass the 16-byte
// aligned shared offset of row r of matrix i; r[i] holds the lane's ldmatrix fragment of matrix i (row l/4,
// columns 2(l%4) and +1, lower column in bits 0-15; with Transpose the matrix is stored transposed). ---
template <bool Transpose = false, unsigned N>
FAPROBE_DEVICE void stmatrix(std::size_t row_offset_bytes, const std::uint32_t (&r)[N]) {
  static_assert(N == 1 || N == 2 || N == 4, "stmatrix stores 1, 2 or 4 matrices (.x1, .x2, .x4)");
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  const std::uint32_t address = detail::shared_address(row_offset_bytes);
  if constexpr (N == 1 && !Transpose) {
    asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(address), "r"(r[0]) : "memory");
  } else if constexpr (N == 1) {
    asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(address), "r"(r[0]) : "memory");
  } else if constexpr (N == 2 && !Transpose) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(address), "r"(r[0]), "r"(r[1])
                 : "memory");
  } else if constexpr (N == 2) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(address), "r"(r[0]),
                 "r"(r[1]) : "memory");
  } else if constexpr (!Transpose) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
  } else {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
  }
#else
  (void)row_offset_bytes, (void)r;
  __trap();
#endif
#else
  std::uint32_t words[4] = {};
  for (unsigned i = 0; i < N; ++i) words[i] = r[i];
  emu::stmatrix(N, Transpose, row_offset_bytes, words);
#endif
}

}  // namespace faprobe::cuda::isa
