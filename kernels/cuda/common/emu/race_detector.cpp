// The emulator's race detector (race_detector.hpp): vector clocks, epochs and the per-byte shadow.
#include "cuda/common/emu/race_detector.hpp"

#include <algorithm>

namespace faprobe::emu::detail {

const char* access_name(Access access) {
  switch (access) {
    case Access::none: return "nothing";
    case Access::read: return "a shared-memory load";
    case Access::write: return "a shared-memory store";
    case Access::ldmatrix: return "ldmatrix";
    case Access::stmatrix: return "stmatrix";
    case Access::cp_async: return "cp.async";
    case Access::tma_load: return "a TMA load (cp.async.bulk.tensor)";
    case Access::tma_store: return "a TMA store (cp.async.bulk.tensor)";
    case Access::wgmma: return "wgmma.mma_async";
  }
  return "?";
}

bool is_write(Access access) {
  return access == Access::write || access == Access::stmatrix || access == Access::cp_async ||
         access == Access::tma_load;
}

namespace {
bool is_async_proxy(Access access) {
  return access == Access::tma_load || access == Access::tma_store || access == Access::wgmma;
}
}  // namespace

RaceDetector::RaceDetector(unsigned threads, std::size_t shared_bytes, bool enabled)
    : enabled_(enabled), threads_(threads) {
  if (!enabled_) return;
  cells_.resize(shared_bytes);
  clocks_.assign(threads, 0);
  fences_.assign(threads, 0);
  vector_clocks_.assign(std::size_t{threads} * threads, 0);
}

void RaceDetector::begin_cta() {
  if (!enabled_) return;
  ++cta_;
  full_barrier();
}

void RaceDetector::full_barrier() {
  if (!enabled_) return;
  ++epoch_;
  // Clocks never go back, so vector-clock entries from before never cover an access made after.
  for (std::uint32_t& clock : clocks_) ++clock;
}

void RaceDetector::release(unsigned thread, VectorClock& sync) {
  if (!enabled_) return;
  const std::uint32_t* known_by_thread = &vector_clocks_[std::size_t{thread} * threads_];
  for (unsigned u = 0; u < threads_; ++u) sync[u] = std::max(sync[u], known_by_thread[u]);
  sync[thread] = std::max(sync[thread], clocks_[thread]);
  ++clocks_[thread];
}

void RaceDetector::acquire(unsigned thread, const VectorClock& sync) {
  if (!enabled_) return;
  std::uint32_t* known_by_thread = &vector_clocks_[std::size_t{thread} * threads_];
  for (unsigned u = 0; u < threads_; ++u) known_by_thread[u] = std::max(known_by_thread[u], sync[u]);
}

RaceDetector::Cell& RaceDetector::cell(std::size_t offset) {
  Cell& c = cells_[offset];
  if (c.cta != cta_) {
    c = Cell{};
    c.cta = cta_;
  }
  return c;
}

bool RaceDetector::ordered(std::uint32_t epoch, unsigned thread_then, std::uint32_t clock_then,
                           unsigned thread_now) const {
  return epoch != epoch_ || thread_then == thread_now || known(thread_now, thread_then) >= clock_then;
}

std::optional<Hazard> RaceDetector::check_read(unsigned thread, std::size_t offset, std::size_t bytes,
                                               Access access) {
  if (!enabled_) return std::nullopt;
  for (std::size_t b = offset; b < offset + bytes; ++b) {
    Cell& c = cell(b);
    if (c.in_flight_copy != 0) return Hazard{Hazard::Kind::in_flight_copy, b, access, 0, Access::none, c.in_flight_copy};
    if (c.write_access == Access::none) continue;
    if (!ordered(c.write_epoch, c.writer, c.write_clock, thread))
      return Hazard{Hazard::Kind::race, b, access, c.writer, c.write_access, 0};
    if (is_async_proxy(access) && !is_async_proxy(c.write_access) && fences_[c.writer] == c.write_fences)
      return Hazard{Hazard::Kind::missing_proxy_fence, b, access, c.writer, c.write_access, 0};
  }
  return std::nullopt;
}

std::optional<Hazard> RaceDetector::check_write(unsigned thread, std::size_t offset, std::size_t bytes,
                                                Access access) {
  if (!enabled_) return std::nullopt;
  for (std::size_t b = offset; b < offset + bytes; ++b) {
    Cell& c = cell(b);
    if (c.in_flight_copy != 0) return Hazard{Hazard::Kind::in_flight_copy, b, access, 0, Access::none, c.in_flight_copy};
    if (c.wgmma_readers != 0) return Hazard{Hazard::Kind::in_flight_wgmma_read, b, access, 0, Access::wgmma, 0};
    if (c.write_access != Access::none && !ordered(c.write_epoch, c.writer, c.write_clock, thread))
      return Hazard{Hazard::Kind::race, b, access, c.writer, c.write_access, 0};
    if (c.read_epoch != epoch_) continue;
    for (unsigned r = 0; r < c.reader_count; ++r)
      if (!ordered(c.read_epoch, c.readers[r], c.read_clocks[r], thread))
        return Hazard{Hazard::Kind::race, b, access, c.readers[r], c.read_accesses[r], 0};
  }
  return std::nullopt;
}

void RaceDetector::record_read(unsigned thread, std::uint32_t clock, std::size_t offset, std::size_t bytes,
                               Access access) {
  if (!enabled_) return;
  for (std::size_t b = offset; b < offset + bytes; ++b) {
    Cell& c = cell(b);
    if (c.read_epoch != epoch_) {
      c.read_epoch = epoch_;
      c.reader_count = 0;
    }
    // Drop the reads this one is ordered after (its own included).
    unsigned kept = 0;
    for (unsigned r = 0; r < c.reader_count; ++r) {
      if (c.readers[r] == thread || known(thread, c.readers[r]) >= c.read_clocks[r]) continue;
      c.readers[kept] = c.readers[r];
      c.read_clocks[kept] = c.read_clocks[r];
      c.read_accesses[kept] = c.read_accesses[r];
      ++kept;
    }
    if (kept == c.readers.size()) {  // full: forget the oldest (race_detector.hpp: the one blind spot)
      std::move(c.readers.begin() + 1, c.readers.end(), c.readers.begin());
      std::move(c.read_clocks.begin() + 1, c.read_clocks.end(), c.read_clocks.begin());
      std::move(c.read_accesses.begin() + 1, c.read_accesses.end(), c.read_accesses.begin());
      --kept;
    }
    c.readers[kept] = static_cast<std::uint16_t>(thread);
    c.read_clocks[kept] = clock;
    c.read_accesses[kept] = access;
    c.reader_count = static_cast<std::uint8_t>(kept + 1);
  }
}

void RaceDetector::record_write(unsigned thread, std::uint32_t clock, std::size_t offset, std::size_t bytes,
                                Access access) {
  if (!enabled_) return;
  for (std::size_t b = offset; b < offset + bytes; ++b) {
    Cell& c = cell(b);
    c.writer = static_cast<std::uint16_t>(thread);
    c.write_clock = clock;
    c.write_epoch = epoch_;
    c.write_access = access;
    c.write_fences = fences_[thread];
    c.reader_count = 0;
  }
}

std::optional<Hazard> RaceDetector::read(unsigned thread, std::size_t offset, std::size_t bytes, Access access) {
  if (!enabled_) return std::nullopt;
  if (auto hazard = check_read(thread, offset, bytes, access)) return hazard;
  record_read(thread, clocks_[thread], offset, bytes, access);
  return std::nullopt;
}

std::optional<Hazard> RaceDetector::write(unsigned thread, std::size_t offset, std::size_t bytes, Access access) {
  if (!enabled_) return std::nullopt;
  if (auto hazard = check_write(thread, offset, bytes, access)) return hazard;
  record_write(thread, clocks_[thread], offset, bytes, access);
  return std::nullopt;
}

void RaceDetector::set_in_flight_copy(std::size_t offset, std::size_t bytes, std::uint32_t tag) {
  if (!enabled_) return;
  for (std::size_t b = offset; b < offset + bytes; ++b) cell(b).in_flight_copy = tag;
}

void RaceDetector::add_wgmma_readers(std::size_t offset, std::size_t bytes, int delta) {
  if (!enabled_) return;
  for (std::size_t b = offset; b < offset + bytes; ++b) {
    Cell& c = cell(b);
    c.wgmma_readers = static_cast<std::uint16_t>(c.wgmma_readers + delta);
  }
}

}  // namespace faprobe::emu::detail
