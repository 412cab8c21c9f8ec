// The tiles a tensor-core attention kernel is built with (cuda.fa2, cuda.fa3): each kernel's folder lists its
// instantiations in its CMakeLists.txt, one line per (dtype, head_dim, tile) with the masks for which the plain
// implementation runs that tile, and generates from it the kernels, their emulated twins and the table that
// these functions read. Each tile is also an implementation of its own, the variant <implementation>@<tile>
// (cuda.fa3@128x176), for measuring one tile against another. Host side only; nothing here includes a CUDA
// header.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/case.hpp"

namespace faprobe::cuda {

// A tile: block_q query rows by block_k keys per step; named "<block_q>x<block_k>".
struct Tile {
  int block_q = 0, block_k = 0;
  std::string name() const;
  bool operator==(const Tile& other) const { return block_q == other.block_q && block_k == other.block_k; }
};

// One instantiation built: its dtype, head_dim and tile, and the masks for which the plain implementation runs
// it.
struct TileInstantiation {
  DType dtype = DType::fp16;
  int head_dim = 0;
  Tile tile;
  bool default_without_mask = false, default_causal = false;
};
using TileList = std::vector<TileInstantiation>;

// The distinct tiles of a list, in its order: the variants.
std::vector<Tile> distinct_tiles(const TileList& list);
// The tile the plain implementation runs for (dtype, head_dim, mask); nullopt when the list marks none.
std::optional<Tile> default_tile(const TileList& list, DType dtype, std::int64_t head_dim, Mask mask);
// Whether tile (the default when nullopt) is built for the case's dtype and head_dim (and, for the default, marked
// for its mask): "" or the reason, naming `kernel` and, for a tile built elsewhere, where it is built.
std::string tile_supports(const char* kernel, const TileList& list, const Case& c, const std::optional<Tile>& tile);

}  // namespace faprobe::cuda
