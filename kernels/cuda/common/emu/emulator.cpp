// The GPU emulator's scheduler, barriers and warp collectives (interface and design: emulator.hpp).
//
// State lives in one Launch object per launch(), reachable from the fibers through a thread_local pointer
// (a launch runs on one OS thread). Per CTA: one Fiber per thread, 16 barriers, and per warp the list of
// collectives that some lanes have entered and others not yet (two halves of a diverged warp may each
// shuffle with their own mask at the same time). Every stack switch is announced to AddressSanitizer in
// sanitizer builds (the debug preset), so exceptions thrown on fiber stacks are not reported as
// corruption. Costs are in emulator.hpp.
#include "cuda/common/emu/emulator.hpp"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cuda/common/emu/race_detector.hpp"
#include "model/fp8_accumulation.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define FAPROBE_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAPROBE_EMU_ASAN 1
#endif
#endif
#if defined(FAPROBE_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace faprobe::emu {
namespace {

constexpr unsigned warp_size = 32;
constexpr unsigned max_block_threads = 1024;  // as on every GPU since sm_20
constexpr std::size_t shared_base_alignment = 1024;  // of the dynamic shared memory's base, as every 128B swizzle assumes
// What an in-flight accumulator holds until its wgmma retires: a signalling NaN with a recognizable payload.
// Copying it keeps its bits; any arithmetic on it gives a quiet NaN, other bits, so a value computed from
// it and written back is seen at retirement.
constexpr std::uint32_t accumulator_poison = 0x7f80deadu;
constexpr unsigned uncommitted = ~0u;  // the group of an asynchronous operation not yet committed

using detail::Access;
using detail::Hazard;
using detail::VectorClock;

enum class FiberState { runnable, blocked, exited };
enum class WaitKind { none, barrier, collective, mbarrier, warpgroup };
enum class CollectiveKind {
  shfl_idx, shfl_up, shfl_down, shfl_bfly, vote_ballot, vote_all, vote_any,
  mma_m16n8k16_f16, mma_m16n8k16_bf16,
  ldmatrix_x1, ldmatrix_x2, ldmatrix_x4, ldmatrix_x1_trans, ldmatrix_x2_trans, ldmatrix_x4_trans,
  stmatrix_x1, stmatrix_x2, stmatrix_x4, stmatrix_x1_trans, stmatrix_x2_trans, stmatrix_x4_trans, warp_sync
};
// Operand words per lane: a shuffle's value, source and clamp; mma.sync m16n8k16's 4 A, 2 B and 4 C registers.
constexpr unsigned max_operand_words = 10;
// Result words per lane: mma.sync's 4 D registers, ldmatrix.x4's 4 registers.
constexpr unsigned max_result_words = 4;
using Operands = std::array<std::uint32_t, max_operand_words>;
using Results = std::array<std::uint32_t, max_result_words>;

const char* instruction_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::shfl_idx: return "shfl.sync.idx";
    case CollectiveKind::shfl_up: return "shfl.sync.up";
    case CollectiveKind::shfl_down: return "shfl.sync.down";
    case CollectiveKind::shfl_bfly: return "shfl.sync.bfly";
    case CollectiveKind::vote_ballot: return "vote.sync.ballot";
    case CollectiveKind::vote_all: return "vote.sync.all";
    case CollectiveKind::vote_any: return "vote.sync.any";
    case CollectiveKind::mma_m16n8k16_f16: return "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    case CollectiveKind::mma_m16n8k16_bf16: return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    case CollectiveKind::ldmatrix_x1: return "ldmatrix.sync.aligned.m8n8.x1.shared.b16";
    case CollectiveKind::ldmatrix_x2: return "ldmatrix.sync.aligned.m8n8.x2.shared.b16";
    case CollectiveKind::ldmatrix_x4: return "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
    case CollectiveKind::ldmatrix_x1_trans: return "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16";
    case CollectiveKind::ldmatrix_x2_trans: return "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16";
    case CollectiveKind::ldmatrix_x4_trans: return "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
    case CollectiveKind::stmatrix_x1: return "stmatrix.sync.aligned.m8n8.x1.shared.b16";
    case CollectiveKind::stmatrix_x2: return "stmatrix.sync.aligned.m8n8.x2.shared.b16";
    case CollectiveKind::stmatrix_x4: return "stmatrix.sync.aligned.m8n8.x4.shared.b16";
    case CollectiveKind::stmatrix_x1_trans: return "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16";
    case CollectiveKind::stmatrix_x2_trans: return "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16";
    case CollectiveKind::stmatrix_x4_trans: return "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
    case CollectiveKind::warp_sync: return "bar.warp.sync";
  }
  return "?";
}

// AddressSanitizer must be told about every stack switch, or it mistakes an exception thrown on a fiber
// stack for stack corruption. No-ops in other builds.
void sanitizer_start_switch(void** fake_stack_save, const void* stack_bottom, std::size_t stack_size) {
#if defined(FAPROBE_EMU_ASAN)
  __sanitizer_start_switch_fiber(fake_stack_save, stack_bottom, stack_size);
#else
  (void)fake_stack_save, (void)stack_bottom, (void)stack_size;
#endif
}
void sanitizer_finish_switch(void* fake_stack_save, const void** old_bottom, std::size_t* old_size) {
#if defined(FAPROBE_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack_save, old_bottom, old_size);
#else
  (void)fake_stack_save, (void)old_bottom, (void)old_size;
#endif
}

// A suspended fiber (or the scheduler): where it resumes when switched to.
//
// On x86-64 the switch is nine instructions (faprobe_emu_switch_stack below): the callee-saved registers
// (rbx, rbp, r12-r15) and the SSE and x87 control words go on the suspended side's own stack and only its
// stack pointer is kept, as the System V ABI allows at a call. glibc's swapcontext also saves and restores
// the signal mask, a system call each way: 2 of every 3 seconds of an emulated FA-2 verify (b1 h4 s129
// d64 bf16 causal: 437,204 rt_sigprocmask calls, 0.77 s of system time in 1.39 s) went there. Elsewhere,
// and where the compiler may mark the code for shadow stacks (-fcf-protection: __CET__ & 2; a `ret` to a
// fiber's first instruction is not on the shadow stack), it is swapcontext.
#if defined(__x86_64__) && !(defined(__CET__) && (__CET__ & 2))
#define FAPROBE_EMU_STACK_SWITCH 1
#endif

#if defined(FAPROBE_EMU_STACK_SWITCH)
// faprobe_emu_switch_stack(&from_sp, to_sp): pushes the callee-saved registers and the control words,
// stores the stack pointer in from_sp, loads to_sp, and pops the other side's the same way.
extern "C" void faprobe_emu_switch_stack(void** from_sp, void* to_sp);
asm(R"(
  .text
  .p2align 4
  .globl faprobe_emu_switch_stack
  .hidden faprobe_emu_switch_stack
  .type faprobe_emu_switch_stack, @function
faprobe_emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size faprobe_emu_switch_stack, .-faprobe_emu_switch_stack
)");
#endif

class FiberContext {
 public:
  // Makes this context start `entry` on [stack, stack + bytes) when first switched to. entry must never
  // return: it ends by switching away for good.
  void prepare(void* stack, std::size_t bytes, void (*entry)()) {
#if defined(FAPROBE_EMU_STACK_SWITCH)
    // The frame faprobe_emu_switch_stack pops, from the new stack pointer up: the control words (the
    // current ones, as makecontext would keep them), r15..rbx as zeros, rbp = 0 (the end of the frame
    // chain), entry as the return address, then a zero return address for entry itself, so that entry
    // starts with the stack aligned as after a call (rsp + 8 a multiple of 16).
    auto* top = reinterpret_cast<std::uint64_t*>(
        (reinterpret_cast<std::uintptr_t>(stack) + bytes) & ~std::uintptr_t{15});
    std::uint64_t* frame = top - 9;
    std::uint32_t mxcsr = 0;
    std::uint16_t fpu_control = 0;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpu_control));
    frame[0] = std::uint64_t{mxcsr} | std::uint64_t{fpu_control} << 32;
    for (int i = 1; i <= 6; ++i) frame[i] = 0;  // r15, r14, r13, r12, rbx, rbp
    frame[7] = reinterpret_cast<std::uint64_t>(entry);
    frame[8] = 0;
    stack_pointer_ = frame;
#else
    getcontext(&context_);
    context_.uc_stack.ss_sp = stack;
    context_.uc_stack.ss_size = bytes;
    context_.uc_link = nullptr;
    makecontext(&context_, entry, 0);
#endif
  }

  // Suspends the running code into `from` and resumes `to`.
  static void swap(FiberContext& from, FiberContext& to) {
#if defined(FAPROBE_EMU_STACK_SWITCH)
    faprobe_emu_switch_stack(&from.stack_pointer_, to.stack_pointer_);
#else
    swapcontext(&from.context_, &to.context_);
#endif
  }

 private:
#if defined(FAPROBE_EMU_STACK_SWITCH)
  void* stack_pointer_ = nullptr;
#else
  ucontext_t context_{};
#endif
};

// Thrown at a blocked fiber's wait point when the launch is being abandoned, to unwind its stack.
struct FiberCancelled {};

// One thread's share of a wgmma in flight: where its accumulators go, what they will be, and the A registers
// it passed (which must not change until it retires).
struct InFlightWgmma {
  unsigned group = uncommitted;
  float* d = nullptr;
  unsigned count = 0;
  std::vector<float> result;
  const std::uint32_t* a_registers = nullptr;
  std::array<std::uint32_t, 4> a_at_issue{};
  std::size_t operation = 0;  // index into the CTA's wgmma operations
  bool superseded = false;    // a later wgmma on the same accumulators took its result as input
};

// A warpgroup's wgmma in flight: the shared byte ranges it reads until every thread has retired it.
struct WgmmaOperation {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // (offset, bytes)
  unsigned retired = 0;
};

// An asynchronous copy into shared memory that has not landed yet, or has (tag: index + 1 in the CTA's table).
struct AsyncCopy {
  Access kind = Access::cp_async;  // cp_async or tma_load
  unsigned thread = 0;             // the issuing thread
  unsigned group = 0;              // cp.async: its commit group
  std::size_t mbarrier = 0;        // TMA: the mbarrier and the phase (its index) whose completion lands it
  std::uint64_t phase = 0;
  std::uint32_t clock = 0;         // TMA: the issuer's clock when it was issued
  std::vector<SharedChunk> chunks;
  bool landed = false;
};

struct Fiber {
  FiberContext context;
  FiberState state = FiberState::runnable;
  bool started = false;
  Dim3 thread;
  unsigned linear = 0;
  WaitKind wait = WaitKind::none;
  unsigned wait_barrier = 0;
  std::size_t wait_mbarrier = 0;  // shared offset of the mbarrier waited on
  unsigned wait_parity = 0;
  CollectiveKind wait_collective = CollectiveKind::shfl_idx;
  std::uint32_t wait_mask = 0;
  Results collective_result{};  // written by the lane that completes the collective
  std::vector<std::uint32_t> cp_async_in_flight;  // tags of the thread's copies that have not landed
  unsigned cp_async_committed = 0;                // groups committed so far; later copies are in this one
  std::vector<InFlightWgmma> wgmma_in_flight;     // in issue order
  unsigned wgmma_committed = 0;
  bool wgmma_fenced = false;  // a wgmma.fence since the last wgmma.wait_group
};

