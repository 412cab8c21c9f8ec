// The GPU emulator's synchronisation (emulator.hpp, launch.hpp): bar.sync / bar.arrive barriers, which
// count threads and complete when the last one arrives, and Hopper's mbarriers, which track phases, pending
// arrivals and transaction bytes, and land the TMA loads of a phase when it completes. Each completion is a
// release and acquire for the race detector (a barrier of the whole CTA starts a new epoch instead); at a
// CTA's end a named barrier left with arrivals, or an mbarrier with transaction bytes unsettled, is reported.
#include "cuda/common/emu/launch.hpp"

#include <fmt/format.h>

namespace faprobe::emu {
namespace detail {

void Launch::barrier(unsigned id, unsigned thread_count, bool wait) {
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
void Launch::complete_barrier(Barrier& b) {
  if (!detector_.enabled()) return;
  if (b.expected == thread_count_ && b.arrive_only == 0) {
    detector_.full_barrier();
    return;
  }
  if (b.clock.empty()) b.clock = detector_.empty_clock();
  for (unsigned waiter : b.waiters) detector_.release(waiter, b.clock);
  for (unsigned waiter : b.waiters) detector_.acquire(waiter, b.clock);
}

// At the end of a CTA no named barrier may hold arrivals: a bar.arrive that no bar.sync ever matched
// means the producer and consumer counts disagree (on the GPU the next round of that barrier, in a loop
// or a persistent CTA's next tile, would complete early).
void Launch::check_barriers_balanced() const {
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

// --- mbarrier (emulator.hpp). ---
MBarrier& Launch::mbarrier_at(std::size_t offset, const char* instruction) {
  (void)shared_memory(offset, 8, 8);  // the 8-byte object inside the launch's shared memory, aligned
  const auto found = mbarriers_.find(offset);
  if (found == mbarriers_.end())
    fail_here(fmt::format("{} on shared offset {}: no mbarrier was initialized there (mbarrier.init)", instruction, offset));
  return found->second;
}

void Launch::mbarrier_init(std::size_t offset, unsigned count) {
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

// Completes the current phase when nothing is pending: lands its TMA loads, releases its waiters (who
// acquire the phase's releases) and starts the next phase.
void Launch::mbarrier_complete_if_done(MBarrier& b) {
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
void Launch::mbarrier_release(MBarrier& b) {
  if (!detector_.enabled()) return;
  if (b.phase_clock.empty()) b.phase_clock = detector_.empty_clock();
  detector_.release(running_, b.phase_clock);
}

void Launch::mbarrier_expect_tx(std::size_t offset, std::uint32_t tx_bytes) {
  maybe_yield();
  MBarrier& b = mbarrier_at(offset, "mbarrier.expect_tx");
  b.pending_tx += tx_bytes;
}

unsigned Launch::mbarrier_arrive(std::size_t offset, std::uint32_t tx_bytes) {
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

void Launch::mbarrier_complete_tx(std::size_t offset, std::uint32_t tx_bytes) {
  maybe_yield();
  complete_tx(mbarrier_at(offset, "complete_tx"), tx_bytes);
}

void Launch::complete_tx(MBarrier& b, std::uint32_t tx_bytes) {
  b.pending_tx -= tx_bytes;
  mbarrier_release(b);
  // PTX lets the tx-count go negative when the bytes land before the expect_tx; the phase completes only
  // when arrivals and bytes are both settled.
  mbarrier_complete_if_done(b);
}

bool Launch::mbarrier_test_parity(std::size_t offset, unsigned parity) {
  maybe_yield();
  const MBarrier& b = mbarrier_at(offset, "mbarrier.test_wait.parity");
  const bool done = mbarrier_phase_done(b, parity);
  if (done && !b.completed_clock.empty()) detector_.acquire(running_, b.completed_clock);
  return done;
}

void Launch::mbarrier_wait_parity(std::size_t offset, unsigned parity) {
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

// At the end of a CTA every mbarrier's transaction bytes must be settled: a count left non-zero means the
// bytes announced by expect_tx and those delivered by copies disagree, so some phase completed early
// (before all its data landed: a race on the GPU) or can never complete.
void Launch::check_transaction_bytes_settled() const {
  for (const auto& [offset, b] : mbarriers_)
    if (b.pending_tx != 0)
      throw EmulationError(fmt::format("kernel '{}' block {}: the mbarrier at shared offset {} ends the CTA with {} "
                                       "transaction bytes pending: the bytes its expect_tx announced and those its "
                                       "copies delivered disagree",
                                       config_.kernel_name, format_dim(block_), offset, b.pending_tx));
}

}  // namespace detail

void bar_sync(unsigned id, unsigned thread_count) { detail::running_launch("bar.sync").barrier(id, thread_count, true); }
void bar_arrive(unsigned id, unsigned thread_count) {
  detail::running_launch("bar.arrive").barrier(id, thread_count, false);
}

void mbarrier_init(std::size_t offset_bytes, unsigned count) {
  detail::running_launch("mbarrier.init").mbarrier_init(offset_bytes, count);
}
void mbarrier_expect_tx(std::size_t offset_bytes, std::uint32_t tx_bytes) {
  detail::running_launch("mbarrier.expect_tx").mbarrier_expect_tx(offset_bytes, tx_bytes);
}
unsigned mbarrier_arrive(std::size_t offset_bytes, std::uint32_t tx_bytes) {
  return detail::running_launch("mbarrier.arrive").mbarrier_arrive(offset_bytes, tx_bytes);
}
void mbarrier_complete_tx(std::size_t offset_bytes, std::uint32_t tx_bytes) {
  detail::running_launch("complete_tx").mbarrier_complete_tx(offset_bytes, tx_bytes);
}
void mbarrier_wait_parity(std::size_t offset_bytes, unsigned parity) {
  detail::running_launch("mbarrier.try_wait.parity").mbarrier_wait_parity(offset_bytes, parity);
}
bool mbarrier_test_parity(std::size_t offset_bytes, unsigned parity) {
  return detail::running_launch("mbarrier.test_wait.parity").mbarrier_test_parity(offset_bytes, parity);
}

}  // namespace faprobe::emu
