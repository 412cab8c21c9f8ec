// The cuda.decode / cuda.decode-splitk kernels (kernels/cuda/decode/decode.cuh) under the CPU emulator, no
// GPU needed: inputs from make_inputs in the case's K/V layout (a paged pool with NaN in its unused rows,
// variable lengths packed), the output checked by the project's checker against the float64 reference over
// odd shapes (lengths 1, 17, 1000, 4097; head_dim 64, 128, 256; MHA, GQA 4:1, MQA 32:1 with two head chunks;
// pages of 16, 64, 256; lengths 1000, 17, 300, 1 in one batch), with one split (cuda.decode) and with 3 and 64
// (split-K, some splits empty); paged output and LSE bit for bit the contiguous ones (also across two rounds of
// the block-table slice); the LSE against a host computation; the split rule over a grid of shapes and GPUs
// (and the earlier rule, planted, caught by it); the combine step in cuda.decode-splitk's prediction; and
// planted defects (a dropped rescale, a block table ignored, every entry read to the longest length, an
// unweighted combine) that must be caught while the production kernel passes the same case, and the defects
// that only lose speed (caught in the SASS by test_static_checks) shown to keep the results.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <utility>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/attention_args.hpp"
#include "cuda/decode/decode_emulated.hpp"
#include "cuda/decode/splits.hpp"
#include "cuda/factories.hpp"
#include "cuda/launchers.hpp"
#include "flash_kernel_support.hpp"
#include "model/case.hpp"
#include "model/kv_layout.hpp"

