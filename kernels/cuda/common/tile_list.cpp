// The host side of tile_list.hpp.
#include "cuda/common/tile_list.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace faprobe::cuda {

std::string Tile::name() const { return fmt::format("{}x{}", block_q, block_k); }

std::vector<Tile> distinct_tiles(const TileList& list) {
  std::vector<Tile> tiles;
  for (const TileInstantiation& i : list)
    if (std::find(tiles.begin(), tiles.end(), i.tile) == tiles.end()) tiles.push_back(i.tile);
  return tiles;
}

std::optional<Tile> default_tile(const TileList& list, DType dtype, std::int64_t head_dim, Mask mask) {
  for (const TileInstantiation& i : list) {
    if (i.dtype != dtype || i.head_dim != head_dim) continue;
    if (mask == Mask::none ? i.default_without_mask : mask == Mask::causal && i.default_causal) return i.tile;
  }
  return std::nullopt;
}

std::string tile_supports(const char* kernel, const TileList& list, const Case& c, const std::optional<Tile>& tile) {
  if (!tile) {
    if (!default_tile(list, c.dtype, c.head_dim, c.mask))
      return fmt::format("no {} tile is marked for {} head_dim {} mask {} (kernels/cuda/{}/CMakeLists.txt)", kernel,
                         to_string(c.dtype), c.head_dim, to_string(c.mask), kernel);
    return "";
  }
  std::vector<std::string> built;
  for (const TileInstantiation& i : list) {
    if (!(i.tile == *tile)) continue;
    if (i.dtype == c.dtype && i.head_dim == c.head_dim) return "";
    built.push_back(fmt::format("{} d{}", to_string(i.dtype), i.head_dim));
  }
  return fmt::format("the {} tile {} is instantiated for {} only", kernel, tile->name(), fmt::join(built, ", "));
}

}  // namespace faprobe::cuda
