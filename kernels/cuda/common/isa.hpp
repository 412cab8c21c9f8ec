// The instruction layer, part 1: thread and block indices, CTA barriers, warp shuffles and votes, and the
// CTA's dynamic shared memory. Every CUDA built-in or PTX instruction a faprobe kernel uses is one small
// function here; kernels never write asm, warp intrinsics or `extern __shared__` themselves.
//
// Under nvcc (__CUDACC__) each function is the CUDA built-in variable or inline PTX, force-inlined, so the
// GPU build costs nothing over hand-written code. With the host compiler each is a call into the emulator
// (cuda/common/emu/emulator.hpp), which runs the same kernel body on the CPU; a call there costs a
// thread_local lookup, and a barrier or collective a fiber switch per participating thread.
//
// Part 2 (below part 1): the Ampere warp-level matrix instructions mma.sync m16n8k16 (f16, bf16 -> f32) and
// ldmatrix (x1/x2/x4, .trans), cp.async with commit and wait groups, ex2.approx and 16-byte vector loads
// and stores.
// Part 3: conversions between fp32 and the 16-bit storage types (one value, or two packed in a 32-bit
// register as mma.sync takes them).
// Part 4: Hopper's synchronization (sm_90): mbarrier with transaction bytes, elect.sync, the async-proxy
// and mbarrier-init fences, setmaxnreg.
// Later parts (on Hopper wgmma, TMA, stmatrix) follow the same pattern:
// one function, the ISA section beside it, the PTX under __CUDACC__ and the emulator call otherwise, the
// lane-to-fragment layout implemented once in the emulator. Named barriers (bar_sync/bar_arrive with an
// id) are here already for warp specialization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include <cmath>
#include <string>

#include "model/eigen.hpp"
#endif

#include "cuda/common/spans.hpp"

#if defined(__CUDACC__)
#define FAPROBE_DEVICE __device__ __forceinline__
#else
#define FAPROBE_DEVICE inline
#endif

// Full unrolling of loops over register arrays (their indices must be compile-time constants, or the
// arrays go to local memory); the host compiler needs no hint.
#if !defined(FAPROBE_UNROLL)
#if defined(__CUDACC__)
#define FAPROBE_UNROLL _Pragma("unroll")
#else
#define FAPROBE_UNROLL
#endif
#endif