struct Barrier {
  unsigned expected = 0;  // threads, fixed by the first arrival
  unsigned arrived = 0;
  unsigned arrive_only = 0;       // arrivals by bar.arrive, which release without waiting
  std::vector<unsigned> waiters;  // threads in bar.sync, blocked
  VectorClock clock;              // the round's releases (race detector), allocated when first needed
};

// An mbarrier's state (emu::mbarrier_init), by shared offset.
struct MBarrier {
  unsigned count = 0;               // arrivals per phase, from init
  unsigned pending_arrivals = 0;    // in the current phase
  std::int64_t pending_tx = 0;      // transaction bytes still expected in the current phase
  std::uint64_t completed = 0;      // phases completed; the current phase's parity is completed % 2
  std::vector<unsigned> waiters;    // fibers blocked until the current phase completes
  VectorClock phase_clock;          // the current phase's releases (race detector), allocated when needed
  VectorClock completed_clock;      // the last completed phase's, acquired by a wait that sees it complete
  std::vector<std::uint32_t> landing;  // TMA loads that land when the current phase completes
};

// One warp-collective instruction in flight: the operands of every lane that has arrived.
struct Collective {
  CollectiveKind kind = CollectiveKind::shfl_idx;
  std::uint32_t member_mask = 0;
  std::uint32_t arrived = 0;
  std::array<Operands, warp_size> operands{};  // shuffles and votes: value, source operand, clamp_segmask
};

struct Warp {
  std::uint32_t existing_lanes = 0;  // fewer than 32 in the last warp of a CTA whose size is not a multiple
  std::vector<Collective> open;
};

constexpr unsigned warpgroup_size = 128;

// One thread's operands of a wgmma; they live on its (suspended) fiber stack until the collective completes.
struct WgmmaCall {
  WgmmaShape shape;
  std::uint64_t desc_a = 0;
  std::uint64_t desc_b = 0;
  const std::uint32_t* a_registers = nullptr;
  float* d = nullptr;
  bool accumulate = false;
};

// A wgmma in flight in one warpgroup: the threads that have arrived and their operands.
struct WarpgroupCollective {
  unsigned arrived = 0;
  std::array<const WgmmaCall*, warpgroup_size> calls{};
};

const char* wgmma_input_name(WgmmaInput input) {
  switch (input) {
    case WgmmaInput::f16: return "f16";
    case WgmmaInput::bf16: return "bf16";
    case WgmmaInput::e4m3: return "e4m3";
  }
  return "?";
}

std::string wgmma_name(const WgmmaShape& shape) {
  return fmt::format("wgmma.mma_async.sync.aligned.m64n{}k{}.f32.{}.{} (A from {}, B {}-major)", shape.n,
                     shape.input == WgmmaInput::e4m3 ? 32 : 16, wgmma_input_name(shape.input),
                     wgmma_input_name(shape.input), shape.a_in_registers ? "registers" : "shared memory",
                     shape.b_mn_major ? "N" : "K");
}

// The e4m3 ("fn": bias 7, no infinities, S.1111.111 is NaN) value of an 8-bit code, exactly.
float e4m3_to_float(std::uint8_t code) {
  const float sign = (code & 0x80u) != 0 ? -1.0f : 1.0f;
  const unsigned exponent = (code >> 3) & 0xfu;
  const unsigned mantissa = code & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(static_cast<float>(8 + mantissa), static_cast<int>(exponent) - 10);
}

std::string format_dim(const Dim3& d) { return fmt::format("({},{},{})", d.x, d.y, d.z); }

// Fiber stacks for one launch: one mmap, each stack with an inaccessible guard page below it.
class FiberStacks {
 public:
  FiberStacks(std::size_t count, std::size_t stack_bytes) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    stack_bytes_ = (stack_bytes + page - 1) / page * page;
    stride_ = stack_bytes_ + page;
    size_ = stride_ * count;
    void* memory = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) throw EmulationError(fmt::format("emulator: cannot map {} bytes of fiber stacks", size_));
    base_ = static_cast<std::byte*>(memory);
    for (std::size_t i = 0; i < count; ++i) mprotect(base_ + i * stride_, page, PROT_NONE);
  }
  ~FiberStacks() { munmap(base_, size_); }
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;

  void* stack(std::size_t i) const { return base_ + i * stride_ + (stride_ - stack_bytes_); }
  std::size_t stack_bytes() const { return stack_bytes_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::size_t stride_ = 0;
  std::size_t stack_bytes_ = 0;
};

struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{shared_base_alignment}); }
};

// The schedule and checks overrides of ScopedSchedule and ScopedChecks, for the process (a test sets them and
// may launch from another OS thread, as its deadline runner does).
std::optional<std::uint64_t> scoped_schedule;
int scoped_checks = -1;  // -1: none, 0: off, 1: on

class Launch;
thread_local Launch* current_launch = nullptr;

[[noreturn]] void fiber_entry();

class Launch {
 public:
  Launch(const LaunchConfig& config, std::function<void()> body)
      : config_(config),
        body_(std::move(body)),
        thread_count_(static_cast<unsigned>(config.block.count())),
        stacks_(thread_count_, config.stack_bytes),
        fibers_(thread_count_),
        warps_((thread_count_ + warp_size - 1) / warp_size),
        warpgroups_((thread_count_ + warpgroup_size - 1) / warpgroup_size),
        shared_(static_cast<std::byte*>(::operator new(std::max<std::size_t>(config.shared_bytes, 1),
                                                       std::align_val_t{shared_base_alignment}))),
        detector_(thread_count_, config.shared_bytes, checks_enabled()),
        seed_(effective_schedule_seed(config.schedule_seed)),
        random_(seed_),
        order_(thread_count_) {
    for (unsigned i = 0; i < thread_count_; ++i) {
      fibers_[i].linear = i;
      fibers_[i].thread = {i % config.block.x, i / config.block.x % config.block.y,
                           i / (config.block.x * config.block.y)};
    }
    for (std::size_t w = 0; w < warps_.size(); ++w) {
      const unsigned lanes = std::min(warp_size, thread_count_ - static_cast<unsigned>(w) * warp_size);
      warps_[w].existing_lanes = lanes == warp_size ? ~0u : (1u << lanes) - 1u;
    }
  }

  void run() {
    const Dim3& grid = config_.grid;
    std::vector<std::size_t> blocks(grid.count());
    for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = i;
    if (seed_ != 0) std::shuffle(blocks.begin(), blocks.end(), random_);
    for (const std::size_t linear : blocks) {
      block_ = {static_cast<unsigned>(linear % grid.x), static_cast<unsigned>(linear / grid.x % grid.y),
                static_cast<unsigned>(linear / (std::size_t{grid.x} * grid.y))};
      run_block();
    }
  }

  // --- What fibers call. ---
  const std::function<void()>& body() const { return body_; }
  Fiber& running() { return fibers_[running_]; }
  const LaunchConfig& config() const { return config_; }
  const Dim3& block() const { return block_; }

  std::string location() const { return location_of(running_); }
  std::string location_of(unsigned thread) const {
    return fmt::format("kernel '{}' block {} thread {}", config_.kernel_name, format_dim(block_),
                       format_dim(fibers_[thread].thread));
  }
  [[noreturn]] void fail_here(const std::string& what) const { throw EmulationError(location() + ": " + what); }

  // --- The race detector's findings, in words (emulator.hpp, race_detector.hpp). ---
  std::string describe_copy(std::uint32_t tag) const {
    const AsyncCopy& copy = copies_.at(tag - 1);
    if (copy.kind == Access::tma_load) {
      const auto barrier = mbarriers_.find(copy.mbarrier);
      const std::uint64_t phase = copy.phase;
      return fmt::format("a TMA load (cp.async.bulk.tensor) issued by thread {}, which lands when phase {} of the "
                         "mbarrier at shared offset {} completes ({})",
                         format_dim(fibers_[copy.thread].thread), phase, copy.mbarrier,
                         barrier == mbarriers_.end() ? std::string("that mbarrier is gone")
                                                     : fmt::format("{} arrivals and {} transaction bytes pending",
                                                                   barrier->second.pending_arrivals,
                                                                   barrier->second.pending_tx));
    }
    return fmt::format("a cp.async issued by thread {} in its commit group {}, which lands when a "
                       "cp.async.wait_group of that thread covers the group",
                       format_dim(fibers_[copy.thread].thread), copy.group);
  }

  [[noreturn]] void report(const Hazard& hazard, unsigned thread) const {
    const std::string where = location_of(thread);
    const std::string other = format_dim(fibers_[hazard.other_thread].thread);
    switch (hazard.kind) {
      case Hazard::Kind::in_flight_copy:
        throw EmulationError(fmt::format("{}: {} of shared byte offset {} before it has landed: the byte is the "
                                         "destination of {}",
                                         where, detail::access_name(hazard.access), hazard.offset,
                                         describe_copy(hazard.tag)));
      case Hazard::Kind::in_flight_wgmma_read:
        throw EmulationError(fmt::format("{}: {} writes shared byte offset {} while a wgmma.mma_async in flight reads "
                                         "it (no wgmma.wait_group has retired that wgmma in every thread of its "
                                         "warpgroup)",
                                         where, detail::access_name(hazard.access), hazard.offset));
      case Hazard::Kind::missing_proxy_fence:
        throw EmulationError(fmt::format("{}: {} (async proxy) reads shared byte offset {}, which thread {} wrote "
                                         "with {} (generic proxy) and has executed no fence.proxy.async since",
                                         where, detail::access_name(hazard.access), hazard.offset, other,
                                         detail::access_name(hazard.other_access)));
      case Hazard::Kind::race: break;
    }
    const char* hint = hazard.other_access == Access::tma_load
                           ? " (the TMA load landed, but this thread has not waited on its mbarrier phase)"
                           : "";
    throw EmulationError(fmt::format("{}: race on shared memory byte offset {}: {} by this thread and {} by thread "
                                     "{}{} are ordered by no barrier, named barrier, mbarrier phase or __syncwarp",
                                     where, hazard.offset, detail::access_name(hazard.access),
                                     detail::access_name(hazard.other_access), other, hint));
  }
  void check(const std::optional<Hazard>& hazard, unsigned thread) const {
    if (hazard) report(*hazard, thread);
  }

  // A schedule other than the default also switches fibers at random at instruction-layer calls.
  void maybe_yield() {
    if (seed_ == 0 || random_() % 8 != 0) return;
    switch_to_scheduler();  // stays runnable
  }

  void shared_access(const void* address, std::size_t bytes, bool write) {
    maybe_yield();
    const auto* byte = static_cast<const std::byte*>(address);
    if (byte < shared_.get() || byte + bytes > shared_.get() + config_.shared_bytes)
      fail_here("a shared-memory access outside the launch's shared memory");
    const auto offset = static_cast<std::size_t>(byte - shared_.get());
    const unsigned self = running_;
    check(write ? detector_.write(self, offset, bytes, Access::write) : detector_.read(self, offset, bytes, Access::read),
          self);
  }

