// cuda.fa1 (and emu.fa1) — FlashAttention-1 (Dao et al. 2022, Algorithm 1) with its parallelization: one
// CTA per (batch, head), walking every key block and, inside it, every query block. O, the row max m and
// the row sum l live in an fp32 global-memory workspace between key blocks and are rescaled and
// renormalized at every step. The kernel, its tiling and its costs are described in cuda/fa1/fa1.cuh;
// this file is the implementation's shell: support, predictions, the workspace.
//
// Why keep it: the sweep shows the FA-1 → FA-2 step the seed describes. With batch·heads CTAs the GPU is
// only full when batch·heads ≥ a few times the SM count (132 on an H200), and every (key block, query
// block) step reads and writes the query block's O, m and l in HBM: 2·(4·d + 8) bytes per query row per
// key block, which FA-2's loop order (query blocks outer, O in registers) removes.
#include <fmt/format.h>

#include "cuda/attention_args.hpp"
#include "cuda/factories.hpp"
#include "cuda/kernel_implementation.hpp"

namespace faprobe::cuda {
namespace {

class Fa1Run final : public KernelRun {
 public:
  Fa1Run(const Case& c, KernelTensors& tensors, Target target) : args_(KernelImplementation::attention_args(c, tensors)) {
    workspace_ = KernelBuffer(target, fa1_workspace_bytes(args_), AllocKind::workspace);
    args_.workspace = workspace_.data();
  }
  void forward(const Launch& launch) override { fa1_forward(launch, args_); }
  nlohmann::json details() const override {
    const KernelShape shape = fa1_shape(args_.dtype, args_.head_dim);
    return {{"block_q", shape.block_q},
            {"block_k", shape.block_k},
            {"threads", shape.threads},
            {"shared_bytes", shape.shared_bytes},
            {"grid", args_.batch * args_.heads},
            {"workspace_bytes", workspace_.bytes()}};
  }

 private:
  AttentionArgs args_;
  KernelBuffer workspace_;
};

class Fa1 final : public KernelImplementation {
 public:
  using KernelImplementation::KernelImplementation;

  bool writes_lse() const override { return true; }

  std::uint64_t predicted_bytes(const Case& c) const override {
    return tensor_bytes(c) + fa1_workspace_bytes(cuda::attention_args(c, nullptr, nullptr, nullptr, nullptr));
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    (void)rates;
    // mma.sync m16n8k16 instructions per forward call (QKᵀ and PV, the causal share only).
    const double mmas = c.flops() / (2.0 * 16 * 8 * 16);
    if (target() == Target::gpu) return c.flops() / 50e12 + 1e-5;  // loose: FA-1 reaches a fraction of peak
    return mmas * 12e-6;  // emulated: ~12 µs per warp-wide mma.sync with its ldmatrix and shuffles
  }

 protected:
  std::string kernel_name() const override { return "fa1"; }
  std::string kernel_supports(const Case& c) const override { return fa1_supports(c.dtype, c.head_dim); }
  std::unique_ptr<KernelRun> make_run(const Case& c, KernelTensors& tensors) const override {
    return std::make_unique<Fa1Run>(c, tensors, target());
  }
};

}  // namespace

std::unique_ptr<Implementation> make_fa1(Target target) { return std::make_unique<Fa1>(target); }

}  // namespace faprobe::cuda
