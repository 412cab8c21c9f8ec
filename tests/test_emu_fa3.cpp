// The cuda.fa3 kernel (kernels/cuda/fa3/fa3.cuh) under the CPU emulator, no GPU needed: the producer's TMA
// loads through the mbarrier ring, the consumers' wgmma and pingpong, the TMA stores of O, the persistent
// schedule, all run as they are written; inputs from make_inputs, the output checked by the project's checker
// against the float64 reference over odd shapes (lengths 1, 17, 129, 1000; head_dim 64, 128, 256; causal with
// seq_q ≠ seq_k; GQA and MQA; fp16, bf16 and fp8_e4m3), each in every tile instantiated for it, with a
// persistent grid smaller than the tile count, the LSE against a host computation, and planted defects: a
// swizzle mismatch between TMA and the wgmma descriptor, a dropped rescale and an off-by-one causal mask must
// be caught; a stage never released and a wrong transaction byte count must be reported as a deadlock naming
// the mbarrier, not hang; a TMA store without its proxy fence is reported.
#include <algorithm>
#include <fstream>
#include <map>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "case_support.hpp"
#include "cuda/common/emu/device.hpp"
#include "cuda/common/emu/emulator.hpp"
#include "cuda/fa3/fa3_emulated.hpp"
#include "cuda/fa3/fa3_launch.hpp"
#include "cuda/launchers.hpp"
#include "emulator_test_support.hpp"
#include "flash_kernel_support.hpp"
#include "model/case.hpp"

