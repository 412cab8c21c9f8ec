// The emulator as an adversary (emulator.hpp): asynchronous results that arrive late and are poison until
// then (cp.async, wgmma, TMA), the race detector's synchronization edges (barriers, named barriers,
// mbarrier phases, __syncwarp, and what does not order memory: shuffles), the proxy fence, and varied
// schedules. Each hazard is planted in a small kernel and must be reported by name; each correct twin must
// run clean. The rules followed are the PTX ISA's ("cp.async.wait_group", "wgmma.mma_async",
// "wgmma.fence", "Asynchronous operations: async proxy", "membar/fence", "bar.warp.sync").
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/isa.hpp"
#include "cuda/common/isa_tma.hpp"
#include "cuda/common/isa_wgmma.hpp"
#include "cuda/common/tensor_map.hpp"
#include "emulator_test_support.hpp"

namespace faprobe::emu {
namespace {

namespace isa = cuda::isa;
using cuda::SharedSpan;
using testing::const_span_of;
using testing::expect_mentions;
using testing::launch_error;
using testing::within_deadline;

// --- cp.async: lands at the issuing thread's wait_group, poison until then. ---

std::vector<float> cp_async_values() { return {1.5f, 2.5f, 3.5f, 4.5f}; }

TEST(EmulatorCpAsync, ReadingTheDestinationBeforeTheWaitIsReported) {
  const std::vector<float> source = cp_async_values();
  auto in = const_span_of(source, "source");
  expect_mentions(launch_error({"early_read", {2, 1, 1}, {32, 1, 1}, 64}, [&] {
                    if (isa::lane_id() == 3) {
                      isa::cp_async_16(16, in, 0);
                      isa::cp_async_commit_group();
                      (void)static_cast<float>(isa::shared_array<float>(16, 4)[2]);  // no wait_group
                    }
                  }),
                  {"kernel 'early_read' block (0,0,0) thread (3,0,0)", "a shared-memory load of shared byte offset 24",
                   "before it has landed", "a cp.async issued by thread (3,0,0) in its commit group 0"});
}

TEST(EmulatorCpAsync, TheBytesArePoisonUntilTheWaitAndLandThen) {
  const std::vector<float> source = cp_async_values();
  auto in = const_span_of(source, "source");
  std::vector<float> before(4), after(4);
  const ScopedChecks off(false);  // let the early read happen
  within_deadline([&] {
    launch({"late_landing", {1, 1, 1}, {32, 1, 1}, 16}, [&] {
      if (isa::lane_id() != 0) return;
      isa::cp_async_16(0, in, 0);
      isa::cp_async_commit_group();
      const SharedSpan<float> tile = isa::shared_array<float>(0, 4);
      for (unsigned i = 0; i < 4; ++i) before[i] = tile[i];
      isa::cp_async_wait_group<0>();
      for (unsigned i = 0; i < 4; ++i) after[i] = tile[i];
    });
  });
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_TRUE(std::isnan(before[i])) << i;
    EXPECT_EQ(after[i], source[i]);
  }
}

TEST(EmulatorCpAsync, WaitGroupLandsOnlyTheGroupsItCovers) {
  std::vector<float> source(8);
  for (unsigned i = 0; i < 8; ++i) source[i] = static_cast<float>(i + 1);
  auto in = const_span_of(source, "source");
  std::vector<float> seen(8);
  const ScopedChecks off(false);
  within_deadline([&] {
    launch({"two_groups", {1, 1, 1}, {32, 1, 1}, 32}, [&] {
      if (isa::lane_id() != 0) return;
      isa::cp_async_16(0, in, 0);  // group 0
      isa::cp_async_commit_group();
      isa::cp_async_16(16, in, 4);  // group 1
      isa::cp_async_commit_group();
      isa::cp_async_wait_group<1>();  // group 0 only
      const SharedSpan<float> tile = isa::shared_array<float>(0, 8);
      for (unsigned i = 0; i < 8; ++i) seen[i] = tile[i];
      isa::cp_async_wait_group<0>();
    });
  });
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(seen[i], source[i]);
  for (unsigned i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(seen[i])) << i;
}

// Thread 0 copies, thread 32 reads: it needs thread 0's wait_group and then a barrier between them.
std::string copy_then_read(bool wait, bool barrier) {
  static const std::vector<float> source = cp_async_values();
  auto in = const_span_of(source, "source");
  return launch_error({"copy_then_read", {1, 1, 1}, {64, 1, 1}, 16}, [&] {
    const unsigned tid = isa::thread_linear_idx();
    if (tid == 0) {
      isa::cp_async_16(0, in, 0);
      isa::cp_async_commit_group();
      if (wait) isa::cp_async_wait_group<0>();
    }
    if (barrier) isa::sync_threads();
    if (tid == 32) (void)static_cast<float>(isa::shared_array<float>(0, 4)[0]);
    isa::sync_threads();  // thread 0 does not exit (which lands its copies) before thread 32 has read
  });
}

TEST(EmulatorCpAsync, AnotherThreadNeedsTheIssuersWaitAndABarrier) {
  EXPECT_EQ(copy_then_read(true, true), "");
  expect_mentions(copy_then_read(false, true), {"thread (32,0,0)", "before it has landed", "cp.async issued by thread (0,0,0)"});
  expect_mentions(copy_then_read(true, false),
                  {"thread (32,0,0)", "race on shared memory byte offset 0", "a shared-memory load by this thread",
                   "cp.async by thread (0,0,0)"});
}

// --- wgmma: accumulators are poison until wgmma.wait_group retires the wgmma. ---

constexpr std::size_t kA = 0, kB = 2048, kWgmmaShared = 4096;  // A and B: 64x16 halves each, no swizzle
std::uint64_t desc_a() { return isa::wgmma_descriptor(kA, 128, 256, isa::WgmmaSwizzle::none); }
std::uint64_t desc_b() { return isa::wgmma_descriptor(kB, 128, 256, isa::WgmmaSwizzle::none); }

// Operands of ones (A and B in fp16: 0x3c00): every element of D = A·B is 16.
void fill_ones() {
  if (isa::thread_linear_idx() == 0) {
    const SharedSpan<std::uint16_t> operands = isa::shared_array<std::uint16_t>(0, kWgmmaShared / 2);
    for (std::size_t i = 0; i < operands.size(); ++i) operands[i] = 0x3c00;
    isa::fence_proxy_async();  // generic writes, then async-proxy reads by the wgmma
  }
  isa::sync_threads();
}

enum class WgmmaPlant { none, no_fence, no_wait, write_in_flight, modify_a, overwrite_shared, no_proxy_fence, read_early };

std::string wgmma_with(WgmmaPlant plant, std::vector<float>* early = nullptr) {
  return launch_error({"wgmma_plant", {1, 1, 1}, {128, 1, 1}, kWgmmaShared}, [plant, early] {
    const unsigned tid = isa::thread_linear_idx();
    if (plant == WgmmaPlant::no_proxy_fence) {
      if (tid == 0) {
        const SharedSpan<std::uint16_t> operands = isa::shared_array<std::uint16_t>(0, kWgmmaShared / 2);
        for (std::size_t i = 0; i < operands.size(); ++i) operands[i] = 0x3c00;
      }
      isa::sync_threads();
    } else {
      fill_ones();
    }
    float d[32] = {};
    std::uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
    if (plant != WgmmaPlant::no_fence) isa::wgmma_fence();
    if (plant == WgmmaPlant::modify_a) {
      isa::wgmma_rs<64, isa::Half>(d, a, desc_b(), false);
    } else {
      isa::wgmma_ss<64, isa::Half>(d, desc_a(), desc_b(), false);
    }
    isa::wgmma_commit_group();
    if (plant == WgmmaPlant::write_in_flight) d[5] = 0.0f;
    if (plant == WgmmaPlant::modify_a) a[2] = 0;
    if (plant == WgmmaPlant::overwrite_shared && tid == 64) isa::shared_array<std::uint16_t>(kB, 1)[0] = 0;
    if (plant == WgmmaPlant::read_early && early != nullptr) (*early)[tid] = d[0];
    if (plant == WgmmaPlant::no_wait) return;
    isa::wgmma_wait_group<0>();
    if (d[0] != 16.0f) throw EmulationError("D[0] is " + std::to_string(d[0]) + ", not 16");
  });
}

TEST(EmulatorWgmmaAsync, ACorrectSequenceRunsClean) { EXPECT_EQ(wgmma_with(WgmmaPlant::none), ""); }

TEST(EmulatorWgmmaAsync, AMissingFenceIsReported) {
  expect_mentions(wgmma_with(WgmmaPlant::no_fence), {"kernel 'wgmma_plant'", "without a wgmma.fence"});
}

TEST(EmulatorWgmmaAsync, ADroppedWaitIsReportedWhenTheThreadExits) {
  expect_mentions(wgmma_with(WgmmaPlant::no_wait),
                  {"kernel 'wgmma_plant'", "exits with 1 wgmma.mma_async in flight", "no wgmma.wait_group"});
}

TEST(EmulatorWgmmaAsync, WritingAnInFlightAccumulatorIsReported) {
  expect_mentions(wgmma_with(WgmmaPlant::write_in_flight),
                  {"accumulator register d[5] of a wgmma.mma_async in flight was written"});
}

TEST(EmulatorWgmmaAsync, ChangingTheARegistersInFlightIsReported) {
  expect_mentions(wgmma_with(WgmmaPlant::modify_a), {"the A registers of a wgmma.mma_async changed"});
}

TEST(EmulatorWgmmaAsync, WritingSharedMemoryAnInFlightWgmmaReadsIsReported) {
  expect_mentions(wgmma_with(WgmmaPlant::overwrite_shared),
                  {"thread (64,0,0)", "writes shared byte offset 2048 while a wgmma.mma_async in flight reads it"});
}

TEST(EmulatorWgmmaAsync, GenericWritesNeedAProxyFenceBeforeTheWgmmaReadsThem) {
  expect_mentions(wgmma_with(WgmmaPlant::no_proxy_fence),
                  {"wgmma.mma_async (async proxy) reads shared byte offset 0", "which thread (0,0,0) wrote",
                   "no fence.proxy.async since"});
}

TEST(EmulatorWgmmaAsync, ReadingTheAccumulatorsEarlyGivesThePoison) {
  std::vector<float> early(128, 0.0f);
  EXPECT_EQ(wgmma_with(WgmmaPlant::read_early, &early), "");  // a read alone is not seen...
  for (float value : early) EXPECT_TRUE(std::isnan(value));  // ...but it reads NaN, never D
}

// --- TMA: a box lands when its mbarrier phase completes, and is read only after a wait on it. ---

constexpr std::size_t kRingBarrier = 0, kBoxTile = 1024;

enum class TmaPlant { none, read_before_landing, read_without_wait };

std::string tma_with(TmaPlant plant) {
  static const std::vector<std::uint16_t> matrix = [] {
    std::vector<std::uint16_t> m(16 * 64);
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<std::uint16_t>(i + 1);
    return m;
  }();
  const isa::TensorMap map = cuda::emulated_tensor_map(matrix.data(), cuda::matrix_shape(16, 64, 2, 64, 8));
  constexpr std::uint32_t bytes = 64 * 8 * 2;
  return launch_error({"tma_plant", {1, 1, 1}, {64, 1, 1}, kBoxTile + bytes}, [&] {
    const unsigned tid = isa::thread_linear_idx();
    if (tid == 0) {
      isa::mbarrier_init(kRingBarrier, 1);
      isa::fence_mbarrier_init();
    }
    isa::sync_threads();
    if (tid == 0) {
      // read_before_landing announces a second box that never comes: the phase cannot complete.
      isa::mbarrier_arrive(kRingBarrier, plant == TmaPlant::read_before_landing ? 2 * bytes : bytes);
      isa::tma_load<2>(kBoxTile, map, kRingBarrier, {0, 0});
    } else if (tid == 32) {
      if (plant == TmaPlant::none) isa::mbarrier_wait_parity(kRingBarrier, 0);
      (void)static_cast<std::uint16_t>(isa::shared_array<std::uint16_t>(kBoxTile, 8)[3]);
    }
  });
}

TEST(EmulatorTmaAsync, AReadAfterTheWaitRunsClean) { EXPECT_EQ(tma_with(TmaPlant::none), ""); }

TEST(EmulatorTmaAsync, AReadBeforeThePhaseCompletesIsReported) {
  expect_mentions(tma_with(TmaPlant::read_before_landing),
                  {"thread (32,0,0)", "shared byte offset 1030 before it has landed",
                   "a TMA load (cp.async.bulk.tensor) issued by thread (0,0,0)", "phase 0 of the mbarrier at shared offset 0"});
}

TEST(EmulatorTmaAsync, AReadOfALandedBoxWithoutAWaitIsARace) {
  expect_mentions(tma_with(TmaPlant::read_without_wait),
                  {"thread (32,0,0)", "race on shared memory byte offset 1030",
                   "has not waited on its mbarrier phase"});
}

TEST(EmulatorTmaAsync, ATmaStoreOfGenericWritesNeedsAProxyFence) {
  std::vector<std::uint16_t> out(64, 0);
  for (const bool fence : {true, false}) {
    const isa::TensorMap map = cuda::emulated_tensor_map(out.data(), cuda::matrix_shape(1, 64, 2, 64, 1));
    const std::string message = launch_error({"tma_store_fence", {1, 1, 1}, {64, 1, 1}, kBoxTile + 128}, [&] {
      const unsigned tid = isa::thread_linear_idx();
      isa::shared_array<std::uint16_t>(kBoxTile, 64)[tid] = static_cast<std::uint16_t>(tid);
      if (fence) isa::fence_proxy_async();
      isa::sync_threads();
      if (tid == 0) {
        isa::tma_store<2>(map, kBoxTile, {0, 0});
        isa::tma_store_commit_group();
        isa::tma_store_wait_group<0>();
      }
    });
    if (fence) {
      EXPECT_EQ(message, "");
    } else {
      expect_mentions(message, {"a TMA store (cp.async.bulk.tensor) (async proxy) reads shared byte offset", "fence.proxy.async"});
    }
  }
}

// --- The race detector's edges. ---

enum class Edge { none, named_barrier, mbarrier, sync_warp, shuffle };

// One thread stores a word, another loads it, with `edge` in between.
std::string store_then_load(Edge edge, unsigned writer, unsigned reader) {
  return launch_error({"edge", {1, 1, 1}, {64, 1, 1}, 16}, [=] {
    const unsigned tid = isa::thread_linear_idx();
    if (edge == Edge::mbarrier && tid == 0) isa::mbarrier_init(8, 1);
    if (edge == Edge::mbarrier) isa::sync_threads();
    const SharedSpan<std::uint32_t> word = isa::shared_array<std::uint32_t>(0, 1);
    if (tid == writer) word[0] = 7;
    switch (edge) {
      case Edge::named_barrier:  // the writer's warp arrives, the reader's warp waits
        if (tid / 32 == writer / 32) isa::bar_arrive(1, 64);
        if (tid / 32 == reader / 32) isa::bar_sync(1, 64);
        break;
      case Edge::mbarrier:
        if (tid == writer) isa::mbarrier_arrive(8);
        if (tid == reader) isa::mbarrier_wait_parity(8, 0);
        break;
      case Edge::sync_warp:
        if (tid / 32 == 0) isa::sync_warp();
        break;
      case Edge::shuffle:
        if (tid / 32 == 0) (void)isa::shfl_sync(isa::full_warp_mask, tid, 0);
        break;
      case Edge::none: break;
    }
    if (tid == reader) (void)static_cast<std::uint32_t>(word[0]);
  });
}

TEST(EmulatorRaces, SynchronizationEdgesOrderAStoreBeforeALoad) {
  EXPECT_EQ(store_then_load(Edge::named_barrier, 0, 32), "");
  EXPECT_EQ(store_then_load(Edge::mbarrier, 3, 40), "");
  EXPECT_EQ(store_then_load(Edge::sync_warp, 0, 1), "");
  EXPECT_EQ(store_then_load(Edge::none, 5, 5), "");  // program order
}

TEST(EmulatorRaces, WithoutAnEdgeTheAccessesAreReportedWithBothThreads) {
  for (const Edge edge : {Edge::none, Edge::shuffle}) {  // a shuffle does not order memory (emulator.hpp)
    expect_mentions(store_then_load(edge, 0, 1),
                    {"kernel 'edge' block (0,0,0) thread (1,0,0)", "race on shared memory byte offset 0",
                     "a shared-memory load by this thread and a shared-memory store by thread (0,0,0)"});
  }
  // A __syncwarp orders the lanes of its warp only.
  expect_mentions(store_then_load(Edge::sync_warp, 0, 32), {"thread (32,0,0)", "race on shared memory byte offset 0"});
}

TEST(EmulatorRaces, AWriteAfterConcurrentReadsIsReported) {
  expect_mentions(launch_error({"war", {1, 1, 1}, {96, 1, 1}, 16}, [] {
                    const unsigned tid = isa::thread_linear_idx();
                    const SharedSpan<std::uint32_t> word = isa::shared_array<std::uint32_t>(0, 1);
                    if (tid == 0) word[0] = 1;
                    isa::sync_threads();
                    if (tid == 33 || tid == 70) (void)static_cast<std::uint32_t>(word[0]);
                    if (tid == 90) word[0] = 2;  // ordered after neither read
                  }),
                  {"thread (90,0,0)", "a shared-memory store by this thread and a shared-memory load by thread"});
}

TEST(EmulatorRaces, ANamedBarrierLeftWithArrivalsIsReported) {
  expect_mentions(launch_error({"unbalanced", {1, 1, 1}, {64, 1, 1}, 0}, [] {
                    if (isa::warp_id() == 1) isa::bar_arrive(3, 64);
                  }),
                  {"kernel 'unbalanced'", "named barrier 3 ends the CTA with 32 of its 64 threads arrived",
                   "32 of them by bar.arrive"});
}

// --- Hardening. ---

TEST(EmulatorHardening, SharedMemoryStartsOn1024Bytes) {
  std::uintptr_t misalignment = 1;
  within_deadline([&] {
    launch({"aligned", {1, 1, 1}, {32, 1, 1}, 4096}, [&] {
      if (isa::lane_id() == 0)
        misalignment = reinterpret_cast<std::uintptr_t>(isa::shared_array<std::uint8_t>(0, 1).data()) % 1024;
    });
  });
  EXPECT_EQ(misalignment, 0u);
}

TEST(EmulatorHardening, ASwizzledDescriptorOffItsPatternRowsIsRejected) {
  const std::uint64_t on_row = isa::wgmma_descriptor(1024 + 32, 16, 1024, isa::WgmmaSwizzle::bytes128);
  EXPECT_NO_THROW((void)wgmma_element_offset(on_row, false, 2, 0, 0));
  const std::uint64_t off_row = isa::wgmma_descriptor(1024 + 128, 16, 1024, isa::WgmmaSwizzle::bytes128);
  try {
    (void)wgmma_element_offset(off_row, false, 2, 0, 0);
    ADD_FAILURE() << "a 128B-swizzled descriptor starting at 1152 was accepted";
  } catch (const EmulationError& e) {
    expect_mentions(e.what(), {"start address 1152 has nonzero swizzle row bits [7, 10)", "base offset 0"});
  }
  const std::uint64_t off_row_64 = isa::wgmma_descriptor(512 + 256, 16, 512, isa::WgmmaSwizzle::bytes64);
  EXPECT_THROW((void)wgmma_element_offset(off_row_64, false, 2, 0, 0), EmulationError);
  // Without swizzle any 16-byte aligned start is fine.
  EXPECT_NO_THROW((void)wgmma_element_offset(isa::wgmma_descriptor(1152, 128, 256, isa::WgmmaSwizzle::none), false, 2, 0, 0));
}

// --- Schedules. ---

TEST(EmulatorSchedules, SeededSchedulesShuffleCtasAndKeepCorrectResults) {
  // A correct block reduction gives the same sums under every schedule; the CTAs' order changes with the seed.
  std::vector<float> values(4 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 13);
  auto in = const_span_of(values, "values");
  auto run = [&](std::vector<unsigned>& order) {
    std::vector<float> sums(4, 0.0f);
    order.clear();
    within_deadline([&] {
      launch({"block_sum", {4, 1, 1}, {64, 1, 1}, 64 * sizeof(float)}, [&] {
        const unsigned tid = isa::thread_linear_idx();
        if (tid == 0) order.push_back(isa::block_idx_x());
        const SharedSpan<float> partial = isa::shared_array<float>(0, 64);
        partial[tid] = in[isa::block_idx_x() * 64 + tid];
        isa::sync_threads();
        for (unsigned stride = 32; stride > 0; stride /= 2) {
          if (tid < stride) partial[tid] = partial[tid] + partial[tid + stride];
          isa::sync_threads();
        }
        if (tid == 0) sums[isa::block_idx_x()] = partial[0];
      });
    });
    return sums;
  };
  std::vector<unsigned> order;
  const std::vector<float> by_default = run(order);
  EXPECT_EQ(order, (std::vector<unsigned>{0, 1, 2, 3}));
  std::set<std::vector<unsigned>> orders;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const ScopedSchedule schedule(seed);
    EXPECT_EQ(run(order), by_default) << "seed " << seed;
    orders.insert(order);
  }
  EXPECT_GT(orders.size(), 1u) << "six seeds ran the CTAs in one order";
}

TEST(EmulatorSchedules, TheEnvironmentVariablesAreChecked) {
  ::setenv("FAPROBE_EMU_SCHEDULE", "12", 1);
  EXPECT_EQ(effective_schedule_seed(0), 12u);
  EXPECT_EQ(effective_schedule_seed(5), 5u);
  ::setenv("FAPROBE_EMU_SCHEDULE", "twelve", 1);
  EXPECT_THROW((void)effective_schedule_seed(0), EmulationError);
  ::unsetenv("FAPROBE_EMU_SCHEDULE");
  EXPECT_EQ(effective_schedule_seed(0), 0u);
  ::setenv("FAPROBE_EMU_CHECKS", "off", 1);
  EXPECT_FALSE(checks_enabled());
  ::setenv("FAPROBE_EMU_CHECKS", "maybe", 1);
  EXPECT_THROW((void)checks_enabled(), EmulationError);
  ::unsetenv("FAPROBE_EMU_CHECKS");
  EXPECT_TRUE(checks_enabled());
}

}  // namespace
}  // namespace faprobe::emu