namespace faprobe::cuda::isa {

inline constexpr unsigned warp_size = 32;
inline constexpr std::uint32_t full_warp_mask = 0xffffffffu;

// --- Indices: CUDA built-in variables threadIdx, blockIdx, blockDim, gridDim (PTX special registers
// %tid, %ctaid, %ntid, %nctaid, PTX ISA chapter 10 "Special Registers"). ---
#if defined(__CUDACC__)
FAPROBE_DEVICE unsigned thread_idx_x() { return threadIdx.x; }
FAPROBE_DEVICE unsigned thread_idx_y() { return threadIdx.y; }
FAPROBE_DEVICE unsigned thread_idx_z() { return threadIdx.z; }
FAPROBE_DEVICE unsigned block_idx_x() { return blockIdx.x; }
FAPROBE_DEVICE unsigned block_idx_y() { return blockIdx.y; }
FAPROBE_DEVICE unsigned block_idx_z() { return blockIdx.z; }
FAPROBE_DEVICE unsigned block_dim_x() { return blockDim.x; }
FAPROBE_DEVICE unsigned block_dim_y() { return blockDim.y; }
FAPROBE_DEVICE unsigned block_dim_z() { return blockDim.z; }
FAPROBE_DEVICE unsigned grid_dim_x() { return gridDim.x; }
FAPROBE_DEVICE unsigned grid_dim_y() { return gridDim.y; }
FAPROBE_DEVICE unsigned grid_dim_z() { return gridDim.z; }
// PTX ISA special register %laneid (chapter 10, Special Registers).
FAPROBE_DEVICE unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
#else
FAPROBE_DEVICE unsigned thread_idx_x() { return emu::thread_idx().x; }
FAPROBE_DEVICE unsigned thread_idx_y() { return emu::thread_idx().y; }
FAPROBE_DEVICE unsigned thread_idx_z() { return emu::thread_idx().z; }
FAPROBE_DEVICE unsigned block_idx_x() { return emu::block_idx().x; }
FAPROBE_DEVICE unsigned block_idx_y() { return emu::block_idx().y; }
FAPROBE_DEVICE unsigned block_idx_z() { return emu::block_idx().z; }
FAPROBE_DEVICE unsigned block_dim_x() { return emu::block_dim().x; }
FAPROBE_DEVICE unsigned block_dim_y() { return emu::block_dim().y; }
FAPROBE_DEVICE unsigned block_dim_z() { return emu::block_dim().z; }
FAPROBE_DEVICE unsigned grid_dim_x() { return emu::grid_dim().x; }
FAPROBE_DEVICE unsigned grid_dim_y() { return emu::grid_dim().y; }
FAPROBE_DEVICE unsigned grid_dim_z() { return emu::grid_dim().z; }
FAPROBE_DEVICE unsigned lane_id() { return emu::lane_id(); }
#endif

// The thread's index within its CTA, x fastest: the order in which CUDA groups threads into warps.
FAPROBE_DEVICE unsigned thread_linear_idx() {
  return (thread_idx_z() * block_dim_y() + thread_idx_y()) * block_dim_x() + thread_idx_x();
}
FAPROBE_DEVICE unsigned block_threads() { return block_dim_x() * block_dim_y() * block_dim_z(); }
// The warp's index within its CTA (not %warpid, which is a hardware slot and may change).
FAPROBE_DEVICE unsigned warp_id() { return thread_linear_idx() / warp_size; }

// --- CTA barriers: PTX ISA "bar, barrier" (bar.sync, bar.arrive), Parallel Synchronization instructions. ---
// __syncthreads: waits until every thread of the CTA has arrived; orders shared and global memory.
FAPROBE_DEVICE void sync_threads() {
#if defined(__CUDACC__)
  asm volatile("bar.sync 0;" ::: "memory");
#else
  emu::bar_sync(0, 0);
#endif
}
// Named barrier `id` (0..15) for thread_count threads (a multiple of 32; 0: the whole CTA).
FAPROBE_DEVICE void bar_sync(unsigned id, unsigned thread_count) {
#if defined(__CUDACC__)
  if (thread_count == 0) {
    asm volatile("bar.sync %0;" ::"r"(id) : "memory");
  } else {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(thread_count) : "memory");
  }
#else
  emu::bar_sync(id, thread_count);
#endif
}
// Signals arrival at named barrier `id` without waiting (a producer releasing consumers); count required.
FAPROBE_DEVICE void bar_arrive(unsigned id, unsigned thread_count) {
#if defined(__CUDACC__)
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(thread_count) : "memory");
#else
  emu::bar_arrive(id, thread_count);
#endif
}

// --- Warp shuffles: PTX ISA "shfl.sync" (9.7.8.6 in ISA 7.x), on any 4-byte trivially copyable type (float, int, ...). ---
// Operand c packs the segment mask ((32 - width) << 8) and the clamp (31, or 0 for .up), as the CUDA
// __shfl_*_sync intrinsics do; width is a power of two in 1..32 and splits the warp into segments.
namespace detail {
template <typename T>
FAPROBE_DEVICE std::uint32_t to_bits(T value) {
  static_assert(sizeof(T) == 4 && std::is_trivially_copyable_v<T>, "shuffles move 32-bit values");
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
template <typename T>
FAPROBE_DEVICE T from_bits(std::uint32_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
FAPROBE_DEVICE std::uint32_t segment_clamp(unsigned width, bool up) {
#if !defined(__CUDACC__)
  if (width == 0 || width > warp_size || (width & (width - 1)) != 0)
    throw emu::EmulationError(emu::current_location() + ": shuffle width " + std::to_string(width) +
                              " is not a power of two in 1..32");
#endif
  return ((warp_size - width) << 8) | (up ? 0u : 0x1fu);
}
}  // namespace detail

// Lane (src_lane % width) of the caller's segment.
template <typename T>
FAPROBE_DEVICE T shfl_sync(std::uint32_t member_mask, T value, unsigned src_lane, unsigned width = warp_size) {
  const std::uint32_t c = detail::segment_clamp(width, false);
#if defined(__CUDACC__)
  std::uint32_t out;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, %3, %4;"
               : "=r"(out) : "r"(detail::to_bits(value)), "r"(src_lane), "r"(c), "r"(member_mask));
  return detail::from_bits<T>(out);
#else
  return detail::from_bits<T>(emu::shfl_sync(emu::ShuffleMode::idx, member_mask, detail::to_bits(value), src_lane, c));
#endif
}
// Lane (lane - delta); lanes below delta within their segment keep their own value.
template <typename T>
FAPROBE_DEVICE T shfl_up_sync(std::uint32_t member_mask, T value, unsigned delta, unsigned width = warp_size) {
  const std::uint32_t c = detail::segment_clamp(width, true);
#if defined(__CUDACC__)
  std::uint32_t out;
  asm volatile("shfl.sync.up.b32 %0, %1, %2, %3, %4;"
               : "=r"(out) : "r"(detail::to_bits(value)), "r"(delta), "r"(c), "r"(member_mask));
  return detail::from_bits<T>(out);
#else
  return detail::from_bits<T>(emu::shfl_sync(emu::ShuffleMode::up, member_mask, detail::to_bits(value), delta, c));
#endif
}
// Lane (lane + delta); lanes whose source is past their segment keep their own value.
template <typename T>
FAPROBE_DEVICE T shfl_down_sync(std::uint32_t member_mask, T value, unsigned delta, unsigned width = warp_size) {
  const std::uint32_t c = detail::segment_clamp(width, false);
#if defined(__CUDACC__)
  std::uint32_t out;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, %3, %4;"
               : "=r"(out) : "r"(detail::to_bits(value)), "r"(delta), "r"(c), "r"(member_mask));
  return detail::from_bits<T>(out);
#else
  return detail::from_bits<T>(emu::shfl_sync(emu::ShuffleMode::down, member_mask, detail::to_bits(value), delta, c));
#endif
}
// Lane (lane ^ lane_mask), the butterfly of reductions; a source past the segment keeps the own value.
template <typename T>
FAPROBE_DEVICE T shfl_xor_sync(std::uint32_t member_mask, T value, unsigned lane_mask, unsigned width = warp_size) {
  const std::uint32_t c = detail::segment_clamp(width, false);
#if defined(__CUDACC__)
  std::uint32_t out;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, %3, %4;"
               : "=r"(out) : "r"(detail::to_bits(value)), "r"(lane_mask), "r"(c), "r"(member_mask));
  return detail::from_bits<T>(out);
