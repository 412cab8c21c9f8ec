// cuda.fa3's host entry points, callable two ways as launchers.hpp's are (Target::gpu launches the sm_90a
// kernel, Target::emulator runs the same body under the CPU emulation), and the list of its instantiations:
// which tiles are built for which (dtype, head_dim), and which one plain cuda.fa3 runs for each case. The list
// is kernels/cuda/fa3/CMakeLists.txt's (FAPROBE_FA3_INSTANTIATIONS); nothing here includes a CUDA header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda/launchers.hpp"
#include "model/case.hpp"

namespace faprobe::cuda {

// A tile of the kernel: block_q query rows (64 per consumer warpgroup) by block_k keys per step; named
// "<block_q>x<block_k>" (cuda.fa3@128x176).
struct Fa3Tile {
  int block_q = 0, block_k = 0;
  std::string name() const;
  bool operator==(const Fa3Tile& other) const { return block_q == other.block_q && block_k == other.block_k; }
};

// One instantiation built: its dtype (fp16, bf16, fp8_e4m3), head_dim and tile, and the masks for which plain
// cuda.fa3 runs it.
struct Fa3Instantiation {
  DType dtype = DType::fp16;
  int head_dim = 0;
  Fa3Tile tile;
  bool default_without_mask = false, default_causal = false;
};
const std::vector<Fa3Instantiation>& fa3_instantiations();
// The distinct tiles of fa3_instantiations(), in the list's order: the variants cuda.fa3@<tile>.
std::vector<Fa3Tile> fa3_tiles();
// The tile named "<block_q>x<block_k>", if one is instantiated.
std::optional<Fa3Tile> fa3_tile_named(const std::string& name);
// The tile plain cuda.fa3 runs for a case: the instantiation marked for its mask; nullopt when none is.
std::optional<Fa3Tile> fa3_default_tile(DType dtype, std::int64_t head_dim, Mask mask);

// "" when tile (plain cuda.fa3's choice when nullopt) is instantiated for the case's dtype, head_dim and mask,
// else the reason.
std::string fa3_supports(const Case& c, const std::optional<Fa3Tile>& tile);
// "" when this binary holds the sm_90a kernels of cuda.fa3, else why not.
std::string fa3_gpu_missing();
// Tile sizes and launch shape, for the record's details (a tile not instantiated for the dtype and head_dim: zeros).
KernelShape fa3_shape(DType dtype, std::int64_t head_dim, const Fa3Tile& tile);
// Bytes of AttentionArgs::workspace fa3_forward needs: V^T for fp8_e4m3 (e4m3 wgmma reads K-major only), else 0.
std::size_t fa3_workspace_bytes(const AttentionArgs& args);
// Runs the instantiation of (args.dtype, args.head_dim, tile); throws std::invalid_argument naming what is not
// instantiated or not supported.
void fa3_forward(const Launch& launch, const AttentionArgs& args, const Fa3Tile& tile);

}  // namespace faprobe::cuda
