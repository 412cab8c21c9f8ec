// The GPU emulator's wgmma (emulator.hpp, launch.hpp; the layouts in isa_wgmma.hpp): wgmma.mma_async is a
// collective of the caller's warpgroup whose last thread to arrive reads A and B (shared memory through the
// descriptors and their swizzles, or A from the threads' registers) and computes every thread's D at issue;
// each thread's accumulators then hold a NaN poison pattern until its wgmma.wait_group retires the wgmma's
// group, and the shared bytes it reads count as read until every thread has retired it. Retirement checks
// what must not have happened meanwhile: the accumulators written, the A registers changed. Also the
// descriptor's element offsets and the e4m3 conversions.
#include "cuda/common/emu/launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "model/fp8_accumulation.hpp"

namespace faprobe::emu {
namespace detail {
namespace {

const char* wgmma_input_name(WgmmaInput input) {
  switch (input) {
    case WgmmaInput::f16: return "f16";
    case WgmmaInput::bf16: return "bf16";
    case WgmmaInput::e4m3: return "e4m3";
  }
  return "?";
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

unsigned first_arrived(const WarpgroupCollective& c) {
  for (unsigned t = 0; t < warpgroup_size; ++t)
    if (c.calls[t] != nullptr) return t;
  return 0;
}

// The A element held in registers: (warp w, lane l) of the warpgroup, register r, element e of it.
void a_fragment_position(WgmmaInput input, unsigned thread, unsigned reg, unsigned element, unsigned& row,
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

}  // namespace

std::string wgmma_name(const WgmmaShape& shape) {
  return fmt::format("wgmma.mma_async.sync.aligned.m64n{}k{}.f32.{}.{} (A from {}, B {}-major)", shape.n,
                     shape.input == WgmmaInput::e4m3 ? 32 : 16, wgmma_input_name(shape.input),
                     wgmma_input_name(shape.input), shape.a_in_registers ? "registers" : "shared memory",
                     shape.b_mn_major ? "N" : "K");
}

// wgmma.mma_async: a collective of the caller's warpgroup, computed by the last thread to arrive.
void Launch::wgmma(const WgmmaCall& call) {
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

// Element (row, k) of a wgmma operand in shared memory, as a float, bounds-checked; with the race detector
// on, its bytes are added to ranges.
float Launch::wgmma_element(const WgmmaShape& shape, std::uint64_t descriptor, bool mn_major, unsigned row, unsigned k,
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

// Computes D for the whole warpgroup (run by its last thread to arrive) into each thread's in-flight state,
// and poisons the accumulators until wgmma_wait_group retires it. Layouts: isa_wgmma.hpp.
void Launch::wgmma_results(const WarpgroupCollective& c, unsigned group) {
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

void Launch::wgmma_fence() {
  maybe_yield();
  running().wgmma_fenced = true;
}

void Launch::wgmma_commit_group() {
  maybe_yield();
  Fiber& self = running();
  for (InFlightWgmma& w : self.wgmma_in_flight)
    if (w.group == uncommitted) w.group = self.wgmma_committed;
  ++self.wgmma_committed;
}

void Launch::wgmma_wait_group(unsigned pending_groups) {
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

void Launch::retire(Fiber& self, InFlightWgmma& w) {
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

}  // namespace detail

void wgmma(const WgmmaShape& shape, std::uint64_t desc_a, const std::uint32_t* a_registers, std::uint64_t desc_b,
           float* d, bool accumulate) {
  detail::Launch& launch = detail::running_launch("wgmma.mma_async");
  const detail::WgmmaCall call{shape, desc_a, desc_b, a_registers, d, accumulate};
  launch.wgmma(call);
}
void wgmma_fence() { detail::running_launch("wgmma.fence").wgmma_fence(); }
void wgmma_commit_group() { detail::running_launch("wgmma.commit_group").wgmma_commit_group(); }
void wgmma_wait_group(unsigned pending_groups) {
  detail::running_launch("wgmma.wait_group").wgmma_wait_group(pending_groups);
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
  if (magnitude >= detail::e4m3_to_float(largest)) return static_cast<std::uint8_t>(sign | largest);
  unsigned low = 0, high = largest;  // e4m3_to_float(low) <= magnitude < e4m3_to_float(high)
  while (high - low > 1) {
    const unsigned middle = (low + high) / 2;
    if (detail::e4m3_to_float(static_cast<std::uint8_t>(middle)) <= magnitude) low = middle;
    else high = middle;
  }
  const float below = magnitude - detail::e4m3_to_float(static_cast<std::uint8_t>(low));
  const float above = detail::e4m3_to_float(static_cast<std::uint8_t>(high)) - magnitude;
  const unsigned nearest = below < above ? low : above < below ? high : (low % 2 == 0 ? low : high);
  return static_cast<std::uint8_t>(sign | nearest);
}

}  // namespace faprobe::emu
