// The GPU emulator's fibers: one cooperative fiber per thread of a CTA, each on its own stack, switched by
// hand on x86-64 (callee-saved registers and stack pointer, no system call) and by swapcontext elsewhere.
// Nothing here knows about launches: the scheduler (launch.cpp) prepares a context per thread, swaps between
// it and its own, and announces every switch to AddressSanitizer through the hooks below.
#pragma once

#include <cstddef>

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

// On x86-64 the switch is nine instructions (faprobe_emu_switch_stack in fiber.cpp): the callee-saved
// registers (rbx, rbp, r12-r15) and the SSE and x87 control words go on the suspended side's own stack and
// only its stack pointer is kept, as the System V ABI allows at a call. glibc's swapcontext also saves and
// restores the signal mask, a system call each way: 2 of every 3 seconds of an emulated FA-2 verify (b1 h4
// s129 d64 bf16 causal: 437,204 rt_sigprocmask calls, 0.77 s of system time in 1.39 s) went there.
// Elsewhere, and where the compiler may mark the code for shadow stacks (-fcf-protection: __CET__ & 2; a
// `ret` to a fiber's first instruction is not on the shadow stack), it is swapcontext.
#if defined(__x86_64__) && !(defined(__CET__) && (__CET__ & 2))
#define FAPROBE_EMU_STACK_SWITCH 1
#else
#include <ucontext.h>
#endif

#if defined(FAPROBE_EMU_STACK_SWITCH)
// faprobe_emu_switch_stack(&from_sp, to_sp): pushes the callee-saved registers and the control words,
// stores the stack pointer in from_sp, loads to_sp, and pops the other side's the same way.
extern "C" void faprobe_emu_switch_stack(void** from_sp, void* to_sp);
#endif

namespace faprobe::emu::detail {

// AddressSanitizer must be told about every stack switch, or it mistakes an exception thrown on a fiber
// stack for stack corruption. No-ops in other builds.
inline void sanitizer_start_switch(void** fake_stack_save, const void* stack_bottom, std::size_t stack_size) {
#if defined(FAPROBE_EMU_ASAN)
  __sanitizer_start_switch_fiber(fake_stack_save, stack_bottom, stack_size);
#else
  (void)fake_stack_save, (void)stack_bottom, (void)stack_size;
#endif
}
inline void sanitizer_finish_switch(void* fake_stack_save, const void** old_bottom, std::size_t* old_size) {
#if defined(FAPROBE_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack_save, old_bottom, old_size);
#else
  (void)fake_stack_save, (void)old_bottom, (void)old_size;
#endif
}

// A suspended fiber (or the scheduler): where it resumes when switched to.
class FiberContext {
 public:
  // Makes this context start `entry` on [stack, stack + bytes) when first switched to. entry must never
  // return: it ends by switching away for good.
  void prepare(void* stack, std::size_t bytes, void (*entry)());

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

// Fiber stacks for one launch: one mmap, each stack with an inaccessible guard page below it, committed
// only as touched.
class FiberStacks {
 public:
  FiberStacks(std::size_t count, std::size_t stack_bytes);
  ~FiberStacks();
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

}  // namespace faprobe::emu::detail