#else
  return detail::from_bits<T>(emu::shfl_sync(emu::ShuffleMode::bfly, member_mask, detail::to_bits(value), lane_mask, c));
#endif
}

// --- Warp votes: PTX ISA "vote.sync" (ballot, all, any), Parallel Synchronization instructions. ---
FAPROBE_DEVICE std::uint32_t ballot_sync(std::uint32_t member_mask, bool predicate) {
#if defined(__CUDACC__)
  std::uint32_t ballot;
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %1, 0;\n\tvote.sync.ballot.b32 %0, p, %2;\n}"
               : "=r"(ballot) : "r"(predicate ? 1u : 0u), "r"(member_mask));
  return ballot;
#else
  return emu::vote_ballot(member_mask, predicate);
#endif
}
FAPROBE_DEVICE bool all_sync(std::uint32_t member_mask, bool predicate) {
#if defined(__CUDACC__)
  std::uint32_t all;
  asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %1, 0;\n\tvote.sync.all.pred q, p, %2;\n\tselp.u32 %0, 1, 0, q;\n}"
               : "=r"(all) : "r"(predicate ? 1u : 0u), "r"(member_mask));
  return all != 0;
#else
  return emu::vote_all(member_mask, predicate);
#endif
}
FAPROBE_DEVICE bool any_sync(std::uint32_t member_mask, bool predicate) {
#if defined(__CUDACC__)
  std::uint32_t any;
  asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %1, 0;\n\tvote.sync.any.pred q, p, %2;\n\tselp.u32 %0, 1, 0, q;\n}"
               : "=r"(any) : "r"(predicate ? 1u : 0u), "r"(member_mask));
  return any != 0;
#else
  return emu::vote_any(member_mask, predicate);
#endif
}

// __syncwarp: PTX ISA "bar.warp.sync": the lanes in member_mask wait for each other, and their shared and
// global memory accesses before it are ordered before those after it (a warp that owns a shared tile).
FAPROBE_DEVICE void sync_warp(std::uint32_t member_mask = full_warp_mask) {
#if defined(__CUDACC__)
  asm volatile("bar.warp.sync %0;" ::"r"(member_mask) : "memory");
#else
  emu::sync_warp(member_mask);  // the lanes meet, and the race detector orders their accesses
#endif
}

// --- Dynamic shared memory (the launch's shared_bytes; CUDA `extern __shared__`). ---
// count elements of T from byte offset offset_bytes, which must be a multiple of alignof(T). The emulator
// checks the range against the launch's shared_bytes and every index; each CTA starts with 0xFF bytes.
template <typename T>
FAPROBE_DEVICE SharedSpan<T> shared_array(std::size_t offset_bytes, std::size_t count) {
#if defined(__CUDACC__)
  extern __shared__ __align__(1024) unsigned char dynamic_shared[];
  return SharedSpan<T>(reinterpret_cast<T*>(dynamic_shared + offset_bytes), count);
#else
  return SharedSpan<T>(reinterpret_cast<T*>(emu::shared_memory(offset_bytes, count * sizeof(T), alignof(T))), count);
#endif
}

