// The shell shared by every implementation built on faprobe's CUDA kernels, each registered twice from one
// class: `cuda.<kernel>` on the GPU and `emu.<kernel>` under the CPU emulation (device "emulated sm_90a",
// checked like any other, never timed). The shell owns what is the same for all of them:
//   - buffers on the target (KernelBuffer): the GPU's stream-ordered pool, or tracked host memory for the
//     emulator, so the record's peak and workspace bytes come from the right counter;
//   - Q, K and V filled on the target by the device input generator (bit-identical to the host's), in the case's
//     input distribution, Q and K rotated where the implementation's qk_transform() says so;
//   - O, and for kernels that write one (writes_lse()) the LSE, poisoned with NaN before a checked run:
//     0xFF bytes by cudaMemsetAsync on faprobe's stream (ordered before the launches), or memset into the
//     emulated device memory, so an element the kernel does not write reaches the checker as NaN;
//   - timing (CUDA events with the L2 flushed before each sample, inside an NVTX range named after the
//     implementation and case), O and the LSE copied back for the checker after each run (a copy is made
//     once per run, when first asked for, never kept from an earlier run), and the GPU-or-not support rule.
// A kernel implementation supplies its name, its own support rule, predictions, whether its kernel writes
// the LSE, and a KernelRun: the workspaces it allocates and the launches of one forward call.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda/common/emu/device.hpp"
#include "cuda/common/tile_list.hpp"
#include "cuda/launchers.hpp"
#include "cuda/runtime/gpu.hpp"
#include "model/implementation.hpp"
#include "model/kv_layout.hpp"
#include "model/memory.hpp"

namespace faprobe::cuda {

// The SMs of the target: the GPU's, or the emulated device's (emu/device.hpp), so that an emulated run makes
// the choices the GPU would (decode splits, fa3's persistent grid); the emulated device's too when no GPU is
// found.
inline int target_sms(Target target) {
  if (target == Target::emulator) return emu::emulated_device.sm_count;
  const std::vector<gpu::DeviceInfo> found = gpu::devices();
  return found.empty() ? emu::emulated_device.sm_count : found.front().sm_count;
}

// A buffer on the target: device memory from the GPU harness's pool, or a tracked host allocation.
class KernelBuffer {
 public:
  KernelBuffer() = default;
  KernelBuffer(Target target, std::size_t bytes, AllocKind kind);

  void* data() const { return device_.data() != nullptr ? device_.data() : host_.data(); }
  std::size_t bytes() const { return bytes_; }
  template <class T> T* as() const { return static_cast<T*>(data()); }

 private:
  gpu::DeviceBuffer device_;
  HostAllocation host_;
  std::size_t bytes_ = 0;
};

// Q, K, V (filled) and O of one case on the target, in the case's dtype (O in output_dtype(dtype)); K and V
// in the case's K/V layout (layout.rows rows), with the layout's offsets and block table copied to the target.
// lse: fp32 (batch, heads, seq_q) for a kernel that writes one (KernelImplementation::writes_lse()), else
// empty (0 bytes).
struct KernelTensors {
  KernelBuffer q, k, v, o, lse;
  QkTransform transform = QkTransform::none;  // the implementation's (Implementation::qk_transform): how Q, K were filled
  KvLayout layout;                      // on the host
  KernelBuffer seq_starts, block_table;  // the layout's arrays on the target (int32)
};

// One forward call of a kernel implementation for one case, with the workspaces it allocated.
class KernelRun {
 public:
  virtual ~KernelRun() = default;
  virtual void forward(const Launch& launch) = 0;
  virtual nlohmann::json details() const { return nlohmann::json::object(); }
};

class KernelImplementation : public Implementation {
 public:
  explicit KernelImplementation(Target target) : target_(target) {}

