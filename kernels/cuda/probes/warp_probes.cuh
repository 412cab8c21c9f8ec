// Instruction probes, part 1: tiny kernel bodies on the instruction layer that exercise CTA barriers,
// shared memory (and where the dynamic shared memory starts), warp shuffles and votes. Each is compiled
// twice: by nvcc in warp_probes.cu (one __global__ wrapper per probe) and by the host compiler against the
// emulator in tests/test_emulator.cpp, which checks it against an independent host computation (the
// alignment probe: tests/test_probe_suite.cpp). On a GPU the same probes will be run and
// compared bit for bit with the emulator (issue 3, scripts/device-check.sh).
//
// Costs: each probe moves a few words per thread; they exist to pin down semantics, not to be fast.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"

namespace faprobe::cuda::probes {

// The CTA's index in the grid, x fastest.
FAPROBE_DEVICE unsigned block_linear_idx() {
  return (isa::block_idx_z() * isa::grid_dim_y() + isa::block_idx_y()) * isa::grid_dim_x() + isa::block_idx_x();
}
// The thread's index in the grid: CTA after CTA, each CTA's threads x fastest.
FAPROBE_DEVICE std::size_t global_thread_idx() {
  return std::size_t{block_linear_idx()} * isa::block_threads() + isa::thread_linear_idx();
}

// Each CTA sums one value per thread (values[global_thread_idx()], 0 past the end) into
// block_sums[block_linear_idx()]: a shared-memory tree over any block shape, block_threads() floats of
// shared memory. With integer-valued inputs the sum is exact, so any order gives the host's bits.
FAPROBE_DEVICE void block_sum(GlobalSpan<const float> values, GlobalSpan<float> block_sums) {
  const unsigned tid = isa::thread_linear_idx();
  const unsigned threads = isa::block_threads();
  SharedSpan<float> partial = isa::shared_array<float>(0, threads);
  const std::size_t i = global_thread_idx();
  partial[tid] = i < values.size() ? values[i] : 0.0f;
  isa::sync_threads();  // every partial is written before any is read
  unsigned stride = 1;
  while (stride * 2 < threads) stride *= 2;  // the largest power of two below threads (1 for 1 or 2 threads)
  for (; stride > 0; stride /= 2) {
    if (tid < stride && tid + stride < threads) partial[tid] += partial[tid + stride];
    isa::sync_threads();  // this level's sums are complete before the next level reads them
  }
  if (tid == 0) block_sums[block_linear_idx()] = partial[0];
}

// Every lane gets the sum of its warp's values by the butterfly (shfl.sync.bfly, masks 16, 8, 4, 2, 1).
// Needs whole warps: block_threads() a multiple of 32.
FAPROBE_DEVICE void warp_sum(GlobalSpan<const float> values, GlobalSpan<float> sums) {
  const std::size_t i = global_thread_idx();
  float sum = values[i];
  for (unsigned lane_mask = isa::warp_size / 2; lane_mask > 0; lane_mask /= 2)
    sum += isa::shfl_xor_sync(isa::full_warp_mask, sum, lane_mask);
  sums[i] = sum;
}

enum class ShuffleProbe : unsigned { idx, up, down, bfly };

// out[i] = the shuffle `probe` of in[i] over the full warp with operand (source lane, delta or lane
// mask) and width. Needs whole warps.
FAPROBE_DEVICE void shuffle(ShuffleProbe probe, unsigned operand, unsigned width, GlobalSpan<const std::uint32_t> in,
                            GlobalSpan<std::uint32_t> out) {
  const std::size_t i = global_thread_idx();
  const std::uint32_t value = in[i];
  std::uint32_t result = 0;
  switch (probe) {
    case ShuffleProbe::idx: result = isa::shfl_sync(isa::full_warp_mask, value, operand, width); break;
    case ShuffleProbe::up: result = isa::shfl_up_sync(isa::full_warp_mask, value, operand, width); break;
    case ShuffleProbe::down: result = isa::shfl_down_sync(isa::full_warp_mask, value, operand, width); break;
    case ShuffleProbe::bfly: result = isa::shfl_xor_sync(isa::full_warp_mask, value, operand, width); break;
  }
  out[i] = result;
}

// For predicate in[i] != 0 over the full warp: out[3i] = ballot, out[3i+1] = all, out[3i+2] = any.
FAPROBE_DEVICE void vote(GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out) {
  const std::size_t i = global_thread_idx();
  const bool predicate = in[i] != 0;
  out[3 * i] = isa::ballot_sync(isa::full_warp_mask, predicate);
  out[3 * i + 1] = isa::all_sync(isa::full_warp_mask, predicate) ? 1u : 0u;
  out[3 * i + 2] = isa::any_sync(isa::full_warp_mask, predicate) ? 1u : 0u;
}

// Probe "dynamic shared memory 1024B-aligned": where the dynamic shared memory starts. Every 128-byte
// swizzle (TMA boxes, wgmma descriptors) is a function of shared address bits [4, 10), and the kernels place
// swizzled tiles at offsets that are multiples of 1024, so they assume its first byte is 1024-byte aligned
// (on the GPU the instruction layer declares it __align__(1024); under the emulator it is as aligned as the
// emulator allocates each launch's shared memory). Thread i of the grid reads the offset offsets[i] (thread
// 0 of each CTA gets 0: byte 0 itself) and writes two words: out[2i] = that offset, out[2i + 1] =
// isa::dynamic_shared_address(offset) % 1024, which is offset % 1024 exactly when the base is 1024-byte
// aligned (byte 0: 0). The offsets are below the launch's shared bytes.
inline constexpr unsigned swizzle_repeat_bytes = 1024;  // a 128-byte swizzle pattern spans 8 rows of 128 bytes

FAPROBE_DEVICE void dynamic_shared_alignment(GlobalSpan<const std::uint32_t> offsets, GlobalSpan<std::uint32_t> out) {
  const std::size_t i = global_thread_idx();
  const std::uint32_t offset = offsets[i];
  out[2 * i] = offset;
  out[2 * i + 1] = isa::dynamic_shared_address(offset) % swizzle_repeat_bytes;
}

}  // namespace faprobe::cuda::probes
