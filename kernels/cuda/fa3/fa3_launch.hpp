// cuda.fa3's host entry points, callable two ways as launchers.hpp's are (Target::gpu launches the sm_90a
// kernel, Target::emulator runs the same body under the CPU emulation), and the list of its instantiations:
// which tiles are built for which (dtype, head_dim), and which one plain cuda.fa3 runs for each case (a tile of
// FA-3: block_q = 64 rows per consumer warpgroup by block_k keys). The list is kernels/cuda/fa3/CMakeLists.txt's
// (FAPROBE_FA3_INSTANTIATIONS); nothing here includes a CUDA header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda/common/tile_list.hpp"
#include "cuda/launchers.hpp"
#include "model/case.hpp"

namespace faprobe::cuda {

// FA-3's instantiations, from kernels/cuda/fa3/CMakeLists.txt (cuda/common/tile_list.hpp has what they say).
const TileList& fa3_instantiations();

// "" when tile (plain cuda.fa3's choice when nullopt) is instantiated for the case's dtype, head_dim and mask,
// else the reason.
std::string fa3_supports(const Case& c, const std::optional<Tile>& tile);
// "" when this binary holds the sm_90a kernels of cuda.fa3, else why not.
std::string fa3_gpu_missing();
// Tile sizes and launch shape, for the record's details (a tile not instantiated for the dtype and head_dim: zeros).
KernelShape fa3_shape(DType dtype, std::int64_t head_dim, const Tile& tile);
// Bytes of AttentionArgs::workspace fa3_forward needs: V^T for fp8_e4m3 (e4m3 wgmma reads K-major only), else 0.
std::size_t fa3_workspace_bytes(const AttentionArgs& args);
// Runs the instantiation of (args.dtype, args.head_dim, tile); throws std::invalid_argument naming what is not
// instantiated or not supported.
void fa3_forward(const Launch& launch, const AttentionArgs& args, const Tile& tile);

}  // namespace faprobe::cuda
