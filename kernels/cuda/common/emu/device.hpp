// The device the emulator stands for, described once: an sm_90a GPU with the 132 SMs of an H100 SXM or an
// H200 and their per-block limits. Emulated implementations report its name as their device; kernels size
// their persistent grids and decode splits by its SMs under emulation (so that an emulated run makes the
// choices the GPU would); the emulator refuses a launch past its limits, as the GPU does. Plain constants,
// so that nvcc can read them too (fa3.cuh's shared-memory static_assert).
#pragma once

#include <cstddef>

namespace faprobe::emu {

struct DeviceDescription {
  const char* name;                         // the "device" of an emu.* record
  int sm_count;                             // streaming multiprocessors
  unsigned max_block_threads;               // threads per CTA, as on every GPU since sm_20
  std::size_t max_shared_bytes_per_block;   // dynamic shared memory per CTA with the opt-in (sm_90: 227 KiB)
  std::size_t shared_base_alignment;        // of the dynamic shared memory's base, as every 128B swizzle assumes
};

inline constexpr DeviceDescription emulated_device{
    "emulated sm_90a",  // name
    132,                // sm_count: H100 SXM, H200
    1024,               // max_block_threads
    227 * 1024,         // max_shared_bytes_per_block (CUDA C++ Programming Guide, compute capability 9.0)
    1024,               // shared_base_alignment
};

}  // namespace faprobe::emu
