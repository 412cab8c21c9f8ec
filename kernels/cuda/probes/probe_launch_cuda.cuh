// What the probes' GPU launchers (warp_probes.cu, matrix_probes.cu, tma_probes.cu, hopper_probes.cu) share
// (nvcc only): an emu::LaunchConfig's extents as a dim3, and faprobe's stream as a cudaStream_t.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/runtime/gpu.hpp"

namespace faprobe::cuda::probes::on_gpu {

inline dim3 to_dim3(const emu::Dim3& extent) { return dim3(extent.x, extent.y, extent.z); }
inline cudaStream_t probe_stream() { return static_cast<cudaStream_t>(gpu::stream()); }

}  // namespace faprobe::cuda::probes::on_gpu
