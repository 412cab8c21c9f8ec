// The emulator's tensor copies (tma.hpp): the box gathered from global memory row by row into a dense
// staging buffer (zeros outside the tensor), then scattered to shared memory chunk by chunk through the
// swizzle; stores the reverse. Only emulator.hpp's public interface is used: shared_memory() for the range
// and alignment checks, land_async_copy() to deliver a load's chunks when its mbarrier phase completes (with
// its transaction bytes), async_proxy_read() for a store's source, current_location() for errors.
#include "cuda/common/emu/tma.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda/common/emu/emulator.hpp"

namespace faprobe::emu {
namespace {

constexpr std::size_t chunk_bytes = 16;           // the swizzle moves 16-byte chunks
constexpr std::size_t shared_alignment = 128;     // of a tensor copy's shared-memory box

[[noreturn]] void fail(const std::string& instruction, const std::string& what) {
  throw EmulationError(fmt::format("{}: {}: {}", current_location(), instruction, what));
}

void require_launch(const std::string& instruction) {
  // current_location() is the one query that does not throw outside a launch.
  if (current_location() == "outside any launch")
    throw EmulationError(fmt::format("emulator: {} called outside a launch", instruction));
}

// Checks that the map is an emulated one of the copy's rank; returns the box's size in bytes.
std::size_t checked_box_bytes(const TensorMapParams& map, int rank, const std::string& instruction) {
  require_launch(instruction);
  if (map.magic != tensor_map_magic)
    fail(instruction, "the tensor map was not made by emulated_tensor_map (a map encoded for the GPU, or one never "
                      "initialized)");
  if (rank < 1 || rank > tma_max_rank) fail(instruction, fmt::format("rank {} is outside 1..{}", rank, tma_max_rank));
  if (map.rank != static_cast<std::uint32_t>(rank))
    fail(instruction, fmt::format("a {}d copy with a tensor map of rank {}", rank, map.rank));
  std::size_t bytes = map.element_bytes;
  for (int d = 0; d < rank; ++d) bytes *= map.box[d];
  return bytes;
}

// The shared-memory box at shared_offset: 128-byte aligned, and every swizzled chunk inside the launch's
// shared memory (with swizzling the last, partial 128-byte row of a box can reach past its unswizzled end).
std::byte* shared_box(const TensorMapParams& map, std::size_t shared_offset, std::size_t bytes,
                      const std::string& instruction) {
  if (shared_offset % shared_alignment != 0)
    fail(instruction, fmt::format("shared memory at byte offset {} is not aligned to {} bytes (TMA's requirement)",
                                  shared_offset, shared_alignment));
  std::size_t end = shared_offset + bytes;
  if (map.swizzle_bits != 0)
    for (std::size_t chunk = shared_offset; chunk < shared_offset + bytes; chunk += chunk_bytes)
      end = std::max(end, swizzle_offset(chunk, map.swizzle_bits) + chunk_bytes);
  return shared_memory(shared_offset, end - shared_offset, shared_alignment);
}

// Where the chunk at dense offset `dense` of the box lives in shared memory, relative to shared_offset.
std::size_t shared_position(const TensorMapParams& map, std::size_t shared_offset, std::size_t dense) {
  return swizzle_offset(shared_offset + dense, map.swizzle_bits) - shared_offset;
}

// Calls copy(dense_offset, global_offset, bytes) for each run of in-bounds elements of the box, row by row
// in box order: dense_offset is the run's place in the densely packed box, global_offset its byte offset
// from map.base. Elements outside the tensor are skipped.
template <typename CopyRun>
void for_each_in_bounds_run(const TensorMapParams& map, int rank, const int* coords, CopyRun copy) {
  const std::int64_t element_bytes = map.element_bytes;
  const std::int64_t row_elements = map.box[0];
  // Dimension 0: the in-bounds part [first, last) of every row.
  const std::int64_t c0 = coords[0];
  const std::int64_t first = std::clamp<std::int64_t>(-c0, 0, row_elements);
  const std::int64_t last =
      std::clamp<std::int64_t>(static_cast<std::int64_t>(map.dims[0]) - c0, first, row_elements);
  std::size_t rows = 1;
  for (int d = 1; d < rank; ++d) rows *= map.box[d];
  for (std::size_t row = 0; row < rows; ++row) {
    std::size_t rest = row;
    bool inside = last > first;
    std::int64_t global_offset = (c0 + first) * element_bytes;
    for (int d = 1; d < rank && inside; ++d) {
      const std::int64_t index = static_cast<std::int64_t>(rest % map.box[d]);
      rest /= map.box[d];
      const std::int64_t coordinate = coords[d] + index;
      inside = coordinate >= 0 && coordinate < static_cast<std::int64_t>(map.dims[d]);
      global_offset += coordinate * static_cast<std::int64_t>(map.strides_bytes[d]);
    }
    if (!inside) continue;
    const std::size_t dense = (row * static_cast<std::size_t>(row_elements) + static_cast<std::size_t>(first)) *
                              static_cast<std::size_t>(element_bytes);
    copy(dense, static_cast<std::size_t>(global_offset), static_cast<std::size_t>((last - first) * element_bytes));
  }
}

std::string load_name(int rank) { return fmt::format("cp.async.bulk.tensor.{}d.shared::cluster.global", rank); }
std::string store_name(int rank) { return fmt::format("cp.async.bulk.tensor.{}d.global.shared::cta", rank); }

}  // namespace

void tma_load(std::size_t shared_offset, const TensorMapParams& map, std::size_t mbarrier_offset, int rank,
              const int* coords) {
  const std::string instruction = load_name(rank);
  const std::size_t bytes = checked_box_bytes(map, rank, instruction);
  (void)shared_box(map, shared_offset, bytes, instruction);
  std::vector<std::byte> box(bytes, std::byte{0});  // out-of-bounds elements stay zero (OOB fill NONE)
  const auto* global = static_cast<const std::byte*>(map.base);
  for_each_in_bounds_run(map, rank, coords, [&](std::size_t dense, std::size_t global_offset, std::size_t run) {
    std::memcpy(box.data() + dense, global + global_offset, run);
  });
  std::vector<SharedChunk> chunks((bytes + chunk_bytes - 1) / chunk_bytes);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const std::size_t dense = i * chunk_bytes;
    chunks[i].offset = shared_offset + shared_position(map, shared_offset, dense);
    chunks[i].bytes = std::min(chunk_bytes, bytes - dense);
    std::memcpy(chunks[i].data, box.data() + dense, chunks[i].bytes);
  }
  // The whole box counts, out-of-bounds fill included, as on hardware; it fits in shared memory, so in 32 bits.
  land_async_copy(mbarrier_offset, chunks.data(), chunks.size(), static_cast<std::uint32_t>(bytes));
}