// ======================================== Part 2 ========================================

namespace detail {
// The 32-bit shared-state-space address of byte offset_bytes of the dynamic shared memory, as the
// .shared operands of ldmatrix and cp.async take it (PTX ISA "cvta"; __cvta_generic_to_shared).
#if defined(__CUDACC__)
FAPROBE_DEVICE std::uint32_t shared_address(std::size_t offset_bytes) {
  extern __shared__ __align__(1024) unsigned char dynamic_shared[];
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(dynamic_shared + offset_bytes));
}
#endif
}  // namespace detail

// The address of byte offset_bytes of the dynamic shared memory as a 32-bit number, for checking its
// alignment: on the GPU the shared-state-space address (detail::shared_address, the operand ldmatrix,
// cp.async, TMA and the wgmma descriptors take); under the emulator the low 32 bits of the byte's host
// address, which carry the same alignment. Every 128-byte swizzle (TMA boxes, wgmma descriptors) XORs
// address bits [4, 7) with bits [7, 10) (PTX ISA "Tensors": "Shared Memory Swizzling Modes"), so offsets
// that are multiples of 1024 line up with the pattern only if this is 0 modulo 1024 at offset 0; the
// probe "dynamic shared memory 1024B-aligned" (warp_probes.cuh) checks it on both targets.
FAPROBE_DEVICE std::uint32_t dynamic_shared_address(std::size_t offset_bytes) {
#if defined(__CUDACC__)
  return detail::shared_address(offset_bytes);
#else
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(emu::shared_memory(offset_bytes, 0, 1)));
#endif
}

// --- mma.sync: PTX ISA "Warp-level matrix multiply-accumulate instructions: mma",
// fragments per "Matrix Fragments for mma.m16n8k16 with floating point type" (implemented in the
// emulator, emu::mma_m16n8k16). Every lane of the warp calls it; with groupID = lane >> 2 and
// t = lane % 4: a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1], a[2] = A[g][2t+8..2t+9],
// a[3] = A[g+8][2t+8..2t+9] (A 16x16 row-major, two halves per register, lower column in bits 0-15);
// b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g] (B 16x8, k x n); c and d: [g][2t], [g][2t+1],
// [g+8][2t], [g+8][2t+1] of the 16x8 fp32 accumulator. D = A·B + C; d may alias c. ---
FAPROBE_DEVICE void mma_m16n8k16_f16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                                     const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  emu::mma_m16n8k16(emu::MmaInput::f16, a, b, c, d);
#endif
}
// The same with bfloat16 A and B: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, same layouts.
FAPROBE_DEVICE void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                                      const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  emu::mma_m16n8k16(emu::MmaInput::bf16, a, b, c, d);
#endif
}

// --- ldmatrix: PTX ISA "Warp-level matrix load instruction: ldmatrix" (figure
// "ldmatrix fragment layout"). Loads N = 1, 2 or 4 8x8 matrices of .b16 from shared memory; every lane of
// the warp calls it. Lanes 0..8N-1 each pass row_offset_bytes, the dynamic-shared-memory byte offset of
// one 16-byte row (16-byte aligned): lane 8i + r addresses row r of matrix i; the other lanes' offsets
// are ignored. d[i] receives matrix i's elements (row lane/4, cols 2·(lane%4) and +1), lower column in
// bits 0-15; with Transpose (.trans) the elements (rows 2·(lane%4) and +1, col lane/4). ---
template <bool Transpose = false, unsigned N>
FAPROBE_DEVICE void ldmatrix(std::uint32_t (&d)[N], std::size_t row_offset_bytes) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices (.x1, .x2, .x4)");
#if defined(__CUDACC__)
  const std::uint32_t address = detail::shared_address(row_offset_bytes);
  if constexpr (N == 1 && !Transpose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(d[0]) : "r"(address));
  } else if constexpr (N == 1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(d[0]) : "r"(address));
  } else if constexpr (N == 2 && !Transpose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(d[0]), "=r"(d[1]) : "r"(address));
  } else if constexpr (N == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                 : "=r"(d[0]), "=r"(d[1]) : "r"(address));
  } else if constexpr (!Transpose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(address));
  }
#else
  std::uint32_t out[4] = {};
  emu::ldmatrix(N, Transpose, row_offset_bytes, out);
  for (unsigned i = 0; i < N; ++i) d[i] = out[i];
