// The GPU emulator's warp collectives (emulator.hpp, launch.hpp): shfl.sync, vote.sync, bar.warp.sync
// (__syncwarp), mma.sync m16n8k16, ldmatrix and stmatrix. Every lane of the member mask enters with its
// operand words and blocks; the last to arrive computes every lane's result words, each lane exactly the
// fragment the PTX ISA assigns it (the layouts are here, beside the code that applies them, with the ISA
// figure each follows), and releases the others. A lane that arrives with another mask or instruction than
// the lanes waiting is reported at once. Only bar.warp.sync orders memory for the race detector.
#include "cuda/common/emu/launch.hpp"

#include <cstring>

#include <fmt/format.h>

namespace faprobe::emu {
namespace detail {

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

// Enters the calling lane into the warp collective `kind` with its operand words; returns the lane's
// result words once every lane of member_mask has arrived.
Results Launch::collective(CollectiveKind kind, std::uint32_t member_mask, const Operands& operands) {
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

// Computes every member lane's result words into its fiber; run by the last lane to arrive.
void Launch::complete(const Collective& c, unsigned warp_base) {
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

// The result for `lane`. Shuffles: PTX ISA "shfl.sync" (9.7.8.6 in ISA 7.x), the source lane j and whether it is in range
// (segment mask and clamp from c). Votes: PTX ISA vote.sync, over the lanes of the member mask.
std::uint32_t Launch::lane_result(const Collective& c, unsigned lane) const {
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

// A whole-warp instruction (.aligned, no member mask operand): the calling warp must have 32 lanes.
void Launch::require_whole_warp(CollectiveKind kind) {
  const unsigned warp = running().linear / warp_size;
  if (warps_[warp].existing_lanes != ~0u)
    fail_here(fmt::format("{} needs a whole warp, but warp {} has only {} threads (a CTA of {} threads)",
                          instruction_name(kind), warp, thread_count_ - warp * warp_size, thread_count_));
}

// ldmatrix: checks the calling lane's row address before it enters the collective, so the error names it.
void Launch::check_ldmatrix_row(CollectiveKind kind, unsigned matrices, std::size_t offset) const {
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
void Launch::mma_results(const Collective& c, unsigned warp_base) {
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

// launch.hpp; mma.sync's and wgmma's operands.
float half_to_float(std::uint32_t word, unsigned which, bool bf16) {
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
void Launch::ldmatrix_results(const Collective& c, unsigned warp_base) {
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
void Launch::stmatrix_results(const Collective& c, unsigned warp_base) {
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
void Launch::warp_sync_results(const Collective& c, unsigned warp_base) {
  if (!detector_.enabled()) return;
  VectorClock joined = detector_.empty_clock();
  for (unsigned l = 0; l < warp_size; ++l)
    if ((c.member_mask & (1u << l)) != 0) detector_.release(warp_base + l, joined);
  for (unsigned l = 0; l < warp_size; ++l)
    if ((c.member_mask & (1u << l)) != 0) detector_.acquire(warp_base + l, joined);
}

}  // namespace detail

std::uint32_t shfl_sync(ShuffleMode mode, std::uint32_t member_mask, std::uint32_t value,
                        std::uint32_t source_operand, std::uint32_t clamp_segmask) {
  using detail::CollectiveKind;
  CollectiveKind kind = CollectiveKind::shfl_idx;
  switch (mode) {
    case ShuffleMode::idx: kind = CollectiveKind::shfl_idx; break;
    case ShuffleMode::up: kind = CollectiveKind::shfl_up; break;
    case ShuffleMode::down: kind = CollectiveKind::shfl_down; break;
    case ShuffleMode::bfly: kind = CollectiveKind::shfl_bfly; break;
  }
  return detail::running_launch("shfl.sync").collective(kind, member_mask, {value, source_operand, clamp_segmask})[0];
}

std::uint32_t vote_ballot(std::uint32_t member_mask, bool predicate) {
  return detail::running_launch("vote.sync")
      .collective(detail::CollectiveKind::vote_ballot, member_mask, {predicate ? 1u : 0u})[0];
}
bool vote_all(std::uint32_t member_mask, bool predicate) {
  return detail::running_launch("vote.sync")
             .collective(detail::CollectiveKind::vote_all, member_mask, {predicate ? 1u : 0u})[0] != 0;
}
bool vote_any(std::uint32_t member_mask, bool predicate) {
  return detail::running_launch("vote.sync")
             .collective(detail::CollectiveKind::vote_any, member_mask, {predicate ? 1u : 0u})[0] != 0;
}

void sync_warp(std::uint32_t member_mask) {
  (void)detail::running_launch("bar.warp.sync").collective(detail::CollectiveKind::warp_sync, member_mask, {});
}

void mma_m16n8k16(MmaInput input, const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], const float (&c)[4],
                  float (&d)[4]) {
  using detail::CollectiveKind;
  detail::Launch& launch = detail::running_launch("mma.sync");
  const CollectiveKind kind =
      input == MmaInput::bf16 ? CollectiveKind::mma_m16n8k16_bf16 : CollectiveKind::mma_m16n8k16_f16;
  launch.require_whole_warp(kind);
  detail::Operands operands{a[0], a[1], a[2], a[3], b[0], b[1]};
  std::memcpy(&operands[6], c, sizeof c);
  const detail::Results result = launch.collective(kind, ~0u, operands);
  std::memcpy(d, result.data(), sizeof d);
}

void ldmatrix(unsigned matrices, bool transpose, std::size_t row_offset_bytes, std::uint32_t (&d)[4]) {
  using detail::CollectiveKind;
  detail::Launch& launch = detail::running_launch("ldmatrix");
  CollectiveKind kind = CollectiveKind::ldmatrix_x1;
  switch (matrices) {
    case 1: kind = transpose ? CollectiveKind::ldmatrix_x1_trans : CollectiveKind::ldmatrix_x1; break;
    case 2: kind = transpose ? CollectiveKind::ldmatrix_x2_trans : CollectiveKind::ldmatrix_x2; break;
    case 4: kind = transpose ? CollectiveKind::ldmatrix_x4_trans : CollectiveKind::ldmatrix_x4; break;
    default: launch.fail_here(fmt::format("ldmatrix with {} matrices: PTX allows .x1, .x2 and .x4", matrices));
  }
  launch.require_whole_warp(kind);
  launch.check_ldmatrix_row(kind, matrices, row_offset_bytes);
  const detail::Operands operands{static_cast<std::uint32_t>(row_offset_bytes),
                                  static_cast<std::uint32_t>(static_cast<std::uint64_t>(row_offset_bytes) >> 32)};
  const detail::Results result = launch.collective(kind, ~0u, operands);
  for (unsigned i = 0; i < matrices; ++i) d[i] = result[i];
}

void stmatrix(unsigned matrices, bool transpose, std::size_t row_offset_bytes, const std::uint32_t (&r)[4]) {
  using detail::CollectiveKind;
  detail::Launch& launch = detail::running_launch("stmatrix");
  CollectiveKind kind = CollectiveKind::stmatrix_x1;
  switch (matrices) {
    case 1: kind = transpose ? CollectiveKind::stmatrix_x1_trans : CollectiveKind::stmatrix_x1; break;
    case 2: kind = transpose ? CollectiveKind::stmatrix_x2_trans : CollectiveKind::stmatrix_x2; break;
    case 4: kind = transpose ? CollectiveKind::stmatrix_x4_trans : CollectiveKind::stmatrix_x4; break;
    default: launch.fail_here(fmt::format("stmatrix with {} matrices: PTX allows .x1, .x2 and .x4", matrices));
  }
  launch.require_whole_warp(kind);
  launch.check_ldmatrix_row(kind, matrices, row_offset_bytes);
  const detail::Operands operands{static_cast<std::uint32_t>(row_offset_bytes),
                                  static_cast<std::uint32_t>(static_cast<std::uint64_t>(row_offset_bytes) >> 32),
                                  r[0], r[1], r[2], r[3]};
  (void)launch.collective(kind, ~0u, operands);
}

}  // namespace faprobe::emu
