// Internal to cuda.decode: its GPU side. forward_gpu and ctas_per_sm_gpu (decode_gpu.cu) pick the
// instantiation for (element type, head_dim) and call its functions, defined with the __global__ wrappers of
// the attention and combine kernels in decode_<dtype>_hdim<d>.cu. Plain C++ declarations (called from
// decode_emulated.cpp in CUDA builds); the launch helpers below are compiled by nvcc only.
#pragma once

#include "cuda/decode/decode.cuh"

#if defined(__CUDACC__)
#include "cuda/common/launch_gpu.cuh"
#endif

namespace faprobe::cuda::decode {

// Launches the attention kernel (and, with params.splits > 1, the combine kernel) on the cudaStream_t
// stream (as void*); throws gpu::CudaError on a failed launch, std::invalid_argument without an instantiation.
void forward_gpu(const Params& params, ElementType element, int head_dim, void* stream);
// Resident attention CTAs per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor), the fewer of the contiguous
// and the paged kernel.
int ctas_per_sm_gpu(ElementType element, int head_dim);

// One pair per instantiation file.
template <class Element, int HeadDim>
void launch(const Params& params, void* stream);
template <class Element, int HeadDim>
int occupancy();
#define FAPROBE_DECODE_INSTANTIATION(Element, HeadDim)                 \
  template <> void launch<Element, HeadDim>(const Params&, void*);     \
  template <> int occupancy<Element, HeadDim>();
FAPROBE_DECODE_INSTANTIATION(isa::Half, 64)
FAPROBE_DECODE_INSTANTIATION(isa::Half, 128)
FAPROBE_DECODE_INSTANTIATION(isa::Half, 256)
FAPROBE_DECODE_INSTANTIATION(isa::BFloat16, 64)
FAPROBE_DECODE_INSTANTIATION(isa::BFloat16, 128)
FAPROBE_DECODE_INSTANTIATION(isa::BFloat16, 256)
#undef FAPROBE_DECODE_INSTANTIATION

#if defined(__CUDACC__)
// launch_kernel's traits for the combine kernel: combine_threads threads, no shared memory.
struct CombineShape {
  static constexpr int threads = combine_threads;
  static constexpr std::size_t shared_bytes = 0;
};

// The launches and the occupancy query of one instantiation's kernels: the attention kernel for the layout
// (Attend for a contiguous cache, AttendPaged for a paged one), then the combine kernel when split.
template <auto Attend, auto AttendPaged, auto Combine, int HeadDim>
void launch_kernels(const char* attend_name, const char* paged_name, const char* combine_name, const Params& params,
                    void* stream) {
  using T = Traits<HeadDim>;
  const dim3 grid(static_cast<unsigned>(params.splits), static_cast<unsigned>(params.kv_heads * params.head_chunks),
                  static_cast<unsigned>(params.batch));
  if (params.block_table.size() != 0) {
    cuda::launch_kernel<AttendPaged, T>(paged_name, params, grid, stream);
  } else {
    cuda::launch_kernel<Attend, T>(attend_name, params, grid, stream);
  }
  if (params.splits == 1) return;
  cuda::launch_kernel<Combine, CombineShape>(
      combine_name, params, dim3(static_cast<unsigned>(params.heads), static_cast<unsigned>(params.batch)), stream);
}

// Resident CTAs per SM of one attention kernel.
template <auto Attend, int HeadDim>
int kernel_occupancy() {
  using T = Traits<HeadDim>;
  // The opt-in above 48 KiB first: the calculator counts only the shared memory a kernel may use.
  if constexpr (T::shared_bytes > 48 * 1024) {
    FAPROBE_CUDA_CHECK(cudaFuncSetAttribute(Attend, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(T::shared_bytes)));
  }
  int ctas = 0;
  FAPROBE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, Attend, T::threads, T::shared_bytes));
  return ctas;
}

// The fewer of the contiguous and the paged kernel's (the same shared memory; their registers may differ).
template <auto Attend, auto AttendPaged, int HeadDim>
int kernels_occupancy() {
  const int contiguous = kernel_occupancy<Attend, HeadDim>();
  const int paged = kernel_occupancy<AttendPaged, HeadDim>();
  return contiguous < paged ? contiguous : paged;
}
#endif

}  // namespace faprobe::cuda::decode
