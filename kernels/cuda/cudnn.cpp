// cuda.cudnn — cuDNN's fused scaled-dot-product-attention forward pass, built as a cuDNN graph through the
// cudnn-frontend's C++ API: the vendor's FlashAttention, measured beside faprobe's own kernels with the same
// inputs, timing (CUDA events, L2 flushed), memory accounting and float64 check. One SDPA node takes Q, K and V
// in faprobe's (batch, seq, heads, head_dim) layout — cuDNN's logical dims are (batch, heads, seq, head_dim),
// so the strides say where each element is and nothing is copied — and writes O and the stats, cuDNN's name
// for the log-sum-exp of each row (natural log, fp32, (batch, heads, seq_q, 1): exactly faprobe's LSE, which
// the checker then compares). GQA and MQA are K and V with fewer heads; scale is 1/sqrt(head_dim); the mask
// is none, causal (faprobe's bottom-right: set_causal_mask_bottom_right) or causal-top-left (set_causal_mask).
//
// What cuDNN does with it: the graph goes through validate() (the frontend's rules for SDPA on this GPU's
// architecture and this cuDNN's version), build_operation_graph, the heuristics' engine list (mode A, as
// PyTorch's cuDNN backend asks), check_support and build_plans; the engine it picks is a fused flash-style
// kernel (tiles of Q resident, K and V streamed, online softmax; on Hopper TMA and wgmma), whose name the
// record keeps in details.plan. The graph is built once per case (prepare), not per sample; the workspace it
// asks for comes from faprobe's pool (AllocKind::workspace), so the record's peak and workspace bytes hold it.
// One cuDNN handle per process, created on first use and bound to faprobe's stream at each forward call.
//
// Where cuDNN comes from: nothing links it. The frontend runs in its dynamic-loading mode
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING), where every cuDNN call goes through cudnn_frontend::cudnn_dlhandle,
// the libcudnn.so.9 that runtime/cudnn_library.cpp found and dlopened (FAPROBE_CUDNN_LIBRARY, the loader's
// path, the CUDA toolkit, PyTorch's nvidia-cudnn wheel); the record keeps its version, path and source.
// cuDNN's engines are its own compiled code, so there is no emu.cudnn: the CPU emulator runs kernels
// written on faprobe's instruction layer, and cuDNN's are not.
//
// What it takes: fp16 and bf16 (fp32 and fp8_e4m3 are refused here: cuDNN's fp8 SDPA is another graph, with
// descale tensors and amax outputs), contiguous equal-length K/V (paged and variable-length caches are
// refused by the shell), and whatever validate() accepts for the GPU and cuDNN at hand — head_dim a multiple
// of 8, up to 128 or 256 by architecture and cuDNN version; no bottom-right causal mask with seq_q > seq_k
// (rows that see no key). validate() runs in supports() on the host, with no GPU work (~40 µs a case), so
// such a case is unsupported in cuDNN's own words rather than failed; check_support in prepare is the
// engines' final say.
//
// Napkin math (configs/fa3-vs-fa2.json's target: batch 2, heads 16, seq 8192, head_dim 128, bf16, no mask;
// H100 SXM):
//   FLOPs      4·b·h·s²·d = 1.10 TFLOP (half of it causal); at the 989 TFLOP/s dense bf16 tensor-core
//              peak, 1.1 ms: the bound, which the sweep reads cuda.cudnn, cuda.fa3 and PyTorch's cuDNN
//              backend against.
//   Bytes      Q, K, V read and O written once: 4 · 2·8192·16·128 · 2 B = 268 MB, 0.08 ms at 3.35 TB/s;
//              the LSE 1 MB. Compute-bound by more than 10x.
//   Memory     the tensors above, the LSE, and cuDNN's workspace (the forward's engines ask for little or
//              none; the record says how much). The handle's own device memory is cuDNN's, outside faprobe's
//              pool: not in peak_bytes.
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cuda/cudnn.hpp"
#include "cuda/factories.hpp"
#include "cuda/kernel_implementation.hpp"
#include "cuda/runtime/cudnn_library.hpp"
#include "cuda/runtime/gpu.hpp"

#if defined(FAPROBE_WITH_CUDA) && defined(FAPROBE_WITH_CUDNN_FRONTEND)
#define FAPROBE_CUDNN_GRAPH 1
// The frontend's headers are SYSTEM includes (not ours to keep warning-free), with CUDNN_FRONTEND_SKIP_JSON_LIB
// and NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING defined for this file alone (kernels/cuda/CMakeLists.txt).
#include <cudnn_frontend.h>

