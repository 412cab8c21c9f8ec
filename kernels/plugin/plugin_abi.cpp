#include "plugin/plugin_abi.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "model/errors.hpp"
#include "model/fp8.hpp"
#include "model/memory.hpp"

namespace faprobe::plugin {
namespace {

constexpr std::size_t kMaxReasonLength = 1024;  // of a supports() reason: more is no reason, but a missing NUL

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

StdoutToStderr::StdoutToStderr() {
  std::fflush(stdout);  // what is ours goes where it was meant to
  saved_ = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
  if (saved_ >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
}

StdoutToStderr::~StdoutToStderr() {
  if (saved_ < 0) return;
  std::fflush(stdout);  // the plugin's text, to stderr
  dup2(saved_, STDOUT_FILENO);
  close(saved_);
}

namespace {

struct EntryIsolation {
  bool isolated = true;
  double timeout_s = 60;
};
EntryIsolation& entry_isolation() {
  static EntryIsolation setting;
  return setting;
}

// Calls the entry points for one case: supports(), then workspace_bytes() if it is supported.
Descriptor::Answers call_entry_points(const faprobe_implementation* impl, const Case& c,
                                      const std::function<void(char)>& before) {
  Descriptor::Answers answers;
  if (c.mask == Mask::causal_top_left) {
    answers.reason = "causal-top-left is not in the plugin ABI (FAPROBE_MASK_NONE, FAPROBE_MASK_CAUSAL)";
    return answers;
  }
  const AbiCase abi(c);
  before('s');
  const char* reason = impl->supports(impl, abi.get());
  if (reason != nullptr) {
    answers.reason = *reason != '\0' ? std::string(reason, strnlen(reason, kMaxReasonLength))
                                     : std::string("refused by the plugin (no reason given)");
    return answers;
  }
  before('w');
  if (impl->workspace_bytes != nullptr) answers.workspace_bytes = impl->workspace_bytes(impl, abi.get());
  return answers;
}

bool write_all(int fd, const void* data, std::size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= std::size_t(n);
  }
  return true;
}

const char* entry_point_name(char phase) {
  return phase == 's' ? "supports()" : phase == 'w' ? "workspace_bytes()" : "supports() or workspace_bytes()";
}

// call_entry_points in a forked child (see isolate_entry_points). The child reports each phase before it
// enters it ('s', 'w'), then 'a', the workspace bytes, the reason's length and the reason.
Descriptor::Answers call_isolated(const Descriptor& descriptor, const Case& c, double timeout_s) {
  int channel[2];
  if (pipe2(channel, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) {
    const int error = errno;
    close(channel[0]);
    close(channel[1]);
    throw std::system_error(error, std::generic_category(), "fork");
  }
  if (child == 0) {
    close(channel[0]);
    dup2(STDERR_FILENO, STDOUT_FILENO);  // the plugin's printf never reaches a document on stdout
    const rlimit no_core{0, 0};          // a crash here leaves no core file behind
    setrlimit(RLIMIT_CORE, &no_core);
    const Descriptor::Answers answers =
        call_entry_points(descriptor.impl, c, [&](char phase) { write_all(channel[1], &phase, 1); });
    std::fflush(stdout);
    const std::uint64_t length = answers.reason.size();
    const bool sent = write_all(channel[1], "a", 1) &&
                      write_all(channel[1], &answers.workspace_bytes, sizeof(answers.workspace_bytes)) &&
                      write_all(channel[1], &length, sizeof(length)) &&
                      write_all(channel[1], answers.reason.data(), answers.reason.size());
    _exit(sent ? 0 : 1);
  }
  close(channel[1]);
  std::string received;
  using clock = std::chrono::steady_clock;
  const auto deadline =
      clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{channel[0], POLLIN, 0};
    if (poll(&fd, 1, int(std::min<long long>(left, 100))) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(channel[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received.append(buffer, std::size_t(n));
  }
  close(channel[0]);
  if (timed_out) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const std::size_t answer = received.find('a');
  const char phase = received.empty() ? '?' : answer == std::string::npos ? received.back() : 'a';
  if (timed_out && phase != 'a') {
    throw std::runtime_error(fmt::format("{}: {} did not return within {:g} s (run isolated, killed)",
                                         descriptor.name(), entry_point_name(phase), timeout_s));
  }
  std::uint64_t length = 0;
  Descriptor::Answers answers;
  const std::size_t header = answer + 1 + sizeof(answers.workspace_bytes) + sizeof(length);
  if (phase == 'a' && received.size() >= header) {
    std::memcpy(&answers.workspace_bytes, received.data() + answer + 1, sizeof(answers.workspace_bytes));
    std::memcpy(&length, received.data() + answer + 1 + sizeof(answers.workspace_bytes), sizeof(length));
    if (received.size() == header + length) {
      answers.reason = received.substr(header);
      return answers;
    }
  }
  const std::string how = WIFSIGNALED(status) ? fmt::format("crashed (signal {}, SIG{})", WTERMSIG(status),
                                                            sigabbrev_np(WTERMSIG(status)) != nullptr
                                                                ? sigabbrev_np(WTERMSIG(status)) : "?")
                          : WIFEXITED(status) ? fmt::format("exited the process with status {}", WEXITSTATUS(status))
                                              : std::string("ended the process");
  throw std::runtime_error(fmt::format("{}: {} {} (run isolated)", descriptor.name(), entry_point_name(phase), how));
}

}  // namespace

void isolate_entry_points(bool isolated, double timeout_s) { entry_isolation() = {isolated, timeout_s}; }

Descriptor::Answers Descriptor::answers(const Case& c) const {
  const std::string key = c.key();
  if (const auto found = cache->find(key); found != cache->end()) return found->second;
  Answers answers;
  if (entry_isolation().isolated) {
    answers = call_isolated(*this, c, entry_isolation().timeout_s);
  } else {
    const StdoutToStderr redirect;
    answers = call_entry_points(impl, c, [](char) {});
  }
  answers.reason = valid_utf8(answers.reason);
  cache->emplace(key, answers);
  return answers;
}

std::string Descriptor::supports(const Case& c) const { return answers(c).reason; }

std::uint64_t Descriptor::workspace_bytes(const Case& c) const {
  const Answers found = answers(c);
  if (!found.reason.empty()) return 0;  // never asked for an unsupported case
  if (found.workspace_bytes > kMaxWorkspaceBytes) {
    throw std::runtime_error(fmt::format("{}: workspace_bytes() asked for {} bytes, more than any workspace (at most "
                                         "2^50)", name(), found.workspace_bytes));
  }
  return found.workspace_bytes;
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
                                         error_.front() != '\0' ? valid_utf8(error_.data()) : "(no message)"));
  }
}

double ideal_seconds(const Case& c, std::uint64_t bytes, double gflops, double gbytes_per_s) {
  const double compute = gflops > 0 ? c.flops() / (gflops * 1e9) : 0.0;
  const double memory = gbytes_per_s > 0 ? double(bytes) / (gbytes_per_s * 1e9) : 0.0;
  return compute + memory;
}

}  // namespace faprobe::plugin
