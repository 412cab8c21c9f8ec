// A plugin's CPU implementation (FAPROBE_DEVICE_CPU, include/faprobe/plugin.h) as a faprobe
// implementation: plugin.<name>.
//
// faprobe owns everything around the plugin's run, exactly as for its own CPU kernels: Q, K and V from the
// input generator in the case's K/V layout (make_inputs), O (and the LSE where the plugin writes one) from
// the counting allocator and poisoned with NaN before the checked run, the workspace the plugin asks for
// allocated once per case (so no sample pays for it), and the wall clock around each call of run. What it
// cannot know is the plugin's speed: the time prediction is an ideal kernel's (plugin_abi.hpp), so that
// --max-time skips only cases no kernel could finish in time.
//
// Cases run in a child process by default (isolate_by_default): a plugin is code faprobe has never seen,
// and a crash then costs one `failed` record.
#include <chrono>
#include <memory>
#include <optional>

#include <omp.h>

#include "plugin/plugin_abi.hpp"
#include "plugin/adapters.hpp"
#include "model/tensor.hpp"

namespace faprobe::plugin {
namespace {

class CpuPluginCase final : public PreparedCase {
 public:
  CpuPluginCase(const Descriptor& descriptor, const Case& c)
      : descriptor_(descriptor), case_(c), abi_(c), inputs_(make_inputs(c)), output_(make_output(c)),
        call_(descriptor, cuda::Target::emulator) {  // Target::emulator: tracked host memory
    if (descriptor.writes_lse()) lse_.emplace(c);
    const std::uint64_t workspace_bytes = descriptor.workspace_bytes(c);
    if (workspace_bytes != 0) workspace_ = HostAllocation(std::size_t(workspace_bytes), AllocKind::workspace);
    tensors_ = abi_tensors(inputs_.q.data<void>(), inputs_.k.data<void>(), inputs_.v.data<void>(),
                           output_.data<void>(), lse_ ? lse_->data() : nullptr, inputs_.layout,
                           inputs_.layout.seq_starts.data(), inputs_.layout.block_table.data(), workspace_.data(),
                           std::size_t(workspace_bytes));
  }

  void poison_outputs() override {
    fill_nan(output_);
    if (lse_) fill_nan(*lse_);
  }

  double timed_run() override {
    call_.context().threads = omp_get_max_threads();  // --threads, set by the runner before the case
    const auto start = std::chrono::steady_clock::now();
    call_(abi_, tensors_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  const HostTensor& output() override { return output_; }
  const LseTensor* lse() override { return lse_ ? &*lse_ : nullptr; }
  const AttentionInputs* host_inputs() const override { return &inputs_; }
  nlohmann::json details() const override { return {{"plugin", descriptor_.library}}; }

 private:
  StdoutToStderr redirect_;  // first: for as long as the plugin may be called
  const Descriptor& descriptor_;
  Case case_;
  AbiCase abi_;
  AttentionInputs inputs_;
  HostTensor output_;
  std::optional<LseTensor> lse_;
  HostAllocation workspace_;
  faprobe_tensors tensors_{};
  RunCall call_;
};

class CpuPlugin final : public Implementation {
 public:
  explicit CpuPlugin(Descriptor descriptor) : descriptor_(std::move(descriptor)) {}

  std::string name() const override { return descriptor_.name(); }
  std::string device() const override { return "cpu"; }
  std::string supports(const Case& c) const override { return descriptor_.supports(c); }
  bool isolate_by_default() const override { return true; }

  std::uint64_t predicted_bytes(const Case& c) const override {
    return stored_tensor_bytes(c, descriptor_.writes_lse()) + descriptor_.workspace_bytes(c);
  }
  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    return ideal_seconds(c, stored_tensor_bytes(c, descriptor_.writes_lse()), rates.gemm_gflops,
                         rates.memory_gbytes_per_s);
  }
  std::unique_ptr<PreparedCase> prepare(const Case& c) const override {
    return std::make_unique<CpuPluginCase>(descriptor_, c);
  }

 private:
  Descriptor descriptor_;
};

}  // namespace

std::unique_ptr<Implementation> make_cpu_plugin(Descriptor descriptor) {
  return std::make_unique<CpuPlugin>(std::move(descriptor));
}

}  // namespace faprobe::plugin