  void fence_proxy_async() {
    maybe_yield();
    detector_.fence_proxy_async(running_);
  }

  // Called first and last on every fiber, around the kernel body.
  void fiber_started() { sanitizer_finish_switch(nullptr, &scheduler_stack_bottom_, &scheduler_stack_size_); }
  // The last thing an exited fiber does: back to the scheduler, never to be resumed.
  [[noreturn]] void fiber_exit() {
    sanitizer_start_switch(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);
    FiberContext finished;
    FiberContext::swap(finished, scheduler_);
    std::abort();  // unreachable: nothing resumes `finished`
  }

  // Records the first error of the CTA; run_block() rethrows it once the failing fiber has exited.
  void record_failure(std::string message) {
    if (!failed_) error_message_ = std::move(message);
    failed_ = true;
  }

  void barrier(unsigned id, unsigned thread_count, bool wait) {
    maybe_yield();
    const char* instruction = wait ? "bar.sync" : "bar.arrive";
    if (id >= barrier_count) fail_here(fmt::format("{} {}: barrier ids are 0..{}", instruction, id, barrier_count - 1));
    if (thread_count != 0 && (thread_count % warp_size != 0 || thread_count > thread_count_))
      fail_here(fmt::format("{} {}, {}: the thread count must be a multiple of {} and at most the CTA's {} threads",
                            instruction, id, thread_count, warp_size, thread_count_));
    if (!wait && thread_count == 0)
      fail_here(fmt::format("bar.arrive {} needs a thread count (PTX requires operand b)", id));
    const unsigned expected = thread_count == 0 ? thread_count_ : thread_count;
    Barrier& b = barriers_[id];
    if (b.arrived == 0) {
      b.expected = expected;
    } else if (b.expected != expected) {
      fail_here(fmt::format("{} {} expecting {} threads while {} threads wait there expecting {}", instruction, id,
                            expected, b.arrived, b.expected));
    }
    Fiber& self = running();
    if (!wait) {  // released now: the thread runs on
      ++b.arrive_only;
      if (detector_.enabled()) {
        if (b.clock.empty()) b.clock = detector_.empty_clock();
        detector_.release(self.linear, b.clock);
      }
    }
    if (++b.arrived == b.expected) {
      if (wait) b.waiters.push_back(self.linear);
      complete_barrier(b);
      for (unsigned waiter : b.waiters)
        if (waiter != self.linear) release(fibers_[waiter]);
      b = Barrier{};
      return;
    }
    if (!wait) return;
    b.waiters.push_back(self.linear);
    self.wait = WaitKind::barrier;
    self.wait_barrier = id;
    suspend();
  }

  // Orders the round's accesses: a barrier that every thread of the CTA passes in bar.sync starts a new epoch
  // of the race detector; any other round joins the releases of its threads (bar.arrive ones released at
  // arrival; the bar.sync ones are blocked, so their state is as it was when they arrived) and every bar.sync
  // thread acquires them.
  void complete_barrier(Barrier& b) {
    if (!detector_.enabled()) return;
    if (b.expected == thread_count_ && b.arrive_only == 0) {
      detector_.full_barrier();
      return;
    }
    if (b.clock.empty()) b.clock = detector_.empty_clock();
    for (unsigned waiter : b.waiters) detector_.release(waiter, b.clock);
    for (unsigned waiter : b.waiters) detector_.acquire(waiter, b.clock);
  }

  // --- mbarrier (emulator.hpp). ---
  MBarrier& mbarrier_at(std::size_t offset, const char* instruction) {
    (void)shared_memory(offset, 8, 8);  // the 8-byte object inside the launch's shared memory, aligned
    const auto found = mbarriers_.find(offset);
    if (found == mbarriers_.end())
      fail_here(fmt::format("{} on shared offset {}: no mbarrier was initialized there (mbarrier.init)", instruction, offset));
    return found->second;
  }

  void mbarrier_init(std::size_t offset, unsigned count) {
    maybe_yield();
    (void)shared_memory(offset, 8, 8);
    if (count == 0 || count >= (1u << 20))
      fail_here(fmt::format("mbarrier.init at shared offset {}: count {} is outside 1..2^20 - 1", offset, count));
    const auto existing = mbarriers_.find(offset);
    if (existing != mbarriers_.end() && !existing->second.waiters.empty())
      fail_here(fmt::format("mbarrier.init at shared offset {} while {} threads wait on it", offset,
                            existing->second.waiters.size()));
    MBarrier& b = mbarriers_[offset];
    b = MBarrier{};
    b.count = count;
    b.pending_arrivals = count;
  }

  // Completes the current phase when nothing is pending: releases its waiters and starts the next phase.
  // Completes the current phase when nothing is pending: lands its TMA loads, releases its waiters (who
  // acquire the phase's releases) and starts the next phase.
  void mbarrier_complete_if_done(MBarrier& b) {
    if (b.pending_arrivals != 0 || b.pending_tx != 0) return;
    ++b.completed;
    b.pending_arrivals = b.count;
    b.completed_clock = std::move(b.phase_clock);
    b.phase_clock.clear();
    for (const std::uint32_t tag : b.landing) land(tag);
    b.landing.clear();
    for (unsigned waiter : b.waiters) {
      if (!b.completed_clock.empty()) detector_.acquire(waiter, b.completed_clock);
      release(fibers_[waiter]);
    }
    b.waiters.clear();
  }

  // A release by the running thread into the current phase of b (an arrival, or complete_tx).
  void mbarrier_release(MBarrier& b) {
    if (!detector_.enabled()) return;
    if (b.phase_clock.empty()) b.phase_clock = detector_.empty_clock();
    detector_.release(running_, b.phase_clock);
  }

  void mbarrier_expect_tx(std::size_t offset, std::uint32_t tx_bytes) {
    maybe_yield();
    MBarrier& b = mbarrier_at(offset, "mbarrier.expect_tx");
    b.pending_tx += tx_bytes;
  }

