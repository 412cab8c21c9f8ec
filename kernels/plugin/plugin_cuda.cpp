// A plugin's CUDA implementation (FAPROBE_DEVICE_CUDA, include/faprobe/plugin.h) as a faprobe
// implementation: plugin.<name>, on the same shell as faprobe's own CUDA kernels (KernelImplementation).
//
// The shell allocates Q, K, V, O (and the LSE) from faprobe's stream-ordered pool on device 0 in the case's
// K/V layout, fills the inputs on the device, poisons the outputs with NaN before the checked run, times
// each call of run between two CUDA events on faprobe's stream (the L2 flushed before each sample, inside
// an NVTX range) and copies the outputs back for the checker; run gets that stream and queues its work on
// it. The plugin's workspace comes from the same pool, once per case, and counts in the record's peak
// bytes. Where there is no GPU (or the build has no CUDA), supports() says so and the case is an
// `unsupported` record with that reason: a CUDA plugin cannot run under faprobe's emulator, which runs only
// kernels written on its instruction layer.
//
// The plugin links its own CUDA runtime (static, nvcc's default, or shared), faprobe another: both run on
// the device's primary context, and CUDA's stream and pointer handles are the driver's, valid in both (not
// yet tried on a GPU: the first GPU run of the CUDA example plugin is what shows it).
#include <memory>

#include "plugin/plugin_abi.hpp"
#include "plugin/adapters.hpp"
#include "model/tensor.hpp"

namespace faprobe::plugin {
namespace {

// One case's forward call: the plugin's workspace from the pool and the case in the ABI's terms.
class CudaPluginRun final : public cuda::KernelRun {
 public:
  CudaPluginRun(const Descriptor& descriptor, const Case& c, const cuda::KernelTensors& tensors)
      : descriptor_(descriptor), abi_(c), call_(descriptor, cuda::Target::gpu) {
    const std::uint64_t workspace_bytes = descriptor.workspace_bytes(c);
    if (workspace_bytes != 0) {
      workspace_ = cuda::KernelBuffer(cuda::Target::gpu, std::size_t(workspace_bytes), AllocKind::workspace);
    }
    tensors_ = abi_tensors(tensors.q.data(), tensors.k.data(), tensors.v.data(), tensors.o.data(),
                           tensors.lse.bytes() != 0 ? tensors.lse.as<float>() : nullptr, tensors.layout,
                           tensors.seq_starts.as<const std::int32_t>(), tensors.block_table.as<const std::int32_t>(),
                           workspace_.data(), std::size_t(workspace_bytes));
  }

  void forward(const cuda::Launch& launch) override {
    call_.context().stream = launch.stream;
    call_(abi_, tensors_);
  }
  nlohmann::json details() const override { return {{"plugin", descriptor_.library}}; }

 private:
  StdoutToStderr redirect_;  // first: for as long as the plugin may be called
  const Descriptor& descriptor_;
  AbiCase abi_;
  cuda::KernelBuffer workspace_;
  faprobe_tensors tensors_{};
  RunCall call_;
};

class CudaPlugin final : public cuda::KernelImplementation {
 public:
  explicit CudaPlugin(Descriptor descriptor)
      : KernelImplementation(cuda::Target::gpu), descriptor_(std::move(descriptor)) {}

  std::string name() const override { return descriptor_.name(); }
  bool writes_lse() const override { return descriptor_.writes_lse(); }
  std::uint64_t predicted_bytes(const Case& c) const override {
    return tensor_bytes(c) + descriptor_.workspace_bytes(c);
  }
  double predicted_seconds(const Case& c, const MachineRates& rates) const override {
    return ideal_seconds(c, tensor_bytes(c), rates.gpu_bf16_gemm_tflops * 1e3, rates.gpu_copy_gbytes_per_s);
  }
  std::unique_ptr<cuda::KernelRun> make_run(const Case& c, cuda::KernelTensors& tensors) const override {
    return std::make_unique<CudaPluginRun>(descriptor_, c, tensors);
  }

 protected:
  std::string kernel_name() const override { return descriptor_.impl->name; }
  std::string kernel_supports(const Case& c) const override { return descriptor_.supports(c); }
  KvLayouts kv_layouts() const override { return {/*paged=*/true, /*varlen=*/true}; }

 private:
  Descriptor descriptor_;
};

}  // namespace

std::unique_ptr<Implementation> make_cuda_plugin(Descriptor descriptor) {
  return std::make_unique<CudaPlugin>(std::move(descriptor));
}

}  // namespace faprobe::plugin