#endif
}

// --- cp.async: PTX ISA "Data Movement and Conversion Instructions: cp.async", "cp.async.commit_group",
// "cp.async.wait_group". cp_async_16 copies the 16 bytes of source from element
// index (16-byte aligned, 16 / sizeof(T) elements, all inside the span) to shared memory at
// shared_offset_bytes (16-byte aligned), bypassing L1 (.cg). The copy is only guaranteed to have landed
// after cp_async_commit_group() and a cp_async_wait_group<N>() that leaves at most N newer groups
// pending, and, for other threads to read it, a barrier. The emulator lands the copy at that wait_group
// and holds poison there until then (emu/emulator.hpp). ---
template <typename T>
FAPROBE_DEVICE void cp_async_16(std::size_t shared_offset_bytes, GlobalSpan<const T> source, std::size_t index) {
  static_assert(16 % sizeof(T) == 0, "cp.async copies 16 bytes of whole elements");
#if defined(__CUDACC__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
               ::"r"(detail::shared_address(shared_offset_bytes)), "l"(source.data() + index) : "memory");
#else
  (void)source[index + 16 / sizeof(T) - 1];  // bounds check of the last element
  emu::cp_async(shared_offset_bytes, source.data() + index, 16);
#endif
}
FAPROBE_DEVICE void cp_async_commit_group() {
#if defined(__CUDACC__)
  asm volatile("cp.async.commit_group;" ::: "memory");
#else
  emu::cp_async_commit_group();
#endif
}
// Waits until at most Pending of the thread's most recent committed groups are still in flight.
template <unsigned Pending>
FAPROBE_DEVICE void cp_async_wait_group() {
#if defined(__CUDACC__)
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#else
  emu::cp_async_wait_group(Pending);
#endif
}

// --- ex2.approx.f32: PTX ISA "Floating Point Instructions: ex2": 2^x. Hardware's
// ex2.approx has a maximum relative error of about 2 ulp (2^-22.5 over the full range); the emulator
// returns std::exp2, correctly rounded or nearly, so results may differ from the GPU's in the last bits:
// probes of it compare with a tolerance, never bit for bit. ---
FAPROBE_DEVICE float ex2_approx(float x) {
#if defined(__CUDACC__)
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}

// --- ex2.approx.ftz.f32: the same with subnormal inputs and results flushed to zero (PTX ISA "ex2": ".ftz":
// "subnormal inputs and results to sign-preserving zero"). It is one MUFU.EX2; the plain form wraps each in
// a range check and two multiplies (FSETP, @!P FMUL, MUFU.EX2, @!P FMUL) to produce subnormal results. The
// online softmax uses this one: a probability below 2^-126 of the row's largest is zero either way in the
// fp16/bf16/e4m3 P that follows. The emulator applies the flush on both sides around std::exp2. ---
FAPROBE_DEVICE float ex2_approx_ftz(float x) {
#if defined(__CUDACC__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;  // 2^(±0) = 1
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;  // 2^x > 0: the sign kept is +
#endif
}