namespace faprobe {

namespace {

using cuda::fa3::Defect;
using namespace test_support;

// The output of fa3 on case c under the emulator on a persistent grid of `sms` CTAs: the tile plain cuda.fa3
// runs for the case, or `tile`.
HostTensor run_fa3(const Case& c, std::vector<float>* lse = nullptr, int sms = emu::emulated_device.sm_count,
                   std::optional<cuda::Tile> tile = std::nullopt) {
  const cuda::Tile chosen = tile ? *tile : *cuda::default_tile(cuda::fa3_instantiations(), c.dtype, c.head_dim, c.mask);
  return run_flash_kernel(
      c,
      [&](cuda::AttentionArgs& args) {
        std::vector<std::uint64_t> workspace((cuda::fa3_workspace_bytes(args) + 7) / 8);  // V^T for fp8_e4m3
        args.workspace = workspace.data();
        if (sms == emu::emulated_device.sm_count) {
          cuda::fa3_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args, chosen);
        } else {
          cuda::fa3::forward_emulated(args, chosen, sms);
        }
      },
      lse);
}

// The output of fa3 with kDefect planted, in one instantiation per (dtype, head_dim) the defects are tried
// on: a defect is compiled into one kernel body, not into every instantiation.
template <Defect kDefect>
HostTensor run_fa3_defect(const Case& c) {
  return run_flash_kernel(c, [&](cuda::AttentionArgs& args) {
    std::vector<std::uint64_t> workspace((cuda::fa3_workspace_bytes(args) + 7) / 8);
    args.workspace = workspace.data();
    if (c.dtype == DType::fp16 && c.head_dim == 64) {
      cuda::fa3::forward_emulated<cuda::TiledInstance<cuda::isa::Half, 64, 128, 128>, kDefect>(args);
    } else if (c.dtype == DType::fp16 && c.head_dim == 128) {
      cuda::fa3::forward_emulated<cuda::TiledInstance<cuda::isa::Half, 128, 128, 128>, kDefect>(args);
    } else if (c.dtype == DType::bf16 && c.head_dim == 64) {
      cuda::fa3::forward_emulated<cuda::TiledInstance<cuda::isa::BFloat16, 64, 192, 128>, kDefect>(args);
    } else if (c.dtype == DType::bf16 && c.head_dim == 128) {
      cuda::fa3::forward_emulated<cuda::TiledInstance<cuda::isa::BFloat16, 128, 128, 128>, kDefect>(args);
    } else if (c.dtype == DType::fp8_e4m3 && c.head_dim == 128) {
      cuda::fa3::forward_emulated<cuda::TiledInstance<cuda::isa::E4M3, 128, 128, 128>, kDefect>(args);
    } else {
      throw std::invalid_argument("run_fa3_defect: no planted instantiation for " + c.label());
    }
  });
}

VerifyResult check(const Case& c, const HostTensor& output) { return check_output(c, GeneratedInputs(c), output); }

// The EmulationError message of running fa3 with kDefect on c ("" if it ran), within the hang deadline.
template <Defect kDefect>
std::string emulation_error(const Case& c) {
  return emu::testing::launch_error([&] { run_fa3_defect<kDefect>(c); });
}

// Block sizes (Traits): 128 query rows (two consumers of 64); keys 128 per block at d 64 and 128, 64 at 256.
std::vector<Case> odd_shapes() {
  const Mask none = Mask::none, causal = Mask::causal;
  const DType fp16 = DType::fp16, bf16 = DType::bf16, fp8 = DType::fp8_e4m3;
  return {
      make_case(1, 1, 1, 1, 1, 64, fp16, none),
      make_case(1, 2, 2, 1, 1, 256, bf16, causal),
      make_case(1, 1, 1, 17, 17, 128, bf16, causal),
      make_case(2, 2, 2, 17, 17, 64, fp16, none),
      make_case(1, 2, 2, 129, 129, 64, fp16, causal),     // 2 query blocks, the second with one row
      make_case(1, 1, 1, 127, 129, 128, fp16, none),      // 2 key blocks, the last with one key
      make_case(1, 1, 1, 129, 129, 256, fp16, causal),    // d 256: 3 key blocks of 64
      make_case(1, 1, 1, 17, 129, 64, bf16, causal),      // seq_q < seq_k: the diagonal shifted right
      make_case(1, 1, 1, 1, 300, 128, fp16, causal),      // one row sees every key
      make_case(1, 1, 1, 129, 17, 128, fp16, causal),     // seq_q > seq_k: 112 rows see no key
      make_case(1, 1, 1, 300, 129, 64, bf16, causal),     // seq_q > seq_k across query and key blocks
      make_case(1, 8, 1, 129, 127, 64, fp16, causal),     // GQA 8:1
      make_case(1, 4, 1, 17, 200, 256, bf16, none),       // MQA
      make_case(1, 1, 1, 1000, 1000, 64, fp16, causal),   // 8 query blocks, causal block skipping
      make_case(1, 1, 1, 1000, 1000, 128, bf16, none),    // 8 key blocks: both stages reused 4 times
      // fp8_e4m3 (per-tensor scales, V transposed, bf16 output): 64-byte rows at d 64, 128-byte ones above.
      make_case(1, 1, 1, 1, 1, 64, fp8, none),
      make_case(1, 2, 2, 17, 17, 64, fp8, causal),
      make_case(1, 1, 1, 129, 300, 128, fp8, causal),     // seq_q < seq_k, 3 key blocks, a partial 32-key group
      make_case(1, 1, 1, 300, 129, 256, fp8, causal),     // seq_q > seq_k
      make_case(1, 4, 1, 129, 1000, 128, fp8, none),      // MQA, 8 key blocks
  };
}

// Every odd shape in every tile instantiated for its dtype and head_dim (fa3/CMakeLists.txt's list).
std::vector<TiledCase> odd_shapes_in_every_tile() { return in_every_tile(odd_shapes(), cuda::fa3_instantiations()); }

class Fa3OddShapes : public testing::TestWithParam<TiledCase> {};

TEST_P(Fa3OddShapes, MatchesReference) {
  const Case& c = GetParam().c;
  ASSERT_EQ(cuda::fa3_supports(c, GetParam().tile), "");
  const VerifyResult result = check(c, run_fa3(c, nullptr, emu::emulated_device.sm_count, GetParam().tile));
  EXPECT_TRUE(result.passed) << c.label() << " tile " << GetParam().tile.name() << ": " << describe(result);
  EXPECT_GT(result.rows_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Emulated, Fa3OddShapes, testing::ValuesIn(odd_shapes_in_every_tile()), tiled_case_name);

TEST(Fa3, EveryInstantiationIsInTheVerifyMatrix) {
  expect_every_instantiation_covered(odd_shapes_in_every_tile(), cuda::fa3_instantiations());
}

TEST(Fa3, PersistentGridSmallerThanTheTilesWalksEveryTile) {
  // 3 CTAs for 2·3·ceil(300/128) = 18 tiles of mixed lengths (causal): each CTA runs 6 tiles, so the K/V
  // ring's phases and Q's full/empty pair carry over from tile to tile, and the pingpong barriers too.
  const Case c = make_case(2, 3, 1, 300, 280, 64, DType::bf16, Mask::causal);
  const VerifyResult result = check(c, run_fa3(c, nullptr, 3));
  EXPECT_TRUE(result.passed) << describe(result);
  const Case one_cta = make_case(1, 2, 2, 260, 260, 128, DType::fp16, Mask::none);
  const VerifyResult single = check(one_cta, run_fa3(one_cta, nullptr, 1));
  EXPECT_TRUE(single.passed) << describe(single);
}

TEST(Fa3, RowsWithoutKeysAreZeros) {
  const Case c = make_case(1, 2, 2, 129, 17, 64, DType::fp16, Mask::causal);
  expect_keyless_rows_zero(c, run_fa3(c));
  const Case empty_tile = make_case(1, 1, 1, 300, 100, 128, DType::bf16, Mask::causal);  // tile 0 sees no key
  expect_keyless_rows_zero(empty_tile, run_fa3(empty_tile));
}

TEST(Fa3, LogSumExpMatchesHost) {
  const Case c = make_case(2, 2, 1, 150, 140, 64, DType::bf16, Mask::causal);
  std::vector<float> lse;
  run_fa3(c, &lse);
  EXPECT_LT(worst_lse_error(c, lse), 1e-4);
}

// fp8_e4m3's LSE against the H200 (results/h200/2026-12-04/verify/fp8-lse.jsonl): where a row sees 1, 2 or 17
// keys its LSE error is the scores' accumulation error, which the emulator now models (Hopper's e4m3 adder,
// model/fp8_accumulation.hpp). Emulated on the same cases (no mask, seq_q 1 and 17, seeds 0–4), the worst
// error per (head_dim, seq_k) must be within 10 % of the GPU's (it is within 1 %: the model reproduces the
// GPU's scores; the issue asked for 2×); exact fp32 accumulation, the emulator before, was 10 to 100 times
// below it.
TEST(Fa3Fp8, LseErrorsTrackTheH200WhereRowsSeeFewKeys) {
  std::map<std::pair<std::int64_t, std::int64_t>, double> gpu, emulated;  // (head_dim, seq_k) -> worst
  std::ifstream in(std::string(FAPROBE_SOURCE_DIR) + "/results/h200/2026-12-04/verify/fp8-lse.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line);
    Case c;
    from_json(record.at("case"), c);
    if (c.mask != Mask::none || c.seq_k > 17 || c.seq_q > 17) continue;
    double& worst = gpu[{c.head_dim, c.seq_k}];
    worst = std::max(worst, record.at("verify").at("lse_max_abs_diff").get<double>());
    std::vector<float> lse;
    run_fa3(c, &lse);
    double& emulated_worst = emulated[{c.head_dim, c.seq_k}];
    emulated_worst = std::max(emulated_worst, worst_lse_error(c, lse));
  }
  ASSERT_EQ(gpu.size(), 9u) << "head_dim 64, 128, 256 by seq_k 1, 2, 17";
  for (const auto& [key, gpu_worst] : gpu) {
    const double emulated_worst = emulated[key];
    std::printf("fp8 d%lld seq_k %lld: LSE error H200 %.2e, emulated %.2e\n", static_cast<long long>(key.first),
                static_cast<long long>(key.second), gpu_worst, emulated_worst);
    EXPECT_LE(gpu_worst, 1.1 * emulated_worst) << "d" << key.first << " seq_k " << key.second;
    EXPECT_GE(gpu_worst, emulated_worst / 1.1) << "d" << key.first << " seq_k " << key.second;
  }
}

TEST(Fa3, RefusesWhatIsNotInstantiatedWithAReason) {
  const auto supports = [](DType dtype, std::int64_t head_dim) {
    return cuda::fa3_supports(make_case(1, 1, 1, 64, 64, head_dim, dtype, Mask::none), std::nullopt);
  };
  const auto forward = [](const cuda::Launch& launch, const cuda::AttentionArgs& args) {
    cuda::fa3_forward(launch, args, cuda::Tile{128, 128});
  };
  expect_refuses_with_reasons(supports, forward, 96);
  EXPECT_NE(supports(DType::fp32, 64).find("fa3"), std::string::npos) << "the reason names the kernel";
  // A tile that is not built for the case names where it is built.
  const std::string reason =
      cuda::fa3_supports(make_case(1, 1, 1, 64, 64, 64, DType::bf16, Mask::none), cuda::Tile{128, 176});
  EXPECT_NE(reason.find("the fa3 tile 128x176 is instantiated for fp16 d128, bf16 d128 only"), std::string::npos) << reason;
  EXPECT_NE(cuda::fa3_supports(make_case(1, 1, 1, 64, 64, 64, DType::bf16, Mask::causal_top_left), std::nullopt)
                .find("bottom-right"),
            std::string::npos);
}

// Each instantiation: a producer and block_q / 64 consumer warpgroups, and its shared memory within Hopper's:
// Q, two K and two V stages, e4m3's O staging (16-bit O is staged in Q), 10 mbarriers of 8 bytes.
TEST(Fa3, ShapesAreWarpgroupsWithinHoppersSharedMemory) {
  for (const cuda::TileInstantiation& i : cuda::fa3_instantiations()) {
    SCOPED_TRACE(testing::Message() << to_string(i.dtype) << " d" << i.head_dim << " " << i.tile.name());
    const cuda::KernelShape shape = cuda::fa3_shape(i.dtype, i.head_dim, i.tile);
    EXPECT_EQ(shape.threads, 128 + 128 * (i.tile.block_q / 64));
    EXPECT_EQ(shape.block_q, i.tile.block_q);
    EXPECT_EQ(shape.block_k, i.tile.block_k);
    const std::size_t element = i.dtype == DType::fp8_e4m3 ? 1 : 2;
    const std::size_t o_staging = i.dtype == DType::fp8_e4m3 ? std::size_t(shape.block_q) * std::size_t(i.head_dim) * 2 : 0;
    EXPECT_EQ(shape.shared_bytes,
              std::size_t(shape.block_q + 4 * shape.block_k) * std::size_t(i.head_dim) * element + o_staging + 10 * 8);
    EXPECT_LE(shape.shared_bytes, emu::emulated_device.max_shared_bytes_per_block);
  }
  // Each (dtype, head_dim, mask) of the kernel has exactly one default tile.
  for (DType dtype : {DType::fp16, DType::bf16, DType::fp8_e4m3})
    for (std::int64_t d : {64, 128, 256})
      for (Mask mask : {Mask::none, Mask::causal}) {
        int defaults = 0;
        for (const cuda::TileInstantiation& i : cuda::fa3_instantiations())
          if (i.dtype == dtype && i.head_dim == d && (mask == Mask::none ? i.default_without_mask : i.default_causal)) ++defaults;
        EXPECT_EQ(defaults, 1) << to_string(dtype) << " d" << d << " " << to_string(mask);
      }
}

// --- Planted defects. ---

// TMA writes K with the 128-byte swizzle, the wgmma descriptor reads it as 64-byte: S is built from the wrong
// elements of K, so every output is wrong.
TEST(Fa3Planted, SwizzleMismatchBetweenTmaAndWgmmaIsCaught) {
  const Case c = make_case(1, 2, 2, 129, 129, 128, DType::fp16, Mask::none);
  EXPECT_TRUE(check(c, run_fa3(c)).passed);
  const VerifyResult bad = check(c, run_fa3_defect<Defect::swizzle_mismatch>(c));
  EXPECT_FALSE(bad.passed) << "swizzle_mismatch not caught: " << describe(bad);
  std::printf("swizzle_mismatch: %s\n", describe(bad).c_str());
}

TEST(Fa3Planted, NoRescaleIsCaught) {
  // seq_k 600 is 5 key blocks at d 64; with one block (seq_k 100) there is nothing to rescale.
  expect_defect_caught("no_rescale", make_case(1, 2, 2, 100, 600, 64, DType::fp16, Mask::none),
                       make_case(1, 2, 2, 100, 100, 64, DType::fp16, Mask::none), "one key block needs no rescale",
                       [](const Case& c) { return run_fa3(c); },
                       [](const Case& c) { return run_fa3_defect<Defect::no_rescale>(c); });
}

TEST(Fa3Planted, CausalOffByOneIsCaught) {
  expect_defect_caught("causal_off_by_one", make_case(1, 1, 1, 129, 129, 128, DType::bf16, Mask::causal),
                       make_case(1, 1, 1, 129, 129, 128, DType::bf16, Mask::none), "no causal mask, nothing to get wrong",
                       [](const Case& c) { return run_fa3(c); },
                       [](const Case& c) { return run_fa3_defect<Defect::causal_off_by_one>(c); });
}

// e4m3 without V's per-tensor scale (2^-6): O is 64 times too large, far outside fp8's own tolerance.
TEST(Fa3Planted, Fp8WithoutTheVScaleIsCaught) {
  const Case c = make_case(1, 2, 1, 129, 200, 128, DType::fp8_e4m3, Mask::causal);
  EXPECT_TRUE(check(c, run_fa3(c)).passed);
  const VerifyResult bad = check(c, run_fa3_defect<Defect::no_v_scale>(c));
  EXPECT_FALSE(bad.passed) << "no_v_scale not caught: " << describe(bad);
}

// The consumers never release a K stage: the producer's wait for the stage's "empty" phase can never
// complete. The emulator reports the deadlock, naming the mbarrier and what it still expects.
TEST(Fa3Planted, AnMbarrierWaitThatCanNeverCompleteIsReported) {
  const Case c = make_case(1, 1, 1, 64, 600, 64, DType::fp16, Mask::none);  // 5 key blocks through 2 stages
  emu::testing::expect_mentions(emulation_error<Defect::never_released>(c), {"deadlock", "fa3_fp16_hdim64", "wait on the mbarrier at shared offset",
                                          "256 of 256 arrivals pending"});
}

// The producer announces half of a K tile's bytes: the "full" phase completes on the first of its two boxes
// (on the GPU the consumers then race the second box) and the other half counts against the next phase.
// Under the emulator the copies land at issue, so the output is even right; what gives the defect away is
// the barrier ending the CTA with bytes unaccounted, which the emulator reports.
TEST(Fa3Planted, AWrongTransactionByteCountIsReported) {
  const Case c = make_case(1, 1, 1, 64, 600, 128, DType::bf16, Mask::none);
  // The consumers' wgmma then reads the second box before it has landed: the race detector names the TMA load
  // and its mbarrier phase. With the checks off, the CTA's end still finds the bytes unsettled.
  emu::testing::expect_mentions(emulation_error<Defect::missing_expect_tx>(c),
                                {"fa3_bf16_hdim128", "wgmma.mma_async of shared byte offset", "before it has landed",
                                 "a TMA load (cp.async.bulk.tensor) issued by thread (0,0,0)", "-16384 transaction bytes pending"});
  const emu::ScopedChecks off(false);
  emu::testing::expect_mentions(emulation_error<Defect::missing_expect_tx>(c), {"fa3_bf16_hdim128", "transaction bytes pending", "disagree"});
}

// The asynchronous hazards of a warp-specialized kernel, each reported by name. Three key blocks, so that
// the steady state (key block 1 on) runs.
TEST(Fa3Planted, ConsumersThatDoNotWaitForTheFullBarrierAreReported) {
  const Case c = make_case(1, 1, 1, 128, 384, 64, DType::fp16, Mask::none);
  emu::testing::expect_mentions(emulation_error<Defect::no_full_wait>(c),
                                {"fa3_fp16_hdim64", "race on shared memory byte offset",
                                 "wgmma.mma_async by this thread and a TMA load (cp.async.bulk.tensor) by thread (0,0,0)",
                                 "has not waited on its mbarrier phase"});
}

TEST(Fa3Planted, ScoresReadWhileTheirWgmmaIsInFlightAreReported) {
  const Case c = make_case(1, 1, 1, 128, 384, 64, DType::bf16, Mask::none);
  emu::testing::expect_mentions(emulation_error<Defect::scores_read_in_flight>(c),
                                {"fa3_bf16_hdim64", "of a wgmma.mma_async in flight was written (or read and written back) "
                                                    "before wgmma.wait_group retired it"});
}

TEST(Fa3Planted, AMissingWgmmaFenceIsReported) {
  const Case c = make_case(1, 1, 1, 128, 384, 64, DType::fp16, Mask::none);
  emu::testing::expect_mentions(emulation_error<Defect::no_wgmma_fence>(c), {"fa3_fp16_hdim64", "without a wgmma.fence"});
}

// No fence.proxy.async between the consumers' stmatrix of O and the TMA store that reads it: the store (the
// async proxy) may read shared memory before the generic-proxy writes are visible to it.
TEST(Fa3Planted, AStoreOfOWithoutTheProxyFenceIsReported) {
  const Case c = make_case(1, 1, 1, 128, 128, 64, DType::fp16, Mask::none);
  emu::testing::expect_mentions(emulation_error<Defect::no_store_fence>(c), {"fa3_fp16_hdim64", "fence.proxy.async"});
}

// Seeded schedules (shuffled fibers, random switches, shuffled CTAs) give the same output, bit for bit.
TEST(Fa3Schedules, VariedSchedulesDoNotChangeTheOutput) {
  expect_same_output_under_schedules(make_case(1, 4, 2, 200, 300, 64, DType::fp16, Mask::causal), [](const Case& c) { return run_fa3(c); });
  // Three consumers in turn (192-row tiles) and the O stores they share the staging area with.
  expect_same_output_under_schedules(make_case(1, 3, 1, 500, 450, 64, DType::bf16, Mask::none), [](const Case& c) { return run_fa3(c); });
}

TEST(Fa3Timing, EmulatedVerifySeq1024) {
  report_emulated_cost("fa3", make_case(1, 2, 2, 1024, 1024, 128, DType::fp16, Mask::none),
                       [](const Case& c) { return run_fa3(c); });
}

}  // namespace
}  // namespace faprobe
