// The instruction layer, part 5: Hopper's tensor memory accelerator (TMA, sm_90). One thread issues a copy
// of a whole tile (a "box") between global and shared memory, described by a tensor map that the host
// encodes once (cuda/common/tensor_map.hpp); a load completes on an mbarrier (isa.hpp part 4) with
// transaction bytes, a store in bulk groups that the issuing thread waits for.
//
// PTX ISA sections followed: chapter "Tensors" ("Tiled Mode", "Bounding Box", "Out of Boundary Access",
// "Shared Memory Swizzling Modes", "Tensor-map"); "Data Movement and Conversion Instructions":
// "cp.async.bulk.tensor", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group", "prefetch, prefetchu"
// (prefetch.tensormap).
//
// Usage, as FA-3's producer warp does it: the host builds the map (gpu_tensor_map on the GPU,
// emulated_tensor_map under the emulator) and passes it to the kernel as a `const __grid_constant__
// isa::TensorMap` parameter, so that its generic address is the operand the instructions take. One elected
// thread announces the box's bytes with mbarrier_arrive(mbar, box_bytes) (expect_tx) and issues tma_load;
// consumers wait with mbarrier_wait_parity. Shared boxes are 128-byte aligned (required), and 1024-byte
// aligned from the start of the dynamic shared memory when swizzled (the pattern repeats every 1024 bytes
// and hardware applies it to the address bits). Coordinates are in elements, innermost first, and may
// lie partly or wholly outside the tensor: such elements load as zeros and are not stored.
//
// Under nvcc each function is one PTX instruction; below sm_90 they trap (like part 4), so headers using
// them compile in the sm_80 pass. Under the host compiler each calls the emulator (emu/tma.hpp, which has
// the model and its deviations); the TensorMap then holds an emu::TensorMapParams, and a map encoded for
// the GPU is refused. Costs on the GPU: one instruction per tile issued by one thread; a 64x64 bf16 box is
// 8 KiB, so a few boxes in flight keep an SM's share of HBM bandwidth busy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cuda/common/isa.hpp"
#if !defined(__CUDACC__)
#include "cuda/common/emu/tma.hpp"
#endif

namespace faprobe::cuda::isa {

// A tensor map: on the GPU the 128 opaque bytes of a CUtensorMap; under the emulator an emu::TensorMapParams
// in its first bytes. 128-byte aligned as CUDA 13's cuda.h declares CUtensorMap (alignas(128); CUDA 12's was
// alignas(64), the least that cuTensorMapEncodeTiled and the tensor copies accept), so a map embedded in a
// struct (fa3::Params) or passed as a __grid_constant__ kernel parameter sits where a CUtensorMap would;
// tensor_map_gpu.cpp checks size and alignment against cuda.h's.
struct alignas(128) TensorMap {
  std::uint64_t opaque[16];
};
static_assert(sizeof(TensorMap) == 128 && alignof(TensorMap) == 128, "a TensorMap is laid out as a CUtensorMap");

// The shared-memory swizzle of a map (CUtensorMapSwizzle's first four values); the value is the number of
// XORed address bits B: byte-address bits [4, 4+B) are XORed with bits [7, 7+B).
enum class TmaSwizzle : std::uint32_t { none = 0, bytes32 = 1, bytes64 = 2, bytes128 = 3 };

namespace detail {
#if !defined(__CUDACC__)
static_assert(sizeof(emu::TensorMapParams) <= sizeof(TensorMap), "an emulated map fits in a TensorMap");
inline emu::TensorMapParams emulated_map(const TensorMap& map) {
  emu::TensorMapParams params;
  std::memcpy(&params, map.opaque, sizeof params);
  return params;
}
#endif
}  // namespace detail

// --- cp.async.bulk.tensor.<Rank>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes: the box at
// coords into shared memory at shared_offset_bytes (128-byte aligned); when it has landed its bytes
// complete_tx on the mbarrier at mbarrier_offset_bytes. Issued by one thread. ---
template <int Rank>
FAPROBE_DEVICE void tma_load(std::size_t shared_offset_bytes, const TensorMap& map, std::size_t mbarrier_offset_bytes,
                             const int (&coords)[Rank]) {
  static_assert(Rank >= 1 && Rank <= 5, "tensor copies have 1 to 5 dimensions");
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  const std::uint32_t destination = detail::shared_address(shared_offset_bytes);
  const std::uint32_t mbarrier = detail::shared_address(mbarrier_offset_bytes);
  const auto map_address = reinterpret_cast<std::uint64_t>(&map);
  if constexpr (Rank == 1) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3}], [%2];"
                 ::"r"(destination), "l"(map_address), "r"(mbarrier), "r"(coords[0]) : "memory");
  } else if constexpr (Rank == 2) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 ::"r"(destination), "l"(map_address), "r"(mbarrier), "r"(coords[0]), "r"(coords[1]) : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];"
                 ::"r"(destination), "l"(map_address), "r"(mbarrier), "r"(coords[0]), "r"(coords[1]), "r"(coords[2])
                 : "memory");
  } else if constexpr (Rank == 4) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];"
                 ::"r"(destination), "l"(map_address), "r"(mbarrier), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]),
                 "r"(coords[3]) : "memory");
  } else {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
                 ::"r"(destination), "l"(map_address), "r"(mbarrier), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]),
                 "r"(coords[3]), "r"(coords[4]) : "memory");
  }
