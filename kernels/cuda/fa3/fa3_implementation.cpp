// cuda.fa3 (and emu.fa3) — FlashAttention-3's forward pass for Hopper: a producer warpgroup feeding K and V
// by TMA through an mbarrier ring, two or three consumer warpgroups running wgmma and the online softmax in
// pingpong, on a persistent grid. The kernel, its tiling and its costs are described in cuda/fa3/fa3.cuh; this
// file is the implementation's shell: support (sm_90 GPUs only, and a binary with sm_90a code), predictions,
// the launch details, and the tile each case runs: plain cuda.fa3 takes the tile fa3/CMakeLists.txt marks for
// the case's dtype, head_dim and mask, and each tile built is also an implementation of its own,
// cuda.fa3@<block_q>x<block_k> (listed by `faprobe list --variants`), for measuring one against another.
//
// cuda.fa3-incoherent (and emu.fa3-incoherent) is the same fp8 kernel, unchanged, on Q and K under incoherent
// processing (FA-3's "FP8 with incoherent processing", src/model/incoherent.hpp): the device fill writes Q·H·D
// and K·H·D rounded once to e4m3, V as for cuda.fa3, and Q's descale carries the 1/head_dim of the unnormalized
// Hadamard matrix. fp8_e4m3 only; its qk_transform() tells the checker which inputs the kernel consumed.
//
// Against cuda.fa2 (the seed's FA-2 → FA-3 step): the same algorithm, but the loads are one TMA instruction
// per 64-column box issued by one thread, the GEMMs are asynchronous warpgroup-wide wgmma reading shared
// memory directly (no ldmatrix), and the softmax of one consumer hides behind the GEMMs of the others.
#include <utility>

#include <fmt/format.h>

#include "cuda/attention_args.hpp"
#include "cuda/factories.hpp"
#include "cuda/fa3/fa3_launch.hpp"
#include "cuda/kernel_implementation.hpp"

namespace faprobe::cuda {
namespace {

class Fa3Run final : public KernelRun {
 public:
  Fa3Run(const Case& c, KernelTensors& tensors, Target target, const Tile& tile, nlohmann::json tile_details)
      : args_(KernelImplementation::attention_args(c, tensors)), target_(target), tile_(tile),
        tile_details_(std::move(tile_details)) {
    workspace_ = KernelBuffer(target, fa3_workspace_bytes(args_), AllocKind::workspace);  // V^T for fp8_e4m3
    args_.workspace = workspace_.data();
  }
  void forward(const Launch& launch) override { fa3_forward(launch, args_, tile_); }
  nlohmann::json details() const override {
    const KernelShape shape = fa3_shape(args_.dtype, args_.head_dim, tile_);
    const std::int64_t query_blocks = (args_.seq_q + shape.block_q - 1) / shape.block_q;
    const std::int64_t tiles = query_blocks * args_.heads * args_.batch;
    const int sms = target_sms(target_);
    nlohmann::json details = tile_details_;
    details.update({{"block_q", shape.block_q},
                    {"block_k", shape.block_k},
                    {"threads", shape.threads},
                    {"shared_bytes", shape.shared_bytes},
                    {"tiles", tiles},
                    {"grid", std::min<std::int64_t>(tiles, sms)},
                    {"stages", 2},
                    {"workspace_bytes", workspace_.bytes()}});
    return details;
  }

 private:
  AttentionArgs args_;
  Target target_;
  Tile tile_;
  nlohmann::json tile_details_;
  KernelBuffer workspace_;
};

class Fa3 final : public TiledKernelImplementation {
 public:
  // incoherent: cuda.fa3-incoherent, the fp8 kernel on rotated Q and K.
  Fa3(Target target, std::optional<Tile> tile, bool incoherent = false)
      : TiledKernelImplementation(target, std::move(tile)), incoherent_(incoherent) {}

  bool writes_lse() const override { return true; }
  QkTransform qk_transform() const override { return incoherent_ ? QkTransform::incoherent : QkTransform::none; }

  std::uint64_t predicted_bytes(const Case& c) const override {
    return tensor_bytes(c) + fa3_workspace_bytes(cuda::attention_args(c, nullptr, nullptr, nullptr, nullptr));
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    (void)rates;
    if (target() == Target::gpu) return c.flops() / 300e12 + 1e-5;  // loose: half the FA-3 paper's H100 figure
    // emulated: ~1 ns per multiply-accumulate of the wgmma emulation, plus the fibers' switches.
    return c.flops() / 2.0 * 1e-9 + 1e-3;
  }

 protected:
  std::string kernel() const override { return incoherent_ ? "fa3-incoherent" : "fa3"; }
  const TileList& instantiations() const override { return fa3_instantiations(); }
  std::string kernel_supports(const Case& c) const override {
    if (incoherent_ && c.dtype != DType::fp8_e4m3) {
      return fmt::format("incoherent processing rotates Q and K before their rounding to e4m3: fp8_e4m3 only, not {} "
                         "(cuda.fa3 runs it)", to_string(c.dtype));
    }
    if (incoherent_ && !incoherent_head_dim(c.head_dim)) {
      return fmt::format("incoherent processing's Walsh–Hadamard transform needs a power-of-two head_dim up to {}, not {}",
                         incoherent_max_head_dim, c.head_dim);
    }
    std::string reason = fa3_supports(c, tile());
    if (!reason.empty() || target() != Target::gpu) return reason;
    reason = fa3_gpu_missing();
    if (!reason.empty()) return reason;
    const std::vector<gpu::DeviceInfo> found = gpu::devices();
    if (!found.empty() && found.front().compute_major != 9)
      return fmt::format("the fa3 kernel needs an sm_90 GPU (Hopper: wgmma, TMA, setmaxnreg); {} is sm_{}{}",
                         found.front().name, found.front().compute_major, found.front().compute_minor);
    return "";
  }
  std::unique_ptr<KernelRun> make_run(const Case& c, KernelTensors& tensors) const override {
    const Tile chosen = tile_for(c);
    nlohmann::json details = tile_details(chosen);
    if (incoherent_) details["qk_transform"] = "incoherent: Q and K times H·D (Walsh–Hadamard, random signs), not timed";
    return std::make_unique<Fa3Run>(c, tensors, target(), chosen, std::move(details));
  }

 private:
  bool incoherent_ = false;
};

}  // namespace

std::unique_ptr<Implementation> make_fa3(Target target) { return std::make_unique<Fa3>(target, std::nullopt); }

std::unique_ptr<Implementation> make_fa3_incoherent(Target target) {
  return std::make_unique<Fa3>(target, std::nullopt, /*incoherent=*/true);
}

std::vector<std::unique_ptr<Implementation>> make_fa3_variants(Target target) {
  return make_tile_variants<Fa3>(target, fa3_instantiations());
}

}  // namespace faprobe::cuda
