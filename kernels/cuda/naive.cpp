// cuda.naive (and emu.naive) — textbook attention on the GPU as three separate steps, each through global
// memory: S = Q·Kᵀ by cuBLAS into a materialized fp32 (batch, heads, seq_q, seq_k) tensor, P =
// softmax(scale·S) by faprobe's softmax kernel (cuda/naive/softmax.cuh), which applies the causal mask by
// index (no mask tensor), written in the case's dtype, then O = P·V by cuBLAS. The baseline the flash
// kernels are measured against, and the seed table's "standard attention" row.
//
// GEMMs: cublasGemmStridedBatchedEx with fp32 accumulation (CUBLAS_COMPUTE_32F: no TF32 for fp32 inputs,
// so fp32 cases are full fp32), one call per (batch entry, KV head) with the GQA group as the batch (K and
// V stride 0 inside a group) — one call per batch entry for MHA. Row-major (seq, heads, head_dim) tensors
// are read as column-major matrices with leading dimension heads·head_dim, so no transposes are copied:
// Sᵀ = K·Qᵀ (m = seq_k, n = seq_q, k = head_dim) and Oᵀ = Vᵀ·Pᵀ (m = head_dim, n = seq_q, k = seq_k).
// The emulated twin computes the two GEMMs with Eigen in fp32 on the host (cuBLAS is not faprobe's code)
// and runs the softmax kernel under the emulator.
//
// Napkin math (seed table: batch 8, heads 32, head_dim 128, causal, fp16, seq 8192; H200):
//   FLOPs      4·b·h·s²·d = 70.4 TFLOP-equivalents of GEMM work (the full square: masked scores are
//              computed, then zeroed by the softmax) — twice the causal FLOPs faprobe credits.
//   Bytes      S written and read (4 B), P written and read (2 B): 12·b·h·s² = 206 GB, about 43 ms at
//              ~4.8 TB/s; the GEMMs at ~600 TFLOP/s take ~120 ms. Compute-bound on paper at this size,
//              memory-bound for small head_dim.
//   Memory     S (4 B) + P (dtype) per score: 6·b·h·s² = 103 GB at seq 8192 — fits in 141 GB — and 412 GB
//              at 16384: skipped by its predicted memory, as the seed table's OOM rows; plus cuBLAS's
//              workspace (32 MiB on Hopper) and Q, K, V, O.
#include <algorithm>
#include <cstring>
#include <limits>

#include "model/eigen.hpp"
#include <fmt/format.h>

#include "cuda/factories.hpp"
#include "cuda/kernel_implementation.hpp"
#include "cuda/runtime/gpu.hpp"

#if defined(FAPROBE_WITH_CUDA)
#include <cublas_v2.h>
#endif

namespace faprobe::cuda {
namespace {

std::uint64_t score_elements(const Case& c) {
  return std::uint64_t(c.batch) * std::uint64_t(c.heads) * std::uint64_t(c.seq_q) * std::uint64_t(c.seq_k);
}

#if defined(FAPROBE_WITH_CUDA)
cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::fp32: return CUDA_R_32F;
    case DType::fp16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp8_e4m3: break;
  }
  throw std::invalid_argument("cuda.naive takes fp32, fp16, bf16");
}