#else
  (void)shared_offset_bytes, (void)map, (void)mbarrier_offset_bytes, (void)coords;
  __trap();
#endif
#else
  emu::tma_load(shared_offset_bytes, detail::emulated_map(map), mbarrier_offset_bytes, Rank, coords);
#endif
}

// --- cp.async.bulk.tensor.<Rank>d.global.shared::cta.tile.bulk_group: the box in shared memory at
// shared_offset_bytes (128-byte aligned) to the tensor at coords; elements outside the tensor are not
// written. Make the CTA's shared-memory writes visible first (fence_proxy_async() by each writing thread,
// then a barrier); then the issuing thread commits the group and waits for it before reusing the buffer. ---
template <int Rank>
FAPROBE_DEVICE void tma_store(const TensorMap& map, std::size_t shared_offset_bytes, const int (&coords)[Rank]) {
  static_assert(Rank >= 1 && Rank <= 5, "tensor copies have 1 to 5 dimensions");
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  const std::uint32_t source = detail::shared_address(shared_offset_bytes);
  const auto map_address = reinterpret_cast<std::uint64_t>(&map);
  if constexpr (Rank == 1) {
    asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%2}], [%1];"
                 ::"l"(map_address), "r"(source), "r"(coords[0]) : "memory");
  } else if constexpr (Rank == 2) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];"
                 ::"l"(map_address), "r"(source), "r"(coords[0]), "r"(coords[1]) : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];"
                 ::"l"(map_address), "r"(source), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]) : "memory");
  } else if constexpr (Rank == 4) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];"
                 ::"l"(map_address), "r"(source), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]), "r"(coords[3])
                 : "memory");
  } else {
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];"
                 ::"l"(map_address), "r"(source), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]), "r"(coords[3]),
                 "r"(coords[4]) : "memory");
  }
#else
  (void)map, (void)shared_offset_bytes, (void)coords;
  __trap();
#endif
#else
  emu::tma_store(detail::emulated_map(map), shared_offset_bytes, Rank, coords);
#endif
}

// cp.async.bulk.commit_group: the thread's bulk stores issued since the last commit become one group.
FAPROBE_DEVICE void tma_store_commit_group() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#else
  __trap();
#endif
#else
  emu::bulk_commit_group();
#endif
}
// cp.async.bulk.wait_group.read Pending: waits until at most Pending of the thread's most recent groups
// still read their shared-memory source; the buffers of the others may be overwritten.
template <unsigned Pending>
FAPROBE_DEVICE void tma_store_wait_group_read() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
#else
  __trap();
#endif
#else
  emu::bulk_wait_group(Pending);
#endif
}
// cp.async.bulk.wait_group Pending: waits until at most Pending of the thread's most recent groups are
// incomplete, their writes to global memory included (before the kernel reads what it stored).
template <unsigned Pending>
FAPROBE_DEVICE void tma_store_wait_group() {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(Pending) : "memory");
#else
  __trap();
#endif
#else
  emu::bulk_wait_group(Pending);
#endif
}

// prefetch.tensormap: brings the map into the cache of tensor maps ahead of the first copy that uses it
// (its generic address, a __grid_constant__ parameter). A no-op under emulation.
FAPROBE_DEVICE void prefetch_tensor_map(const TensorMap& map) {
#if defined(__CUDACC__)
#if FAPROBE_SM90_PTX
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&map)) : "memory");
#else
  (void)map;
  __trap();
#endif
#else
  (void)map;
#endif
}

}  // namespace faprobe::cuda::isa
