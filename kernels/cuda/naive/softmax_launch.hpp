// Internal to cuda.naive's softmax (softmax.cuh): the GPU launcher, defined in softmax_gpu.cu in CUDA
// builds only, and the tests' entry point to the planted defects, defined in softmax_emulated.cpp beside
// the public entry point naive_softmax (launchers.hpp). Plain C++, no CUDA header.
#pragma once

#include "cuda/naive/softmax.cuh"

namespace faprobe::cuda {

struct SoftmaxArgs;  // launchers.hpp

namespace naive {

#if defined(FAPROBE_WITH_CUDA)
// Launches the softmax on stream (a cudaStream_t; null = the default stream) with the given shape, over
// device memory, and checks the launch. Asynchronous. Instantiated for isa::Float, isa::Half, isa::BFloat16.
template <class Out>
void softmax_on_gpu(void* stream, const SoftmaxLaunchShape& shape, const SoftmaxParams& params,
                    GlobalSpan<const float> scores, GlobalSpan<typename Out::Storage> probs);
#endif

// For the tests only: naive_softmax under the emulator with a planted defect (host pointers).
void naive_softmax_emulated_with_defect(const SoftmaxArgs& args, SoftmaxDefect defect);

}  // namespace naive
}  // namespace faprobe::cuda