// The two GEMMs of one forward call on the GPU (see the file comment for the column-major reading).
void gemms_on_gpu(const Case& c, const KernelTensors& tensors, float* scores, void* probs, bool scores_step) {
  auto handle = static_cast<cublasHandle_t>(gpu::cublas_handle());
  const cudaDataType_t type = cuda_type(c.dtype);
  const std::size_t element = dtype_bytes(c.dtype);
  const std::int64_t group = c.group_size();
  const bool per_batch = group == 1;  // MHA: all heads of a batch entry in one call
  const std::int64_t calls_per_batch = per_batch ? 1 : c.kv_heads;
  const int batch_count = int(per_batch ? c.heads : group);
  // Leading dimensions (cuBLAS takes them as int; strides between matrices as long long).
  const int q_row = int(c.heads * c.head_dim), kv_row = int(c.kv_heads * c.head_dim);
  const int ld_scores = int(c.seq_k), head_dim = int(c.head_dim);
  const long long score_stride = c.seq_q * c.seq_k;
  const float one = 1.0f, zero = 0.0f;
  const auto* q = static_cast<const char*>(tensors.q.data());
  const auto* k = static_cast<const char*>(tensors.k.data());
  const auto* v = static_cast<const char*>(tensors.v.data());
  auto* o = static_cast<char*>(tensors.o.data());
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t call = 0; call < calls_per_batch; ++call) {
      const std::int64_t first_head = per_batch ? 0 : call * group;
      const std::int64_t kv_head = per_batch ? 0 : call;
      const long long kv_stride = per_batch ? c.head_dim : 0;  // next head's K/V, or the same K/V in a group
      const std::size_t q_offset = std::size_t((b * c.seq_q * c.heads + first_head) * c.head_dim) * element;
      const std::size_t kv_offset = std::size_t((b * c.seq_k * c.kv_heads + kv_head) * c.head_dim) * element;
      const std::size_t score_offset = std::size_t((b * c.heads + first_head) * score_stride);
      if (scores_step) {
        // Sᵀ (seq_k x seq_q, ld seq_k) = K (as Kᵀ: op T of a head_dim x seq_k matrix) · Qᵀ (head_dim x seq_q).
        FAPROBE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(c.seq_k), int(c.seq_q),
                                                head_dim, &one, k + kv_offset, type, kv_row, kv_stride,
                                                q + q_offset, type, q_row, head_dim, &zero,
                                                scores + score_offset, CUDA_R_32F, ld_scores, score_stride,
                                                batch_count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      } else {
        // Oᵀ (head_dim x seq_q, ld heads·head_dim) = Vᵀ (head_dim x seq_k) · Pᵀ (seq_k x seq_q, ld seq_k).
        FAPROBE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, head_dim, int(c.seq_q),
                                                int(c.seq_k), &one, v + kv_offset, type, kv_row, kv_stride,
                                                static_cast<const char*>(probs) + score_offset * element, type,
                                                ld_scores, score_stride, &zero, o + q_offset, type, q_row,
                                                head_dim, batch_count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    }
  }
}
#endif

// The emulated twin's GEMMs: fp32 on the host over the dtype's values, as cuBLAS computes them.
template <class Storage>
void gemms_on_host(const Case& c, const KernelTensors& tensors, float* scores, const void* probs, bool scores_step) {
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strided = Eigen::Map<const Eigen::Matrix<Storage, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                             Eigen::OuterStride<>>;
  const auto* q = tensors.q.as<const Storage>();
  const auto* k = tensors.k.as<const Storage>();
  const auto* v = tensors.v.as<const Storage>();
  auto* o = tensors.o.as<Storage>();
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::int64_t kvh = c.kv_head_of(h);
      const Strided k_head(k + (b * c.seq_k * c.kv_heads + kvh) * c.head_dim, c.seq_k, c.head_dim,
                           Eigen::OuterStride<>(c.kv_heads * c.head_dim));
      const std::size_t score_offset = std::size_t((b * c.heads + h) * c.seq_q * c.seq_k);
      if (scores_step) {
        const Strided q_head(q + (b * c.seq_q * c.heads + h) * c.head_dim, c.seq_q, c.head_dim,
                             Eigen::OuterStride<>(c.heads * c.head_dim));
        Eigen::Map<RowMatrix> s(scores + score_offset, c.seq_q, c.seq_k);
        s.noalias() = q_head.template cast<float>() * k_head.template cast<float>().transpose();
      } else {
        const Strided v_head(v + (b * c.seq_k * c.kv_heads + kvh) * c.head_dim, c.seq_k, c.head_dim,
                             Eigen::OuterStride<>(c.kv_heads * c.head_dim));
        const Eigen::Map<const Eigen::Matrix<Storage, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> p(
            static_cast<const Storage*>(probs) + score_offset, c.seq_q, c.seq_k);
        const RowMatrix out = p.template cast<float>() * v_head.template cast<float>();
        Eigen::Map<Eigen::Matrix<Storage, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>(
            o + (b * c.seq_q * c.heads + h) * c.head_dim, c.seq_q, c.head_dim,
            Eigen::OuterStride<>(c.heads * c.head_dim)) = out.template cast<Storage>();
      }
    }
  }
}

