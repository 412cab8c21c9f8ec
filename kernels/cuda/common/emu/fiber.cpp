// The emulator's fibers (fiber.hpp): the hand-written stack switch, a fiber's first frame, and the mapping of
// the fiber stacks.
#include "cuda/common/emu/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include <fmt/format.h>

#include "cuda/common/emu/emulator.hpp"

#if defined(FAPROBE_EMU_STACK_SWITCH)
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

namespace faprobe::emu::detail {

void FiberContext::prepare(void* stack, std::size_t bytes, void (*entry)()) {
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

FiberStacks::FiberStacks(std::size_t count, std::size_t stack_bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  stride_ = stack_bytes_ + page;
  size_ = stride_ * count;
  void* memory = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw EmulationError(fmt::format("emulator: cannot map {} bytes of fiber stacks", size_));
  base_ = static_cast<std::byte*>(memory);
  for (std::size_t i = 0; i < count; ++i) mprotect(base_ + i * stride_, page, PROT_NONE);
}
FiberStacks::~FiberStacks() { munmap(base_, size_); }

}  // namespace faprobe::emu::detail
