#include "cuda/kernel_implementation.hpp"

#include "cuda/attention_args.hpp"
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "cuda/runtime/gpu.hpp"
#include "model/host_info.hpp"
#include "model/inputs.hpp"
#include "model/tensor.hpp"

namespace faprobe::cuda {

bool built_with_cuda() {
#if defined(FAPROBE_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

KernelBuffer::KernelBuffer(Target target, std::size_t bytes, AllocKind kind) : bytes_(bytes) {
  const std::size_t allocated = bytes == 0 ? 16 : bytes;  // never a null pointer for an empty tensor
  if (target == Target::gpu) {
    device_ = gpu::DeviceBuffer(allocated, kind);
  } else {
    host_ = HostAllocation(allocated, kind);
  }
}

namespace {


std::size_t bytes_of(DType dtype, std::int64_t elements) { return dtype_bytes(dtype) * std::size_t(elements); }

// One kernel implementation prepared for one case: tensors on the target, inputs generated there.
class KernelPreparedCase final : public PreparedCase {
 public:
  KernelPreparedCase(const KernelImplementation& impl, const Case& c)
      : impl_(impl), case_(c), output_(make_output(c)) {
    if (target() == Target::gpu) gpu::reset_peaks();
    launch_.target = target();
    launch_.stream = target() == Target::gpu ? gpu::stream() : nullptr;
    tensors_.layout = make_kv_layout(c);
    const std::int64_t kv_storage = tensors_.layout.rows * c.kv_heads * c.head_dim;  // with a page pool's padding
    tensors_.q = KernelBuffer(target(), bytes_of(c.dtype, c.q_elements()), AllocKind::tensor);
    tensors_.k = KernelBuffer(target(), bytes_of(c.dtype, kv_storage), AllocKind::tensor);
    tensors_.v = KernelBuffer(target(), bytes_of(c.dtype, kv_storage), AllocKind::tensor);
    tensors_.o = KernelBuffer(target(), bytes_of(output_dtype(c.dtype), c.q_elements()), AllocKind::tensor);
    if (impl_.writes_lse()) {
      tensors_.lse = KernelBuffer(target(), std::size_t(lse_bytes(c)), AllocKind::tensor);
      lse_ = LseTensor(c);
    }
    tensors_.seq_starts = copy_ints(tensors_.layout.seq_starts);
    tensors_.block_table = copy_ints(tensors_.layout.block_table);
    tensors_.transform = impl_.qk_transform();
    if (tensors_.transform == QkTransform::incoherent) {
      fill_rotated_qk();
    } else {
      fill_input(launch_, tensors_.q.data(), c.dtype, std::size_t(c.q_elements()), tensor_key(c.seed, TensorId::q),
                 c.inputs);
    }
    fill_kv();
    run_ = impl_.make_run(c, tensors_);
    if (target() == Target::gpu) gpu::synchronize();
  }

  void configure(const MeasureSettings& settings) override { flush_l2_ = settings.flush_l2; }

  // O and the LSE on the target all NaN (kNanPoisonByte); on the GPU stream-ordered before the next launch.
  void poison_outputs() override {
    for (const KernelBuffer* buffer : {&tensors_.o, &tensors_.lse}) {
      if (buffer->bytes() == 0) continue;  // no LSE
      if (target() == Target::gpu) {
        gpu::fill_bytes(buffer->data(), kNanPoisonByte, buffer->bytes());
      } else {
        std::memset(buffer->data(), kNanPoisonByte, buffer->bytes());
      }
    }
    output_current_ = lse_current_ = false;  // the host copies are of what the target held before
  }

  double timed_run() override {
    output_current_ = lse_current_ = false;
    if (target() == Target::emulator) {
      const auto start = std::chrono::steady_clock::now();
      run_->forward(launch_);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    const gpu::NvtxRange range(fmt::format("{} {}", impl_.name(), case_.label()));
    // The first run of a prepared case is never a sample (the harness's checked run, or a warm-up): it runs
    // unheld, so that the lazy loading of its kernels' module happens while the stream is free
    // (gpu.hpp, time_on_stream). Every later run is held, and counted for the record.
    const bool first = !ran_once_;
    ran_once_ = true;
    const gpu::GpuSample sample = gpu::time_on_stream([this] { run_->forward(launch_); }, flush_l2_,
                                                      first ? gpu::Hold::none : gpu::Hold::blocking_kernel);
    if (!first) tally_.add(sample);
    return sample.seconds;
  }

  // The layout's int32 arrays on the target (counted as tensors: they are inputs of the case).
  KernelBuffer copy_ints(const std::vector<std::int32_t>& values) {
    KernelBuffer buffer(target(), values.size() * sizeof(std::int32_t), AllocKind::tensor);
    if (values.empty()) return buffer;
    if (target() == Target::gpu) {
      gpu::copy_to_device(buffer.data(), values.data(), buffer.bytes());
    } else {
      std::memcpy(buffer.data(), values.data(), buffer.bytes());
    }
    return buffer;
  }

  // K and V on the target: the generator in logical order for a contiguous layout; for a page pool, each
  // page's logical rows (and NaN padding) from what the page holds, an int32 pair per page on the target,
  // shared by both fills and freed after them.
  void fill_kv() {
    const std::size_t row_width = std::size_t(case_.kv_heads * case_.head_dim);
    const std::pair<KernelBuffer*, TensorId> tensors[] = {{&tensors_.k, TensorId::k}, {&tensors_.v, TensorId::v}};
    if (!tensors_.layout.paged()) {
      for (const auto& [tensor, id] : tensors) {
        if (id == TensorId::k && tensors_.transform == QkTransform::incoherent) continue;  // fill_rotated_qk's
        fill_input(launch_, tensor->data(), case_.dtype, std::size_t(tensors_.layout.rows) * row_width,
                   tensor_key(case_.seed, id), case_.inputs);
      }
      return;
    }
    const KvLayout::PageContents contents = tensors_.layout.page_contents();
    const KernelBuffer first_row = copy_ints(contents.first_row), valid_rows = copy_ints(contents.valid_rows);
    PagedFill paged;
    paged.pages = contents.first_row.size();
    paged.row_width = row_width;
    paged.page_size = int(tensors_.layout.page_size);
    paged.page_first_row = first_row.as<const std::int32_t>();
    paged.page_valid_rows = valid_rows.as<const std::int32_t>();
    for (const auto& [tensor, id] : tensors) {
      fill_paged_input(launch_, tensor->data(), case_.dtype, tensor_key(case_.seed, id), case_.inputs, paged);
    }
    if (target() == Target::gpu) gpu::synchronize();  // the page arrays are freed on return
  }

  // Q and K under incoherent processing (model/incoherent.hpp), rotated and rounded a row at a time; the
  // implementation's supports() has made sure of fp8_e4m3, contiguous K/V and the head_dim.
  void fill_rotated_qk() {
    if (tensors_.layout.paged() || case_.varlen()) throw std::invalid_argument("incoherent processing: contiguous K/V only");
    const std::uint64_t signs_key = incoherent_signs_key(case_.seed);
    fill_rotated_input(launch_, tensors_.q.data(), std::size_t(case_.q_elements()), int(case_.head_dim),
                       tensor_key(case_.seed, TensorId::q), case_.inputs, signs_key);
    fill_rotated_input(launch_, tensors_.k.data(), std::size_t(case_.kv_elements()), int(case_.head_dim),
                       tensor_key(case_.seed, TensorId::k), case_.inputs, signs_key);
  }

  const HostTensor& output() override {
    if (!output_current_) {
      copy_from_target(output_.data<void>(), tensors_.o);
      output_current_ = true;
    }
    return output_;
  }

  const LseTensor* lse() override {
    if (tensors_.lse.bytes() == 0) return nullptr;
    if (!lse_current_) {
      copy_from_target(lse_.data(), tensors_.lse);
      lse_current_ = true;
    }
    return &lse_;
  }

  // For `run --save`: the inputs regenerated on the host, bit-identical to what the input generator wrote on
  // the target (the checker and test_emu_kernels rely on the same identity). Made only when asked.
  const AttentionInputs* host_inputs() const override {
    if (!host_inputs_) host_inputs_ = std::make_unique<AttentionInputs>(make_inputs(case_, impl_.qk_transform()));
    return host_inputs_.get();
  }

  nlohmann::json details() const override {
    nlohmann::json details = run_->details();
    if (target() == Target::gpu) tally_.write_details(details, flush_l2_);
    return details;
  }

  std::optional<MemoryCounters> device_memory() const override {
    if (target() == Target::gpu) return gpu::counters();
    return std::nullopt;
  }

 private:
  Target target() const { return impl_.target(); }

  // A whole buffer of the target into host memory of its size; on the GPU after the work queued before it.
  void copy_from_target(void* host, const KernelBuffer& buffer) const {
    if (target() == Target::gpu) {
      gpu::copy_to_host(host, buffer.data(), buffer.bytes());
    } else {
      std::memcpy(host, buffer.data(), buffer.bytes());
    }
  }

  const KernelImplementation& impl_;
  Case case_;
  Launch launch_;
  KernelTensors tensors_;
  std::unique_ptr<KernelRun> run_;
  HostTensor output_;
  LseTensor lse_;  // empty unless the kernel writes the LSE
  mutable std::unique_ptr<AttentionInputs> host_inputs_;
  bool output_current_ = false, lse_current_ = false;  // whether output_ and lse_ hold the latest run's
  bool flush_l2_ = true;
  bool ran_once_ = false;
  gpu::SampleTally tally_;  // how the GPU samples after the first run were timed
};

}  // namespace

std::string KernelImplementation::name() const { return base_name(kernel_name()); }

std::string KernelImplementation::base_name(const std::string& kernel) const {
  return (target_ == Target::gpu ? "cuda." : "emu.") + kernel;
}

std::string KernelImplementation::device() const {
  if (target_ == Target::emulator) return emu::emulated_device.name;
  const std::vector<gpu::DeviceInfo> found = gpu::devices();
  return found.empty() ? "cuda (no device)" : found.front().name;
}

std::uint64_t KernelImplementation::default_memory_limit() const {
  if (target_ == Target::gpu && !gpu::devices().empty()) return gpu::default_memory_limit();
  return default_host_memory_limit();
}

std::string KernelImplementation::default_memory_limit_source() const {
  if (target_ == Target::gpu && !gpu::devices().empty()) return "free GPU memory";
  return default_host_memory_limit_source();
}

std::string KernelImplementation::supports(const Case& c) const {
  if (target_ == Target::gpu) {
    if (!built_with_cuda()) return "built without CUDA (configure with nvcc on the PATH, FAPROBE_ENABLE_CUDA=ON)";
    const std::vector<gpu::DeviceInfo> found = gpu::devices();
    if (found.empty()) return fmt::format("no CUDA device ({})", gpu::no_device_reason());
    const gpu::DeviceInfo& device = found.front();
    if (device.compute_major < 8) {
      return fmt::format("needs compute capability 8.0 or newer (mma.sync, cp.async); {} is {}", device.name,
                         device.compute_capability());
    }
  }
  if (std::string reason = kv_layout_support(c, kv_layouts()); !reason.empty()) return reason;
  if (c.mask == Mask::causal_top_left && !top_left_mask()) return kTopLeftUnsupported;
  return kernel_supports(c);
}

std::unique_ptr<PreparedCase> KernelImplementation::prepare(const Case& c) const {
  return std::make_unique<KernelPreparedCase>(*this, c);
}

AttentionArgs KernelImplementation::attention_args(const Case& c, const KernelTensors& tensors) {
  AttentionArgs args =
      cuda::attention_args(c, tensors.q.data(), tensors.k.data(), tensors.v.data(), tensors.o.data(), tensors.transform);
  if (tensors.lse.bytes() != 0) args.lse = tensors.lse.as<float>();
  const KvLayout& layout = tensors.layout;
  args.kv_rows = layout.rows;
  args.seq_starts = tensors.seq_starts.as<const std::int32_t>();
  if (layout.paged()) {
    args.block_table = tensors.block_table.as<const std::int32_t>();
    args.page_size = layout.page_size;
    args.pages_per_seq = layout.pages_per_seq;
  }
  return args;
}

std::uint64_t KernelImplementation::tensor_bytes(const Case& c) const { return stored_tensor_bytes(c, writes_lse()); }

}  // namespace faprobe::cuda
