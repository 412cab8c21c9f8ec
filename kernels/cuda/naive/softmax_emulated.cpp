// The entry point naive_softmax (launchers.hpp) of cuda.naive's softmax (softmax.cuh): on the GPU through
// softmax_gpu.cu, under the emulator by running the same kernel body on host memory; and the tests' entry
// with a planted defect (softmax_launch.hpp). The dtype and variant become template arguments here only.
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/launchers.hpp"
#include "cuda/naive/softmax.cuh"
#include "cuda/naive/softmax_launch.hpp"

namespace faprobe::cuda {
namespace {

// CTAs per launch at most; further rows loop in the grid stride. On the GPU 65536 CTAs are at least 15
// waves of the smallest (one-warp) CTAs on a 132-SM H100/H200; the emulator runs CTAs one after another,
// so a few CTAs that loop cost fewer fiber starts than one CTA per row.
#if defined(FAPROBE_WITH_CUDA)
constexpr unsigned gpu_max_blocks = 65536;
#endif
constexpr unsigned emulated_softmax_max_blocks = 8;

naive::SoftmaxParams params_of(const SoftmaxArgs& args) {
  if (args.batch_heads < 0 || args.seq_q < 1 || args.seq_k < 1)
    throw std::invalid_argument("naive_softmax: batch_heads must be >= 0 and seq_q, seq_k >= 1");
  naive::SoftmaxParams params;
  params.rows = args.batch_heads * args.seq_q;
  params.seq_q = args.seq_q;
  params.seq_k = args.seq_k;
  params.causal = args.causal;
  params.scale_log2 = static_cast<float>(double{args.scale} * 1.4426950408889634);  // log2(e)
  if (params.rows > 0 && (args.scores == nullptr || args.probs == nullptr))
    throw std::invalid_argument("naive_softmax: scores and probs must not be null");
  return params;
}

template <class Out, naive::SoftmaxDefect Defect>
void run_softmax(const Launch& launch, const SoftmaxArgs& args) {
  using Storage = typename Out::Storage;
  const naive::SoftmaxParams params = params_of(args);
  if (params.rows == 0) return;  // a grid of zero CTAs is not a valid launch
  const std::size_t elements = std::size_t(params.rows) * std::size_t(params.seq_k);
  const GlobalSpan<const float> scores(args.scores, elements, "scores");
  const GlobalSpan<Storage> probs(static_cast<Storage*>(args.probs), elements, "probs");
  if (launch.target == Target::gpu) {
    if constexpr (Defect != naive::SoftmaxDefect::none) {
      throw std::logic_error("naive_softmax: planted defects run under the emulator only");
    } else {
#if defined(FAPROBE_WITH_CUDA)
      const naive::SoftmaxLaunchShape shape = naive::softmax_launch_shape(params.rows, params.seq_k, gpu_max_blocks);
      naive::softmax_on_gpu<Out>(launch.stream, shape, params, scores, probs);
      return;
#else
      throw std::runtime_error("built without CUDA");
#endif
    }
  }
  const naive::SoftmaxLaunchShape shape = naive::softmax_launch_shape(params.rows, params.seq_k, emulated_softmax_max_blocks);
  const emu::LaunchConfig config{shape.cached ? "naive_softmax (cached rows)" : "naive_softmax (streamed rows)",
                                 {shape.blocks}, {shape.threads}, naive::softmax_shared_bytes};
  if (shape.cached) {
    emu::launch(config, [&] { naive::softmax_rows_cached<Out, Defect>(params, scores, probs); });
  } else {
    emu::launch(config, [&] { naive::softmax_rows_streamed<Out, Defect>(params, scores, probs); });
  }
}

template <naive::SoftmaxDefect Defect>
void dispatch_dtype(const Launch& launch, const SoftmaxArgs& args) {
  switch (args.dtype) {
    case DType::fp32: return run_softmax<isa::Float, Defect>(launch, args);
    case DType::fp16: return run_softmax<isa::Half, Defect>(launch, args);
    case DType::bf16: return run_softmax<isa::BFloat16, Defect>(launch, args);
    case DType::fp8_e4m3: break;
  }
  throw std::invalid_argument("naive_softmax: dtype " + std::string(to_string(args.dtype)) +
                              " is not an output type (fp32, fp16, bf16)");
}

}  // namespace

void naive_softmax(const Launch& launch, const SoftmaxArgs& args) {
  dispatch_dtype<naive::SoftmaxDefect::none>(launch, args);
}

namespace naive {
void naive_softmax_emulated_with_defect(const SoftmaxArgs& args, SoftmaxDefect defect) {
  const Launch emulator{Target::emulator, nullptr};
  switch (defect) {
    case SoftmaxDefect::none: return dispatch_dtype<SoftmaxDefect::none>(emulator, args);
    case SoftmaxDefect::missing_barrier: return dispatch_dtype<SoftmaxDefect::missing_barrier>(emulator, args);
    case SoftmaxDefect::causal_off_by_one: return dispatch_dtype<SoftmaxDefect::causal_off_by_one>(emulator, args);
  }
  throw std::invalid_argument("naive_softmax_emulated_with_defect: unknown defect");
}
}  // namespace naive

}  // namespace faprobe::cuda
