// The instruction layer's Hopper synchronization (isa.hpp part 4) under the emulator: mbarrier phases with
// arrivals and transaction bytes, a producer warp handing tiles to consumer warps through a two-stage ring
// of mbarriers (the pattern of FA-3's producer and consumers), a wait that can never complete reported as
// a deadlock naming the barrier rather than hanging, misuse reported, elect.sync electing one lane, and
// setmaxnreg's no-op. Each expectation is computed on the host from the PTX ISA's description.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/isa.hpp"
#include "emulator_test_support.hpp"

namespace faprobe::emu {
namespace {

namespace isa = cuda::isa;
using testing::const_span_of;
using testing::expect_mentions;
using testing::launch_error;
using testing::span_of;
using testing::within_deadline;

TEST(EmulatorMbarrier, PhaseCompletesOnTheLastArrivalAndTheLastTransactionByte) {
  // One barrier expecting 2 arrivals and 64 transaction bytes: after each event the test records whether
  // phase 0 (parity 0) has completed.
  std::vector<int> seen(6, -1);
  within_deadline([&] {
    launch({"mbarrier_phase", {1, 1, 1}, {1, 1, 1}, 64}, [&] {
      isa::mbarrier_init(8, 2);
      seen[0] = mbarrier_test_parity(8, 0);
      (void)mbarrier_arrive(8, 64);  // arrival 1 with 64 bytes expected
      seen[1] = mbarrier_test_parity(8, 0);
      mbarrier_complete_tx(8, 48);
      seen[2] = mbarrier_test_parity(8, 0);
      (void)mbarrier_arrive(8, 0);  // arrival 2: 16 bytes still pending
      seen[3] = mbarrier_test_parity(8, 0);
      mbarrier_complete_tx(8, 16);  // the last byte: phase 0 completes
      seen[4] = mbarrier_test_parity(8, 0);
      seen[5] = mbarrier_test_parity(8, 1);  // phase 1 has just begun
    });
  });
  EXPECT_EQ(seen, (std::vector<int>{0, 0, 0, 0, 1, 0}));
}

// The ring of the test below: warp 0 produces kTiles tiles of 32 floats (tile t, lane l: 100t + l) into
// kStages shared stages; warps 1 and 2 each sum every tile. Stage s has a "full" barrier (1 arrival + the
// tile's bytes) and an "empty" barrier (one arrival per consumer warp). The producer waits on "empty" before
// overwriting a stage (unless wait_for_empty is false: a planted defect), the consumers on "full" before
// reading it; round r of a stage waits for the phase of parity r % 2, as CUTLASS's pipelines do. Returns
// the sums, consumer by consumer.
constexpr int kTiles = 8, kStages = 2, kTileFloats = 32;

std::vector<float> run_ring(bool wait_for_empty) {
  constexpr std::size_t kFull = 0, kEmpty = 16, kData = 64;  // byte offsets: 2 barriers each, then the stages
  std::vector<float> sums(2 * kTiles, 0.0f);
  within_deadline([&] {
    launch({"mbarrier_ring", {1, 1, 1}, {96, 1, 1}, kData + kStages * kTileFloats * 4}, [&] {
      const unsigned warp = isa::thread_linear_idx() / 32, lane = isa::lane_id();
      if (isa::thread_linear_idx() == 0) {
        for (int s = 0; s < kStages; ++s) {
          isa::mbarrier_init(kFull + 8 * s, 1);
          isa::mbarrier_init(kEmpty + 8 * s, 2);
        }
        isa::fence_mbarrier_init();
      }
      isa::sync_threads();  // the barriers exist before anyone arrives or waits
      for (int tile = 0; tile < kTiles; ++tile) {
        const int stage = tile % kStages;
        const unsigned round = static_cast<unsigned>(tile / kStages);
        const std::size_t data = kData + std::size_t(stage) * kTileFloats * 4;
        if (warp == 0) {
          if (tile >= kStages && wait_for_empty) isa::mbarrier_wait_parity(kEmpty + 8 * stage, (round - 1) % 2);
          isa::shared_array<float>(data, kTileFloats)[lane] = float(tile * 100 + int(lane));
          isa::sync_warp();
          if (isa::elect_sync()) {
            isa::mbarrier_arrive(kFull + 8 * stage, kTileFloats * 4);  // the tile's bytes, as a TMA copy announces
            mbarrier_complete_tx(kFull + 8 * stage, kTileFloats * 4);  // and the copy landing
          }
        } else {
          isa::mbarrier_wait_parity(kFull + 8 * stage, round % 2);
          float total = isa::shared_array<float>(data, kTileFloats)[lane];
          for (unsigned offset = 16; offset > 0; offset /= 2) total += isa::shfl_xor_sync(isa::full_warp_mask, total, offset);
          if (lane == 0) sums[std::size_t((warp - 1) * kTiles + tile)] = total;
          isa::sync_warp();
          if (isa::elect_sync()) isa::mbarrier_arrive(kEmpty + 8 * stage);
        }
      }
    });
  });
  return sums;
}

float expected_sum(int tile) { return float(32 * tile * 100 + 31 * 32 / 2); }

TEST(EmulatorMbarrier, ProducerWarpFeedsConsumerWarpsThroughATwoStageRing) {
  const std::vector<float> sums = run_ring(/*wait_for_empty=*/true);
  for (int consumer = 0; consumer < 2; ++consumer)
    for (int tile = 0; tile < kTiles; ++tile)
      EXPECT_EQ(sums[std::size_t(consumer * kTiles + tile)], expected_sum(tile)) << "consumer " << consumer << " tile " << tile;
}

TEST(EmulatorMbarrier, AProducerThatDoesNotWaitForEmptyStagesIsCaught) {
  // Planted: the producer overwrites stages the consumers have not read, so some sums are of later tiles
  // (or, with the phases now out of step, the launch deadlocks); either way the ring is shown broken.
  std::vector<float> sums;
  std::string error;
  try {
    sums = run_ring(/*wait_for_empty=*/false);
  } catch (const EmulationError& e) {
    error = e.what();
  }
  int wrong = 0;
  for (int i = 0; i < 2 * kTiles && error.empty(); ++i) wrong += sums[std::size_t(i)] != expected_sum(i % kTiles);
  EXPECT_TRUE(wrong > 0 || !error.empty()) << "the missing wait went unnoticed";
}

TEST(EmulatorMbarrier, AWaitThatCanNeverCompleteIsReportedNotHung) {
  // Two arrivals expected, one made: the waiting warp can never proceed.
  const std::string message = launch_error({"mbarrier_never", {1, 1, 1}, {32, 1, 1}, 16}, [] {
    if (isa::thread_linear_idx() == 0) isa::mbarrier_init(8, 2);
    isa::sync_threads();
    if (isa::thread_linear_idx() == 0) isa::mbarrier_arrive(8, 128);
    isa::mbarrier_wait_parity(8, 0);
  });
  expect_mentions(message, {"kernel 'mbarrier_never'", "deadlock", "32 threads",
                            "wait on the mbarrier at shared offset 8 for its phase of parity 0",
                            "1 of 2 arrivals pending", "128 transaction bytes pending"});
}

TEST(EmulatorMbarrier, MisuseIsReported) {
  expect_mentions(launch_error({"mbarrier_uninitialized", {1, 1, 1}, {1, 1, 1}, 16}, [] { isa::mbarrier_arrive(8); }),
                  {"mbarrier.arrive on shared offset 8: no mbarrier was initialized there"});
  expect_mentions(launch_error({"mbarrier_misaligned", {1, 1, 1}, {1, 1, 1}, 16}, [] { isa::mbarrier_init(4, 1); }),
                  {"byte offset 4 is not aligned to 8 bytes"});
  expect_mentions(launch_error({"mbarrier_outside", {1, 1, 1}, {1, 1, 1}, 16}, [] { isa::mbarrier_init(16, 1); }),
                  {"exceed the launch's 16 bytes of shared memory"});
  expect_mentions(launch_error({"mbarrier_over_arrival", {1, 1, 1}, {1, 1, 1}, 16},
                               [] {
                                 isa::mbarrier_init(0, 1);
                                 isa::mbarrier_arrive(0, 64);  // the only arrival; 64 bytes still pending
                                 isa::mbarrier_arrive(0);      // one arrival too many in this phase
                               }),
                  {"more arrivals than its count 1"});
}

TEST(EmulatorHopper, ElectSyncElectsOneLaneOfTheMask) {
  std::vector<std::uint32_t> elected(64, 0);
  within_deadline([&] {
    launch({"elect", {1, 1, 1}, {64, 1, 1}, 0}, [&] {
      const unsigned lane = isa::lane_id();
      if (isa::thread_linear_idx() < 32) {
        elected[isa::thread_linear_idx()] = isa::elect_sync() ? 1u : 0u;
      } else if (lane % 2 == 1) {  // warp 1: only the odd lanes take part
        elected[isa::thread_linear_idx()] = isa::elect_sync(0xaaaaaaaau) ? 1u : 0u;
      }
    });
  });
  std::uint32_t warp0 = 0, warp1 = 0;
  for (unsigned i = 0; i < 32; ++i) {
    warp0 += elected[i];
    warp1 += elected[32 + i];
    if (i % 2 == 0) {
      EXPECT_EQ(elected[32 + i], 0u) << "lane " << i << " is not in the mask";
    }
  }
  EXPECT_EQ(warp0, 1u);
  EXPECT_EQ(warp1, 1u);
  EXPECT_EQ(elected[0], 1u) << "the emulator elects the lowest lane of the mask";
  EXPECT_EQ(elected[33], 1u);
}

TEST(EmulatorHopper, SetmaxnregAndFencesAreNoOps) {
  std::vector<int> after(128, 0);
  within_deadline([&] {
    launch({"setmaxnreg", {1, 1, 1}, {128, 1, 1}, 0}, [&] {
      isa::setmaxnreg<24, false>();
      isa::setmaxnreg<240, true>();
      isa::fence_proxy_async();
      after[isa::thread_linear_idx()] = 1;
    });
  });
  for (int value : after) EXPECT_EQ(value, 1);
}

}  // namespace
}  // namespace faprobe::emu
