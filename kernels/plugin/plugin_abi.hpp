// What faprobe's side of the plugin ABI (include/faprobe/plugin.h) shares between the CPU and the CUDA
// adapters (plugin_cpu.cpp, plugin_cuda.cpp): a case translated into a faprobe_case, one loaded
// implementation descriptor with the library it came from, the scratch allocator behind
// faprobe_run_context::allocate, and a call of run that turns a nonzero return into an exception.
//
// Nothing of faprobe crosses into the plugin but the header's C structures, and no C++ exception crosses
// out of faprobe's callbacks (allocate returns NULL instead). The loader (src/harness/plan/plugins.hpp) checks a
// descriptor before any adapter is made from it.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/kernel_implementation.hpp"
#include "faprobe/plugin.h"
#include "model/case.hpp"
#include "model/implementation.hpp"
#include "model/kv_layout.hpp"

namespace faprobe::plugin {

// A case as the ABI passes it, with the storage its seqlens pointer points into.
class AbiCase {
 public:
  explicit AbiCase(const Case& c);
  AbiCase(const AbiCase&) = delete;
  AbiCase& operator=(const AbiCase&) = delete;
  const faprobe_case* get() const { return &abi_; }

 private:
  std::vector<std::int64_t> seqlens_;
  faprobe_case abi_{};
};

// Where supports() and workspace_bytes() run. Isolated (the default): in a child process forked for the
// case, which calls both and sends back the answers, so that a crash or a hang there (bounded by timeout_s)
// costs the case a `failed` record, as one in run() does under --isolate; the answers are kept per case.
// Not isolated (--no-isolate, and in an --isolate child, which is isolated already): in this process.
void isolate_entry_points(bool isolated, double timeout_s);

// The largest workspace a plugin may ask for (1 PiB): more is a corrupt size, and sums stay far from 2^64.
constexpr std::uint64_t kMaxWorkspaceBytes = std::uint64_t(1) << 50;

// While it lives, what is written to stdout (descriptor 1: printf, std::cout, write(1, ...)) goes to stderr:
// a plugin's debugging text never mixes into a document faprobe writes on stdout.
class StdoutToStderr {
 public:
  StdoutToStderr();
  ~StdoutToStderr();
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_ = -1;
};

// One implementation of a loaded plugin library.
struct Descriptor {
  const faprobe_implementation* impl = nullptr;  // in the library, valid while it stays loaded (always)
  std::string library;                           // the library's path, as the loader resolved it

  std::string name() const { return std::string("plugin.") + impl->name; }
  bool writes_lse() const { return (impl->flags & FAPROBE_WRITES_LSE) != 0; }
  // "" or the plugin's reason. Both throw std::runtime_error naming the entry point when it crashed, hung,
  // or (workspace_bytes) asked for more than kMaxWorkspaceBytes.
  std::string supports(const Case& c) const;
  std::uint64_t workspace_bytes(const Case& c) const;  // 0 without a workspace_bytes function

  struct Answers {
    std::string reason;  // of supports()
    std::uint64_t workspace_bytes = 0;
  };
  Answers answers(const Case& c) const;
  std::shared_ptr<std::map<std::string, Answers>> cache = std::make_shared<std::map<std::string, Answers>>();
};

// The ABI's view of one case's buffers, wherever they live: the layout's row count and page table columns,
// its seq_starts and block table (null unless paged) as the device holds them, and the workspace.
faprobe_tensors abi_tensors(const void* q, const void* k, const void* v, void* o, float* lse, const KvLayout& layout,
                            const std::int32_t* seq_starts, const std::int32_t* block_table, void* workspace,
                            std::size_t workspace_bytes);

// The memory handed out through faprobe_run_context::allocate: tracked buffers on the implementation's
// device (KernelBuffer: the GPU pool, or the host's counting allocator), counted as workspace, kept until
// the plugin releases them or the allocator is destroyed (the end of the case).
class ScratchAllocator {
 public:
  explicit ScratchAllocator(cuda::Target target) : target_(target) {}
  ScratchAllocator(const ScratchAllocator&) = delete;
  ScratchAllocator& operator=(const ScratchAllocator&) = delete;
  void bind(faprobe_run_context& context);  // context.allocate, release, allocator

 private:
  static void* allocate(void* allocator, std::size_t bytes) noexcept;
  static void release(void* allocator, void* pointer) noexcept;
  cuda::Target target_;
  std::map<void*, cuda::KernelBuffer> buffers_;
};

// The error buffer of faprobe_run_context, and one call of run: throws std::runtime_error naming the
// implementation and quoting the plugin's message when run returns nonzero.
class RunCall {
 public:
  RunCall(const Descriptor& descriptor, cuda::Target target);
  RunCall(const RunCall&) = delete;
  RunCall& operator=(const RunCall&) = delete;
  faprobe_run_context& context() { return context_; }
  void operator()(const AbiCase& c, const faprobe_tensors& tensors);

 private:
  const Descriptor& descriptor_;
  ScratchAllocator scratch_;
  std::array<char, 1024> error_{};
  faprobe_run_context context_{};
};

// predicted_seconds of a plugin: nothing is known of its kernel, so the time an ideal one would take at
// this machine's measured rates (its FLOPs at the GEMM rate plus its tensors at the copy rate), a lower
// bound: a plugin is skipped for --max-time only when no kernel could be fast enough.
double ideal_seconds(const Case& c, std::uint64_t bytes, double gflops, double gbytes_per_s);

}  // namespace faprobe::plugin
