// The GPU emulator's state for one launch (emulator.hpp), internal to the emulator: kernels never include
// it. One Launch object per launch(), reachable from the fibers through a thread_local pointer (a launch runs
// on one OS thread). Per CTA: one Fiber per thread, 16 barriers, the mbarriers by shared offset, per warp the
// list of collectives that some lanes have entered and others not yet (two halves of a diverged warp may each
// shuffle with their own mask at the same time), per warpgroup the wgmma being entered, and the asynchronous
// copies and wgmma operations issued. Launch's member functions are defined by concern:
//   launch.cpp       the launch and its scheduler: CTAs, fibers (fiber.hpp) run round robin, deadlocks, errors
//                    in words
//   sync.cpp         bar.sync / bar.arrive barriers and mbarriers
//   collectives.cpp  warp collectives: shuffles, votes, __syncwarp, mma.sync, ldmatrix, stmatrix
//   async_copy.cpp   cp.async and the landing of TMA loads: issued now, landed later, poison until then
//   wgmma.cpp        wgmma: a warpgroup collective whose results stay in flight until wgmma.wait_group
// Costs are in emulator.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/common/emu/device.hpp"
#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/emu/fiber.hpp"
#include "cuda/common/emu/race_detector.hpp"

namespace faprobe::emu::detail {

inline constexpr unsigned warp_size = 32;
// What an in-flight accumulator holds until its wgmma retires: a signalling NaN with a recognizable payload.
// Copying it keeps its bits; any arithmetic on it gives a quiet NaN, other bits, so a value computed from
// it and written back is seen at retirement.
inline constexpr std::uint32_t accumulator_poison = 0x7f80deadu;
inline constexpr unsigned uncommitted = ~0u;  // the group of an asynchronous operation not yet committed

enum class FiberState { runnable, blocked, exited };
enum class WaitKind { none, barrier, collective, mbarrier, warpgroup };
enum class CollectiveKind {
  shfl_idx, shfl_up, shfl_down, shfl_bfly, vote_ballot, vote_all, vote_any,
  mma_m16n8k16_f16, mma_m16n8k16_bf16,
  ldmatrix_x1, ldmatrix_x2, ldmatrix_x4, ldmatrix_x1_trans, ldmatrix_x2_trans, ldmatrix_x4_trans,
  stmatrix_x1, stmatrix_x2, stmatrix_x4, stmatrix_x1_trans, stmatrix_x2_trans, stmatrix_x4_trans, warp_sync
};
// Operand words per lane: a shuffle's value, source and clamp; mma.sync m16n8k16's 4 A, 2 B and 4 C registers.
inline constexpr unsigned max_operand_words = 10;
// Result words per lane: mma.sync's 4 D registers, ldmatrix.x4's 4 registers.
inline constexpr unsigned max_result_words = 4;
using Operands = std::array<std::uint32_t, max_operand_words>;
using Results = std::array<std::uint32_t, max_result_words>;

const char* instruction_name(CollectiveKind kind);  // "shfl.sync.idx", ... (collectives.cpp)
// Half `which` (0: bits 0-15, the lower-numbered element) of a .f16x2 or .bf16x2 register as a float.
float half_to_float(std::uint32_t word, unsigned which, bool bf16);

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

inline constexpr unsigned warpgroup_size = 128;

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

std::string wgmma_name(const WgmmaShape& shape);  // "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 (...)"
std::string format_dim(const Dim3& d);             // "(x,y,z)"

struct AlignedDelete {
  void operator()(std::byte* p) const {
    ::operator delete(p, std::align_val_t{emulated_device.shared_base_alignment});
  }
};

class Launch {
 public:
  Launch(const LaunchConfig& config, std::function<void()> body);

  // --- The launch and its scheduler (launch.cpp). ---
  void run();  // every CTA of the grid, one after the other
  const std::function<void()>& body() const { return body_; }
  Fiber& running() { return fibers_[running_]; }
  const LaunchConfig& config() const { return config_; }
  const Dim3& block() const { return block_; }
  std::string location() const { return location_of(running_); }
  std::string location_of(unsigned thread) const {
    return "kernel '" + config_.kernel_name + "' block " + format_dim(block_) + " thread " +
           format_dim(fibers_[thread].thread);
  }
  [[noreturn]] void fail_here(const std::string& what) const { throw EmulationError(location() + ": " + what); }
  // The race detector's findings, in words (emulator.hpp, race_detector.hpp).
  [[noreturn]] void report(const Hazard& hazard, unsigned thread) const;
  void check(const std::optional<Hazard>& hazard, unsigned thread) const {
    if (hazard) report(*hazard, thread);
  }
  // A schedule other than the default also switches fibers at random at instruction-layer calls.
  void maybe_yield() {
    if (seed_ == 0 || random_() % 8 != 0) return;
    switch_to_scheduler();  // stays runnable
  }
  void shared_access(const void* address, std::size_t bytes, bool write);
  std::byte* shared_memory(std::size_t offset, std::size_t size, std::size_t alignment) const;
  // Called first and last on every fiber, around the kernel body.
  void fiber_started();
  [[noreturn]] void fiber_exit();
  void thread_finished();
  void record_failure(std::string message);