// --- fma.rn.f32 and max.f32 (PTX ISA "Floating Point Instructions"): a·b + c rounded once (FFMA), and the
// larger of two floats (FMNMX; a NaN operand yields the other). Written out so that the softmax's
// x·scale − max and its row maxima are one instruction each, whatever the compiler would contract. The
// emulator computes the same: std::fma rounds once, std::fmax drops a NaN operand. ---
FAPROBE_DEVICE float fma_rn(float a, float b, float c) {
#if defined(__CUDACC__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
FAPROBE_DEVICE float max_f32(float a, float b) {
#if defined(__CUDACC__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

// --- 16-byte vector load from global memory: PTX ISA "ld" with .v4.u32 (LDG.128). Reads the
// 16 bytes from element index (16-byte aligned, all inside the span) as four 32-bit words. ---
struct alignas(16) Words4 {
  std::uint32_t word[4];
};
template <typename T>
FAPROBE_DEVICE Words4 load_16(GlobalSpan<const T> source, std::size_t index) {
  static_assert(16 % sizeof(T) == 0, "a 16-byte load reads whole elements");
  Words4 out;
#if defined(__CUDACC__)
  // A plain 16-byte typed load: nvcc emits ld.global.v4.u32 and the compiler still sees the memory access.
  const uint4 v = *reinterpret_cast<const uint4*>(source.data() + index);
  out.word[0] = v.x;
  out.word[1] = v.y;
  out.word[2] = v.z;
  out.word[3] = v.w;
#else
  (void)source[index + 16 / sizeof(T) - 1];  // bounds check of the last element
  const T* first = &source[index];
  if (reinterpret_cast<std::uintptr_t>(first) % 16 != 0)
    throw emu::EmulationError(emu::current_location() + ": 16-byte load from " + source.name() + "[" +
                              std::to_string(index) + "], an address not aligned to 16 bytes");
  std::memcpy(out.word, first, sizeof out.word);
#endif
  return out;
}

// --- 16-byte vector store to global memory: PTX ISA "st" with .v4.u32 (STG.128). Writes the four 32-bit
// words to the 16 bytes from element index (16-byte aligned, all inside the span). ---
template <typename T>
FAPROBE_DEVICE void store_16(GlobalSpan<T> destination, std::size_t index, const Words4& words) {
  static_assert(16 % sizeof(T) == 0, "a 16-byte store writes whole elements");
#if defined(__CUDACC__)
  // In PTX: a plain uint4 store from four scalars was split by nvcc 13 into four st.global.u32 (STG.E).
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(destination.data() + index), "r"(words.word[0]),
               "r"(words.word[1]), "r"(words.word[2]), "r"(words.word[3])
               : "memory");
#else
  (void)destination[index + 16 / sizeof(T) - 1];  // bounds check of the last element
  T* first = &destination[index];
  if (reinterpret_cast<std::uintptr_t>(first) % 16 != 0)
    throw emu::EmulationError(emu::current_location() + ": 16-byte store to " + destination.name() + "[" +
                              std::to_string(index) + "], an address not aligned to 16 bytes");
  std::memcpy(first, words.word, sizeof words.word);
#endif
}

// ======================================== Part 3 ========================================

// --- Conversions between fp32 and fp16 / bf16, round to nearest even: PTX ISA "cvt" (cvt.rn.f16.f32,
// cvt.rn.bf16.f32, cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32, and cvt.f32.f16 / bf16, which are exact). Storage
// is the raw 16 bits (std::uint16_t), so kernels compile the same with nvcc and the host compiler; the
// emulator converts with Eigen's half and bfloat16 (also round to nearest even, NaN kept). A pair packed in
// a .b32 register holds the lower-numbered element in bits 0-15, as mma.sync and ldmatrix expect. ---
FAPROBE_DEVICE float half_to_float(std::uint16_t bits) {
#if defined(__CUDACC__)
  return __half2float(__ushort_as_half(bits));
#else
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
#endif
}
FAPROBE_DEVICE float bfloat16_to_float(std::uint16_t bits) {
#if defined(__CUDACC__)
  return __bfloat162float(__ushort_as_bfloat16(bits));
#else
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
#endif
}
FAPROBE_DEVICE std::uint16_t float_to_half(float value) {
#if defined(__CUDACC__)
  return __half_as_ushort(__float2half_rn(value));
#else
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value));
#endif
}
FAPROBE_DEVICE std::uint16_t float_to_bfloat16(float value) {
#if defined(__CUDACC__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(value));
#else
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(value));
#endif
}
// (lo, hi) rounded to f16 (bf16) and packed: lo in bits 0-15. On the GPU one cvt.rn.f16x2.f32 /
// cvt.rn.bf16x2.f32 (sm_80: a single F2FP.PACK_AB; PTX ISA "cvt": "the value converted from input a is
// stored in the upper half of d"), where two scalar conversions cost two F2FP and a PRMT to merge them.
FAPROBE_DEVICE std::uint32_t pack_half2(float lo, float hi) {
#if defined(__CUDACC__)
  std::uint32_t packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
#else
  return std::uint32_t{float_to_half(lo)} | (std::uint32_t{float_to_half(hi)} << 16);
#endif
}
FAPROBE_DEVICE std::uint32_t pack_bfloat162(float lo, float hi) {
#if defined(__CUDACC__)
  std::uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
#else
  return std::uint32_t{float_to_bfloat16(lo)} | (std::uint32_t{float_to_bfloat16(hi)} << 16);
#endif
}

