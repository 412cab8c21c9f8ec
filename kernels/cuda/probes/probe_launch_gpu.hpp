// The GPU launchers of the instruction probes, internal to probe_suite.cpp: each launches one __global__
// wrapper of warp_probes.cu / matrix_probes.cu / tma_probes.cu / hopper_probes.cu on faprobe's stream
// (gpu::stream()) with the grid, block and dynamic shared memory of an emu::LaunchConfig, so that one launch
// description drives both targets, and checks the launch (FAPROBE_CHECK_LAUNCH, named after
// config.kernel_name). The spans hold device pointers (gpu::DeviceBuffer); the launch is asynchronous:
// gpu::synchronize() before reading the outputs back.
// Defined only in CUDA builds (FAPROBE_WITH_CUDA); plain C++, no CUDA header.
#pragma once

#include <cstdint>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/spans.hpp"
#include "cuda/probes/conversion_probes.cuh"
#include "cuda/probes/hopper_probes.cuh"
#include "cuda/probes/matrix_probes.cuh"
#include "cuda/probes/tma_probes.cuh"
#include "cuda/probes/warp_probes.cuh"

namespace faprobe::cuda::probes::on_gpu {

// Part 1 (warp_probes.cu).
void block_sum(const emu::LaunchConfig& config, GlobalSpan<const float> values, GlobalSpan<float> block_sums);
void warp_sum(const emu::LaunchConfig& config, GlobalSpan<const float> values, GlobalSpan<float> sums);
void shuffle(const emu::LaunchConfig& config, ShuffleProbe probe, unsigned operand, unsigned width,
             GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out);
void vote(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> out);
void dynamic_shared_alignment(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> offsets,
                              GlobalSpan<std::uint32_t> out);

// Parts 2 and 3 (matrix_probes.cu).
void mma_m16n8k16(const emu::LaunchConfig& config, MmaProbeType type, GlobalSpan<const std::uint16_t> a,
                  GlobalSpan<const std::uint16_t> b, GlobalSpan<const float> c, GlobalSpan<float> d,
                  GlobalSpan<const std::uint32_t> source_lane);
void ldmatrix(const emu::LaunchConfig& config, unsigned matrices, bool transpose, GlobalSpan<const std::uint16_t> image,
              GlobalSpan<const std::uint32_t> row_offsets, GlobalSpan<std::uint32_t> out);
void async_copy(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> in, GlobalSpan<std::uint32_t> copied,
                GlobalSpan<std::uint32_t> loaded, GlobalSpan<float> exp2);
void ex2_ftz(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> in, GlobalSpan<float> out);
void convert(const emu::LaunchConfig& config, ConversionProbe probe, GlobalSpan<const std::uint32_t> in,
             GlobalSpan<std::uint32_t> out);

// Part 4 (tma_probes.cu): sm_90 only. The maps are encoded for the GPU (gpu_tensor_map).
void tma_copy(const emu::LaunchConfig& config, const isa::TensorMap& load_map, const isa::TensorMap& store_map,
              GlobalSpan<std::uint32_t> shared_words);

// Part 5 (hopper_probes.cu): sm_90a only.
void wgmma_f16_ss_swizzle128(const emu::LaunchConfig& config, GlobalSpan<const std::uint16_t> a,
                             GlobalSpan<const std::uint16_t> b, GlobalSpan<float> d);
void wgmma_bf16_rs_n_major(const emu::LaunchConfig& config, GlobalSpan<const std::uint16_t> a,
                           GlobalSpan<const std::uint16_t> b, GlobalSpan<float> d);
void wgmma_e4m3_ss_swizzle64(const emu::LaunchConfig& config, GlobalSpan<const float> a, GlobalSpan<const float> b,
                             GlobalSpan<float> d);
void stmatrix_x4(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> fragments,
                 GlobalSpan<const std::uint32_t> row_offsets, GlobalSpan<std::uint32_t> images);
void mbarrier_phases(const emu::LaunchConfig& config, GlobalSpan<const std::uint32_t> values,
                     GlobalSpan<const std::uint32_t> member_masks, GlobalSpan<std::uint32_t> records);

}  // namespace faprobe::cuda::probes::on_gpu