  // --- Barriers and mbarriers (sync.cpp). ---
  void barrier(unsigned id, unsigned thread_count, bool wait);
  void mbarrier_init(std::size_t offset, unsigned count);
  void mbarrier_expect_tx(std::size_t offset, std::uint32_t tx_bytes);
  unsigned mbarrier_arrive(std::size_t offset, std::uint32_t tx_bytes);
  void mbarrier_complete_tx(std::size_t offset, std::uint32_t tx_bytes);
  bool mbarrier_test_parity(std::size_t offset, unsigned parity);
  void mbarrier_wait_parity(std::size_t offset, unsigned parity);

  // --- Warp collectives (collectives.cpp). ---
  Results collective(CollectiveKind kind, std::uint32_t member_mask, const Operands& operands);
  void require_whole_warp(CollectiveKind kind);
  void check_ldmatrix_row(CollectiveKind kind, unsigned matrices, std::size_t offset) const;

  // --- Asynchronous copies (async_copy.cpp). ---
  void cp_async(std::size_t offset, const void* source, std::size_t bytes);
  void cp_async_commit_group();
  void cp_async_wait_group(unsigned pending_groups);
  void land_async_copy(std::size_t mbarrier_offset, const SharedChunk* chunks, std::size_t count, std::uint32_t tx_bytes);
  void async_proxy_read(std::size_t offset, std::size_t bytes);
  void fence_proxy_async();

  // --- wgmma (wgmma.cpp). ---
  void wgmma(const WgmmaCall& call);
  void wgmma_fence();
  void wgmma_commit_group();
  void wgmma_wait_group(unsigned pending_groups);

 private:
  // launch.cpp
  void run_block();
  void release(Fiber& fiber) {
    fiber.state = FiberState::runnable;
    fiber.wait = WaitKind::none;
  }
  void suspend();
  void switch_to_scheduler();
  void resume(unsigned i);
  [[noreturn]] void abandon_block(std::string message);
  std::string wait_description(const Fiber& fiber) const;
  std::string deadlock_message() const;
  // sync.cpp
  void complete_barrier(Barrier& b);
  void check_barriers_balanced() const;
  MBarrier& mbarrier_at(std::size_t offset, const char* instruction);
  void mbarrier_complete_if_done(MBarrier& b);
  void mbarrier_release(MBarrier& b);
  void complete_tx(MBarrier& b, std::uint32_t tx_bytes);
  bool mbarrier_phase_done(const MBarrier& b, unsigned parity) const { return b.completed % 2 != (parity & 1u); }
  void check_transaction_bytes_settled() const;
  // collectives.cpp
  void complete(const Collective& c, unsigned warp_base);
  std::uint32_t lane_result(const Collective& c, unsigned lane) const;
  void mma_results(const Collective& c, unsigned warp_base);
  void ldmatrix_results(const Collective& c, unsigned warp_base);
  void stmatrix_results(const Collective& c, unsigned warp_base);
  void warp_sync_results(const Collective& c, unsigned warp_base);
  // async_copy.cpp
  std::uint32_t add_copy(AsyncCopy copy);
  void land(std::uint32_t tag);
  std::string describe_copy(std::uint32_t tag) const;
  // wgmma.cpp
  float wgmma_element(const WgmmaShape& shape, std::uint64_t descriptor, bool mn_major, unsigned row, unsigned k,
                      char operand, std::vector<std::pair<std::size_t, std::size_t>>& ranges) const;
  void wgmma_results(const WarpgroupCollective& c, unsigned group);
  void retire(Fiber& self, InFlightWgmma& w);

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
  RaceDetector detector_;
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

// The launch running on this OS thread, if any.
inline thread_local Launch* current_launch = nullptr;

[[noreturn]] void fail_outside_launch(const char* what);
// The running launch, for the instruction named by what; throws EmulationError outside a launch.
inline Launch& running_launch(const char* what) {
  if (current_launch == nullptr) fail_outside_launch(what);
  return *current_launch;
}

}  // namespace faprobe::emu::detail
