// cuda.fa1's host entry points (launchers.hpp): support, shape and workspace size, and fa1_forward, which
// runs the kernel body (fa1.cuh) under the emulator for Target::emulator and launches the nvcc-compiled
// instantiation (fa1_gpu.cu) for Target::gpu. The kernel's Params are built here, in one place, for both.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/fa1/fa1_emulated.hpp"
#if defined(FAPROBE_WITH_CUDA)
#include "cuda/fa1/fa1_gpu.hpp"
#endif

namespace faprobe::cuda {
namespace fa1 {

Params make_params(const AttentionArgs& args) {
  Params p;
  static_cast<AttentionParams&>(p) = make_attention_params("fa1", args);
  if (args.workspace == nullptr)
    throw std::invalid_argument("fa1_forward: the workspace (fa1_workspace_bytes) must be allocated by the caller");
  const std::size_t rows = static_cast<std::size_t>(args.batch * args.heads * args.seq_q);
  const std::size_t head_dim = static_cast<std::size_t>(args.head_dim);
  float* workspace = static_cast<float*>(args.workspace);
  p.o_acc = GlobalSpan<float>(workspace, rows * head_dim, "workspace O");
  p.row_max = GlobalSpan<float>(workspace + rows * head_dim, rows, "workspace row max");
  p.row_sum = GlobalSpan<float>(workspace + rows * (head_dim + 1), rows, "workspace row sum");
  return p;
}

}  // namespace fa1

std::string fa1_supports(DType dtype, std::int64_t head_dim) { return tensor_core_supports("fa1", dtype, head_dim); }

KernelShape fa1_shape(DType dtype, std::int64_t head_dim) {
  return instantiated_shape<fa1::Traits>("fa1", dtype, head_dim);
}

std::size_t fa1_workspace_bytes(const AttentionArgs& args) {
  const std::int64_t rows = args.batch * args.heads * args.seq_q;
  return static_cast<std::size_t>(rows * (args.head_dim + 2)) * sizeof(float);
}

void fa1_forward(const Launch& launch, const AttentionArgs& args) {
  if (launch.target == Target::emulator) {
    fa1::forward_emulated<fa1::Defect::none>(args);
    return;
  }
#if defined(FAPROBE_WITH_CUDA)
  fa1::forward_gpu(fa1::make_params(args), element_type("fa1", args.dtype), static_cast<int>(args.head_dim),
                   launch.stream);
#else
  throw std::runtime_error("built without CUDA");
#endif
}

}  // namespace faprobe::cuda