void tma_store(const TensorMapParams& map, std::size_t shared_offset, int rank, const int* coords) {
  const std::string instruction = store_name(rank);
  const std::size_t bytes = checked_box_bytes(map, rank, instruction);
  // Loads take boxes that start outside the tensor on either side; stores only past its far edges. An
  // H200 stopped the kernel with "an illegal instruction" at a 2-D store at (-16, -8) whose loads at the
  // same coordinates had worked (faprobe probes under compute-sanitizer, 2026-12-04; results/h200/).
  for (int d = 0; d < rank; ++d)
    if (coords[d] < 0)
      fail(instruction, fmt::format("the box starts at coordinate {} = {} < 0: a tensor store's box may hang off "
                                    "the tensor's far edges only (on an H200 a negative start is an illegal "
                                    "instruction)", d, coords[d]));
  const std::byte* shared = shared_box(map, shared_offset, bytes, instruction);
  std::vector<std::byte> box(bytes);
  for (std::size_t dense = 0; dense < bytes; dense += chunk_bytes) {
    const std::size_t position = shared_position(map, shared_offset, dense);
    const std::size_t run = std::min(chunk_bytes, bytes - dense);
    async_proxy_read(shared_offset + position, run);
    std::memcpy(box.data() + dense, shared + position, run);
  }
  // The map's pointer is const for the loads' sake; the tensor a store targets is writable device memory.
  auto* global = static_cast<std::byte*>(const_cast<void*>(map.base));
  for_each_in_bounds_run(map, rank, coords, [&](std::size_t dense, std::size_t global_offset, std::size_t run) {
    std::memcpy(global + global_offset, box.data() + dense, run);
  });
}

void bulk_commit_group() { require_launch("cp.async.bulk.commit_group"); }

void bulk_wait_group(unsigned pending_groups) {
  (void)pending_groups;  // every bulk copy has completed at issue
  require_launch("cp.async.bulk.wait_group");
}

}  // namespace faprobe::emu
