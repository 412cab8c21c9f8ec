// cuda.fa2's host entry points, callable two ways as launchers.hpp's are (Target::gpu launches the nvcc-compiled
// kernel, Target::emulator runs the same body under the CPU emulation), and the list of its instantiations: which
// tiles are built for which (dtype, head_dim), and which one plain cuda.fa2 runs for each case. The list is
// kernels/cuda/fa2/CMakeLists.txt's (FAPROBE_FA2_INSTANTIATIONS); nothing here includes a CUDA header.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "cuda/common/tile_list.hpp"
#include "cuda/launchers.hpp"
#include "model/case.hpp"

namespace faprobe::cuda {

// FA-2's instantiations, from kernels/cuda/fa2/CMakeLists.txt (cuda/common/tile_list.hpp has what they say).
const TileList& fa2_instantiations();
// "" when tile (plain cuda.fa2's choice when nullopt) is instantiated for the case's dtype, head_dim and mask,
// else the reason.
std::string fa2_supports(const Case& c, const std::optional<Tile>& tile);
// Tile sizes and launch shape, for the record's details (a tile not instantiated for the dtype and head_dim: zeros).
KernelShape fa2_shape(DType dtype, std::int64_t head_dim, const Tile& tile);
// No workspace: args.workspace is ignored. Throws std::invalid_argument on what the kernel cannot run.
void fa2_forward(const Launch& launch, const AttentionArgs& args, const Tile& tile);

}  // namespace faprobe::cuda