class NaiveRun final : public KernelRun {
 public:
  NaiveRun(const Case& c, KernelTensors& tensors, Target target)
      : case_(c),
        tensors_(tensors),
        scores_(target, score_elements(c) * sizeof(float), AllocKind::workspace),
        probs_(target, score_elements(c) * dtype_bytes(c.dtype), AllocKind::workspace) {
    if (target == Target::gpu) {
      cublas_workspace_ = KernelBuffer(target, gpu::cublas_workspace_bytes(), AllocKind::workspace);
      gpu::set_cublas_workspace(cublas_workspace_.data(), cublas_workspace_.bytes());
    }
  }
  ~NaiveRun() override {
    if (cublas_workspace_.data() != nullptr) {
      try {
        gpu::set_cublas_workspace(nullptr, 0);  // cuBLAS must not keep a pointer into freed memory
      } catch (...) {
      }
    }
  }

  void forward(const Launch& launch) override {
    gemms(launch, /*scores_step=*/true);
    SoftmaxArgs softmax;
    softmax.scores = scores_.as<const float>();
    softmax.probs = probs_.data();
    softmax.dtype = case_.dtype;
    softmax.batch_heads = case_.batch * case_.heads;
    softmax.seq_q = case_.seq_q;
    softmax.seq_k = case_.seq_k;
    softmax.causal = case_.causal();
    softmax.scale = float(case_.scale());
    naive_softmax(launch, softmax);
    gemms(launch, /*scores_step=*/false);
  }

  nlohmann::json details() const override {
    return {{"scores_bytes", scores_.bytes()},
            {"probs_bytes", probs_.bytes()},
            {"gemm", "cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F"},
            {"cublas_workspace_bytes", cublas_workspace_.bytes()}};
  }

 private:
  void gemms(const Launch& launch, bool scores_step) {
    if (launch.target == Target::gpu) {
#if defined(FAPROBE_WITH_CUDA)
      gemms_on_gpu(case_, tensors_, scores_.as<float>(), probs_.data(), scores_step);
#endif
      return;
    }
    dispatch_storage(case_.dtype, [&](auto storage) {
      gemms_on_host<decltype(storage)>(case_, tensors_, scores_.as<float>(), probs_.data(), scores_step);
    });
  }

  Case case_;
  KernelTensors& tensors_;
  KernelBuffer scores_, probs_, cublas_workspace_;
};

class Naive final : public KernelImplementation {
 public:
  using KernelImplementation::KernelImplementation;

  std::uint64_t predicted_bytes(const Case& c) const override {
    const std::uint64_t workspace = target() == Target::gpu && built_with_cuda() ? 32ull << 20 : 0;
    return tensor_bytes(c) + score_elements(c) * (sizeof(float) + dtype_bytes(c.dtype)) + workspace;
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    const double gemm_flops = 4.0 * double(score_elements(c)) * double(c.head_dim);
    const double score_bytes = double(score_elements(c)) * 2.0 * double(sizeof(float) + dtype_bytes(c.dtype));
    if (target() == Target::gpu) return gemm_flops / 100e12 + score_bytes / 1e12;  // a loose Ampere/Hopper bound
    // Emulated: host GEMMs, and the softmax kernel at roughly 20 ns per score under the emulator.
    return gemm_flops / (rates.gemm_gflops * 1e9) + double(score_elements(c)) * 20e-9;
  }

 protected:
  std::string kernel_name() const override { return "naive"; }
  std::string kernel_supports(const Case& c) const override {
    if (c.dtype == DType::fp8_e4m3) return "fp8_e4m3 is not supported (cuBLAS and the softmax kernel take fp32, fp16, bf16)";
    if (std::max(c.seq_q, c.seq_k) > std::numeric_limits<int>::max())
      return "a sequence longer than 2^31 − 1 (cuBLAS takes int dimensions)";
    return "";
  }
  std::unique_ptr<KernelRun> make_run(const Case& c, KernelTensors& tensors) const override {
    return std::make_unique<NaiveRun>(c, tensors, target());
  }
};

}  // namespace

std::unique_ptr<Implementation> make_naive(Target target) { return std::make_unique<Naive>(target); }

}  // namespace faprobe::cuda