// The storage types as tags for kernel templates: Float (fp32), Half (fp16) and BFloat16 (bf16), each with
// its Storage type and conversions, the 16-bit ones also with their mma.sync flavour, so a kernel is
// written once for all of them.
struct Float {
  using Storage = float;
  static FAPROBE_DEVICE float to_float(float value) { return value; }
  static FAPROBE_DEVICE float from_float(float value) { return value; }
};
struct Half {
  using Storage = std::uint16_t;
  static FAPROBE_DEVICE float to_float(std::uint16_t bits) { return half_to_float(bits); }
  static FAPROBE_DEVICE std::uint16_t from_float(float value) { return float_to_half(value); }
  static FAPROBE_DEVICE std::uint32_t pack2(float lo, float hi) { return pack_half2(lo, hi); }
  static FAPROBE_DEVICE void mma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                                 const float (&c)[4]) {
    mma_m16n8k16_f16(d, a, b, c);
  }
};
struct BFloat16 {
  using Storage = std::uint16_t;
  static FAPROBE_DEVICE float to_float(std::uint16_t bits) { return bfloat16_to_float(bits); }
  static FAPROBE_DEVICE std::uint16_t from_float(float value) { return float_to_bfloat16(value); }
  static FAPROBE_DEVICE std::uint32_t pack2(float lo, float hi) { return pack_bfloat162(lo, hi); }
  static FAPROBE_DEVICE void mma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                                 const float (&c)[4]) {
    mma_m16n8k16_bf16(d, a, b, c);
  }
};

// ======================================== Part 4 ========================================
// Hopper (sm_90) synchronization. These compile for every target, so that a header using them builds in
// the sm_80 pass too, but their PTX exists only from sm_90: below it they trap, and the kernels that use
// them are compiled and launched for sm_90a only.

#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FAPROBE_SM90_PTX 1
#else
#define FAPROBE_SM90_PTX 0
#endif
#endif

// --- mbarrier: PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier". An 8-byte
// object at shared offset offset_bytes (8-byte aligned); phases complete when every expected arrival and
// every expected transaction byte is in (the emulator's model is described in emu/emulator.hpp). ---
// mbarrier.init.shared::cta.b64: count arrivals per phase. Make it visible to the async proxy (TMA) with
// fence_mbarrier_init() and to other threads with a barrier before they use it.
FAPROBE_DEVICE void mbarrier_init(std::size_t offset_bytes, unsigned count) {
#if defined(__CUDACC__)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(detail::shared_address(offset_bytes)), "r"(count)
               : "memory");
#else
  emu::mbarrier_init(offset_bytes, count);
#endif
}
// mbarrier.arrive.expect_tx.shared::cta.b64 (tx_bytes > 0) or mbarrier.arrive.shared::cta.b64: one arrival,
// after announcing tx_bytes of asynchronous copies that will complete on this barrier.
FAPROBE_DEVICE void mbarrier_arrive(std::size_t offset_bytes, std::uint32_t tx_bytes = 0) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  if (tx_bytes > 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 ::"r"(detail::shared_address(offset_bytes)), "r"(tx_bytes) : "memory");
  } else {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(detail::shared_address(offset_bytes)) : "memory");
  }
#else
  (void)offset_bytes, (void)tx_bytes;
  __trap();
#endif
#else
  (void)emu::mbarrier_arrive(offset_bytes, tx_bytes);
#endif
}
// mbarrier.try_wait.parity.shared::cta.b64 until it succeeds: returns once the phase of parity `parity`
// (0 or 1) has completed. A consumer waiting for stage s of a ring passes the parity of the round it is in.
FAPROBE_DEVICE void mbarrier_wait_parity(std::size_t offset_bytes, unsigned parity) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  const std::uint32_t address = detail::shared_address(offset_bytes);
  std::uint32_t done = 0;
  while (done == 0) {
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(address), "r"(parity) : "memory");
  }
#else
  (void)offset_bytes, (void)parity;
  __trap();
#endif
#else
  emu::mbarrier_wait_parity(offset_bytes, parity);
#endif
}
// mbarrier.test_wait.parity.shared::cta.b64: whether the phase of parity `parity` has completed, without
// waiting (right after init, parity 1 counts as completed: the phase before the first). A snapshot: only
// deterministic where no arrival or transaction can be in flight, e.g. after a CTA barrier.
FAPROBE_DEVICE bool mbarrier_test_wait_parity(std::size_t offset_bytes, unsigned parity) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  std::uint32_t done = 0;
  asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
               "selp.u32 %0, 1, 0, p;\n}"
               : "=r"(done) : "r"(detail::shared_address(offset_bytes)), "r"(parity) : "memory");
  return done != 0;
#else
  (void)offset_bytes, (void)parity;
  __trap();
  return false;
#endif
#else
  return emu::mbarrier_test_parity(offset_bytes, parity);
