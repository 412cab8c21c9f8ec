// The GPU emulator's shared-memory race detector: happens-before over one CTA's threads, and the shadow of
// every shared byte (compute-sanitizer's racecheck, done inside the emulator where every access is seen).
//
// Idea. Each thread t has a clock, which ticks at every release it performs (a barrier arrival, an mbarrier
// arrival, a __syncwarp, a copy's completion), and a vector clock vc[t]: vc[t][u] is the latest clock of
// thread u that t has synchronized with since. A synchronization object (a named barrier's round, an
// mbarrier phase, a warp sync) carries a vector clock too: a release joins the releaser's knowledge and its
// own clock into it, an acquire joins it into the acquirer's (the FastTrack formulation of Flanagan and
// Freund, PLDI 2009). An access by u at clock c is ordered before an access by t when t == u (program order)
// or vc[t][u] >= c. A barrier that every thread of the CTA passes with bar.sync orders everything before it
// before everything after: instead of joining N vector clocks it starts a new epoch, and an access recorded
// in an earlier epoch is ordered before every later one. That keeps __syncthreads-only kernels (most of
// them) at O(1) per barrier and thread.
//
// Shadow. Per shared byte: the last write (thread, clock, epoch, what kind of access, the writer's
// fence.proxy.async count at the time), up to four reads of the current epoch that are not ordered before
// one another (a read ordered after an earlier one replaces it: a later write ordered after the new read is
// ordered after the old one too), the tag of an asynchronous copy still in flight to the byte, and how many
// in-flight wgmma operations read it. Each entry carries the serial of the CTA that last touched it, so a
// new CTA starts with an empty shadow without clearing it. A byte read by more than four mutually unordered
// threads keeps the four latest reads: a write racing only with an older one is not reported (the one known
// blind spot; every kernel here reads a byte from at most four warps or warpgroups between barriers).
//
// What it reports (a Hazard; the emulator words it and names both threads):
//   - race: two accesses from different threads, one a write, with no synchronization ordering them;
//   - in_flight_copy: an access to a byte that an asynchronous copy (cp.async before its wait_group, TMA
//     before its mbarrier phase completes) has not written yet;
//   - in_flight_wgmma_read: a write to a byte that a wgmma in flight (issued, not yet retired by
//     wgmma.wait_group) reads;
//   - missing_proxy_fence: an async-proxy read (wgmma, TMA store) of a byte last written through the generic
//     proxy (st.shared, stmatrix, cp.async) by a thread that has executed no fence.proxy.async since.
//
// Costs: 64 bytes of shadow per shared byte (a launch of 192 KiB of shared memory: 12 MiB), a few compares
// per byte accessed, and N entries per vector-clock release or acquire (N threads; N² of memory for the
// vector clocks, 0.6 MiB at 384 threads).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace faprobe::emu::detail {

// What touched a shared byte; the async-proxy ones are tma_load, tma_store and wgmma.
enum class Access : std::uint8_t { none, read, write, ldmatrix, stmatrix, cp_async, tma_load, tma_store, wgmma };
const char* access_name(Access access);  // "st.shared", "ldmatrix", ...
bool is_write(Access access);

using VectorClock = std::vector<std::uint32_t>;

struct Hazard {
  enum class Kind { race, in_flight_copy, in_flight_wgmma_read, missing_proxy_fence };
  Kind kind = Kind::race;
  std::size_t offset = 0;        // the shared byte
  Access access = Access::none;  // the access that found it
  unsigned other_thread = 0;     // race, missing_proxy_fence: the earlier access's (linear) thread
  Access other_access = Access::none;
  std::uint32_t tag = 0;         // in_flight_copy: the copy's tag (Launch's table of asynchronous copies)
};

class RaceDetector {
 public:
  // enabled false: every call is a no-op and reports nothing (FAPROBE_EMU_CHECKS=off).
  RaceDetector(unsigned threads, std::size_t shared_bytes, bool enabled);

  bool enabled() const { return enabled_; }
  void begin_cta();
  // Every thread of the CTA passed one bar.sync.
  void full_barrier();
  // A release by thread into sync, and an acquire of sync by thread (sync has one entry per thread).
  void release(unsigned thread, VectorClock& sync);
  void acquire(unsigned thread, const VectorClock& sync);
  VectorClock empty_clock() const { return VectorClock(threads_, 0); }
  std::uint32_t clock(unsigned thread) const { return enabled_ ? clocks_[thread] : 0; }
  void fence_proxy_async(unsigned thread) {
    if (enabled_) ++fences_[thread];
  }

  // Checks an access of [offset, offset + bytes) by thread without recording it; async-proxy reads also
  // need a fence.proxy.async after generic writes.
  std::optional<Hazard> check_read(unsigned thread, std::size_t offset, std::size_t bytes, Access access);
  std::optional<Hazard> check_write(unsigned thread, std::size_t offset, std::size_t bytes, Access access);
  // Records an access as done by thread at clock (its current clock unless a copy landed for it later).
  void record_read(unsigned thread, std::uint32_t clock, std::size_t offset, std::size_t bytes, Access access);
  void record_write(unsigned thread, std::uint32_t clock, std::size_t offset, std::size_t bytes, Access access);
  // check_*, then record_* at the thread's current clock; returns the hazard instead of recording.
  std::optional<Hazard> read(unsigned thread, std::size_t offset, std::size_t bytes, Access access);
  std::optional<Hazard> write(unsigned thread, std::size_t offset, std::size_t bytes, Access access);

  // The bytes an asynchronous copy will write (tag != 0) until it lands (tag 0).
  void set_in_flight_copy(std::size_t offset, std::size_t bytes, std::uint32_t tag);
  // In-flight wgmma reads of [offset, offset + bytes): +1 at issue, -1 at retirement.
  void add_wgmma_readers(std::size_t offset, std::size_t bytes, int delta);

 private:
  struct Cell {
    std::uint32_t cta = 0;       // the CTA serial that last touched the cell; another: the cell is empty
    std::uint32_t in_flight_copy = 0;
    std::uint16_t wgmma_readers = 0;
    Access write_access = Access::none;
    std::uint8_t reader_count = 0;
    std::uint16_t writer = 0;
    std::array<std::uint16_t, 4> readers{};
    std::uint32_t write_epoch = 0;
    std::uint32_t write_clock = 0;
    std::uint32_t write_fences = 0;
    std::uint32_t read_epoch = 0;
    std::array<std::uint32_t, 4> read_clocks{};
    std::array<Access, 4> read_accesses{};
  };

  Cell& cell(std::size_t offset);
  bool ordered(std::uint32_t epoch, unsigned thread_then, std::uint32_t clock_then, unsigned thread_now) const;
  std::uint32_t known(unsigned thread, unsigned other) const { return vector_clocks_[std::size_t{thread} * threads_ + other]; }

  bool enabled_;
  unsigned threads_;
  std::uint32_t cta_ = 0;
  std::uint32_t epoch_ = 0;
  std::vector<Cell> cells_;
  std::vector<std::uint32_t> clocks_;
  std::vector<std::uint32_t> fences_;
  std::vector<std::uint32_t> vector_clocks_;  // threads_ x threads_, row t: vc[t]
};

}  // namespace faprobe::emu::detail
