// Instruction probes, part 4: Hopper's tensor copies (isa_tma.hpp) with an mbarrier (isa.hpp part 4). One
// kernel body loads three boxes of a 16-bit matrix into shared memory with cp.async.bulk.tensor (one inside
// the matrix, one hanging off its right and bottom edges, one at negative coordinates), writes the shared
// bytes out as words, and stores the boxes that start inside the matrix (the first two) back with the store
// form into a second matrix, where only the elements inside the matrix may be written. (A store at negative
// coordinates is an illegal instruction on an H200, seen 2026-12-04, so the third box is loaded only.) Compiled by nvcc in tma_probes.cu (sm_90a; a trapping
// stub below sm_90) and by the host compiler in probe_suite.cpp, whose emulated output is the reference the
// GPU's must equal bit for bit: the swizzled shared-memory image shows the swizzle pattern and the
// out-of-bounds zeros, the stored matrix the un-swizzling and the bounds of stores. Each thread's part is
// a few words; the whole probe is one CTA and 13 KiB of shared memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/common/isa_tma.hpp"

namespace faprobe::cuda::probes {

// The probe's matrix (rows x cols 16-bit elements, row-major) and box (64 elements = 128 bytes per row,
// the widest a 128B swizzle allows, 32 rows).
inline constexpr unsigned tma_probe_rows = 100;
inline constexpr unsigned tma_probe_cols = 200;
inline constexpr unsigned tma_probe_box_cols = 64;
inline constexpr unsigned tma_probe_box_rows = 32;
inline constexpr unsigned tma_probe_boxes = 3;
inline constexpr unsigned tma_probe_stored_boxes = 2;  // the boxes at non-negative coordinates
inline constexpr unsigned tma_probe_box_bytes = tma_probe_box_cols * tma_probe_box_rows * 2;
inline constexpr std::size_t tma_probe_barrier = 0;     // the mbarrier's shared offset
inline constexpr std::size_t tma_probe_first_box = 1024;  // boxes 1024-byte aligned, as swizzling needs
inline constexpr std::size_t tma_probe_shared_bytes = tma_probe_first_box + tma_probe_boxes * tma_probe_box_bytes;
inline constexpr unsigned tma_probe_threads = 128;

// Box b's coordinates (column, row): inside; off the right edge (cols 200..223) and the bottom (rows
// 100..111); at negative coordinates (cols -16..-1, rows -8..-1 outside).
FAPROBE_DEVICE int tma_probe_col(unsigned box) { return box == 0 ? 64 : box == 1 ? 160 : -16; }
FAPROBE_DEVICE int tma_probe_row(unsigned box) { return box == 0 ? 8 : box == 1 ? 80 : -8; }

// One CTA of tma_probe_threads threads, tma_probe_shared_bytes of dynamic shared memory. load_map and
// store_map describe the source and destination matrices with the same box and swizzle; shared_words
// receives the tma_probe_boxes boxes as they lie in shared memory (tma_probe_box_bytes / 4 words each).
FAPROBE_DEVICE void tma_copy(const isa::TensorMap& load_map, const isa::TensorMap& store_map,
                             GlobalSpan<std::uint32_t> shared_words) {
  const unsigned tid = isa::thread_linear_idx();
  if (tid == 0) {
    isa::prefetch_tensor_map(load_map);
    isa::mbarrier_init(tma_probe_barrier, 1);
    isa::fence_mbarrier_init();
  }
  isa::sync_threads();  // the mbarrier is initialized before anyone waits on it
  if (tid == 0) {
    isa::mbarrier_arrive(tma_probe_barrier, tma_probe_boxes * tma_probe_box_bytes);  // expect_tx: all three boxes
    for (unsigned box = 0; box < tma_probe_boxes; ++box)
      isa::tma_load<2>(tma_probe_first_box + box * std::size_t{tma_probe_box_bytes}, load_map, tma_probe_barrier,
                       {tma_probe_col(box), tma_probe_row(box)});
  }
  isa::mbarrier_wait_parity(tma_probe_barrier, 0);  // phase 0: the arrival and every box's bytes are in
  const SharedSpan<std::uint32_t> boxes =
      isa::shared_array<std::uint32_t>(tma_probe_first_box, tma_probe_boxes * tma_probe_box_bytes / 4);
  for (std::size_t i = tid; i < boxes.size(); i += tma_probe_threads) shared_words[i] = boxes[i];
  if (tid == 0) {
    isa::fence_proxy_async();  // harmless here (no generic writes to the boxes); the order a kernel's epilogue needs
    for (unsigned box = 0; box < tma_probe_stored_boxes; ++box)
      isa::tma_store<2>(store_map, tma_probe_first_box + box * std::size_t{tma_probe_box_bytes},
                        {tma_probe_col(box), tma_probe_row(box)});
    isa::tma_store_commit_group();
    isa::tma_store_wait_group<0>();  // the stores have reached global memory before the kernel ends
  }
}

}  // namespace faprobe::cuda::probes
