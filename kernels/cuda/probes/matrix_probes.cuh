// Instruction probes, part 2: tiny kernel bodies on the instruction layer that exercise the warp-level
// matrix instructions mma.sync m16n8k16 (f16 and bf16 -> f32) and ldmatrix (x1/x2/x4, with and without
// .trans), and cp.async with its groups, 16-byte loads, ex2.approx and ex2.approx.ftz. Compiled twice, like
// part 1: by nvcc in matrix_probes.cu and by the host compiler against the emulator in
// tests/test_emulator_mma.cpp, which checks each against an independent host computation (a matrix product;
// the ISA's ldmatrix lane mapping; 2^x with the .ftz flushes). On a GPU they will be compared with the
// emulator bit for bit, ex2.approx within its error bound and ex2.approx.ftz too, except where the ISA fixes
// its result (issue 3, scripts/device-check.sh).
//
// The probes gather and scatter fragments with the lane layouts of the PTX ISA written out here a second
// time (the emulator has its own copy): a CI pass shows the two agree with each other and with the host's
// matrix product; a GPU pass shows they agree with the hardware. Costs: one warp per CTA, a few hundred
// bytes each; they pin down semantics, not speed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/probes/warp_probes.cuh"

namespace faprobe::cuda::probes {

enum class MmaProbeType : unsigned { f16, bf16 };

// Element indices of one lane's mma.m16n8k16 fragments, from PTX ISA "Matrix Fragments for mma.m16n8k16
// with floating point type" (groupID = lane >> 2, threadID_in_group = lane % 4). Half h (0 or 1) of
// register j of A: row-major index into the 16x16 A.
FAPROBE_DEVICE unsigned mma_a_index(unsigned lane, unsigned j, unsigned h) {
  const unsigned row = (lane >> 2) + (j % 2) * 8;           // a2,a3 and a6,a7 (registers 1, 3): groupID + 8
  const unsigned col = (lane % 4) * 2 + h + (j / 2) * 8;    // a4..a7 (registers 2, 3): columns + 8
  return row * 16 + col;
}
// Half h of register j of B: row-major index into the 16x8 (k x n) B.
FAPROBE_DEVICE unsigned mma_b_index(unsigned lane, unsigned j, unsigned h) {
  const unsigned row = (lane % 4) * 2 + h + j * 8;  // b2,b3 (register 1): rows + 8
  return row * 8 + (lane >> 2);
}
// Element i of C or D: row-major index into the 16x8 accumulator.
FAPROBE_DEVICE unsigned mma_c_index(unsigned lane, unsigned i) {
  const unsigned row = (lane >> 2) + (i / 2) * 8;
  return row * 8 + (lane % 4) * 2 + (i % 2);
}

// One warp per CTA, tile t = block_linear_idx(): d[t] = a[t]·b[t] + c[t] with a 16x16 row-major, b 16x8
// row-major (k x n), both as raw f16 or bf16 bits, c and d 16x8 row-major fp32. Block of 32 threads.
// source_lane (null: every lane its own) names the lane whose fragments each lane gathers: a test plants
// a layout bug with it.
FAPROBE_DEVICE void mma_m16n8k16(MmaProbeType type, GlobalSpan<const std::uint16_t> a,
                                 GlobalSpan<const std::uint16_t> b, GlobalSpan<const float> c, GlobalSpan<float> d,
                                 GlobalSpan<const std::uint32_t> source_lane = {}) {
  const unsigned lane = isa::lane_id();
  const unsigned from = source_lane.size() == 0 ? lane : source_lane[lane];
  const std::size_t tile = block_linear_idx();
  std::uint32_t a_frag[4];
  std::uint32_t b_frag[2];
  float c_frag[4];
  for (unsigned j = 0; j < 4; ++j)
    a_frag[j] = std::uint32_t{a[tile * 256 + mma_a_index(from, j, 0)]} |
                (std::uint32_t{a[tile * 256 + mma_a_index(from, j, 1)]} << 16);
  for (unsigned j = 0; j < 2; ++j)
    b_frag[j] = std::uint32_t{b[tile * 128 + mma_b_index(from, j, 0)]} |
                (std::uint32_t{b[tile * 128 + mma_b_index(from, j, 1)]} << 16);
  for (unsigned i = 0; i < 4; ++i) c_frag[i] = c[tile * 128 + mma_c_index(from, i)];
  float d_frag[4];
  if (type == MmaProbeType::bf16) {
    isa::mma_m16n8k16_bf16(d_frag, a_frag, b_frag, c_frag);
  } else {
    isa::mma_m16n8k16_f16(d_frag, a_frag, b_frag, c_frag);
  }
  for (unsigned i = 0; i < 4; ++i) d[tile * 128 + mma_c_index(lane, i)] = d_frag[i];
}

// ldmatrix.x<matrices>[.trans] from a shared-memory image: the CTA (one warp, 32 threads) copies image
// (raw .b16 values) into shared memory, then lane l loads with row address row_offsets[l] (bytes into the
// image, 16-byte aligned; only lanes 0..8·matrices-1 are used) and writes its registers to
// out[4l .. 4l+matrices-1]; out[4l+matrices..4l+3] are not written. matrices is 1, 2 or 4.
FAPROBE_DEVICE void ldmatrix(unsigned matrices, bool transpose, GlobalSpan<const std::uint16_t> image,
                             GlobalSpan<const std::uint32_t> row_offsets, GlobalSpan<std::uint32_t> out) {
  const unsigned lane = isa::lane_id();
  SharedSpan<std::uint16_t> shared = isa::shared_array<std::uint16_t>(0, image.size());
  for (std::size_t i = lane; i < image.size(); i += isa::warp_size) shared[i] = image[i];
  isa::sync_threads();  // the image is complete before any lane loads from it
  const std::size_t offset = row_offsets[lane];
  std::uint32_t r1[1] = {};
  std::uint32_t r2[2] = {};
  std::uint32_t r4[4] = {};
  switch (matrices * 2 + (transpose ? 1 : 0)) {
    case 2: isa::ldmatrix<false>(r1, offset); break;
    case 3: isa::ldmatrix<true>(r1, offset); break;
    case 4: isa::ldmatrix<false>(r2, offset); break;
    case 5: isa::ldmatrix<true>(r2, offset); break;
    case 8: isa::ldmatrix<false>(r4, offset); break;
    case 9: isa::ldmatrix<true>(r4, offset); break;
    default: return;
  }
  for (unsigned i = 0; i < matrices; ++i)
    out[4 * lane + i] = matrices == 1 ? r1[i] : matrices == 2 ? r2[i] : r4[i];
}

// cp.async, 16-byte loads and stores, and ex2.approx, the rest of part 2. Each thread of the CTA copies the 16 bytes
// at in[4i..4i+3] (i = thread_linear_idx(), in holding 4·block_threads() words) to shared memory with
// cp.async, commits and waits for the group; after a barrier, thread i writes the words thread i+1 copied
// (wrapping) to copied[4i..4i+3] and the same words, loaded directly with a 16-byte load, to loaded[...]
// with a 16-byte store; exp2[i] = ex2.approx of the word in[4i] read as a float. block_threads()·16 bytes of shared memory.
FAPROBE_DEVICE void async_copy(GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> copied,
                               GlobalSpan<std::uint32_t> loaded, GlobalSpan<float> exp2) {
  const unsigned tid = isa::thread_linear_idx();
  const unsigned threads = isa::block_threads();
  isa::cp_async_16(16 * std::size_t{tid}, in, 4 * std::size_t{tid});
  isa::cp_async_commit_group();
  isa::cp_async_wait_group<0>();
  isa::sync_threads();  // every thread's copy has landed before any other thread reads it
  const unsigned next = (tid + 1) % threads;
  SharedSpan<std::uint32_t> tile = isa::shared_array<std::uint32_t>(0, 4 * std::size_t{threads});
  const isa::Words4 direct = isa::load_16(in, 4 * std::size_t{next});
  for (unsigned i = 0; i < 4; ++i) copied[4 * std::size_t{tid} + i] = tile[4 * std::size_t{next} + i];
  isa::store_16(loaded, 4 * std::size_t{tid}, direct);
  exp2[tid] = isa::ex2_approx(isa::detail::from_bits<float>(in[4 * std::size_t{tid}]));
}

// ex2.approx.ftz.f32 on its own, the softmax's exponential (online_softmax.cuh): thread i
// (global_thread_idx(); threads past in.size() do nothing) writes ex2.approx.ftz of the word in[i] read as a
// float. Its own body rather than a fourth output of async_copy, so that its inputs can be the ones the flush
// is about (subnormal inputs, results below 2^-126, infinities, NaN) without feeding them to the plain form.
// One word in and one out per thread.
FAPROBE_DEVICE void ex2_ftz(GlobalSpan<const std::uint32_t> in, GlobalSpan<float> out) {
  const std::size_t i = global_thread_idx();
  if (i >= in.size()) return;
  out[i] = isa::ex2_approx_ftz(isa::detail::from_bits<float>(in[i]));
}

}  // namespace faprobe::cuda::probes
