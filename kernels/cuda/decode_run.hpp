// What cuda.decode and cuda.decode-splitk share (kernels/cuda/decode/ holds their one kernel): the forward
// call over a case's tensors with a given split count and its workspace, the record's details, and the
// predictions. The two implementations differ only in the split count: 1, or FlashDecoding's heuristic
// (decode/splits.hpp) unless the case forces one (--splits).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include "cuda/decode/splits.hpp"
#include "cuda/kernel_implementation.hpp"

namespace faprobe::cuda {

// CTAs of the unsplit attention grid: batch · kv_heads · ceil(group / 16).
inline std::int64_t decode_ctas(const Case& c) {
  return c.batch * c.kv_heads * decode::head_chunks(static_cast<int>(c.group_size()));
}

// What the split rule (decode/splits.hpp) knows of a case and the kernel's shape, before the GPU's SMs and
// occupancy: the unsplit grid, the longest entry's keys, the key block, and two key blocks per warp at least.
inline decode::SplitInputs decode_split_inputs(const Case& c, const KernelShape& shape) {
  decode::SplitInputs inputs;
  inputs.ctas = decode_ctas(c);
  inputs.longest_keys = c.seq_k;
  inputs.block_k = static_cast<int>(shape.block_k);
  inputs.min_split_keys = static_cast<int>(2 * (shape.threads / 32) * shape.block_k);
  return inputs;
}

// The splits a prediction assumes: the case's --splits, else the most the rule may choose (its choice needs
// the GPU's occupancy, which the parent of an isolated run does not ask for), so that it bounds the run.
inline std::int64_t decode_predicted_splits(const Case& c) {
  if (c.splits > 0) return c.splits;
  const KernelShape shape = decode_shape(c.dtype, c.head_dim);
  if (shape.threads == 0) return 1;
  return decode::most_splits(decode_split_inputs(c, shape));
}

// Bytes split-K adds to the unsplit kernel's: its attention kernel writes fp32 partial outputs and LSEs
// (splits · batch · heads · (d + 1) · 4 bytes) where it would write O, and the combine kernel reads them all
// back and writes O.
inline double decode_combine_bytes(const Case& c, std::int64_t splits) {
  if (splits <= 1) return 0.0;
  return 2.0 * double(splits * c.batch * c.heads * (c.head_dim + 1)) * sizeof(float);
}

class DecodeRun final : public KernelRun {
 public:
  // split_k: choose the split count (the case's --splits, else the heuristic); otherwise one split.
  DecodeRun(Target target, const Case& c, KernelTensors& tensors, bool split_k)
      : args_(KernelImplementation::attention_args(c, tensors)),
        shape_(decode_shape(c.dtype, c.head_dim)),
        ctas_(decode_ctas(c)) {
    if (split_k) {
      sms_ = target_sms(target);
      ctas_per_sm_ = decode_ctas_per_sm(Launch{target, nullptr}, c.dtype, c.head_dim);
      decode::SplitInputs inputs = decode_split_inputs(c, shape_);
      inputs.sms = sms_;
      inputs.ctas_per_sm = ctas_per_sm_;
      args_.splits = c.splits > 0 ? c.splits : decode::choose_splits(inputs);
      slot_fill_ = decode::slot_fill(inputs, static_cast<int>(args_.splits));
    }
    workspace_ = KernelBuffer(target, decode_workspace_bytes(args_), AllocKind::workspace);
    args_.workspace = workspace_.data();
  }

  void forward(const Launch& launch) override { decode_forward(launch, args_); }

  nlohmann::json details() const override {
    nlohmann::json details{{"splits", args_.splits},
                           {"heads_per_cta", shape_.block_q},
                           {"block_k", shape_.block_k},
                           {"threads", shape_.threads},
                           {"shared_bytes", shape_.shared_bytes},
                           {"grid", args_.splits * ctas_}};
    if (sms_ > 0) {
      details["sms"] = sms_;
      details["ctas_per_sm"] = ctas_per_sm_;
      details["slot_fill"] = std::round(slot_fill_ * 1000.0) / 1000.0;  // of the slots of its waves
    }
    if (args_.page_size > 0) details["page_size"] = args_.page_size;
    return details;
  }

 private:
  AttentionArgs args_;
  KernelShape shape_;
  KernelBuffer workspace_;
  std::int64_t ctas_ = 0;  // of the unsplit grid
  int sms_ = 0, ctas_per_sm_ = 0;
  double slot_fill_ = 0.0;
};

// Both implementations: support, the layouts they take, the predictions, and the run, with one split
// (cuda.decode) or split-K's choice (cuda.decode-splitk).
template <bool kSplitK>
class DecodeImplementation final : public KernelImplementation {
 public:
  using KernelImplementation::KernelImplementation;

  bool writes_lse() const override { return true; }  // by the attention kernel, or split-K's combine

  std::uint64_t predicted_bytes(const Case& c) const override {
    // Split-K's partials at the most splits it may use (decode_predicted_splits).
    const std::int64_t splits = kSplitK ? decode_predicted_splits(c) : 1;
    if (splits <= 1) return tensor_bytes(c);
    return tensor_bytes(c) + std::uint64_t(splits * c.batch * c.heads * (c.head_dim + 1)) * sizeof(float);
  }

  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    (void)rates;
    if (target() == Target::gpu) {
      // Loose (far below an H200's HBM rate, and ~10 µs a launch): K, V, Q and O once, and with split-K the
      // combine step's traffic and its own launch.
      const std::int64_t splits = kSplitK ? decode_predicted_splits(c) : 1;
      const int launches = splits > 1 ? 2 : 1;
      return (c.min_bytes() + decode_combine_bytes(c, splits)) / 0.5e12 + launches * 1e-5;
    }
    // Emulated: ~12 µs per warp-wide mma.sync with its ldmatrix; the m16 tile holds 16 query heads whatever
    // the group, so the count is that of 16 rows per CTA.
    const double padded_flops = 4.0 * double(decode_ctas(c)) * 16.0 * c.avg_keys() * double(c.head_dim);
    return padded_flops / (2.0 * 16 * 8 * 16) * 12e-6;
  }

 protected:
  std::string kernel_supports(const Case& c) const override {
    if (c.mode != Mode::decode || c.seq_q != 1) return "decode implementations need --mode decode (seq_q = 1)";
    return decode_supports(c.dtype, c.head_dim);
  }
  KvLayouts kv_layouts() const override { return {/*paged=*/true, /*varlen=*/true}; }
  std::string kernel_name() const override { return kSplitK ? "decode-splitk" : "decode"; }
  std::unique_ptr<KernelRun> make_run(const Case& c, KernelTensors& tensors) const override {
    return std::make_unique<DecodeRun>(target(), c, tensors, kSplitK);
  }
};

}  // namespace faprobe::cuda