namespace cudnn_frontend {
// The library every cuDNN call of the frontend goes through (dynamic-loading mode): set by loaded_cudnn().
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

namespace faprobe::cuda {
namespace {

// The cuDNN workspace predicted_bytes allows for before the graph is built: cuDNN says how much a plan needs
// only once it is built on the GPU (prepare). 32 MiB is cuBLAS's workspace on Hopper, far above what the SDPA
// forward engines have been seen to ask (none, or a few KiB for a tile scheduler); the record's
// workspace_bytes is the real figure.
constexpr std::uint64_t kWorkspaceAllowance = 32ull << 20;

// The GPU's architecture as the frontend's support rules read it: 90 for sm_90 (0 without a GPU).
int gpu_sm_version() {
  const std::vector<gpu::DeviceInfo> found = gpu::devices();
  return found.empty() ? 0 : found.front().compute_major * 10 + found.front().compute_minor;
}

#if defined(FAPROBE_CUDNN_GRAPH)
namespace fe = cudnn_frontend;

// The tensors of the graph, by the uids its variant pack names them with.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats };

// The process's cuDNN: found and loaded once (runtime/cudnn_library.cpp), and handed to the frontend before
// its first call (it resolves each entry point once, from this handle, and keeps it).
const gpu::CudnnLibrary& loaded_cudnn() {
  static const gpu::CudnnLibrary& library = []() -> const gpu::CudnnLibrary& {
    const gpu::CudnnLibrary& found = gpu::cudnn_library();
    if (found.available()) fe::cudnn_dlhandle = found.handle;
    return found;
  }();
  return library;
}

std::string cudnn_error(cudnnStatus_t status) {
  const char* text = fe::detail::get_error_string(status);
  return fmt::format("{} (cuDNN status {})", text != nullptr ? text : "unknown error", int(status));
}

// Throws for a failed step of the graph, in the frontend's words.
void check(const fe::error_t& status, const char* step) {
  if (status.is_bad()) {
    throw std::runtime_error(fmt::format("cuDNN {}: {} failed: {}", loaded_cudnn().version_text(), step,
                                         status.err_msg));
  }
}

// The process's cuDNN handle, on device 0 (faprobe's), created on first use. Never destroyed: at exit the
// CUDA context may already be gone, and the process's end frees it anyway.
cudnnHandle_t cudnn_handle() {
  static std::mutex mutex;
  static cudnnHandle_t handle = nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (handle == nullptr) {
    cudnnHandle_t created = nullptr;
    if (const cudnnStatus_t status = fe::detail::create_handle(&created); status != CUDNN_STATUS_SUCCESS) {
      throw std::runtime_error(fmt::format("cudnnCreate failed: {}", cudnn_error(status)));
    }
    handle = created;
  }
  return handle;
}

// The SDPA graph of case c (see the file comment) for an sm_<sm_version> GPU, not yet validated. The
// architecture is given, so that the frontend's support rules ask no CUDA runtime of their own.
std::shared_ptr<fe::graph::Graph> sdpa_graph(const Case& c, int sm_version) {
  // Never a frontend call without cuDNN: it would resolve its entry points from a null handle, for good.
  if (const gpu::CudnnLibrary& library = loaded_cudnn(); !library.available()) {
    throw std::runtime_error(fmt::format("cuDNN unavailable: {}", library.reason_unavailable));
  }
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(c.dtype == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  graph->set_sm_version(sm_version);
  // Logical (batch, heads, seq, head_dim) over faprobe's row-major (batch, seq, heads, head_dim).
  const auto dims = [&c](std::int64_t seq, std::int64_t heads) {
    return std::vector<std::int64_t>{c.batch, heads, seq, c.head_dim};
  };
  const auto strides = [&c](std::int64_t seq, std::int64_t heads) {
    return std::vector<std::int64_t>{seq * heads * c.head_dim, c.head_dim, heads * c.head_dim, 1};
  };
  const auto input = [&](const char* name, Uid uid, std::int64_t seq, std::int64_t heads) {
    auto attributes = fe::graph::Tensor_attributes().set_name(name).set_uid(uid);
    return graph->tensor(attributes.set_dim(dims(seq, heads)).set_stride(strides(seq, heads)));
  };
  const auto q = input("Q", kQ, c.seq_q, c.heads);
  const auto k = input("K", kK, c.seq_k, c.kv_heads);
  const auto v = input("V", kV, c.seq_k, c.kv_heads);
  auto options =
      fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(float(c.scale()));
  if (c.mask == Mask::causal) options.set_causal_mask_bottom_right(true);  // row i sees keys j <= i + seq_k - seq_q
  if (c.mask == Mask::causal_top_left) options.set_causal_mask(true);      // row i sees keys j <= i
  auto [o, stats] = graph->sdpa(q, k, v, options);
  o->set_output(true).set_uid(kO).set_dim(dims(c.seq_q, c.heads)).set_stride(strides(c.seq_q, c.heads));
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({c.batch, c.heads, c.seq_q, 1})
      .set_stride({c.heads * c.seq_q, c.seq_q, 1, 1});  // faprobe's LSE: (batch, heads, seq_q)
  return graph;
}

class CudnnRun final : public KernelRun {
 public:
  CudnnRun(const Case& c, KernelTensors& tensors) : graph_(sdpa_graph(c, gpu_sm_version())), handle_(cudnn_handle()) {
    check(graph_->validate(), "validate");
    check(graph_->build_operation_graph(handle_), "build_operation_graph");
    check(graph_->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans (heuristics mode A)");
    check(graph_->check_support(), "check_support");
    check(graph_->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
    std::int64_t workspace_bytes = 0;
    check(graph_->get_workspace_size(workspace_bytes), "get_workspace_size");
    workspace_ = KernelBuffer(Target::gpu, std::size_t(workspace_bytes), AllocKind::workspace);
    if (graph_->get_plan_name(plan_).is_bad()) plan_ = "unknown";
    pointers_ = {{kQ, tensors.q.data()}, {kK, tensors.k.data()}, {kV, tensors.v.data()},
                 {kO, tensors.o.data()}, {kStats, tensors.lse.data()}};
  }

  void forward(const Launch& launch) override {
    if (const cudnnStatus_t status = fe::detail::set_stream(handle_, static_cast<cudaStream_t>(launch.stream));
        status != CUDNN_STATUS_SUCCESS) {
      throw std::runtime_error(fmt::format("cudnnSetStream failed: {}", cudnn_error(status)));
    }
    check(graph_->execute(handle_, pointers_, workspace_.data()), "execute");
  }

  nlohmann::json details() const override {
    const gpu::CudnnLibrary& library = loaded_cudnn();
    return {{"cudnn_version", library.version_text()},
            {"cudnn_version_number", library.version},
            {"cudnn_library", library.path},
            {"cudnn_library_source", library.source},
            {"cudnn_headers_version", gpu::cudnn_version_text(CUDNN_VERSION)},
            {"cudnn_frontend_version", fmt::format("{}.{}.{}", CUDNN_FRONTEND_MAJOR_VERSION,
                                                   CUDNN_FRONTEND_MINOR_VERSION, CUDNN_FRONTEND_PATCH_VERSION)},
            {"heuristics", "A"},
            {"execution_plans", graph_->get_execution_plan_count()},
            {"plan", plan_},
            {"workspace_bytes", workspace_.bytes()}};
  }

 private:
  std::shared_ptr<fe::graph::Graph> graph_;
  cudnnHandle_t handle_;
  KernelBuffer workspace_;
  std::unordered_map<std::int64_t, void*> pointers_;  // the variant pack: uid -> device pointer
  std::string plan_;
};
#endif

class Cudnn final : public KernelImplementation {
 public:
  Cudnn() : KernelImplementation(Target::gpu) {}

  bool writes_lse() const override { return true; }  // cuDNN's stats

  std::uint64_t predicted_bytes(const Case& c) const override { return tensor_bytes(c) + kWorkspaceAllowance; }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    (void)rates;
    return c.flops() / 300e12 + 1e-5;  // loose: well under the Hopper tensor-core peak, as for cuda.fa3
  }

 protected:
  std::string kernel_name() const override { return "cudnn"; }
  bool top_left_mask() const override { return true; }  // set_causal_mask

  std::string kernel_supports(const Case& c) const override { return cudnn_graph_support(c, gpu_sm_version()); }

  std::unique_ptr<KernelRun> make_run(const Case& c, KernelTensors& tensors) const override {
#if defined(FAPROBE_CUDNN_GRAPH)
    return std::make_unique<CudnnRun>(c, tensors);
#else
    (void)tensors;
    throw std::logic_error(fmt::format("cuda.cudnn cannot run {}: {}", c.label(), cudnn_graph_support(c, 0)));
#endif
  }
};

}  // namespace

std::string cudnn_graph_support(const Case& c, int sm_version) {
#if !defined(FAPROBE_CUDNN_GRAPH)
  (void)c;
  (void)sm_version;
#if defined(FAPROBE_CUDNN_MISSING)
  return FAPROBE_CUDNN_MISSING;
#elif defined(FAPROBE_WITH_CUDA)
  return "built without the cudnn-frontend headers";
#else
  return "built without CUDA (configure with nvcc on the PATH, FAPROBE_ENABLE_CUDA=ON)";
#endif
#else
  if (c.dtype != DType::fp16 && c.dtype != DType::bf16) {
    return fmt::format("{} is not supported: cuda.cudnn builds cuDNN's fp16/bf16 SDPA graph", to_string(c.dtype));
  }
  const gpu::CudnnLibrary& library = loaded_cudnn();
  if (!library.available()) return fmt::format("cuDNN unavailable: {}", library.reason_unavailable);
  try {
    if (const fe::error_t status = sdpa_graph(c, sm_version)->validate(); status.is_bad()) {
      return fmt::format("cuDNN {} refuses it: {}", library.version_text(), status.err_msg);
    }
  } catch (const std::exception& error) {
    return fmt::format("cuDNN {}: {}", library.version_text(), error.what());
  }
  return "";
#endif
}

std::unique_ptr<Implementation> make_cudnn() { return std::make_unique<Cudnn>(); }

}  // namespace faprobe::cuda
