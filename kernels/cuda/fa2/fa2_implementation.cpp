// cuda.fa2 (and emu.fa2) — FlashAttention-2's forward pass: one CTA per (query block, head, batch), each
// holding its rows' O, m and l in registers over one pass through the keys, normalizing once at the end.
// The kernel, its tiling and its costs are described in cuda/fa2/fa2.cuh; this file is the
// implementation's shell: support, predictions, the launch details, and the tile each case runs (plain cuda.fa2:
// the one fa2/CMakeLists.txt marks for the case; cuda.fa2@<tile>: that one).
//
// Against cuda.fa1 (the seed's FA-1 → FA-2 step): the grid has ceil(seq_q / 64) times more CTAs, so one
// (batch, head) fills the GPU at long sequences, and O never goes through HBM between key blocks.
#include "cuda/fa2/fa2_launch.hpp"
#include "cuda/factories.hpp"
#include "cuda/kernel_implementation.hpp"

namespace faprobe::cuda {
namespace {

class Fa2Run final : public KernelRun {
 public:
  Fa2Run(const Case& c, KernelTensors& tensors, const Tile& tile, nlohmann::json tile_details)
      : args_(KernelImplementation::attention_args(c, tensors)), tile_(tile), tile_details_(std::move(tile_details)) {}
  void forward(const Launch& launch) override { fa2_forward(launch, args_, tile_); }
  nlohmann::json details() const override {
    const KernelShape shape = fa2_shape(args_.dtype, args_.head_dim, tile_);
    const std::int64_t query_blocks = (args_.seq_q + shape.block_q - 1) / shape.block_q;
    nlohmann::json details = tile_details_;
    details.update({{"block_q", shape.block_q},
                    {"block_k", shape.block_k},
                    {"threads", shape.threads},
                    {"shared_bytes", shape.shared_bytes},
                    {"grid", query_blocks * args_.heads * args_.batch}});
    return details;
  }

 private:
  AttentionArgs args_;
  Tile tile_;
  nlohmann::json tile_details_;
};

class Fa2 final : public TiledKernelImplementation {
 public:
  using TiledKernelImplementation::TiledKernelImplementation;

  bool writes_lse() const override { return true; }

  std::uint64_t predicted_bytes(const Case& c) const override { return tensor_bytes(c); }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    (void)rates;
    // mma.sync m16n8k16 instructions per forward call (QKᵀ and PV, the causal share only).
    const double mmas = c.flops() / (2.0 * 16 * 8 * 16);
    if (target() == Target::gpu) return c.flops() / 150e12 + 1e-5;  // loose: well under the tensor-core peak
    return mmas * 12e-6;  // emulated: ~12 µs per warp-wide mma.sync with its ldmatrix and shuffles
  }

 protected:
  std::string kernel() const override { return "fa2"; }
  const TileList& instantiations() const override { return fa2_instantiations(); }
  std::string kernel_supports(const Case& c) const override {
    std::string reason = fa2_supports(c, tile());
    if (reason.empty() && (c.heads > 65535 || c.batch > 65535))
      reason = "the fa2 kernel's grid takes at most 65535 heads and 65535 batch entries";
    return reason;
  }
  std::unique_ptr<KernelRun> make_run(const Case& c, KernelTensors& tensors) const override {
    const Tile chosen = tile_for(c);
    return std::make_unique<Fa2Run>(c, tensors, chosen, tile_details(chosen));
  }
};

}  // namespace

std::unique_ptr<Implementation> make_fa2(Target target) { return std::make_unique<Fa2>(target, std::nullopt); }

std::vector<std::unique_ptr<Implementation>> make_fa2_variants(Target target) {
  return make_tile_variants<Fa2>(target, fa2_instantiations());
}

}  // namespace faprobe::cuda
