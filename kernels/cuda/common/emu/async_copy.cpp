// The GPU emulator's asynchronous copies (emulator.hpp, launch.hpp): cp.async and the landing of TMA loads
// (tma.cpp issues them). A copy reads its source at issue; its destination holds 0xFF poison, and is marked
// in flight for the race detector, until it lands: a cp.async when its thread's cp.async.wait_group covers
// its group, a TMA load when the mbarrier phase its bytes complete on completes (sync.cpp). An early access
// is reported naming the copy. Also the async proxy's side of the race detector: fence.proxy.async and a TMA
// store's read of its source.
#include "cuda/common/emu/launch.hpp"

#include <cstring>

#include <fmt/format.h>

namespace faprobe::emu {
namespace detail {

std::uint32_t Launch::add_copy(AsyncCopy copy) {
  copies_.push_back(std::move(copy));
  return static_cast<std::uint32_t>(copies_.size());
}

// Writes a copy's bytes into shared memory and records them as written by its issuer.
void Launch::land(std::uint32_t tag) {
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

void Launch::cp_async(std::size_t offset, const void* source, std::size_t bytes) {
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

void Launch::cp_async_commit_group() {
  maybe_yield();
  ++running().cp_async_committed;  // an empty group is allowed
}

// Lands the running thread's copies whose group is committed and older than its newest pending_groups.
void Launch::cp_async_wait_group(unsigned pending_groups) {
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
void Launch::land_async_copy(std::size_t mbarrier_offset, const SharedChunk* chunks, std::size_t count, std::uint32_t tx_bytes) {
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

void Launch::async_proxy_read(std::size_t offset, std::size_t bytes) {
  maybe_yield();
  check(detector_.read(running_, offset, bytes, Access::tma_store), running_);
}

void Launch::fence_proxy_async() {
  maybe_yield();
  detector_.fence_proxy_async(running_);
}

// A copy in words, for the race detector's report of an early access (Launch::report).
std::string Launch::describe_copy(std::uint32_t tag) const {
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

}  // namespace detail

void cp_async(std::size_t shared_offset_bytes, const void* source, std::size_t bytes) {
  detail::running_launch("cp.async").cp_async(shared_offset_bytes, source, bytes);
}
void cp_async_commit_group() { detail::running_launch("cp.async.commit_group").cp_async_commit_group(); }
void cp_async_wait_group(unsigned pending_groups) {
  detail::running_launch("cp.async.wait_group").cp_async_wait_group(pending_groups);
}

void land_async_copy(std::size_t mbarrier_offset, const SharedChunk* chunks, std::size_t count, std::uint32_t tx_bytes) {
  detail::running_launch("cp.async.bulk.tensor").land_async_copy(mbarrier_offset, chunks, count, tx_bytes);
}
void async_proxy_read(std::size_t offset, std::size_t bytes) {
  detail::running_launch("cp.async.bulk.tensor").async_proxy_read(offset, bytes);
}
void fence_proxy_async() { detail::running_launch("fence.proxy.async").fence_proxy_async(); }

}  // namespace faprobe::emu
