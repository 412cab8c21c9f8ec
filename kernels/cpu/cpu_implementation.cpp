#include "cpu/cpu_implementation.hpp"

#include <omp.h>

namespace faprobe::cpu {
namespace {

class CpuPreparedCase final : public PreparedCase {
 public:
  CpuPreparedCase(const CpuImplementation& impl, const Case& c)
      : impl_(impl), case_(c), inputs_(make_inputs(c)), output_(make_output(c)) {
    impl_.describe(case_, details_);
  }

  void poison_outputs() override { fill_nan(output_); }

  double timed_run() override {
    const auto start = std::chrono::steady_clock::now();
    impl_.forward({case_, inputs_.q, inputs_.k, inputs_.v, output_, inputs_.layout});
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const HostTensor& output() override { return output_; }
  const AttentionInputs* host_inputs() const override { return &inputs_; }
  nlohmann::json details() const override { return details_; }

 private:
  const CpuImplementation& impl_;
  Case case_;
  AttentionInputs inputs_;
  HostTensor output_;
  nlohmann::json details_ = nlohmann::json::object();
};

}  // namespace

std::string CpuImplementation::supports(const Case& c) const {
  if (c.dtype == DType::fp8_e4m3) {
    return "fp8_e4m3 is not supported: CPU implementations compute on fp32, fp16 or bf16 storage (fp8 cases are "
           "for fp8 tensor-core kernels)";
  }
  if (c.mask == Mask::causal_top_left && !top_left_mask()) return kTopLeftUnsupported;
  return kv_layout_support(c, kv_layouts());
}

std::unique_ptr<PreparedCase> CpuImplementation::prepare(const Case& c) const {
  return std::make_unique<CpuPreparedCase>(*this, c);
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace faprobe::cpu
