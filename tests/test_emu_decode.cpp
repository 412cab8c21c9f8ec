// The cuda.decode / cuda.decode-splitk kernels (kernels/cuda/decode/decode.cuh) under the CPU emulator, no
// GPU needed: inputs from make_inputs in the case's K/V layout (a paged pool with NaN in its unused rows,
// variable lengths packed), the output checked by the project's checker against the float64 reference over
// odd shapes (lengths 1, 17, 1000, 4097; head_dim 64, 128, 256; MHA, GQA 4:1, MQA 32:1 with two head chunks;
// pages of 16, 64, 256; lengths 1000, 17, 300, 1 in one batch), with one split (cuda.decode) and with 3 and 64
// (split-K, some splits empty); the LSE against a host computation; the split heuristic; and planted defects
// (a dropped rescale, a block table ignored, every entry read to the longest length, an unweighted combine)
// that must be caught while the production kernel passes the same case.
#include <algorithm>
#include <cctype>
#include <cmath>
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

TEST(Decode, RefusesWhatIsNotInstantiatedWithAReason) {
  expect_refuses_with_reasons(cuda::decode_supports, cuda::decode_forward, 96);
}

// --- The split heuristic (cuda/decode/splits.hpp). ---

TEST(DecodeSplits, NoSplitWhenTheGridFillsTheGpu) {
  cuda::decode::SplitInputs inputs;
  inputs.sms = 132;
  inputs.ctas_per_sm = 3;
  inputs.longest_keys = 32768;
  inputs.ctas = 64 * 8;  // batch 64, 8 KV heads: 512 CTAs on 396 slots
  EXPECT_EQ(cuda::decode::choose_splits(inputs), 1);
}

TEST(DecodeSplits, FillsTheGpuAtBatchOne) {
  cuda::decode::SplitInputs inputs;
  inputs.sms = 132;
  inputs.ctas_per_sm = 3;
  inputs.longest_keys = 32768;
  inputs.ctas = 32;  // batch 1, 32 KV heads
  const int splits = cuda::decode::choose_splits(inputs);
  const double waves = 32.0 * splits / 396.0;
  EXPECT_GE(waves / std::ceil(waves), 0.8) << splits << " splits";
  EXPECT_LE(waves, 1.0) << "no second, mostly empty wave";
}

TEST(DecodeSplits, ShortRowsAreNotCutBelowTheMinimum) {
  cuda::decode::SplitInputs inputs;
  inputs.sms = 132;
  inputs.ctas_per_sm = 3;
  inputs.ctas = 1;
  inputs.longest_keys = 600;
  inputs.min_split_keys = 256;
  EXPECT_LE(cuda::decode::choose_splits(inputs), 3);  // ceil(600 / 256)
  inputs.longest_keys = 100;
  EXPECT_EQ(cuda::decode::choose_splits(inputs), 1);
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

TEST(DecodeTiming, EmulatedVerifySeq8k) {
  report_emulated_cost("decode-splitk", decode_case(1, 8, 2, 8192, 128, DType::bf16, 64),
                       [](const Case& c) { return run_decode(c, 4); });
}

}  // namespace
}  // namespace faprobe