  std::string name() const override;  // "cuda.<kernel>" or "emu.<kernel>" (a plugin's: "plugin.<name>")
  // "cuda.<kernel>" or "emu.<kernel>" for a kernel name: a variant's variant_of().
  std::string base_name(const std::string& kernel) const;
  std::string device() const final;  // the GPU's name (or "cuda (no device)"), or "emulated sm_90a"
  bool timed() const final { return target_ == Target::gpu; }
  bool runs_on_gpu() const final { return target_ == Target::gpu; }
  bool isolate_by_default() const final { return target_ == Target::gpu; }
  std::uint64_t default_memory_limit() const final;
  std::string default_memory_limit_source() const final;
  std::string supports(const Case& c) const final;  // a GPU present (for cuda.*), K/V layout, mask, kernel_supports
  std::unique_ptr<PreparedCase> prepare(const Case& c) const final;

  Target target() const { return target_; }
  // The workspaces and launches of one forward call of case c over its tensors (allocated by the shell).
  virtual std::unique_ptr<KernelRun> make_run(const Case& c, KernelTensors& tensors) const = 0;
  // The AttentionArgs of a case over its tensors, K/V layout included, and the LSE when the tensors have
  // one (no workspace).
  static AttentionArgs attention_args(const Case& c, const KernelTensors& tensors);
  // Whether the kernel writes AttentionArgs::lse (natural log, −inf for a row that sees no key): the shell
  // then allocates it, poisons it with O, and the checker compares it with the reference's (PreparedCase::lse).
  virtual bool writes_lse() const { return false; }

 protected:
  virtual std::string kernel_name() const = 0;                   // "naive", "fa1"
  virtual std::string kernel_supports(const Case& c) const = 0;  // "" or the reason
  // The K/V layouts the kernel takes beyond contiguous equal lengths.
  virtual KvLayouts kv_layouts() const { return {}; }
  // Whether it takes --mask causal-top-left (PyTorch's is_causal) as well as the bottom-right causal mask.
  virtual bool top_left_mask() const { return false; }
  // Bytes of Q, K, V in the case's dtype, O in output_dtype and the LSE where the kernel writes one: the
  // part of predicted_bytes every kernel shares.
  std::uint64_t tensor_bytes(const Case& c) const;

 private:
  Target target_;
};

// A kernel built in tiles (cuda/common/tile_list.hpp: cuda.fa2, cuda.fa3), registered twice over: the plain
// implementation runs, for each case, the tile its kernel's list marks for the case's dtype, head_dim and mask;
// each tile built is also an implementation of its own, the variant "<implementation>@<tile>", run only when
// named. A subclass says which kernel and list it is and makes the run for a chosen tile.
class TiledKernelImplementation : public KernelImplementation {
 public:
  TiledKernelImplementation(Target target, std::optional<Tile> tile) : KernelImplementation(target), tile_(tile) {}
  std::string variant_of() const final { return tile_ ? base_name(kernel()) : ""; }

 protected:
  virtual std::string kernel() const = 0;  // "fa2"
  virtual const TileList& instantiations() const = 0;
  std::string kernel_name() const final { return tile_ ? kernel() + "@" + tile_->name() : kernel(); }
  // The tile case c runs with: the variant's own, or the default the list marks for it (supports() checked
  // that there is one).
  Tile tile_for(const Case& c) const { return tile_ ? *tile_ : *default_tile(instantiations(), c.dtype, c.head_dim, c.mask); }
  const std::optional<Tile>& tile() const { return tile_; }
  // The record's details of the tile: its name and how it was chosen.
  nlohmann::json tile_details(const Tile& chosen) const {
    return {{"tile", chosen.name()}, {"tile_choice", tile_ ? "named" : "the default for its dtype, head_dim and mask"}};
  }

 private:
  std::optional<Tile> tile_;  // nullopt: the plain implementation
};

// One Impl (a TiledKernelImplementation taking (target, tile)) per tile of its list: the variants.
template <class Impl>
std::vector<std::unique_ptr<Implementation>> make_tile_variants(Target target, const TileList& list) {
  std::vector<std::unique_ptr<Implementation>> variants;
  for (const Tile& tile : distinct_tiles(list)) variants.push_back(std::make_unique<Impl>(target, tile));
  return variants;
}

}  // namespace faprobe::cuda