  unsigned mbarrier_arrive(std::size_t offset, std::uint32_t tx_bytes) {
    maybe_yield();
    MBarrier& b = mbarrier_at(offset, tx_bytes > 0 ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive");
    b.pending_tx += tx_bytes;
    const unsigned parity = static_cast<unsigned>(b.completed % 2);
    if (b.pending_arrivals == 0)  // every arrival of the phase is in, its transaction bytes are not yet: PTX's UB
      fail_here(fmt::format("mbarrier.arrive at shared offset {}: more arrivals than its count {}", offset, b.count));
    --b.pending_arrivals;
    mbarrier_release(b);
    mbarrier_complete_if_done(b);
    return parity;
  }

  void mbarrier_complete_tx(std::size_t offset, std::uint32_t tx_bytes) {
    maybe_yield();
    complete_tx(mbarrier_at(offset, "complete_tx"), tx_bytes);
  }
  void complete_tx(MBarrier& b, std::uint32_t tx_bytes) {
    b.pending_tx -= tx_bytes;
    mbarrier_release(b);
    // PTX lets the tx-count go negative when the bytes land before the expect_tx; the phase completes only
    // when arrivals and bytes are both settled.
    mbarrier_complete_if_done(b);
  }

  bool mbarrier_phase_done(const MBarrier& b, unsigned parity) const { return b.completed % 2 != (parity & 1u); }

  bool mbarrier_test_parity(std::size_t offset, unsigned parity) {
    maybe_yield();
    const MBarrier& b = mbarrier_at(offset, "mbarrier.test_wait.parity");
    const bool done = mbarrier_phase_done(b, parity);
    if (done && !b.completed_clock.empty()) detector_.acquire(running_, b.completed_clock);
    return done;
  }

  void mbarrier_wait_parity(std::size_t offset, unsigned parity) {
    maybe_yield();
    MBarrier& b = mbarrier_at(offset, "mbarrier.try_wait.parity");
    if (mbarrier_phase_done(b, parity)) {
      if (!b.completed_clock.empty()) detector_.acquire(running_, b.completed_clock);
      return;
    }
    Fiber& self = running();
    b.waiters.push_back(self.linear);
    self.wait = WaitKind::mbarrier;
    self.wait_mbarrier = offset;
    self.wait_parity = parity & 1u;
    suspend();
  }

  // Enters the calling lane into the warp collective `kind` with its operand words; returns the lane's
  // result words once every lane of member_mask has arrived.
  Results collective(CollectiveKind kind, std::uint32_t member_mask, const Operands& operands) {
    maybe_yield();
    Fiber& self = running();
    const unsigned lane = self.linear % warp_size;
    const std::uint32_t lane_bit = 1u << lane;
    Warp& warp = warps_[self.linear / warp_size];
    const char* name = instruction_name(kind);
    if ((member_mask & lane_bit) == 0)
      fail_here(fmt::format("{} with member mask {:#010x} that excludes the calling lane {}", name, member_mask, lane));
    if ((member_mask & ~warp.existing_lanes) != 0)
      fail_here(fmt::format("{} with member mask {:#010x} names lanes {:#010x} that do not exist (a CTA of {} threads)",
                            name, member_mask, member_mask & ~warp.existing_lanes, thread_count_));
    std::size_t slot = warp.open.size();
    for (std::size_t i = 0; i < warp.open.size(); ++i) {
      const Collective& other = warp.open[i];
      if ((other.member_mask & member_mask) == 0) continue;
      if (other.member_mask != member_mask || other.kind != kind || (other.arrived & lane_bit) != 0)
        fail_here(fmt::format("mismatched warp collective: lane {} calls {} with member mask {:#010x} while lanes "
                              "{:#010x} wait in {} with member mask {:#010x}",
                              lane, name, member_mask, other.arrived, instruction_name(other.kind), other.member_mask));
      slot = i;
    }
    if (slot == warp.open.size()) {
      warp.open.emplace_back();
      warp.open.back().kind = kind;
      warp.open.back().member_mask = member_mask;
    }
    Collective& c = warp.open[slot];
    c.arrived |= lane_bit;
    c.operands[lane] = operands;
    if (c.arrived != c.member_mask) {
      self.wait = WaitKind::collective;
      self.wait_collective = kind;
      self.wait_mask = member_mask;
      suspend();
      return self.collective_result;
    }
    const unsigned warp_base = self.linear - lane;
    complete(c, warp_base);
    for (unsigned l = 0; l < warp_size; ++l)
      if ((member_mask & (1u << l)) != 0 && l != lane) release(fibers_[warp_base + l]);
    warp.open.erase(warp.open.begin() + static_cast<std::ptrdiff_t>(slot));
    return self.collective_result;
  }

  // --- wgmma (emulator.hpp): a collective of the caller's warpgroup. ---
  void wgmma(const WgmmaCall& call) {
    maybe_yield();
    Fiber& self = running();
    if (!self.wgmma_fenced)
      fail_here(fmt::format("{} without a wgmma.fence since the thread's last wgmma.wait_group (or its start): PTX "
                            "requires wgmma.fence before the first wgmma.mma_async and between register accesses and "
                            "a wgmma.mma_async that uses those registers",
                            wgmma_name(call.shape)));
    if (thread_count_ % warpgroup_size != 0)
      fail_here(fmt::format("{} needs whole warpgroups of {} threads, but the CTA has {} threads", wgmma_name(call.shape),
                            warpgroup_size, thread_count_));
    const WgmmaShape& shape = call.shape;
    if (shape.n == 0 || shape.n % 8 != 0 || shape.n > 256)
      fail_here(fmt::format("{}: N must be a multiple of 8 in 8..256", wgmma_name(shape)));
    if (shape.b_mn_major && shape.input == WgmmaInput::e4m3)
      fail_here(fmt::format("{}: e4m3 operands must be K-major (PTX allows imm-tnsp-b only for f16 and bf16)",
                            wgmma_name(shape)));
    const unsigned group = self.linear / warpgroup_size;
    const unsigned member = self.linear % warpgroup_size;
    WarpgroupCollective& c = warpgroups_[group];
    if (c.arrived != 0) {
      const WgmmaCall& first = *c.calls[first_arrived(c)];
      if (first.shape.input != shape.input || first.shape.n != shape.n ||
          first.shape.a_in_registers != shape.a_in_registers || first.shape.b_mn_major != shape.b_mn_major ||
          first.desc_a != call.desc_a || first.desc_b != call.desc_b || first.accumulate != call.accumulate)
        fail_here(fmt::format("mismatched wgmma in warpgroup {}: thread {} calls {} (desc_a {:#x}, desc_b {:#x}, "
                              "accumulate {}) while {} threads wait in {} (desc_a {:#x}, desc_b {:#x}, accumulate {})",
                              group, self.linear, wgmma_name(shape), call.desc_a, call.desc_b, call.accumulate,
                              c.arrived, wgmma_name(first.shape), first.desc_a, first.desc_b, first.accumulate));
    }
    c.calls[member] = &call;
    if (++c.arrived < warpgroup_size) {
      self.wait = WaitKind::warpgroup;
      self.wait_barrier = group;
      suspend();
      return;
    }
    wgmma_results(c, group);
    const unsigned base = group * warpgroup_size;
    for (unsigned t = 0; t < warpgroup_size; ++t)
      if (base + t != self.linear) release(fibers_[base + t]);
    c = WarpgroupCollective{};
  }

  static unsigned first_arrived(const WarpgroupCollective& c) {
    for (unsigned t = 0; t < warpgroup_size; ++t)
      if (c.calls[t] != nullptr) return t;
    return 0;
  }

  // Element (row, k) of a wgmma operand in shared memory, as a float, bounds-checked; with the race detector
  // on, its bytes are added to ranges.
  float wgmma_element(const WgmmaShape& shape, std::uint64_t descriptor, bool mn_major, unsigned row, unsigned k,
                      char operand, std::vector<std::pair<std::size_t, std::size_t>>& ranges) const {
    const unsigned bytes = shape.input == WgmmaInput::e4m3 ? 1 : 2;
    const std::size_t offset = wgmma_element_offset(descriptor, mn_major, bytes, row, k);
    if (detector_.enabled()) {  // by 16-byte chunk (consecutive k share one), so that sorting them stays cheap
      const std::size_t chunk = offset & ~std::size_t{15};
      if (ranges.empty() || ranges.back().first != chunk)
        ranges.emplace_back(chunk, std::min<std::size_t>(16, config_.shared_bytes - chunk));
    }
    if (offset + bytes > config_.shared_bytes)
      fail_here(fmt::format("{}: element ({}, {}) of {} at shared byte offset {} lies outside the launch's {} bytes of "
                            "shared memory (descriptor {:#018x})",
                            wgmma_name(shape), row, k, operand, offset, config_.shared_bytes, descriptor));
    if (bytes == 1) return e4m3_to_float(static_cast<std::uint8_t>(shared_.get()[offset]));
    std::uint16_t half = 0;
    std::memcpy(&half, shared_.get() + offset, sizeof half);
    return half_to_float(half, 0, shape.input == WgmmaInput::bf16);
  }

  // The A element held in registers: (warp w, lane l) of the warpgroup, register r, element e of it.
  static void a_fragment_position(WgmmaInput input, unsigned thread, unsigned reg, unsigned element, unsigned& row,
                                  unsigned& k) {
    const unsigned warp = thread / warp_size;
    const unsigned lane = thread % warp_size;
    const unsigned group = lane / 4;
    const unsigned thread_in_group = lane % 4;
    row = 16 * warp + group + (reg % 2) * 8;
    if (input == WgmmaInput::e4m3) {
      k = thread_in_group * 4 + element + (reg / 2) * 16;  // m16n8k32 .e4m3 A: 4 bytes per register
    } else {
      k = thread_in_group * 2 + element + (reg / 2) * 8;  // m16n8k16 A: 2 halves per register
    }
  }

  // Computes D for the whole warpgroup (run by its last thread to arrive) into each thread's in-flight state,
  // and poisons the accumulators until wgmma_wait_group retires it. Layouts: isa_wgmma.hpp.
  void wgmma_results(const WarpgroupCollective& c, unsigned group) {
    const WgmmaCall& first = *c.calls[0];
    const WgmmaShape& shape = first.shape;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    const unsigned k_extent = shape.input == WgmmaInput::e4m3 ? 32 : 16;
    std::vector<float> a(64 * k_extent), b(std::size_t{shape.n} * k_extent);
    if (shape.a_in_registers) {
      const unsigned per_register = shape.input == WgmmaInput::e4m3 ? 4 : 2;
      for (unsigned t = 0; t < warpgroup_size; ++t)
        for (unsigned reg = 0; reg < 4; ++reg)
          for (unsigned e = 0; e < per_register; ++e) {
            unsigned row = 0, k = 0;
            a_fragment_position(shape.input, t, reg, e, row, k);
            const std::uint32_t word = c.calls[t]->a_registers[reg];
            a[row * k_extent + k] = per_register == 4 ? e4m3_to_float(static_cast<std::uint8_t>(word >> (8 * e)))
                                                      : half_to_float(word, e, shape.input == WgmmaInput::bf16);
          }
    } else {
      for (unsigned row = 0; row < 64; ++row)
        for (unsigned k = 0; k < k_extent; ++k)
          a[row * k_extent + k] = wgmma_element(shape, first.desc_a, false, row, k, 'A', ranges);
    }
    for (unsigned n = 0; n < shape.n; ++n)
      for (unsigned k = 0; k < k_extent; ++k)
        b[n * k_extent + k] = wgmma_element(shape, first.desc_b, shape.b_mn_major, n, k, 'B', ranges);
    // The shared bytes it reads: written before the wgmma (as the completing thread sees it, with a
    // fence.proxy.async after generic writes), and read until every thread of the warpgroup retires it.
    const std::size_t operation = wgmma_operations_.size();
    wgmma_operations_.emplace_back();
    if (detector_.enabled()) {
      std::sort(ranges.begin(), ranges.end());
      std::vector<std::pair<std::size_t, std::size_t>> merged;
      for (const auto& [offset, bytes] : ranges) {
        if (!merged.empty() && merged.back().first + merged.back().second >= offset)
          merged.back().second = std::max(merged.back().second, offset + bytes - merged.back().first);
        else
          merged.emplace_back(offset, bytes);
      }
      for (const auto& [offset, bytes] : merged) {
        check(detector_.check_read(running_, offset, bytes, Access::wgmma), running_);
        detector_.add_wgmma_readers(offset, bytes, +1);
      }
      wgmma_operations_[operation].ranges = std::move(merged);
    }
    const unsigned count = shape.n / 2;
    for (unsigned t = 0; t < warpgroup_size; ++t) {
      const unsigned warp = t / warp_size;
      const unsigned lane = t % warp_size;
      const WgmmaCall& call = *c.calls[t];
      Fiber& fiber = fibers_[group * warpgroup_size + t];
      // A wgmma in flight on the same accumulators is chained: its result is this one's input.
      InFlightWgmma* previous = nullptr;
      for (InFlightWgmma& w : fiber.wgmma_in_flight) {
        if (w.superseded) continue;
        const bool overlaps = w.d < call.d + count && call.d < w.d + w.count;
        if (!overlaps) continue;
        if (w.d != call.d || w.count != count)
          throw EmulationError(location_of(fiber.linear) + ": " + wgmma_name(shape) +
                               ": its accumulators overlap those of a wgmma in flight without being the same registers");
        previous = &w;
      }
      InFlightWgmma next;
      next.d = call.d;
      next.count = count;
      next.operation = operation;
      next.result.resize(count);
      if (shape.a_in_registers) {
        next.a_registers = call.a_registers;
        std::copy(call.a_registers, call.a_registers + 4, next.a_at_issue.begin());
      }
      for (unsigned i = 0; i < count; ++i) {
        const unsigned j = i / 4, h = (i / 2) % 2, column = i % 2;
        const unsigned row = 16 * warp + lane / 4 + 8 * h;
        const unsigned col = 8 * j + 2 * (lane % 4) + column;
        float acc = 0.0f;
        if (first.accumulate) acc = previous != nullptr ? previous->result[i] : call.d[i];
        if (shape.input == WgmmaInput::e4m3) {  // the tensor core's narrow adder (model/fp8_accumulation.hpp)
          acc = hopper_e4m3_accumulate(acc, &a[row * k_extent], 1, &b[col * k_extent], 1, k_extent);
        } else {
          for (unsigned k = 0; k < k_extent; ++k) acc += a[row * k_extent + k] * b[col * k_extent + k];
        }
        next.result[i] = acc;
      }
      if (previous != nullptr) previous->superseded = true;
      for (unsigned i = 0; i < count; ++i) std::memcpy(&call.d[i], &accumulator_poison, sizeof(float));
      fiber.wgmma_in_flight.push_back(std::move(next));
    }
  }

  // A whole-warp instruction (.aligned, no member mask operand): the calling warp must have 32 lanes.
  void require_whole_warp(CollectiveKind kind) {
    const unsigned warp = running().linear / warp_size;
    if (warps_[warp].existing_lanes != ~0u)
      fail_here(fmt::format("{} needs a whole warp, but warp {} has only {} threads (a CTA of {} threads)",
                            instruction_name(kind), warp, thread_count_ - warp * warp_size, thread_count_));
  }

  // ldmatrix: checks the calling lane's row address before it enters the collective, so the error names it.
  void check_ldmatrix_row(CollectiveKind kind, unsigned matrices, std::size_t offset) const {
    const unsigned lane = fibers_[running_].linear % warp_size;
    if (lane >= 8 * matrices) return;  // its address is ignored
    if (offset % 16 != 0)
      fail_here(fmt::format("{}: lane {} supplies row address at shared byte offset {}, not 16-byte aligned",
                            instruction_name(kind), lane, offset));
    if (offset > config_.shared_bytes || 16 > config_.shared_bytes - offset)
      fail_here(fmt::format("{}: lane {} supplies row address at shared bytes [{}, {}), outside the launch's {} bytes "
                            "of shared memory",
                            instruction_name(kind), lane, offset, offset + 16, config_.shared_bytes));
  }

  // --- Asynchronous copies (emulator.hpp): issued now, landed later. ---
  std::uint32_t add_copy(AsyncCopy copy) {
    copies_.push_back(std::move(copy));
    return static_cast<std::uint32_t>(copies_.size());
  }

  // Writes a copy's bytes into shared memory and records them as written by its issuer.
  void land(std::uint32_t tag) {
    AsyncCopy& copy = copies_[tag - 1];
    if (copy.landed) return;
    copy.landed = true;
    const std::uint32_t clock = copy.kind == Access::tma_load ? copy.clock : detector_.clock(copy.thread);
    for (const SharedChunk& chunk : copy.chunks) {
      std::memcpy(shared_.get() + chunk.offset, chunk.data, chunk.bytes);
      detector_.set_in_flight_copy(chunk.offset, chunk.bytes, 0);
      detector_.record_write(copy.thread, clock, chunk.offset, chunk.bytes, copy.kind);
    }
    copy.chunks.clear();
    copy.chunks.shrink_to_fit();
  }

  void cp_async(std::size_t offset, const void* source, std::size_t bytes) {
    maybe_yield();
    if (bytes != 4 && bytes != 8 && bytes != 16)
      fail_here(fmt::format("cp.async of {} bytes: PTX allows 4, 8 and 16", bytes));
    if (reinterpret_cast<std::uintptr_t>(source) % bytes != 0)
      fail_here(fmt::format("cp.async of {} bytes from a global address not aligned to {} bytes", bytes, bytes));
    std::byte* destination = shared_memory(offset, bytes, bytes);
    Fiber& self = running();
    check(detector_.check_write(self.linear, offset, bytes, Access::cp_async), self.linear);
    AsyncCopy copy;
    copy.kind = Access::cp_async;
    copy.thread = self.linear;
    copy.group = self.cp_async_committed;
    SharedChunk chunk;
    chunk.offset = offset;
    chunk.bytes = bytes;
    std::memcpy(chunk.data, source, bytes);  // the source is read at issue
    copy.chunks.push_back(chunk);
    const std::uint32_t tag = add_copy(std::move(copy));
    std::memset(destination, 0xFF, bytes);  // poison until it lands
    detector_.set_in_flight_copy(offset, bytes, tag);
    self.cp_async_in_flight.push_back(tag);
  }

  void cp_async_commit_group() {
    maybe_yield();
    ++running().cp_async_committed;  // an empty group is allowed
  }

  // Lands the running thread's copies whose group is committed and older than its newest pending_groups.
  void cp_async_wait_group(unsigned pending_groups) {
    maybe_yield();
    Fiber& self = running();
    if (self.cp_async_committed <= pending_groups) return;
    const unsigned complete_below = self.cp_async_committed - pending_groups;
    std::vector<std::uint32_t> still_in_flight;
    for (const std::uint32_t tag : self.cp_async_in_flight) {
      if (copies_[tag - 1].group < complete_below) land(tag);
      else still_in_flight.push_back(tag);
    }
    self.cp_async_in_flight = std::move(still_in_flight);
  }

  // A TMA load (tma.cpp): checked as a write by the issuing thread now, poison until its phase completes.
  void land_async_copy(std::size_t mbarrier_offset, const SharedChunk* chunks, std::size_t count, std::uint32_t tx_bytes) {
    maybe_yield();
    MBarrier& b = mbarrier_at(mbarrier_offset, "cp.async.bulk.tensor");
    const unsigned self = running_;
    for (std::size_t i = 0; i < count; ++i) check(detector_.check_write(self, chunks[i].offset, chunks[i].bytes, Access::tma_load), self);
    AsyncCopy copy;
    copy.kind = Access::tma_load;
    copy.thread = self;
    copy.mbarrier = mbarrier_offset;
    copy.phase = b.completed;
    copy.clock = detector_.clock(self);  // the clock complete_tx below releases
    copy.chunks.assign(chunks, chunks + count);
    const std::uint32_t tag = add_copy(std::move(copy));
    for (std::size_t i = 0; i < count; ++i) {
      std::memset(shared_.get() + chunks[i].offset, 0xFF, chunks[i].bytes);
      detector_.set_in_flight_copy(chunks[i].offset, chunks[i].bytes, tag);
    }
    b.landing.push_back(tag);
    complete_tx(b, tx_bytes);
  }

  void async_proxy_read(std::size_t offset, std::size_t bytes) {
    maybe_yield();
    check(detector_.read(running_, offset, bytes, Access::tma_store), running_);
  }

  // --- wgmma's asynchrony (emulator.hpp). ---
  void wgmma_fence() {
    maybe_yield();
    running().wgmma_fenced = true;
  }
  void wgmma_commit_group() {
    maybe_yield();
    Fiber& self = running();
    for (InFlightWgmma& w : self.wgmma_in_flight)
      if (w.group == uncommitted) w.group = self.wgmma_committed;
    ++self.wgmma_committed;
  }
  void wgmma_wait_group(unsigned pending_groups) {
    maybe_yield();
    Fiber& self = running();
    self.wgmma_fenced = false;
    const unsigned committed = self.wgmma_committed;
    std::vector<InFlightWgmma> still_in_flight;
    for (InFlightWgmma& w : self.wgmma_in_flight) {
      if (w.group == uncommitted || w.group + pending_groups >= committed) {
        still_in_flight.push_back(std::move(w));
        continue;
      }
      retire(self, w);
    }
    self.wgmma_in_flight = std::move(still_in_flight);
  }

  void retire(Fiber& self, InFlightWgmma& w) {
    if (w.a_registers != nullptr && !std::equal(w.a_at_issue.begin(), w.a_at_issue.end(), w.a_registers))
      fail_here("the A registers of a wgmma.mma_async changed before wgmma.wait_group retired it (PTX: registers "
                "passed as A must not be modified while the wgmma is in flight)");
    if (!w.superseded) {
      for (unsigned i = 0; i < w.count; ++i) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &w.d[i], sizeof bits);
        if (bits != accumulator_poison)
          fail_here(fmt::format("accumulator register d[{}] of a wgmma.mma_async in flight was written (or read and "
                                "written back) before wgmma.wait_group retired it",
                                i));
      }
      std::memcpy(w.d, w.result.data(), w.count * sizeof(float));
    }
    WgmmaOperation& operation = wgmma_operations_[w.operation];
    if (++operation.retired < warpgroup_size) return;
    for (const auto& [offset, bytes] : operation.ranges) {
      detector_.add_wgmma_readers(offset, bytes, -1);
      detector_.record_read(self.linear, detector_.clock(self.linear), offset, bytes, Access::wgmma);
    }
    operation.ranges.clear();
    operation.ranges.shrink_to_fit();
  }

  // A thread's kernel body has returned: its copies land (nothing can be ordered after them), and wgmma in
  // flight is an error (its accumulators and shared reads outlive the thread).
  void thread_finished() {
    Fiber& self = running();
    for (const std::uint32_t tag : self.cp_async_in_flight) land(tag);
    self.cp_async_in_flight.clear();
    if (!self.wgmma_in_flight.empty())
      fail_here(fmt::format("the thread exits with {} wgmma.mma_async in flight: no wgmma.wait_group retired them",
                            self.wgmma_in_flight.size()));
  }

  std::byte* shared_memory(std::size_t offset, std::size_t size, std::size_t alignment) const {
    if (alignment == 0 || offset % alignment != 0)
      fail_here(fmt::format("shared memory at byte offset {} is not aligned to {} bytes", offset, alignment));
    if (offset > config_.shared_bytes || size > config_.shared_bytes - offset)
      fail_here(fmt::format("shared memory bytes [{}, {}) exceed the launch's {} bytes of shared memory", offset,
                            offset + size, config_.shared_bytes));
    return shared_.get() + offset;
  }

 private:
  // Computes every member lane's result words into its fiber; run by the last lane to arrive.
  void complete(const Collective& c, unsigned warp_base) {
    switch (c.kind) {
      case CollectiveKind::mma_m16n8k16_f16:
      case CollectiveKind::mma_m16n8k16_bf16: mma_results(c, warp_base); return;
      case CollectiveKind::ldmatrix_x1:
      case CollectiveKind::ldmatrix_x2:
      case CollectiveKind::ldmatrix_x4:
      case CollectiveKind::ldmatrix_x1_trans:
      case CollectiveKind::ldmatrix_x2_trans:
      case CollectiveKind::ldmatrix_x4_trans: ldmatrix_results(c, warp_base); return;
      case CollectiveKind::stmatrix_x1:
      case CollectiveKind::stmatrix_x2:
      case CollectiveKind::stmatrix_x4:
      case CollectiveKind::stmatrix_x1_trans:
      case CollectiveKind::stmatrix_x2_trans:
      case CollectiveKind::stmatrix_x4_trans: stmatrix_results(c, warp_base); return;
      case CollectiveKind::warp_sync: warp_sync_results(c, warp_base); return;
      default: break;
    }
    for (unsigned l = 0; l < warp_size; ++l) {
      if ((c.member_mask & (1u << l)) == 0) continue;
      fibers_[warp_base + l].collective_result[0] = lane_result(c, l);
    }
  }

  // mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32. Fragment layouts: PTX ISA "Matrix
  // Fragments for mma.m16n8k16 with floating point type", with
  // groupID = lane >> 2 and threadID_in_group = lane % 4:
  //   A (16x16, .row), a0..a7 in 4 .b32 registers, low half first: row groupID for a0,a1,a4,a5 and
  //     groupID + 8 for a2,a3,a6,a7; col threadID_in_group*2 + (i & 1) for a0..a3, + 8 for a4..a7.
  //   B (16x8, .col), b0..b3 in 2 .b32 registers: row threadID_in_group*2 + (i & 1) for b0,b1, + 8 for
  //     b2,b3; col groupID.
  //   C and D (16x8 f32), c0..c3: row groupID for c0,c1 and groupID + 8 for c2,c3; col
  //     threadID_in_group*2 + (i & 1).
  // Accumulation order (emulator.hpp): acc = C[m][n], then acc += A[m][k]·B[k][n] for k = 0..15, in fp32.
  void mma_results(const Collective& c, unsigned warp_base) {
    const bool bf16 = c.kind == CollectiveKind::mma_m16n8k16_bf16;
    float a[16][16];
    float b[16][8];
    float acc[16][8];
    for (unsigned lane = 0; lane < warp_size; ++lane) {
      const Operands& op = c.operands[lane];
      const unsigned group = lane >> 2;
      const unsigned thread_in_group = lane % 4;
      for (unsigned i = 0; i < 8; ++i) {
        const unsigned row = group + ((i >> 1) & 1u) * 8;  // a2,a3,a6,a7: groupID + 8
        const unsigned col = thread_in_group * 2 + (i & 1u) + (i >= 4 ? 8 : 0);
        a[row][col] = half_to_float(op[i / 2], i % 2, bf16);
      }
      for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = thread_in_group * 2 + (i & 1u) + (i >= 2 ? 8 : 0);
        b[row][group] = half_to_float(op[4 + i / 2], i % 2, bf16);
      }
      for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = group + (i >= 2 ? 8 : 0);
        const unsigned col = thread_in_group * 2 + (i & 1u);
        std::memcpy(&acc[row][col], &op[6 + i], sizeof(float));
      }
    }
    for (unsigned m = 0; m < 16; ++m)
      for (unsigned n = 0; n < 8; ++n)
        for (unsigned k = 0; k < 16; ++k) {
          const float product = a[m][k] * b[k][n];  // exact (at most 22 significant bits) unless it underflows
          acc[m][n] += product;
        }
    for (unsigned lane = 0; lane < warp_size; ++lane) {
      const unsigned group = lane >> 2;
      const unsigned thread_in_group = lane % 4;
      Results& d = fibers_[warp_base + lane].collective_result;
      for (unsigned i = 0; i < 4; ++i)
        std::memcpy(&d[i], &acc[group + (i >= 2 ? 8 : 0)][thread_in_group * 2 + (i & 1u)], sizeof(float));
    }
  }

  // Half `which` (0: bits 0-15, the lower-numbered element) of a .f16x2 or .bf16x2 register as a float.
  static float half_to_float(std::uint32_t word, unsigned which, bool bf16) {
    const std::uint32_t h = (word >> (16 * which)) & 0xffffu;
    std::uint32_t bits = 0;
    if (bf16) {
      bits = h << 16;  // bfloat16 is the upper half of a binary32
    } else {
      const std::uint32_t sign = (h & 0x8000u) << 16;
      const std::uint32_t exponent = (h >> 10) & 0x1fu;
      std::uint32_t mantissa = h & 0x3ffu;
      if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN
      } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
      } else if (mantissa == 0) {
        bits = sign;
      } else {  // subnormal: normalize
        int e = 113;
        while ((mantissa & 0x400u) == 0) {
          mantissa <<= 1;
          --e;
        }
        bits = sign | (static_cast<std::uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13);
      }
    }
    float value = 0.0f;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }

  // ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16. PTX ISA "Warp-level matrix load instruction:
  // ldmatrix" (figure "ldmatrix fragment layout"): row r of matrix i
  // (8 .b16 elements, 16 bytes) is read from the address in lane 8i + r. Lane l receives in d[i] the
  // elements (row l/4, cols 2·(l%4) and 2·(l%4)+1) of matrix i, the lower column in bits 0-15; with .trans
  // the matrix is transposed on the way, so lane l receives (rows 2·(l%4) and 2·(l%4)+1, col l/4).
  void ldmatrix_results(const Collective& c, unsigned warp_base) {
    unsigned matrices = 1;
    if (c.kind == CollectiveKind::ldmatrix_x2 || c.kind == CollectiveKind::ldmatrix_x2_trans) matrices = 2;
    if (c.kind == CollectiveKind::ldmatrix_x4 || c.kind == CollectiveKind::ldmatrix_x4_trans) matrices = 4;
    const bool transpose = c.kind == CollectiveKind::ldmatrix_x1_trans ||
                           c.kind == CollectiveKind::ldmatrix_x2_trans || c.kind == CollectiveKind::ldmatrix_x4_trans;
    for (unsigned i = 0; i < matrices; ++i) {
      std::uint16_t m[8][8];
      for (unsigned r = 0; r < 8; ++r) {
        const Operands& op = c.operands[8 * i + r];
        const std::size_t offset = std::size_t{op[0]} | (std::size_t{op[1]} << 32);  // checked at arrival
        // The row is read on behalf of the lane that supplied its address.
        check(detector_.read(warp_base + 8 * i + r, offset, sizeof m[r], Access::ldmatrix), warp_base + 8 * i + r);
        std::memcpy(m[r], shared_.get() + offset, sizeof m[r]);
      }
      for (unsigned lane = 0; lane < warp_size; ++lane) {
        const unsigned row = lane / 4;
        const unsigned col = 2 * (lane % 4);
        const std::uint16_t low = transpose ? m[col][row] : m[row][col];
        const std::uint16_t high = transpose ? m[col + 1][row] : m[row][col + 1];
        fibers_[warp_base + lane].collective_result[i] = std::uint32_t{low} | (std::uint32_t{high} << 16);
      }
    }
  }

  // stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16, PTX ISA "stmatrix": ldmatrix in reverse. Row r of
  // matrix i goes to the address in lane 8i + r (operands 0-1); lane l's register i (operand 2 + i) holds
  // (row l/4, cols 2(l%4) and +1) of matrix i, or with .trans (rows 2(l%4) and +1, col l/4).
  void stmatrix_results(const Collective& c, unsigned warp_base) {
    unsigned matrices = 1;
    if (c.kind == CollectiveKind::stmatrix_x2 || c.kind == CollectiveKind::stmatrix_x2_trans) matrices = 2;
    if (c.kind == CollectiveKind::stmatrix_x4 || c.kind == CollectiveKind::stmatrix_x4_trans) matrices = 4;
    const bool transpose = c.kind == CollectiveKind::stmatrix_x1_trans ||
                           c.kind == CollectiveKind::stmatrix_x2_trans || c.kind == CollectiveKind::stmatrix_x4_trans;
    for (unsigned i = 0; i < matrices; ++i) {
      std::uint16_t m[8][8];
      for (unsigned lane = 0; lane < warp_size; ++lane) {
        const unsigned row = lane / 4;
        const unsigned col = 2 * (lane % 4);
        const std::uint32_t word = c.operands[lane][2 + i];
        const auto low = static_cast<std::uint16_t>(word & 0xffffu);
        const auto high = static_cast<std::uint16_t>(word >> 16);
        if (transpose) {
          m[col][row] = low;
          m[col + 1][row] = high;
        } else {
          m[row][col] = low;
          m[row][col + 1] = high;
        }
      }
      for (unsigned r = 0; r < 8; ++r) {
        const Operands& op = c.operands[8 * i + r];
        const std::size_t offset = std::size_t{op[0]} | (std::size_t{op[1]} << 32);  // checked at arrival
        check(detector_.write(warp_base + 8 * i + r, offset, sizeof m[r], Access::stmatrix), warp_base + 8 * i + r);
        std::memcpy(shared_.get() + offset, m[r], sizeof m[r]);
      }
    }
  }

  // bar.warp.sync: every member lane releases, then acquires what all of them released.
  void warp_sync_results(const Collective& c, unsigned warp_base) {
    if (!detector_.enabled()) return;
    VectorClock joined = detector_.empty_clock();
    for (unsigned l = 0; l < warp_size; ++l)
      if ((c.member_mask & (1u << l)) != 0) detector_.release(warp_base + l, joined);
    for (unsigned l = 0; l < warp_size; ++l)
      if ((c.member_mask & (1u << l)) != 0) detector_.acquire(warp_base + l, joined);
  }

  // The result for `lane`. Shuffles: PTX ISA "shfl.sync" (9.7.8.6 in ISA 7.x), the source lane j and whether it is in range
  // (segment mask and clamp from c). Votes: PTX ISA vote.sync, over the lanes of the member mask.
  std::uint32_t lane_result(const Collective& c, unsigned lane) const {
    if (c.kind == CollectiveKind::vote_ballot || c.kind == CollectiveKind::vote_all ||
        c.kind == CollectiveKind::vote_any) {
      std::uint32_t ballot = 0;
      for (unsigned l = 0; l < warp_size; ++l)
        if ((c.member_mask & (1u << l)) != 0 && c.operands[l][0] != 0) ballot |= 1u << l;
      if (c.kind == CollectiveKind::vote_ballot) return ballot;
      if (c.kind == CollectiveKind::vote_all) return ballot == c.member_mask ? 1u : 0u;
      return ballot != 0 ? 1u : 0u;
    }
    const int b = static_cast<int>(c.operands[lane][1] & 0x1fu);
    const int clamp = static_cast<int>(c.operands[lane][2] & 0x1fu);
    const int segmask = static_cast<int>((c.operands[lane][2] >> 8) & 0x1fu);
    const int self = static_cast<int>(lane);
    const int max_lane = (self & segmask) | (clamp & ~segmask);
    const int min_lane = self & segmask;
    int j = self;
    bool in_range = false;
    switch (c.kind) {
      case CollectiveKind::shfl_up: j = self - b; in_range = j >= max_lane; break;
      case CollectiveKind::shfl_down: j = self + b; in_range = j <= max_lane; break;
      case CollectiveKind::shfl_bfly: j = self ^ b; in_range = j <= max_lane; break;
      default: j = min_lane | (b & ~segmask); in_range = j <= max_lane; break;
    }
    if (!in_range) j = self;  // out of range: the lane keeps its own value
    // Reading a lane outside the member mask is undefined in the ISA; the emulator reports it.
    if ((c.member_mask & (1u << j)) == 0)
      fail_here(fmt::format("{} with member mask {:#010x}: lane {} reads lane {}, which is not in the mask",
                            instruction_name(c.kind), c.member_mask, lane, j));
    return c.operands[static_cast<unsigned>(j)][0];
  }

  void release(Fiber& fiber) {
    fiber.state = FiberState::runnable;
    fiber.wait = WaitKind::none;
  }

  void suspend() {
    running().state = FiberState::blocked;
    switch_to_scheduler();
  }

  // Back to the scheduler from the running fiber, which resumes here when scheduled again (or unwinds when
  // the launch is being abandoned).
  void switch_to_scheduler() {
    Fiber& self = running();
    void* fake_stack = nullptr;
    sanitizer_start_switch(&fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
    FiberContext::swap(self.context, scheduler_);
    sanitizer_finish_switch(fake_stack, nullptr, nullptr);
    if (cancelling_) throw FiberCancelled{};
  }

  void resume(unsigned i) {
    running_ = i;
    fibers_[i].started = true;
    void* fake_stack = nullptr;
    sanitizer_start_switch(&fake_stack, stacks_.stack(i), stacks_.stack_bytes());
    FiberContext::swap(scheduler_, fibers_[i].context);
    sanitizer_finish_switch(fake_stack, nullptr, nullptr);
  }


  void run_block() {
    std::memset(shared_.get(), 0xFF, config_.shared_bytes);  // poison: every float and double reads as NaN
    for (Barrier& b : barriers_) b = Barrier{};
    mbarriers_.clear();
    copies_.clear();
    wgmma_operations_.clear();
    detector_.begin_cta();
    for (Warp& w : warps_) w.open.clear();
    for (WarpgroupCollective& g : warpgroups_) g = WarpgroupCollective{};
    for (unsigned i = 0; i < thread_count_; ++i) {
      Fiber& fiber = fibers_[i];
      fiber.state = FiberState::runnable;
      fiber.started = false;
      fiber.wait = WaitKind::none;
      fiber.cp_async_in_flight.clear();
      fiber.cp_async_committed = 0;
      fiber.wgmma_in_flight.clear();
      fiber.wgmma_committed = 0;
      fiber.wgmma_fenced = false;
      fiber.context.prepare(stacks_.stack(i), stacks_.stack_bytes(), fiber_entry);
    }
    for (unsigned i = 0; i < thread_count_; ++i) order_[i] = i;
    for (;;) {
      bool progressed = false;
      if (seed_ != 0) std::shuffle(order_.begin(), order_.end(), random_);
      for (const unsigned i : order_) {
        if (fibers_[i].state != FiberState::runnable) continue;
        resume(i);
        progressed = true;
        if (failed_) abandon_block(error_message_);
      }
      const bool all_exited = std::all_of(fibers_.begin(), fibers_.end(),
                                          [](const Fiber& f) { return f.state == FiberState::exited; });
      if (all_exited) {
        check_transaction_bytes_settled();
        check_barriers_balanced();
        return;
      }
      if (!progressed) abandon_block(deadlock_message());
    }
  }

  // At the end of a CTA every mbarrier's transaction bytes must be settled: a count left non-zero means the
  // bytes announced by expect_tx and those delivered by copies disagree, so some phase completed early
  // (before all its data landed: a race on the GPU, invisible here where copies land at issue) or can never
  // complete.
  void check_transaction_bytes_settled() const {
    for (const auto& [offset, b] : mbarriers_)
      if (b.pending_tx != 0)
        throw EmulationError(fmt::format("kernel '{}' block {}: the mbarrier at shared offset {} ends the CTA with {} "
                                         "transaction bytes pending: the bytes its expect_tx announced and those its "
                                         "copies delivered disagree",
                                         config_.kernel_name, format_dim(block_), offset, b.pending_tx));
  }

  // At the end of a CTA no named barrier may hold arrivals: a bar.arrive that no bar.sync ever matched
  // means the producer and consumer counts disagree (on the GPU the next round of that barrier, in a loop
  // or a persistent CTA's next tile, would complete early).
  void check_barriers_balanced() const {
    for (unsigned id = 0; id < barrier_count; ++id) {
      const Barrier& b = barriers_[id];
      if (b.arrived != 0)
        throw EmulationError(fmt::format("kernel '{}' block {}: named barrier {} ends the CTA with {} of its {} "
                                         "threads arrived ({} of them by bar.arrive): its arrivals and waits do not "
                                         "balance",
                                         config_.kernel_name, format_dim(block_), id, b.arrived, b.expected,
                                         b.arrive_only));
    }
  }

  // Unwinds every suspended fiber of the CTA, then throws message on the caller's side.
  [[noreturn]] void abandon_block(std::string message) {
    cancelling_ = true;
    for (unsigned i = 0; i < thread_count_; ++i) {
      Fiber& fiber = fibers_[i];
      if (fiber.state == FiberState::exited) continue;
      if (fiber.started) resume(i);
      fiber.state = FiberState::exited;
    }
    cancelling_ = false;
    throw EmulationError(message);
  }

  std::string wait_description(const Fiber& fiber) const {
    if (fiber.wait == WaitKind::mbarrier) {
      const MBarrier& b = mbarriers_.at(fiber.wait_mbarrier);
      return fmt::format("wait on the mbarrier at shared offset {} for its phase of parity {} ({} of {} arrivals "
                         "pending, {} transaction bytes pending)",
                         fiber.wait_mbarrier, fiber.wait_parity, b.pending_arrivals, b.count, b.pending_tx);
    }
    if (fiber.wait == WaitKind::warpgroup) {
      const WarpgroupCollective& c = warpgroups_[fiber.wait_barrier];
      return fmt::format("wait in a wgmma of warpgroup {} ({} of {} threads arrived)", fiber.wait_barrier, c.arrived,
                         warpgroup_size);
    }
    if (fiber.wait == WaitKind::barrier) {
      const Barrier& b = barriers_[fiber.wait_barrier];
      return fmt::format("wait at barrier {} ({} of {} threads arrived)", fiber.wait_barrier, b.arrived, b.expected);
    }
    std::uint32_t arrived = 0;
    for (const Collective& c : warps_[fiber.linear / warp_size].open)
      if (c.member_mask == fiber.wait_mask) arrived = c.arrived;
    return fmt::format("wait in {} of warp {} with member mask {:#010x} (lanes arrived {:#010x})",
                       instruction_name(fiber.wait_collective), fiber.linear / warp_size, fiber.wait_mask, arrived);
  }

  std::string deadlock_message() const {
    std::vector<std::pair<std::string, std::vector<unsigned>>> groups;  // in order of first appearance
    unsigned exited = 0;
    for (const Fiber& fiber : fibers_) {
      if (fiber.state == FiberState::exited) {
        ++exited;
        continue;
      }
      std::string what = wait_description(fiber);
      auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
      if (group == groups.end()) {
        groups.emplace_back(std::move(what), std::vector<unsigned>{});
        group = groups.end() - 1;
      }
      group->second.push_back(fiber.linear);
    }
    std::string message = fmt::format("kernel '{}' block {}: deadlock, no thread can proceed:", config_.kernel_name,
                                      format_dim(block_));
    constexpr std::size_t named_threads = 6;
    for (const auto& [what, threads] : groups) {
      message += fmt::format(" {} thread{}", threads.size(), threads.size() == 1 ? "" : "s");
      for (std::size_t i = 0; i < std::min(threads.size(), named_threads); ++i)
        message += " " + format_dim(fibers_[threads[i]].thread);
      if (threads.size() > named_threads) message += fmt::format(" and {} more", threads.size() - named_threads);
      message += " " + what + ";";
    }
    message += fmt::format(" {} of {} threads have exited", exited, thread_count_);
    return message;
  }

  LaunchConfig config_;
  std::function<void()> body_;
  unsigned thread_count_;
  FiberStacks stacks_;
  std::vector<Fiber> fibers_;
  std::vector<Warp> warps_;
  std::vector<WarpgroupCollective> warpgroups_;
  std::array<Barrier, barrier_count> barriers_{};
  std::map<std::size_t, MBarrier> mbarriers_;  // by shared offset, for the current CTA
  std::unique_ptr<std::byte, AlignedDelete> shared_;
  detail::RaceDetector detector_;
  std::vector<AsyncCopy> copies_;                  // the current CTA's asynchronous copies, by tag - 1
  std::vector<WgmmaOperation> wgmma_operations_;  // the current CTA's wgmma operations
  std::uint64_t seed_;                             // 0: the default schedule
  std::mt19937_64 random_;
  std::vector<unsigned> order_;                    // the order of one scheduler round
  FiberContext scheduler_;
  const void* scheduler_stack_bottom_ = nullptr;  // the calling thread's stack, for the sanitizer
  std::size_t scheduler_stack_size_ = 0;
  Dim3 block_;
  unsigned running_ = 0;
  bool failed_ = false;
  bool cancelling_ = false;
  std::string error_message_;
};

