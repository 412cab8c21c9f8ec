// Hopper's tensor memory accelerator (TMA) in the GPU emulator: the tensor copies
// cp.async.bulk.tensor.<n>d (global -> shared with complete_tx on an mbarrier, shared -> global in bulk
// groups) that cuda/common/isa_tma.hpp calls under the host compiler.
//
// PTX ISA followed: chapter "Tensors" (sections "Tensor Dimension, size and format", "Tiled Mode" with its
// "Bounding Box" and "Out of Boundary Access", "Shared Memory Swizzling Modes", "Tensor-map"), and
// "Data Movement and Conversion Instructions: cp.async.bulk.tensor". The tensor map's fields are those of
// the driver's cuTensorMapEncodeTiled (CUDA Driver API, "Tensor Map Object Managment").
//
// Model. A map describes a tensor of `rank` dimensions (dims[0] innermost and contiguous, element_bytes
// each; strides_bytes[i] from one index of dimension i to the next) and a box of box[0] x ... x
// box[rank-1] elements. A load copies the box whose first element is at `coords` (in elements, signed)
// into shared memory, packed densely in box order (box[0] fastest, one row of box[0] elements after
// another); elements outside the tensor (a coordinate below 0 or at or past dims) arrive as zero bytes,
// as with hardware's CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE. Then each 16-byte chunk moves to its swizzled
// position: with B swizzle bits (32B: 1, 64B: 2, 128B: 3) the byte at offset o of the CTA's dynamic shared
// memory lands at swizzle_offset(o, B), i.e. bits [4, 4+B) of o XORed with bits [7, 7+B). Hardware swizzles
// the shared address itself; the two agree when the dynamic shared memory starts 1024-byte aligned (the
// emulator allocates it so), and the kernels keep each swizzled tile 1024-byte aligned from there (the
// pattern repeats every 1024 bytes). The box's bytes, out-of-bounds fill included as hardware counts them,
// complete_tx on the mbarrier at issue; the data itself lands when that mbarrier phase completes, and is
// poison (0xFF) until then. A consumer must observe the phase (an mbarrier wait) before reading: the race
// detector reports a read of a box that has not landed, or that has landed without the reader having
// waited (emulator.hpp). A store is the reverse: it reads the box from shared memory (an async-proxy read,
// checked as such) through the same swizzle and writes only the elements inside the tensor; its box may
// hang off the tensor's far edges but not start before it (an illegal instruction on an H200: tma.cpp).
//
// Deviations from hardware: a store reads shared memory at issue, so overwriting its source before
// cp.async.bulk.wait_group.read is not caught. With swizzling and a box row (box[0] · element_bytes)
// narrower than the swizzle span, rows are packed densely before swizzling; the kernels and probes use rows
// exactly one span wide, the case checked against the GPU.
//
// Costs: a copy of the box through a staging buffer plus one call per 16-byte chunk of arithmetic; a 64x64
// bf16 tile (8 KiB) costs a few microseconds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace faprobe::emu {

inline constexpr int tma_max_rank = 5;
// Marks a TensorMapParams made by cuda::emulated_tensor_map; anything else (a map encoded for the GPU, a
// zeroed one) is refused by the copies.
inline constexpr std::uint32_t tensor_map_magic = 0x544d4150u;  // "TMAP"

// What an emulated tensor map holds (copied into the bytes of an isa::TensorMap). Entries past rank are 0.
struct TensorMapParams {
  const void* base;                           // the tensor's first element; stores write through it (see tma_store)
  std::uint32_t rank;                         // 1..5
  std::uint32_t element_bytes;                // 1, 2 or 4
  std::uint64_t dims[tma_max_rank];           // elements per dimension, innermost first
  std::uint64_t strides_bytes[tma_max_rank];  // strides_bytes[0] == element_bytes
  std::uint32_t box[tma_max_rank];            // the box, in elements per dimension
  std::uint32_t swizzle_bits;                 // B: 0 (none), 1 (32B), 2 (64B), 3 (128B)
  std::uint32_t magic;                        // tensor_map_magic
};

// Where the byte at offset byte_offset of a swizzled shared tile lives: bits [4, 4+B) XOR bits [7, 7+B)
// (CUTLASS's Swizzle<B, 4, 3>). An involution: applying it twice gives byte_offset back. Shared with the
// emulation of wgmma's shared-memory descriptors, which read TMA's layouts.
inline std::size_t swizzle_offset(std::size_t byte_offset, unsigned swizzle_bits) {
  return byte_offset ^ (((byte_offset >> 7) & ((std::size_t{1} << swizzle_bits) - 1u)) << 4);
}

// cp.async.bulk.tensor.<rank>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes: the box at coords
// (rank entries, innermost first) into shared memory at shared_offset (128-byte aligned, the whole box
// inside the launch's shared memory), then complete_tx of the box's bytes on the mbarrier at
// mbarrier_offset. Throws EmulationError naming the instruction for a map not made by emulated_tensor_map,
// a rank other than the map's, or a shared range that is misaligned or outside the launch's shared memory.
void tma_load(std::size_t shared_offset, const TensorMapParams& map, std::size_t mbarrier_offset, int rank,
              const int* coords);
// cp.async.bulk.tensor.<rank>d.global.shared::cta.tile.bulk_group: the box in shared memory at
// shared_offset (same checks) to global memory at coords; elements outside the tensor are not written.
// Throws EmulationError for a negative coordinate: hardware faults there (tma.cpp), though loads accept one.
// The map holds a const pointer because loads are its common use; a store writes through it (the tensor
// is the kernel's output, which the host made the map for).
void tma_store(const TensorMapParams& map, std::size_t shared_offset, int rank, const int* coords);
// cp.async.bulk.commit_group and cp.async.bulk.wait_group[.read]: every bulk copy has completed at issue,
// so both only check that they run inside a launch.
void bulk_commit_group();
void bulk_wait_group(unsigned pending_groups);

}  // namespace faprobe::emu
