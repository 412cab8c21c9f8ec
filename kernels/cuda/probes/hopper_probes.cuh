// Instruction probes, part 5: the rest of Hopper's (sm_90a) instructions the FA-3 kernels rely on. Three
// wgmma.mma_async probes (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions",
// "Matrix Descriptor Format", "Shared Memory Matrix Layout"): f16 with both operands K-major in 128-byte
// swizzled rows; bf16 with A from registers and B N-major, 128-byte swizzle; e4m3 with 64-byte swizzle, its
// tiles converted in the kernel with cvt.rn.satfinite.e4m3x2.f32. Each places its tiles with plain shared
// stores by the layout's own formula (the 16-byte chunk XORed with the row's bits, as TMA would write
// them), issues its k-steps, and writes every thread's accumulators in thread order, so the output shows
// the accumulator layout too. Inputs are small integers (|v| <= 3), whose products and sums are exact in
// fp32 in any order: the results are fixed by the ISA, bit for bit. Then stmatrix.x4 and .x4.trans (PTX ISA
// "stmatrix"), whose shared-memory image is the output, and the mbarrier phase machine with expect_tx,
// complete_tx, test_wait and try_wait, and elect.sync (PTX ISA "mbarrier", "elect.sync"), every observation
// made where no arrival is in flight, so the output does not depend on timing.
//
// Compiled by nvcc in hopper_probes.cu (sm_90a; a trapping stub below sm_90) and by the host compiler in
// probe_suite.cpp, whose emulated output is the reference the GPU's must equal bit for bit;
// tests/test_probe_suite.cpp checks the emulated wgmma outputs against a host matrix product. Costs: one
// CTA each, at most 16 KiB of shared memory and a few thousand output words.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/isa.hpp"
#include "cuda/common/isa_wgmma.hpp"