[[noreturn]] void fiber_entry() {
  Launch& launch = *current_launch;
  Fiber& fiber = launch.running();
  launch.fiber_started();
  try {
    launch.body()();
    launch.thread_finished();
  } catch (const FiberCancelled&) {
    // the launch is abandoned; the stack is unwound
  } catch (const EmulationError& e) {
    launch.record_failure(e.what());
  } catch (const std::exception& e) {
    launch.record_failure(launch.location() + ": the kernel threw: " + e.what());
  } catch (...) {
    launch.record_failure(launch.location() + ": the kernel threw an exception not derived from std::exception");
  }
  fiber.state = FiberState::exited;
  launch.fiber_exit();
}

Launch& running_launch(const char* what) {
  if (current_launch == nullptr) throw EmulationError(fmt::format("emulator: {} called outside a launch", what));
  return *current_launch;
}

}  // namespace

void launch(const LaunchConfig& config, std::function<void()> kernel_body) {
  if (current_launch != nullptr)
    throw EmulationError(fmt::format("kernel '{}': launched from inside {}", config.kernel_name,
                                     current_launch->location()));
  const Dim3& block = config.block;
  const Dim3& grid = config.grid;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.count() > max_block_threads)
    throw EmulationError(fmt::format("kernel '{}': block {} is empty or has more than {} threads", config.kernel_name,
                                     format_dim(block), max_block_threads));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw EmulationError(fmt::format("kernel '{}': empty grid {}", config.kernel_name, format_dim(grid)));
  if (!kernel_body) throw EmulationError(fmt::format("kernel '{}': no kernel body", config.kernel_name));
  Launch state(config, std::move(kernel_body));
  current_launch = &state;
  try {
    state.run();
  } catch (...) {
    current_launch = nullptr;
    throw;
  }
  current_launch = nullptr;
}