#endif
}
// mbarrier.complete_tx.shared::cta.b64 (sm_90): tx_bytes of the current phase's expected transaction bytes
// are done, as when an asynchronous copy's bytes land; a thread issuing it stands in for the copy.
FAPROBE_DEVICE void mbarrier_complete_tx(std::size_t offset_bytes, std::uint32_t tx_bytes) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(detail::shared_address(offset_bytes)),
               "r"(tx_bytes) : "memory");
#else
  (void)offset_bytes, (void)tx_bytes;
  __trap();
#endif
#else
  emu::mbarrier_complete_tx(offset_bytes, tx_bytes);
#endif
}

// --- elect.sync: PTX ISA "elect.sync": one lane of member_mask is true, the same lane every time (which one
// PTX leaves open; the emulator elects the lowest). Every lane of the mask must execute it. ---
FAPROBE_DEVICE bool elect_sync(std::uint32_t member_mask = full_warp_mask) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  std::uint32_t elected = 0;
  asm volatile("{\n\t.reg .pred p;\n\telect.sync _|p, %1;\n\tselp.u32 %0, 1, 0, p;\n}"
               : "=r"(elected) : "r"(member_mask));
  return elected != 0;
#else
  (void)member_mask;
  __trap();
  return false;
#endif
#else
  const std::uint32_t arrived = emu::vote_ballot(member_mask, true);  // the collective: every lane meets here
  return lane_id() == static_cast<unsigned>(__builtin_ctz(arrived));
#endif
}

// --- Fences: PTX ISA "membar / fence". fence.proxy.async.shared::cta orders this thread's generic-proxy
// writes to shared memory before later async-proxy (TMA, wgmma) accesses; fence.mbarrier_init makes
// mbarrier.init visible to the async proxy. The emulator's race detector requires fence.proxy.async between
// a thread's generic writes and async-proxy reads of them; fence.mbarrier_init is a no-op there. ---
FAPROBE_DEVICE void fence_proxy_async() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#else
  __trap();
#endif
#else
  emu::fence_proxy_async();
#endif
}
FAPROBE_DEVICE void fence_mbarrier_init() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  __trap();
#endif
#endif
}

// The registers per thread that ptxas allots at entry to a kernel of __launch_bounds__(threads_per_cta,
// ctas_per_sm) that uses setmaxnreg, which needs that count to be known (else it drops every setmaxnreg:
// C7508): the SM's register file (64 Ki 32-bit registers on sm_80 and sm_90, CUDA C++ Programming Guide,
// "Compute Capabilities") over the SM's threads rounded up to whole warpgroups (setmaxnreg's unit), rounded
// down to the allocation unit of 8 registers per thread (256 per warp). Measured with ptxas 13 for sm_90a:
// (384, 1): 168; (288, 1): 168; (192, 2): 168; (384, 2): 80; (576, 1) and (640, 1): 96. Two limits it does
// not model: where this reaches 255 (256 threads per SM or fewer) or exceeds the largest setmaxnreg count of
// the kernel, ptxas enters with that smaller count instead. A warp-specialized budget (FA-3's 128 · 24 +
// 256 · 240) must add up to the CTA's threads times this, or setmaxnreg.inc waits for registers that the
// other warpgroups never free; tests/test_static_checks.cpp checks the count ptxas chose.
inline constexpr unsigned register_file_per_sm = 65536;
inline constexpr unsigned register_allocation_unit = 8;
constexpr unsigned registers_at_entry(unsigned threads_per_cta, unsigned ctas_per_sm) {
  const unsigned threads_per_sm = (threads_per_cta * ctas_per_sm + 127) / 128 * 128;
  return register_file_per_sm / threads_per_sm / register_allocation_unit * register_allocation_unit;
}
static_assert(registers_at_entry(384, 1) == 168 && registers_at_entry(384, 2) == 80 && registers_at_entry(576, 1) == 96,
              "the counts ptxas was measured to allot");

// --- setmaxnreg: PTX ISA "setmaxnreg" (sm_90a): the warpgroup's registers per thread become Count, a
// multiple of 8 in 24..256; .inc waits until the registers are free, .dec releases them (a producer
// warpgroup gives its registers to the consumers). Every thread of the warpgroup executes it. A no-op under
// emulation, which has no register file; tests/test_static_checks.cpp checks that ptxas kept it. ---
template <unsigned Count, bool Increase>
FAPROBE_DEVICE void setmaxnreg() {
  static_assert(Count % 8 == 0 && Count >= 24 && Count <= 256, "setmaxnreg takes a multiple of 8 in 24..256");
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a's architecture-specific features, not plain sm_90
  if constexpr (Increase) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Count));
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Count));
  }
#else
  __trap();
#endif
#endif
}

}  // namespace faprobe::cuda::isa
