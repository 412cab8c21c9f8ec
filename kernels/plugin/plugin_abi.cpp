#include "plugin/plugin_abi.hpp"

#include <cstring>
#include <exception>
#include <stdexcept>

#include <fmt/format.h>

#include "model/fp8.hpp"
#include "model/memory.hpp"

namespace faprobe::plugin {
namespace {

// The header's enums are numbered like faprobe's; a change to either breaks these.
static_assert(int(DType::fp32) == FAPROBE_DTYPE_FP32 && int(DType::fp16) == FAPROBE_DTYPE_FP16 &&
              int(DType::bf16) == FAPROBE_DTYPE_BF16 && int(DType::fp8_e4m3) == FAPROBE_DTYPE_FP8_E4M3);
static_assert(int(Mask::none) == FAPROBE_MASK_NONE && int(Mask::causal) == FAPROBE_MASK_CAUSAL);
static_assert(int(Mode::prefill) == FAPROBE_MODE_PREFILL && int(Mode::decode) == FAPROBE_MODE_DECODE);

}  // namespace

AbiCase::AbiCase(const Case& c) : seqlens_(c.seqlens) {
  abi_.batch = c.batch;
  abi_.heads = c.heads;
  abi_.kv_heads = c.kv_heads;
  abi_.seq_q = c.seq_q;
  abi_.seq_k = c.seq_k;
  abi_.head_dim = c.head_dim;
  abi_.dtype = std::int32_t(c.dtype);
  abi_.mask = std::int32_t(c.mask);
  abi_.mode = std::int32_t(c.mode);
  abi_.seed = c.seed;
  abi_.page_size = c.page_size;
  abi_.seqlens = seqlens_.empty() ? nullptr : seqlens_.data();
  abi_.splits = c.splits;
  abi_.scale = float(c.scale());
  abi_.fp8_scale = c.fp8_descale(TensorId::q);  // the same for Q, K and V; it follows the case's input distribution
}

std::string Descriptor::supports(const Case& c) const {
  if (c.mask == Mask::causal_top_left) {
    return "causal-top-left is not in the plugin ABI (FAPROBE_MASK_NONE, FAPROBE_MASK_CAUSAL)";
  }
  const AbiCase abi(c);
  const char* reason = impl->supports(impl, abi.get());
  if (reason == nullptr) return "";
  return *reason != '\0' ? std::string(reason) : std::string("refused by the plugin (no reason given)");
}

std::uint64_t Descriptor::workspace_bytes(const Case& c) const {
  if (impl->workspace_bytes == nullptr) return 0;
  const AbiCase abi(c);
  return impl->workspace_bytes(impl, abi.get());
}

faprobe_tensors abi_tensors(const void* q, const void* k, const void* v, void* o, float* lse, const KvLayout& layout,
                            const std::int32_t* seq_starts, const std::int32_t* block_table, void* workspace,
                            std::size_t workspace_bytes) {
  faprobe_tensors tensors{};
  tensors.q = q;
  tensors.k = k;
  tensors.v = v;
  tensors.o = o;
  tensors.lse = lse;
  tensors.kv_rows = layout.rows;
  tensors.seq_starts = seq_starts;
  tensors.block_table = layout.paged() ? block_table : nullptr;
  tensors.pages_per_seq = layout.pages_per_seq;
  tensors.workspace = workspace_bytes != 0 ? workspace : nullptr;
  tensors.workspace_bytes = workspace_bytes;
  return tensors;
}

void ScratchAllocator::bind(faprobe_run_context& context) {
  context.allocate = &ScratchAllocator::allocate;
  context.release = &ScratchAllocator::release;
  context.allocator = this;
}

void* ScratchAllocator::allocate(void* allocator, std::size_t bytes) noexcept {
  auto* self = static_cast<ScratchAllocator*>(allocator);
  try {
    cuda::KernelBuffer buffer(self->target_, bytes, AllocKind::workspace);
    void* data = buffer.data();
    self->buffers_.emplace(data, std::move(buffer));
    return data;
  } catch (const std::exception&) {  // out of memory, or a CUDA error: the plugin sees NULL
    return nullptr;
  }
}

void ScratchAllocator::release(void* allocator, void* pointer) noexcept {
  auto* self = static_cast<ScratchAllocator*>(allocator);
  self->buffers_.erase(pointer);  // a pointer faprobe did not hand out is ignored
}

RunCall::RunCall(const Descriptor& descriptor, cuda::Target target) : descriptor_(descriptor), scratch_(target) {
  scratch_.bind(context_);
  context_.error = error_.data();
  context_.error_size = error_.size();
}

void RunCall::operator()(const AbiCase& c, const faprobe_tensors& tensors) {
  error_.front() = '\0';
  const int status = descriptor_.impl->run(descriptor_.impl, c.get(), &tensors, &context_);
  error_.back() = '\0';  // whatever the plugin wrote, a C string
  if (status != 0) {
    throw std::runtime_error(fmt::format("{}: run returned {}: {}", descriptor_.name(), status,
                                         error_.front() != '\0' ? error_.data() : "(no message)"));
  }
}

double ideal_seconds(const Case& c, std::uint64_t bytes, double gflops, double gbytes_per_s) {
  const double compute = gflops > 0 ? c.flops() / (gflops * 1e9) : 0.0;
  const double memory = gbytes_per_s > 0 ? double(bytes) / (gbytes_per_s * 1e9) : 0.0;
  return compute + memory;
}

}  // namespace faprobe::plugin