Dim3 thread_idx() { return running_launch("thread_idx").running().thread; }
Dim3 block_idx() { return running_launch("block_idx").block(); }
Dim3 block_dim() { return running_launch("block_dim").config().block; }
Dim3 grid_dim() { return running_launch("grid_dim").config().grid; }
unsigned thread_linear_idx() { return running_launch("thread_linear_idx").running().linear; }
unsigned lane_id() { return thread_linear_idx() % warp_size; }
unsigned warp_id() { return thread_linear_idx() / warp_size; }

std::string current_location() {
  return current_launch == nullptr ? std::string("outside any launch") : current_launch->location();
}

void bar_sync(unsigned id, unsigned thread_count) { running_launch("bar.sync").barrier(id, thread_count, true); }
void bar_arrive(unsigned id, unsigned thread_count) { running_launch("bar.arrive").barrier(id, thread_count, false); }

std::uint32_t shfl_sync(ShuffleMode mode, std::uint32_t member_mask, std::uint32_t value,
                        std::uint32_t source_operand, std::uint32_t clamp_segmask) {
  CollectiveKind kind = CollectiveKind::shfl_idx;
  switch (mode) {
    case ShuffleMode::idx: kind = CollectiveKind::shfl_idx; break;
    case ShuffleMode::up: kind = CollectiveKind::shfl_up; break;
    case ShuffleMode::down: kind = CollectiveKind::shfl_down; break;
    case ShuffleMode::bfly: kind = CollectiveKind::shfl_bfly; break;
  }
  return running_launch("shfl.sync").collective(kind, member_mask, {value, source_operand, clamp_segmask})[0];
}