namespace faprobe {
namespace {

using cuda::decode::Defect;
using namespace test_support;  // run checks shared with the FA kernels' tests

// A decode case: lengths seq_k, or `seqlens` when given (which then set batch and seq_k).
Case decode_case(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, std::int64_t seq_k,
                 std::int64_t head_dim, DType dtype, std::int64_t page_size = 0, std::vector<std::int64_t> seqlens = {}) {
  Case c;
  c.batch = seqlens.empty() ? batch : std::int64_t(seqlens.size());
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.seq_q = 1;
  c.seq_k = seqlens.empty() ? seq_k : *std::max_element(seqlens.begin(), seqlens.end());
  c.head_dim = head_dim;
  c.dtype = dtype;
  c.mode = Mode::decode;
  c.page_size = page_size;
  c.seqlens = std::move(seqlens);
  c.seed = std::uint64_t(c.seq_k * 101 + head_dim + heads * 7 + kv_heads + page_size * 13);
  c.validate();
  return c;
}

// The output of the decode kernels on case c under the emulator with `splits` CTAs per row's keys and
// kDefect planted, arguments built as the implementation's shell builds them; the LSE too when asked.
template <Defect kDefect = Defect::none>
HostTensor run_decode(const Case& c, std::int64_t splits, std::vector<float>* lse = nullptr) {
  const AttentionInputs inputs = make_inputs(c);
  HostTensor output = make_output(c);
  cuda::AttentionArgs args = cuda::attention_args(c, inputs.q.data<std::uint16_t>(), inputs.k.data<std::uint16_t>(),
                                                  inputs.v.data<std::uint16_t>(), output.data<std::uint16_t>());
  args.kv_rows = inputs.layout.rows;
  args.seq_starts = inputs.layout.seq_starts.data();
  if (inputs.layout.paged()) {
    args.block_table = inputs.layout.block_table.data();
    args.page_size = inputs.layout.page_size;
    args.pages_per_seq = inputs.layout.pages_per_seq;
  }
  args.splits = splits;
  std::vector<float> workspace(cuda::decode_workspace_bytes(args) / sizeof(float) + 1);
  args.workspace = workspace.data();
  if (lse != nullptr) {
    lse->assign(static_cast<std::size_t>(c.batch * c.heads), std::numeric_limits<float>::quiet_NaN());
    args.lse = lse->data();
  }
  if constexpr (kDefect == Defect::none) {
    cuda::decode_forward(cuda::Launch{cuda::Target::emulator, nullptr}, args);
  } else {
    cuda::decode::forward_emulated<kDefect>(args);
  }
  return output;
}

VerifyResult check(const Case& c, const HostTensor& output) { return check_output(c, GeneratedInputs(c), output); }

// --- The kernels against the reference. Key blocks per warp step (Traits::block_k): 64, 32, 16 keys for
// d 64, 128, 256. ---

struct DecodeShape {
  Case c;
  std::int64_t splits;
};

void PrintTo(const DecodeShape& shape, std::ostream* out) { *out << shape.c.label() << " splits " << shape.splits; }

std::vector<DecodeShape> odd_shapes() {
  const DType fp16 = DType::fp16, bf16 = DType::bf16;
  std::vector<DecodeShape> shapes;
  for (std::int64_t splits : {1, 3, 64}) {
    shapes.push_back({decode_case(1, 1, 1, 1, 64, fp16), splits});              // one key: 63 of 64 splits empty
    shapes.push_back({decode_case(2, 4, 4, 17, 128, bf16), splits});            // one partial block
    shapes.push_back({decode_case(1, 8, 2, 1000, 64, fp16), splits});           // GQA 4:1, 16 blocks over 4 warps
    shapes.push_back({decode_case(1, 4, 1, 4097, 256, bf16), splits});          // 257 blocks, the last one key
    shapes.push_back({decode_case(1, 32, 1, 300, 128, fp16), splits});          // MQA 32:1: two CTAs of 16 heads
    shapes.push_back({decode_case(2, 4, 2, 1000, 128, bf16, 16), splits});      // pages of 16 < block_k
    shapes.push_back({decode_case(1, 2, 2, 1000, 256, fp16, 64), splits});      // pages of 64 > block_k
    shapes.push_back({decode_case(1, 2, 1, 700, 64, bf16, 256), splits});       // one partial page of 256
    shapes.push_back({decode_case(0, 4, 2, 0, 128, bf16, 0, {1000, 17, 300, 1}), splits});   // variable lengths
    shapes.push_back({decode_case(0, 4, 2, 0, 64, fp16, 32, {1000, 17, 300, 1}), splits});   // ... paged
  }
  return shapes;
}

std::string shape_name(const testing::TestParamInfo<DecodeShape>& info) {
  std::string name = info.param.c.label() + " splits" + std::to_string(info.param.splits);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name + "_" + std::to_string(info.index);
}

class DecodeOddShapes : public testing::TestWithParam<DecodeShape> {};

TEST_P(DecodeOddShapes, MatchesReference) {
  const DecodeShape& shape = GetParam();
  ASSERT_EQ(cuda::decode_supports(shape.c.dtype, shape.c.head_dim), "");
  const VerifyResult result = check(shape.c, run_decode(shape.c, shape.splits));
  EXPECT_TRUE(result.passed) << shape.c.label() << " splits " << shape.splits << ": " << describe(result);
  EXPECT_EQ(result.rows_checked, shape.c.batch * shape.c.heads);  // small cases: every (entry, head)
}

INSTANTIATE_TEST_SUITE_P(Emulated, DecodeOddShapes, testing::ValuesIn(odd_shapes()), shape_name);

TEST(Decode, LogSumExpMatchesHostWithAndWithoutSplits) {
  const Case c = decode_case(0, 4, 2, 0, 128, DType::bf16, 16, {1000, 17, 300});
  for (std::int64_t splits : {1, 5}) {
    std::vector<float> lse;
    run_decode(c, splits, &lse);
    EXPECT_LT(worst_lse_error(c, lse), 1e-4) << "splits " << splits;
  }
}

TEST(Decode, PagedPoolPlacesPagesOutOfOrderWithNaNPadding) {
  // The test shapes above are only as strong as the layout they run on: pages really permuted, and the
  // unused rows of an entry's last page poisoned, so that reading them shows in the output.
  const Case c = decode_case(0, 2, 2, 0, 64, DType::fp16, 16, {1000, 17, 300});
  const AttentionInputs inputs = make_inputs(c);
  const KvLayout& layout = inputs.layout;
  std::vector<std::int32_t> pages;
  for (std::int32_t page : layout.block_table)
    if (page >= 0) pages.push_back(page);
  ASSERT_EQ(std::int64_t(pages.size()) * 16, layout.rows);
  EXPECT_FALSE(std::is_sorted(pages.begin(), pages.end()));
  std::sort(pages.begin(), pages.end());
  for (std::size_t i = 0; i < pages.size(); ++i) EXPECT_EQ(pages[i], std::int32_t(i)) << "a permutation of the pool";
  // Entry 1 has 17 keys: its second page holds one key, then 15 NaN rows.
  const std::int64_t padding_row = layout.storage_row(1, 16) + 1;
  EXPECT_TRUE(std::isnan(inputs.k.get(padding_row * inputs.k.row_stride())));
  EXPECT_FALSE(std::isnan(inputs.k.get(layout.storage_row(1, 16) * inputs.k.row_stride())));
  // And the values follow the keys, not their storage: key 5 of entry 2 is logical row 1000 + 17 + 5.
  const GeneratedInputs generated(c);
  std::vector<double> expected(64);
  generated.row(TensorId::v, 2, 5, 1, expected.data());
  EXPECT_EQ(inputs.v.get(layout.storage_row(2, 5) * inputs.v.row_stride() + 64), float(expected[0]));
}

TEST(Decode, PagedIsBitForBitContiguous) {
  // The paged kernel gathers the same rows into the same tiles and walks them in the same order, so its O and
  // LSE are the contiguous kernel's bits, over pages smaller and larger than a key block, variable lengths,
  // split-K, and a CTA whose keys span more pages than one round's table slice (9000 keys at page 16, one
  // split: two rounds).
  const std::vector<std::pair<Case, std::int64_t>> cases = {
      {decode_case(1, 1, 1, 9000, 64, DType::fp16, 16), 1},
      {decode_case(1, 4, 2, 2000, 128, DType::bf16, 256), 3},
      {decode_case(0, 4, 2, 0, 256, DType::bf16, 32, {1000, 17, 300}), 2},
  };
  for (const auto& [paged, splits] : cases) {
    Case contiguous = paged;
    contiguous.page_size = 0;  // the same seed: the same logical K and V
    std::vector<float> paged_lse, contiguous_lse;
    const HostTensor paged_output = run_decode(paged, splits, &paged_lse);
    const HostTensor contiguous_output = run_decode(contiguous, splits, &contiguous_lse);
    ASSERT_EQ(paged_output.elements(), contiguous_output.elements());
    EXPECT_EQ(std::memcmp(paged_output.data<std::uint16_t>(), contiguous_output.data<std::uint16_t>(),
                          std::size_t(paged_output.elements()) * sizeof(std::uint16_t)),
              0)
        << paged.label();
    EXPECT_EQ(std::memcmp(paged_lse.data(), contiguous_lse.data(), paged_lse.size() * sizeof(float)), 0) << paged.label();
    EXPECT_TRUE(check(paged, paged_output).passed) << paged.label();
  }
}

TEST(Decode, RefusesWhatIsNotInstantiatedWithAReason) {
  expect_refuses_with_reasons(cuda::decode_supports, cuda::decode_forward, 96);
}

// --- The split rule (cuda/decode/splits.hpp). ---

using cuda::decode::SplitInputs;

SplitInputs split_inputs(std::int64_t ctas, int sms, int ctas_per_sm, std::int64_t keys, int block_k = 32) {
  SplitInputs inputs;
  inputs.ctas = ctas;
  inputs.sms = sms;
  inputs.ctas_per_sm = ctas_per_sm;
  inputs.longest_keys = keys;
  inputs.block_k = block_k;
  inputs.min_split_keys = 2 * 4 * block_k;  // two key blocks per warp, as the implementation asks
  return inputs;
}

// Every way `choose` breaks the rule over a grid of batch × kv_heads × seq_k × key block, on 132 SMs (H100 SXM,
// H200) and 114 (H100 PCIe) at one to three CTAs per SM, each line naming the point: a count outside 1 ..
// the cap, more splits than key blocks or than min_split_keys allows, an empty split, and, where some allowed
// count fills 95 % of the slots of its waves, a choice that does not or is not the smallest that does
// (otherwise, one short of the best fill). The reference is written out here, not taken from splits.cpp.
template <class Choose>
std::vector<std::string> fill_rule_violations(Choose choose) {
  std::vector<std::string> violations;
  for (int sms : {132, 114})
    for (int per_sm : {1, 2, 3})
      for (std::int64_t batch : {1, 2, 3, 4, 8, 16, 64})
        for (std::int64_t kv_heads : {1, 2, 8, 32})
          for (std::int64_t keys : {1, 100, 700, 4096, 16384, 32768, 131072})
            for (int block_k : {16, 32, 64}) {
              const SplitInputs in = split_inputs(batch * kv_heads, sms, per_sm, keys, block_k);
              const int chosen = choose(in);
              const std::string at = "b" + std::to_string(batch) + " kv" + std::to_string(kv_heads) + " k" +
                                     std::to_string(keys) + " block_k " + std::to_string(block_k) + " on " +
                                     std::to_string(sms) + "x" + std::to_string(per_sm) + " slots: " +
                                     std::to_string(chosen) + " splits";
              const std::int64_t blocks = (keys + block_k - 1) / block_k;
              const std::int64_t allowed = std::max<std::int64_t>(
                  1, std::min({std::int64_t{cuda::decode::kMaxHeuristicSplits}, blocks, keys / in.min_split_keys}));
              const double slots = double(sms) * per_sm;
              const auto fill = [&](std::int64_t splits) {
                const double waves = double(in.ctas) * double(splits) / slots;
                return waves / std::ceil(waves);
              };
              const auto all_work = [&](std::int64_t splits) {
                return (splits - 1) * ((blocks + splits - 1) / splits) < blocks;
              };
              if (chosen < 1 || chosen > allowed) {
                violations.push_back(at + ", allowed 1.." + std::to_string(allowed));
                continue;
              }
              if (!all_work(chosen)) violations.push_back(at + " leave a split empty");
              std::int64_t smallest_full = 0;
              double best = 0.0;
              for (std::int64_t splits = 1; splits <= allowed; ++splits) {
                if (!all_work(splits)) continue;
                if (smallest_full == 0 && fill(splits) >= 0.95) smallest_full = splits;
                best = std::max(best, fill(splits));
              }
              if (smallest_full != 0 && chosen != smallest_full)
                violations.push_back(at + " fill " + std::to_string(fill(chosen)) + ", " + std::to_string(smallest_full) +
                                     " is the fewest that fill 95 %");
              if (smallest_full == 0 && fill(chosen) < best)
                violations.push_back(at + " fill " + std::to_string(fill(chosen)) + " below the best " + std::to_string(best));
            }
  return violations;
}

std::string joined_lines(const std::vector<std::string>& lines, std::size_t most = 10) {
  std::string text;
  for (std::size_t i = 0; i < lines.size() && i < most; ++i) text += "\n  " + lines[i];
  return text;
}

TEST(DecodeSplits, FillsTheSlotsWheneverTheKeysAllowIt) {
  const std::vector<std::string> violations = fill_rule_violations(cuda::decode::choose_splits);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations:" << joined_lines(violations);
}

// The rule before this one (the smallest split count within 85 % of the best wave efficiency, no split when
// the grid fills 80 % of the slots), planted: the grid above catches it, at the issue's case among others.
int earlier_rule(const SplitInputs& in) {
  const double slots = double(in.sms) * in.ctas_per_sm;
  if (double(in.ctas) >= 0.8 * slots) return 1;
  const std::int64_t blocks = (in.longest_keys + in.min_split_keys - 1) / in.min_split_keys;
  const int most = int(std::clamp<std::int64_t>(blocks, 1, cuda::decode::kMaxHeuristicSplits));
  const auto per_split = [&](int splits) { return (blocks + splits - 1) / splits; };
  const auto efficiency = [&](int splits) {
    const double waves = double(in.ctas) * splits / slots;
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int splits = 1; splits <= most; ++splits)
    if (splits == 1 || per_split(splits) != per_split(splits - 1)) best = std::max(best, efficiency(splits));
  for (int splits = 1; splits <= most; ++splits)
    if ((splits == 1 || per_split(splits) != per_split(splits - 1)) && efficiency(splits) >= 0.85 * best) return splits;
  return 1;
}

TEST(DecodeSplits, PlantedEarlierRuleIsCaught) {
  const std::vector<std::string> violations = fill_rule_violations(earlier_rule);
  EXPECT_FALSE(violations.empty());
  const std::string issue_case = "b1 kv32 k16384 block_k 32 on 132x2 slots: 7 splits fill 0.848485, 8 is the fewest";
  EXPECT_TRUE(std::any_of(violations.begin(), violations.end(),
                          [&](const std::string& v) { return v.find(issue_case) != std::string::npos; }))
      << violations.size() << " violations:" << joined_lines(violations, 40);
}

TEST(DecodeSplits, BatchOneFillsTheGpuFrom16kKeys) {
  // b1 h32 d128 (block_k 32) on an H200: 8 splits at two CTAs per SM (256 of 264 slots), 12 at three.
  for (std::int64_t keys : {16384, 32768, 65536, 131072}) {
    EXPECT_EQ(cuda::decode::choose_splits(split_inputs(32, 132, 2, keys)), 8) << keys;
    EXPECT_EQ(cuda::decode::choose_splits(split_inputs(32, 132, 3, keys)), 12) << keys;
  }
  EXPECT_NEAR(cuda::decode::slot_fill(split_inputs(32, 132, 2, 32768), 8), 256.0 / 264.0, 1e-12);
}

TEST(DecodeSplits, NoSplitWhenTheGridFillsTheGpu) {
  // batch 48, 8 KV heads: 384 CTAs on 396 slots (97 %).
  EXPECT_EQ(cuda::decode::choose_splits(split_inputs(48 * 8, 132, 3, 32768)), 1);
}

TEST(DecodeSplits, ShortRowsAreNotCutBelowTheMinimum) {
  SplitInputs inputs = split_inputs(1, 132, 3, 600);  // min_split_keys 256
  EXPECT_EQ(cuda::decode::choose_splits(inputs), 2);  // floor(600 / 256): both splits keep 256 keys or more
  inputs.longest_keys = 100;
  EXPECT_EQ(cuda::decode::choose_splits(inputs), 1);
}

TEST(DecodeSplits, PredictionCostsTheCombine) {
  // cuda.decode-splitk's predicted time and memory grow by the combine's traffic (the fp32 partials written
  // and read back) and its launch; cuda.decode, which never splits, has neither.
  Case c = decode_case(1, 32, 32, 32768, 128, DType::bf16);
  c.splits = 8;
  const auto splitk = cuda::make_decode_splitk(cuda::Target::gpu);
  const auto unsplit = cuda::make_decode(cuda::Target::gpu);
  const double partial_bytes = 8.0 * 32 * 129 * 4;
  EXPECT_EQ(double(splitk->predicted_bytes(c)) - double(unsplit->predicted_bytes(c)), partial_bytes);
  const double extra = splitk->predicted_seconds(c, MachineRates{}) - unsplit->predicted_seconds(c, MachineRates{});
  EXPECT_GT(extra, 2.0 * partial_bytes / 0.5e12) << "the partials written and read back";
  EXPECT_GE(extra, 1e-5 + 2.0 * partial_bytes / 0.5e12 - 1e-12) << "and the combine's launch";
  c.splits = 1;
  EXPECT_EQ(splitk->predicted_seconds(c, MachineRates{}), unsplit->predicted_seconds(c, MachineRates{}));
}

// --- Planted defects: each caught where it matters, harmless where it cannot show. ---

TEST(DecodePlanted, NoRescaleIsCaught) {
  // 2000 keys give each warp several blocks whose max grows; 64 keys are one block per warp, where the
  // only rescale multiplies an empty accumulator.
  expect_defect_caught(
      "no_rescale", decode_case(1, 4, 4, 2000, 64, DType::fp16), decode_case(1, 4, 4, 64, 64, DType::fp16),
      "one key block per warp never rescales", [](const Case& c) { return run_decode(c, 1); },
      [](const Case& c) { return run_decode<Defect::no_rescale>(c, 1); });
}

TEST(DecodePlanted, IgnoredBlockTableIsCaught) {
  expect_defect_caught(
      "ignore_block_table", decode_case(2, 4, 2, 1000, 128, DType::bf16, 16), decode_case(2, 4, 2, 1000, 128, DType::bf16),
      "a contiguous cache has no block table", [](const Case& c) { return run_decode(c, 3); },
      [](const Case& c) { return run_decode<Defect::ignore_block_table>(c, 3); });
}

TEST(DecodePlanted, LongestLengthForEveryEntryIsCaught) {
  // The last entry is the longest, so the defect reads the next entries' keys, never past the tensor.
  expect_defect_caught(
      "longest_length", decode_case(0, 4, 2, 0, 64, DType::fp16, 0, {17, 1000, 300, 1030}),
      decode_case(3, 4, 2, 1000, 64, DType::fp16), "equal lengths are all the longest",
      [](const Case& c) { return run_decode(c, 1); }, [](const Case& c) { return run_decode<Defect::longest_length>(c, 1); });
}

TEST(DecodePlanted, UnweightedCombineIsCaught) {
  expect_defect_caught(
      "unweighted_combine", decode_case(1, 4, 4, 3000, 128, DType::bf16), decode_case(1, 4, 4, 2999, 128, DType::bf16),
      "with one split the combine kernel does not run",
      [](const Case& c) { return run_decode(c, 8); },
      [](const Case& c) { return run_decode<Defect::unweighted_combine>(c, c.seq_k == 3000 ? 8 : 1); });
}

TEST(DecodePlanted, LostSpeedKeepsTheResults) {
  // The defects that only cost speed (caught by test_static_checks in the SASS) leave the output's bits as
  // they are: the static checks are what catches them, and the planted kernels there are this kernel.
  const Case c = decode_case(0, 4, 2, 0, 64, DType::fp16, 16, {1000, 17, 300});
  std::vector<float> lse, planted_lse;
  const HostTensor output = run_decode(c, 3, &lse);
  const auto same_bits = [&](const HostTensor& planted, const char* defect) {
    EXPECT_EQ(std::memcmp(output.data<std::uint16_t>(), planted.data<std::uint16_t>(),
                          std::size_t(output.elements()) * sizeof(std::uint16_t)),
              0)
        << defect;
    EXPECT_EQ(std::memcmp(lse.data(), planted_lse.data(), lse.size() * sizeof(float)), 0) << defect;
  };
  same_bits(run_decode<Defect::drain_every_tile>(c, 3, &planted_lse), "drain_every_tile");
  same_bits(run_decode<Defect::divided_page>(c, 3, &planted_lse), "divided_page");
  same_bits(run_decode<Defect::global_table>(c, 3, &planted_lse), "global_table");
}

TEST(DecodeTiming, EmulatedVerifySeq8k) {
  report_emulated_cost("decode-splitk", decode_case(1, 8, 2, 8192, 128, DType::bf16, 64),
                       [](const Case& c) { return run_decode(c, 4); });
}

}  // namespace
}  // namespace faprobe
