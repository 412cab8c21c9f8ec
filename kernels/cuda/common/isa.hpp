// The instruction layer, part 1: thread and block indices, CTA barriers, warp shuffles and votes, and the
// CTA's dynamic shared memory. Every CUDA built-in or PTX instruction a faprobe kernel uses is one small
// function here; kernels never write asm, warp intrinsics or `extern __shared__` themselves.
//
// Under nvcc (__CUDACC__) each function is the CUDA built-in variable or inline PTX, force-inlined, so the
// GPU build costs nothing over hand-written code. With the host compiler each is a call into the emulator
// (cuda/common/emu/emulator.hpp), which runs the same kernel body on the CPU; a call there costs a
// thread_local lookup, and a barrier or collective a fiber switch per participating thread.
//
// Later parts (mma.sync, ldmatrix, cp.async, ex2.approx, vector loads; on Hopper wgmma, TMA, mbarrier,
// setmaxnreg, elect.sync, stmatrix) follow the same pattern: one function, the ISA section beside it, the
// PTX under __CUDACC__ and the emulator call otherwise, the lane-to-fragment layout implemented once in
// the emulator. Named barriers (bar_sync/bar_arrive with an id) are here already for warp specialization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if !defined(__CUDACC__)
#include <string>
#endif

#include "cuda/common/spans.hpp"

#if defined(__CUDACC__)
#define FAPROBE_DEVICE __device__ __forceinline__
#else
#define FAPROBE_DEVICE inline
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

// --- Dynamic shared memory (the launch's shared_bytes; CUDA `extern __shared__`). ---
// count elements of T from byte offset offset_bytes, which must be a multiple of alignof(T). The emulator
// checks the range against the launch's shared_bytes and every index; each CTA starts with 0xFF bytes.
template <typename T>
FAPROBE_DEVICE SharedSpan<T> shared_array(std::size_t offset_bytes, std::size_t count) {
#if defined(__CUDACC__)
  extern __shared__ __align__(128) unsigned char dynamic_shared[];
  return SharedSpan<T>(reinterpret_cast<T*>(dynamic_shared + offset_bytes), count);
#else
  return SharedSpan<T>(reinterpret_cast<T*>(emu::shared_memory(offset_bytes, count * sizeof(T), alignof(T))), count);
#endif
}

}  // namespace faprobe::cuda::isa