std::uint32_t vote_ballot(std::uint32_t member_mask, bool predicate) {
  return running_launch("vote.sync").collective(CollectiveKind::vote_ballot, member_mask, {predicate ? 1u : 0u})[0];
}
bool vote_all(std::uint32_t member_mask, bool predicate) {
  return running_launch("vote.sync").collective(CollectiveKind::vote_all, member_mask, {predicate ? 1u : 0u})[0] != 0;
}
bool vote_any(std::uint32_t member_mask, bool predicate) {
  return running_launch("vote.sync").collective(CollectiveKind::vote_any, member_mask, {predicate ? 1u : 0u})[0] != 0;
}

void mbarrier_init(std::size_t offset_bytes, unsigned count) {
  running_launch("mbarrier.init").mbarrier_init(offset_bytes, count);
}
void mbarrier_expect_tx(std::size_t offset_bytes, std::uint32_t tx_bytes) {
  running_launch("mbarrier.expect_tx").mbarrier_expect_tx(offset_bytes, tx_bytes);
}
unsigned mbarrier_arrive(std::size_t offset_bytes, std::uint32_t tx_bytes) {
  return running_launch("mbarrier.arrive").mbarrier_arrive(offset_bytes, tx_bytes);
}
void mbarrier_complete_tx(std::size_t offset_bytes, std::uint32_t tx_bytes) {
  running_launch("complete_tx").mbarrier_complete_tx(offset_bytes, tx_bytes);
}
void mbarrier_wait_parity(std::size_t offset_bytes, unsigned parity) {
  running_launch("mbarrier.try_wait.parity").mbarrier_wait_parity(offset_bytes, parity);
}
bool mbarrier_test_parity(std::size_t offset_bytes, unsigned parity) {
  return running_launch("mbarrier.test_wait.parity").mbarrier_test_parity(offset_bytes, parity);
}