namespace faprobe::cuda::probes {

// --- wgmma ---

inline constexpr unsigned wgmma_probe_threads = 128;  // one warpgroup
inline constexpr unsigned wgmma_probe_m = 64;

// Byte offset of element (row, k) of a K-major tile of 16-bit elements with 128-byte swizzle: row r's 64
// elements at r·128, its 16-byte chunk k/8 at chunk (k/8) ^ (r%8). 8-row groups are 1024 bytes apart (SBO).
FAPROBE_DEVICE std::size_t k_major_swizzle128(unsigned row, unsigned k) {
  return std::size_t{row} * 128 + (((k / 8) ^ (row % 8)) * 16) + (k % 8) * 2;
}
// Byte offset of element (k, n) of an N-major tile of 16-bit elements with 128-byte swizzle: column blocks
// of 64 n, block_bytes apart (LBO); in a block, K row k at k·128 with 16-byte chunk n/8 at (n/8) ^ (k%8).
FAPROBE_DEVICE std::size_t n_major_swizzle128(unsigned k, unsigned n, std::size_t block_bytes) {
  const unsigned within = n % 64;
  return (n / 64) * block_bytes + std::size_t{k} * 128 + (((within / 8) ^ (k % 8)) * 16) + (within % 8) * 2;
}
// Byte offset of element (row, k) of a K-major tile of 1-byte elements with 64-byte swizzle: row r's 64
// elements at r·64, chunk k/16 at (k/16) ^ ((r/2) % 4) (the row's address bits 7-8). 8-row groups 512 apart.
FAPROBE_DEVICE std::size_t k_major_swizzle64_bytes(unsigned row, unsigned k) {
  return std::size_t{row} * 64 + (((k / 16) ^ ((row / 2) % 4)) * 16) + k % 16;
}

// Thread t's accumulator i goes to d[t · N/2 + i]: the thread order, so a layout error shows.
template <int N>
FAPROBE_DEVICE void write_accumulators(const float (&accumulator)[N / 2], GlobalSpan<float> d) {
  const std::size_t first = std::size_t{isa::thread_linear_idx()} * (N / 2);
  FAPROBE_UNROLL
  for (int i = 0; i < N / 2; ++i) d[first + static_cast<unsigned>(i)] = accumulator[i];
}

// The shared-shared wgmma steps of the two K-major probes, once the tiles are in shared memory: makes them
// visible to the async proxy, then D = Σ over K / (32 bytes) steps of A·B, both descriptors stepping 32 bytes
// inside their swizzled rows, and writes D in thread order.
template <int N, class Element, int Steps>
FAPROBE_DEVICE void wgmma_ss_steps(std::size_t b_offset, std::uint32_t stride_byte_offset, isa::WgmmaSwizzle swizzle,
                                   GlobalSpan<float> d) {
  isa::fence_proxy_async();  // this thread's generic stores before the async proxy's (wgmma's) reads
  isa::sync_threads();       // every thread's part of the tiles is in
  float accumulator[N / 2] = {};
  isa::wgmma_fence();
  isa::wgmma_fence_operand(accumulator);
  FAPROBE_UNROLL
  for (unsigned step = 0; step < Steps; ++step) {
    const std::uint64_t desc_a = isa::wgmma_descriptor(32 * step, 16, stride_byte_offset, swizzle);
    const std::uint64_t desc_b = isa::wgmma_descriptor(b_offset + 32 * step, 16, stride_byte_offset, swizzle);
    isa::wgmma_ss<N, Element>(accumulator, desc_a, desc_b, step > 0);
  }
  isa::wgmma_commit_group();
  isa::wgmma_wait_group<0>();
  isa::wgmma_fence_operand(accumulator);  // no read of D moves above the wait
  write_accumulators<N>(accumulator, d);
}

// Probe "wgmma m64n64k16 f16 ss swizzle 128B": D(64×64) = A(64×64)·B, both K-major f16 with 128-byte swizzle,
// four k-steps 32 bytes apart inside the swizzled rows. a: 64×64 f16 bits [m][k]; b: 64×64 f16 bits [n][k];
// d: 128 × 32 words. One CTA of 128 threads, wgmma_f16_shared_bytes of shared memory.
inline constexpr unsigned wgmma_f16_n = 64;
inline constexpr unsigned wgmma_f16_k = 64;
inline constexpr std::size_t wgmma_f16_b_offset = 64 * 128;  // A's 8 KiB first; both 1024-byte aligned
inline constexpr std::size_t wgmma_f16_shared_bytes = wgmma_f16_b_offset + wgmma_f16_n * 128;

FAPROBE_DEVICE void wgmma_f16_ss_swizzle128(GlobalSpan<const std::uint16_t> a, GlobalSpan<const std::uint16_t> b,
                                            GlobalSpan<float> d) {
  const unsigned tid = isa::thread_linear_idx();
  const SharedSpan<std::uint16_t> shared = isa::shared_array<std::uint16_t>(0, wgmma_f16_shared_bytes / 2);
  for (unsigned i = tid; i < wgmma_probe_m * wgmma_f16_k; i += wgmma_probe_threads)
    shared[k_major_swizzle128(i / wgmma_f16_k, i % wgmma_f16_k) / 2] = a[i];
  for (unsigned i = tid; i < wgmma_f16_n * wgmma_f16_k; i += wgmma_probe_threads)
    shared[(wgmma_f16_b_offset + k_major_swizzle128(i / wgmma_f16_k, i % wgmma_f16_k)) / 2] = b[i];
  wgmma_ss_steps<wgmma_f16_n, isa::Half, wgmma_f16_k / 16>(wgmma_f16_b_offset, 1024, isa::WgmmaSwizzle::bytes128, d);
}

// Probe "wgmma m64n128k16 bf16 rs, B N-major swizzle 128B": D(64×128) = A(64×32)·B(32×128), A from registers
// (each thread's mma.sync m16n8k16 A fragment, warp w holding rows 16w..16w+15), B N-major with 128-byte
// swizzle in two 64-column blocks of 32 K rows (4096 bytes apart, LBO), k-step s at 16 K rows = 2048 bytes.
// a: 64×32 bf16 bits [m][k]; b: 32×128 bf16 bits [k][n]; d: 128 × 64 words. One CTA of 128 threads.
inline constexpr unsigned wgmma_bf16_n = 128;
inline constexpr unsigned wgmma_bf16_k = 32;
inline constexpr std::size_t wgmma_bf16_block_bytes = wgmma_bf16_k * 128;  // one 64-column block of B
inline constexpr std::size_t wgmma_bf16_shared_bytes = (wgmma_bf16_n / 64) * wgmma_bf16_block_bytes;

FAPROBE_DEVICE void wgmma_bf16_rs_n_major(GlobalSpan<const std::uint16_t> a, GlobalSpan<const std::uint16_t> b,
                                          GlobalSpan<float> d) {
  const unsigned tid = isa::thread_linear_idx();
  const SharedSpan<std::uint16_t> shared = isa::shared_array<std::uint16_t>(0, wgmma_bf16_shared_bytes / 2);
  for (unsigned i = tid; i < wgmma_bf16_k * wgmma_bf16_n; i += wgmma_probe_threads)
    shared[n_major_swizzle128(i / wgmma_bf16_n, i % wgmma_bf16_n, wgmma_bf16_block_bytes) / 2] = b[i];
  // The A fragment of k-step s, register j: row 16w + l/4 (+8 for odd j), columns 16s + 2(l%4) (+8 for j >= 2).
  const unsigned warp = tid / isa::warp_size, lane = tid % isa::warp_size;
  std::uint32_t fragments[wgmma_bf16_k / 16][4];
  FAPROBE_UNROLL
  for (unsigned step = 0; step < wgmma_bf16_k / 16; ++step) {
    FAPROBE_UNROLL
    for (unsigned j = 0; j < 4; ++j) {
      const unsigned row = 16 * warp + lane / 4 + 8 * (j % 2);
      const unsigned col = 16 * step + 2 * (lane % 4) + 8 * (j / 2);
      const std::size_t first = std::size_t{row} * wgmma_bf16_k + col;
      fragments[step][j] = std::uint32_t{a[first]} | (std::uint32_t{a[first + 1]} << 16);
    }
  }
  isa::fence_proxy_async();  // this thread's generic stores before the async proxy's (wgmma's) reads
  isa::sync_threads();       // every thread's part of B is in
  float accumulator[wgmma_bf16_n / 2] = {};
  isa::wgmma_fence();  // the fragments and accumulators written above are ordered before the wgmma
  isa::wgmma_fence_operand(accumulator);
  FAPROBE_UNROLL
  for (unsigned step = 0; step < wgmma_bf16_k / 16; ++step) {
    const std::uint64_t desc_b = isa::wgmma_descriptor(2048 * step, static_cast<std::uint32_t>(wgmma_bf16_block_bytes),
                                                       1024, isa::WgmmaSwizzle::bytes128);
    isa::wgmma_rs<wgmma_bf16_n, isa::BFloat16, true>(accumulator, fragments[step], desc_b, step > 0);
  }
  isa::wgmma_commit_group();
  isa::wgmma_wait_group<0>();
  isa::wgmma_fence_operand(accumulator);
  write_accumulators<wgmma_bf16_n>(accumulator, d);
}

// Probe "wgmma m64n64k32 e4m3 ss swizzle 64B": D(64×64) = A(64×64)·B, both K-major e4m3 with 64-byte swizzle
// (64 one-byte elements per row), two k-steps 32 bytes apart. The inputs are floats (small integers): each
// thread converts four consecutive k with E4M3::pack4 (cvt.rn.satfinite.e4m3x2.f32, exact for them) and
// stores the word. a: 64×64 floats [m][k]; b: 64×64 floats [n][k]; d: 128 × 32 words.
inline constexpr unsigned wgmma_e4m3_n = 64;
inline constexpr unsigned wgmma_e4m3_k = 64;
inline constexpr std::size_t wgmma_e4m3_b_offset = 64 * 64;  // A's 4 KiB first; 512-byte aligned as 64B swizzle needs
inline constexpr std::size_t wgmma_e4m3_shared_bytes = wgmma_e4m3_b_offset + wgmma_e4m3_n * 64;

FAPROBE_DEVICE void wgmma_e4m3_ss_swizzle64(GlobalSpan<const float> a, GlobalSpan<const float> b, GlobalSpan<float> d) {
  const unsigned tid = isa::thread_linear_idx();
  const SharedSpan<std::uint32_t> shared = isa::shared_array<std::uint32_t>(0, wgmma_e4m3_shared_bytes / 4);
  constexpr unsigned quads_per_row = wgmma_e4m3_k / 4;
  const auto place = [&](GlobalSpan<const float> values, unsigned rows, std::size_t base) {
    for (unsigned q = tid; q < rows * quads_per_row; q += wgmma_probe_threads) {
      const unsigned row = q / quads_per_row, k = 4 * (q % quads_per_row);
      const std::size_t first = std::size_t{row} * wgmma_e4m3_k + k;
      shared[(base + k_major_swizzle64_bytes(row, k)) / 4] =
          isa::E4M3::pack4(values[first], values[first + 1], values[first + 2], values[first + 3]);
    }
  };
  place(a, wgmma_probe_m, 0);
  place(b, wgmma_e4m3_n, wgmma_e4m3_b_offset);
  wgmma_ss_steps<wgmma_e4m3_n, isa::E4M3, wgmma_e4m3_k / 32>(wgmma_e4m3_b_offset, 512, isa::WgmmaSwizzle::bytes64, d);
}

// --- stmatrix ---

// Probe "stmatrix x4 and x4.trans": one warp (32 threads). Lane l holds fragments[4l..4l+3] (matrix i's
// ldmatrix fragment in register i) and stores them with stmatrix.x4 to the 16-byte rows row_offsets[l] of a
// zeroed 1024-byte image, then with .x4.trans to the same rows of a second image; images receives both
// images' 2 · 256 words, so a byte stored where it should not be shows as well as a missing one. The row
// offsets are distinct multiples of 16 below 1024; stmatrix_probe_shared_bytes of shared memory.
inline constexpr std::size_t stmatrix_probe_image_bytes = 1024;
inline constexpr std::size_t stmatrix_probe_shared_bytes = 2 * stmatrix_probe_image_bytes;

FAPROBE_DEVICE void stmatrix_x4(GlobalSpan<const std::uint32_t> fragments, GlobalSpan<const std::uint32_t> row_offsets,
                                GlobalSpan<std::uint32_t> images) {
  const unsigned lane = isa::lane_id();
  const SharedSpan<std::uint32_t> shared = isa::shared_array<std::uint32_t>(0, stmatrix_probe_shared_bytes / 4);
  for (std::size_t i = lane; i < shared.size(); i += isa::warp_size) shared[i] = 0;
  isa::sync_warp();  // the zeros are in before any lane's rows are stored
  std::uint32_t registers[4];
  for (unsigned i = 0; i < 4; ++i) registers[i] = fragments[4 * lane + i];
  isa::stmatrix<false>(row_offsets[lane], registers);
  isa::stmatrix<true>(stmatrix_probe_image_bytes + row_offsets[lane], registers);
  isa::sync_warp();  // every lane's rows are stored before the images are read
  for (std::size_t i = lane; i < shared.size(); i += isa::warp_size) images[i] = shared[i];
}

// --- mbarrier and elect.sync ---

// Probe "mbarrier phases, expect_tx and elect.sync": a CTA of two warps records, per thread, the
// mbarrier_probe_words observations below into records[t · mbarrier_probe_words + w], each taken where no
// arrival or transaction is in flight (between CTA barriers, or after a wait that only this thread's own
// later arrival could overtake), so the words are the same on every run. values: 5 × 32 words exchanged
// through shared memory; member_masks: one nonzero lane mask per warp for a partial elect.sync. PTX leaves
// open which lane elect.sync picks, so only the number of elected lanes is recorded.
inline constexpr unsigned mbarrier_probe_threads = 64;
inline constexpr unsigned mbarrier_probe_words = 20;
inline constexpr unsigned mbarrier_probe_values = 5 * 32;
inline constexpr std::size_t mbarrier_probe_phases = 0;   // count 2: one elected lane per warp
inline constexpr std::size_t mbarrier_probe_full = 8;     // count 32: the producer warp's lanes
inline constexpr std::size_t mbarrier_probe_empty = 16;   // count 32: the consumer warp's lanes
inline constexpr std::size_t mbarrier_probe_handoff = 64;  // 32 words warp 0 hands warp 1 in phase 1
inline constexpr std::size_t mbarrier_probe_slot = 192;    // 32 words per ping-pong round
inline constexpr std::size_t mbarrier_probe_elected = 320;  // one word per thread: elected under the partial mask
inline constexpr std::size_t mbarrier_probe_shared_bytes = mbarrier_probe_elected + 4 * mbarrier_probe_threads;
inline constexpr std::uint32_t mbarrier_probe_tx_bytes = 64;  // announced by warp 0, completed in two halves
inline constexpr unsigned mbarrier_probe_rounds = 4;

// What each record word holds, and its value when the ISA is followed (tests/test_probe_suite.cpp).
namespace mbarrier_record {
enum : unsigned {
  fresh_parity0 = 0,      // test_wait.parity 0 right after init: 0 (phase 0 pending)
  fresh_parity1,          // parity 1 right after init: 1 (the phase before the first counts as complete)
  elected_full_warp,      // lanes elect.sync picked over the whole warp: 1
  elected_in_mask,        // lanes it picked among the warp's member mask: 1
  elected_outside_mask,   // and outside it: 0
  arrived_tx_pending,     // parity 0 after both arrivals, 64 transaction bytes pending: 0
  arrived_parity1,        // parity 1 then: 1
  half_tx_completed,      // parity 0 after complete_tx of 32 bytes: 0
  all_tx_completed,       // parity 0 after the other 32: 1 (phase 0 done)
  next_phase_parity1,     // parity 1 then: 0 (phase 1 pending)
  handoff_value,          // the handoff word warp 0 stored at index (31 - lane) before arriving: values[31 - lane]
  after_wait_parity1,     // parity 1 after waiting for phase 1: 1
  after_wait_parity0,     // parity 0 then: 0 (phase 2 pending)
  ping_pong_round0,       // 4 rounds: the consumer's word read, values[32(r+1) + 31 - lane]; the producer's
                          // test of the empty barrier's phase it waited for, 1
  final_full_parity0 = ping_pong_round0 + mbarrier_probe_rounds,  // full barrier after 4 phases: 0
  final_full_parity1,     // 1
  final_empty_parity1,    // empty barrier after 4 phases: 1
};
}  // namespace mbarrier_record
static_assert(mbarrier_record::final_empty_parity1 + 1 == mbarrier_probe_words, "every record word is described");

FAPROBE_DEVICE unsigned count_bits(std::uint32_t bits) {
  unsigned count = 0;
  for (; bits != 0; bits &= bits - 1) ++count;
  return count;
}

FAPROBE_DEVICE void mbarrier_phases(GlobalSpan<const std::uint32_t> values,
                                    GlobalSpan<const std::uint32_t> member_masks, GlobalSpan<std::uint32_t> records) {
  const unsigned tid = isa::thread_linear_idx(), warp = tid / isa::warp_size, lane = tid % isa::warp_size;
  const std::size_t record = std::size_t{tid} * mbarrier_probe_words;
  using namespace mbarrier_record;
  const auto test = [](std::size_t barrier, unsigned parity) -> std::uint32_t {
    return isa::mbarrier_test_wait_parity(barrier, parity) ? 1u : 0u;
  };
  if (tid == 0) {
    isa::mbarrier_init(mbarrier_probe_phases, 2);
    isa::mbarrier_init(mbarrier_probe_full, isa::warp_size);
    isa::mbarrier_init(mbarrier_probe_empty, isa::warp_size);
    isa::fence_mbarrier_init();
  }
  isa::sync_threads();  // the barriers are initialized before anyone tests them
  records[record + fresh_parity0] = test(mbarrier_probe_phases, 0);
  records[record + fresh_parity1] = test(mbarrier_probe_phases, 1);

  // elect.sync over the whole warp, then over the warp's member mask, which only those lanes execute; the
  // others must not reach a warp collective meanwhile, so the outcome goes through shared memory.
  const bool elected = isa::elect_sync();
  records[record + elected_full_warp] = count_bits(isa::ballot_sync(isa::full_warp_mask, elected));
  const std::uint32_t mask = member_masks[warp];
  const SharedSpan<std::uint32_t> elected_flags =
      isa::shared_array<std::uint32_t>(mbarrier_probe_elected, mbarrier_probe_threads);
  elected_flags[tid] = 0;
  if (((mask >> lane) & 1u) != 0 && isa::elect_sync(mask)) elected_flags[tid] = 1;
  isa::sync_threads();  // the flags are in before they are counted, the fresh tests done before any arrival
  std::uint32_t elected_lanes = 0;
  for (unsigned other = 0; other < isa::warp_size; ++other)
    elected_lanes |= elected_flags[warp * isa::warp_size + other] << other;
  records[record + elected_in_mask] = count_bits(elected_lanes & mask);
  records[record + elected_outside_mask] = count_bits(elected_lanes & ~mask);

  // Phase 0: one arrival per warp, warp 0's announcing 64 transaction bytes, then the bytes in two halves.
  if (elected) isa::mbarrier_arrive(mbarrier_probe_phases, warp == 0 ? mbarrier_probe_tx_bytes : 0);
  isa::sync_threads();  // both arrivals are in
  records[record + arrived_tx_pending] = test(mbarrier_probe_phases, 0);
  records[record + arrived_parity1] = test(mbarrier_probe_phases, 1);
  isa::sync_threads();  // every test is done before the bytes complete
  if (tid == 0) isa::mbarrier_complete_tx(mbarrier_probe_phases, mbarrier_probe_tx_bytes / 2);
  isa::sync_threads();  // the first half is in
  records[record + half_tx_completed] = test(mbarrier_probe_phases, 0);
  isa::sync_threads();
  if (tid == isa::warp_size) isa::mbarrier_complete_tx(mbarrier_probe_phases, mbarrier_probe_tx_bytes / 2);
  isa::sync_threads();  // the second half is in: phase 0 completes
  records[record + all_tx_completed] = test(mbarrier_probe_phases, 0);
  records[record + next_phase_parity1] = test(mbarrier_probe_phases, 1);
  isa::mbarrier_wait_parity(mbarrier_probe_phases, 0);  // completed: returns at once
  isa::sync_threads();  // every test is done before phase 1's arrivals

  // Phase 1: warp 0 stores the handoff words, then its elected lane arrives (releasing the warp's stores,
  // ordered before it by the warp barrier); warp 1's elected lane arrives; both warps wait for the phase.
  const SharedSpan<std::uint32_t> handoff = isa::shared_array<std::uint32_t>(mbarrier_probe_handoff, isa::warp_size);
  if (warp == 0) {
    handoff[lane] = values[lane];
    isa::sync_warp();  // every lane's word is stored before the elected lane's arrival releases them
  }
  if (elected) isa::mbarrier_arrive(mbarrier_probe_phases);
  isa::mbarrier_wait_parity(mbarrier_probe_phases, 1);
  records[record + handoff_value] = handoff[isa::warp_size - 1 - lane];
  records[record + after_wait_parity1] = test(mbarrier_probe_phases, 1);
  records[record + after_wait_parity0] = test(mbarrier_probe_phases, 0);
  isa::sync_threads();  // phase 1 is over for everyone before the ping-pong

  // Four rounds through one slot: warp 0 produces (waits for the slot to be empty, stores, arrives on full),
  // warp 1 consumes (waits for full, reads another lane's word, arrives on empty). Round r waits for phase
  // r of full and phase r - 1 of empty (parity 1 in round 0: the phase before the first).
  const SharedSpan<std::uint32_t> slot = isa::shared_array<std::uint32_t>(mbarrier_probe_slot, isa::warp_size);
  for (unsigned round = 0; round < mbarrier_probe_rounds; ++round) {
    if (warp == 0) {
      const unsigned empty_parity = (round % 2) ^ 1u;
      isa::mbarrier_wait_parity(mbarrier_probe_empty, empty_parity);
      // Phase `round` of empty cannot complete before this lane's arrival on full below.
      records[record + ping_pong_round0 + round] = test(mbarrier_probe_empty, empty_parity);
      slot[lane] = values[isa::warp_size * (round + 1) + lane];
      isa::mbarrier_arrive(mbarrier_probe_full);
    } else {
      isa::mbarrier_wait_parity(mbarrier_probe_full, round % 2);
      records[record + ping_pong_round0 + round] = slot[isa::warp_size - 1 - lane];
      isa::mbarrier_arrive(mbarrier_probe_empty);
    }
  }
  isa::sync_threads();  // every round's arrivals are in
  records[record + final_full_parity0] = test(mbarrier_probe_full, 0);
  records[record + final_full_parity1] = test(mbarrier_probe_full, 1);
  records[record + final_empty_parity1] = test(mbarrier_probe_empty, 1);
}

}  // namespace faprobe::cuda::probes