void mma_m16n8k16(MmaInput input, const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], const float (&c)[4],
                  float (&d)[4]) {
  Launch& launch = running_launch("mma.sync");
  const CollectiveKind kind =
      input == MmaInput::bf16 ? CollectiveKind::mma_m16n8k16_bf16 : CollectiveKind::mma_m16n8k16_f16;
  launch.require_whole_warp(kind);
  Operands operands{a[0], a[1], a[2], a[3], b[0], b[1]};
  std::memcpy(&operands[6], c, sizeof c);
  const Results result = launch.collective(kind, ~0u, operands);
  std::memcpy(d, result.data(), sizeof d);
}

void ldmatrix(unsigned matrices, bool transpose, std::size_t row_offset_bytes, std::uint32_t (&d)[4]) {
  Launch& launch = running_launch("ldmatrix");
  CollectiveKind kind = CollectiveKind::ldmatrix_x1;
  switch (matrices) {
    case 1: kind = transpose ? CollectiveKind::ldmatrix_x1_trans : CollectiveKind::ldmatrix_x1; break;
    case 2: kind = transpose ? CollectiveKind::ldmatrix_x2_trans : CollectiveKind::ldmatrix_x2; break;
    case 4: kind = transpose ? CollectiveKind::ldmatrix_x4_trans : CollectiveKind::ldmatrix_x4; break;
    default: launch.fail_here(fmt::format("ldmatrix with {} matrices: PTX allows .x1, .x2 and .x4", matrices));
  }
  launch.require_whole_warp(kind);
  launch.check_ldmatrix_row(kind, matrices, row_offset_bytes);
  const Operands operands{static_cast<std::uint32_t>(row_offset_bytes),
                          static_cast<std::uint32_t>(static_cast<std::uint64_t>(row_offset_bytes) >> 32)};
  const Results result = launch.collective(kind, ~0u, operands);
  for (unsigned i = 0; i < matrices; ++i) d[i] = result[i];
}

void cp_async(std::size_t shared_offset_bytes, const void* source, std::size_t bytes) {
  running_launch("cp.async").cp_async(shared_offset_bytes, source, bytes);
}
void cp_async_commit_group() { running_launch("cp.async.commit_group").cp_async_commit_group(); }
void cp_async_wait_group(unsigned pending_groups) {
  running_launch("cp.async.wait_group").cp_async_wait_group(pending_groups);
}

void sync_warp(std::uint32_t member_mask) {
  (void)running_launch("bar.warp.sync").collective(CollectiveKind::warp_sync, member_mask, {});
}
void fence_proxy_async() { running_launch("fence.proxy.async").fence_proxy_async(); }

void wgmma_fence() { running_launch("wgmma.fence").wgmma_fence(); }
void wgmma_commit_group() { running_launch("wgmma.commit_group").wgmma_commit_group(); }
void wgmma_wait_group(unsigned pending_groups) { running_launch("wgmma.wait_group").wgmma_wait_group(pending_groups); }

void shared_access(const void* address, std::size_t bytes, bool write) {
  running_launch("a shared-memory access").shared_access(address, bytes, write);
}
void land_async_copy(std::size_t mbarrier_offset, const SharedChunk* chunks, std::size_t count, std::uint32_t tx_bytes) {
  running_launch("cp.async.bulk.tensor").land_async_copy(mbarrier_offset, chunks, count, tx_bytes);
}
void async_proxy_read(std::size_t offset, std::size_t bytes) {
  running_launch("cp.async.bulk.tensor").async_proxy_read(offset, bytes);
}

ScopedSchedule::ScopedSchedule(std::uint64_t seed)
    : previous_(scoped_schedule.value_or(0)), had_previous_(scoped_schedule.has_value()) {
  scoped_schedule = seed;
}
ScopedSchedule::~ScopedSchedule() {
  if (had_previous_) scoped_schedule = previous_;
  else scoped_schedule.reset();
}
ScopedChecks::ScopedChecks(bool enabled) : previous_(scoped_checks) { scoped_checks = enabled ? 1 : 0; }
ScopedChecks::~ScopedChecks() { scoped_checks = previous_; }

std::uint64_t effective_schedule_seed(std::uint64_t config_seed) {
  if (config_seed != 0) return config_seed;
  if (scoped_schedule) return *scoped_schedule;
  const char* text = std::getenv("FAPROBE_EMU_SCHEDULE");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const unsigned long long seed = std::strtoull(text, &end, 10);
  if (*end != '\0' || *text == '-')
    throw EmulationError(fmt::format("FAPROBE_EMU_SCHEDULE={}: expected a schedule seed, a non-negative integer "
                                     "(0: the default schedule)",
                                     text));
  return seed;
}

bool checks_enabled() {
  if (scoped_checks >= 0) return scoped_checks == 1;
  const char* text = std::getenv("FAPROBE_EMU_CHECKS");
  if (text == nullptr || *text == '\0') return true;
  const std::string value(text);
  if (value == "on" || value == "1") return true;
  if (value == "off" || value == "0") return false;
  throw EmulationError(fmt::format("FAPROBE_EMU_CHECKS={}: expected on or off", value));
}

void wgmma(const WgmmaShape& shape, std::uint64_t desc_a, const std::uint32_t* a_registers, std::uint64_t desc_b,
           float* d, bool accumulate) {
  Launch& launch = running_launch("wgmma.mma_async");
  const WgmmaCall call{shape, desc_a, desc_b, a_registers, d, accumulate};
  launch.wgmma(call);
}

std::size_t wgmma_element_offset(std::uint64_t descriptor, bool mn_major, unsigned element_bytes, unsigned row,
                                 unsigned k) {
  const std::size_t start = (descriptor & 0x3fffu) << 4;
  const std::size_t leading = ((descriptor >> 16) & 0x3fffu) << 4;
  const std::size_t stride = ((descriptor >> 32) & 0x3fffu) << 4;
  const unsigned base_offset = static_cast<unsigned>((descriptor >> 49) & 0x7u);
  const unsigned mode = static_cast<unsigned>(descriptor >> 62);  // 0 none, 1 128B, 2 64B, 3 32B
  if (base_offset != 0)
    throw EmulationError(fmt::format("{}: wgmma descriptor {:#018x} has base offset {}; the emulator supports 0 "
                                     "(tiles aligned to their swizzle pattern)",
                                     current_location(), descriptor, base_offset));
  const unsigned swizzle_bits = mode == 0 ? 0 : 4 - mode;  // 128B: 3, 64B: 2, 32B: 1
  // With base offset 0, a swizzled operand must start on a row of its swizzle pattern: address bits
  // [7, 7 + B) zero (stepping K inside a row changes bits [4, 7) only). What hardware does otherwise is not
  // verified, and no kernel needs it.
  if (swizzle_bits != 0 && ((start >> 7) & ((std::size_t{1} << swizzle_bits) - 1)) != 0)
    throw EmulationError(fmt::format("{}: wgmma descriptor {:#018x}: start address {} has nonzero swizzle row bits "
                                     "[7, {}) with base offset 0 (a {}-byte swizzled operand must start at a multiple "
                                     "of {} bytes plus an offset below 128)",
                                     current_location(), descriptor, start, 7 + swizzle_bits, 16u << swizzle_bits,
                                     128u << swizzle_bits));
  const std::size_t width = std::size_t{1} << swizzle_bits;  // W: 16-byte chunks per swizzled row
  const unsigned per_chunk = 16 / element_bytes;              // T: elements per 16 bytes
  std::size_t offset = 0;
  if (!mn_major) {
    const std::size_t chunk = k / per_chunk;
    offset = (row % 8) * 16 * width + (row / 8) * stride + (mode == 0 ? chunk * leading : chunk * 16) +
             (k % per_chunk) * element_bytes;
  } else if (mode == 0) {
    offset = (row % per_chunk) * element_bytes + (row / per_chunk) * stride + (k % 8) * 16 + (k / 8) * leading;
  } else {
    offset = (row % per_chunk) * element_bytes + ((row / per_chunk) % width) * 16 + (row / (per_chunk * width)) * leading +
             (k % 8) * 16 * width + (k / 8) * stride;
  }
  const std::size_t address = start + offset;
  return address ^ (((address >> 7) & (width - 1)) << 4);
}

std::uint8_t e4m3_from_float(float value) {
  if (std::isnan(value)) return 0x7f;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  constexpr unsigned largest = 0x7e;  // 448
  if (magnitude >= e4m3_to_float(largest)) return static_cast<std::uint8_t>(sign | largest);
  unsigned low = 0, high = largest;  // e4m3_to_float(low) <= magnitude < e4m3_to_float(high)
  while (high - low > 1) {
    const unsigned middle = (low + high) / 2;
    if (e4m3_to_float(static_cast<std::uint8_t>(middle)) <= magnitude) low = middle;
    else high = middle;
  }
  const float below = magnitude - e4m3_to_float(static_cast<std::uint8_t>(low));
  const float above = e4m3_to_float(static_cast<std::uint8_t>(high)) - magnitude;
  const unsigned nearest = below < above ? low : above < below ? high : (low % 2 == 0 ? low : high);
  return static_cast<std::uint8_t>(sign | nearest);
}

void stmatrix(unsigned matrices, bool transpose, std::size_t row_offset_bytes, const std::uint32_t (&r)[4]) {
  Launch& launch = running_launch("stmatrix");
  CollectiveKind kind = CollectiveKind::stmatrix_x1;
  switch (matrices) {
    case 1: kind = transpose ? CollectiveKind::stmatrix_x1_trans : CollectiveKind::stmatrix_x1; break;
    case 2: kind = transpose ? CollectiveKind::stmatrix_x2_trans : CollectiveKind::stmatrix_x2; break;
    case 4: kind = transpose ? CollectiveKind::stmatrix_x4_trans : CollectiveKind::stmatrix_x4; break;
    default: launch.fail_here(fmt::format("stmatrix with {} matrices: PTX allows .x1, .x2 and .x4", matrices));
  }
  launch.require_whole_warp(kind);
  launch.check_ldmatrix_row(kind, matrices, row_offset_bytes);
  const Operands operands{static_cast<std::uint32_t>(row_offset_bytes),
                          static_cast<std::uint32_t>(static_cast<std::uint64_t>(row_offset_bytes) >> 32), r[0], r[1],
                          r[2], r[3]};
  (void)launch.collective(kind, ~0u, operands);
}

std::byte* shared_memory(std::size_t offset_bytes, std::size_t size_bytes, std::size_t alignment) {
  return running_launch("shared_memory").shared_memory(offset_bytes, size_bytes, alignment);
}

void report_out_of_bounds(const char* space, const char* name, std::size_t index, std::size_t size) {
  throw EmulationError(fmt::format("{}: {} access out of bounds: {}[{}], size {}", current_location(), space, name,
                                   index, size));
}

}  // namespace faprobe::emu
