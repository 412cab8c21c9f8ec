// Every CPU implementation against the float64 reference over odd shapes: lengths 1, 2, 17, 127, 129, 1000;
// head_dim 8 to 256; bottom-right causal with seq_q < seq_k and seq_q > seq_k (early rows see no key and
// must be zeros); GQA 8:1 and MQA; fp32, fp16, bf16; decode cases for every implementation. Also what each
// implementation refuses, and its predicted peak memory against the measured one.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "case_support.hpp"
#include "cpu/cpu_implementation.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/factories.hpp"
#include "cpu/measured_choice.hpp"
#include "cpu/tiled_amx.hpp"
#include "cpu_isa_support.hpp"
#include "harness/plan/registry.hpp"
#include "model/case.hpp"
#include "model/memory.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {
namespace {

// Every CPU implementation the registry holds (harness/plan/registry.hpp: the one list), so that a new kernel is
// checked here by being registered, with no second list to keep.
std::vector<const Implementation*> cpu_implementations() {
  std::vector<const Implementation*> list;
  for (const std::unique_ptr<Implementation>& impl : implementations()) {
    if (impl->device() == "cpu") list.push_back(impl.get());
  }
  return list;
}

using test_support::make_case;

Case decode_case(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, std::int64_t seq_k,
                 std::int64_t head_dim, DType dtype, Mask mask = Mask::none) {
  return make_case(batch, heads, kv_heads, 1, seq_k, head_dim, dtype, mask, Mode::decode);
}

// Prefill shapes (naive and tiled). Big lengths go with few heads so the binary stays fast.
std::vector<Case> prefill_cases() {
  const Mask none = Mask::none, causal = Mask::causal, top_left = Mask::causal_top_left;
  return {
      make_case(1, 1, 1, 1, 1, 8, DType::fp32, none),
      make_case(1, 1, 1, 1, 1, 256, DType::fp16, causal),
      make_case(2, 2, 2, 2, 2, 32, DType::fp32, causal),
      make_case(1, 3, 3, 17, 17, 80, DType::fp16, causal),
      make_case(2, 2, 1, 127, 127, 128, DType::bf16, none),       // MQA
      make_case(1, 2, 2, 129, 129, 256, DType::fp32, causal),
      make_case(1, 16, 2, 129, 129, 64, DType::fp32, causal),     // GQA 8:1
      make_case(3, 2, 2, 129, 129, 8, DType::fp16, none),
      make_case(1, 4, 4, 300, 300, 128, DType::fp32, none),
      make_case(1, 2, 1, 1000, 1000, 64, DType::fp32, causal),    // MQA, many blocks
      make_case(1, 1, 1, 1000, 1000, 128, DType::fp16, none),
      make_case(1, 2, 2, 17, 129, 32, DType::fp32, causal),       // seq_q < seq_k
      make_case(1, 2, 2, 127, 1000, 256, DType::fp16, causal),    // seq_q < seq_k
      make_case(1, 1, 1, 2, 1000, 32, DType::fp32, causal),
      make_case(1, 1, 1, 1, 1000, 64, DType::bf16, causal),       // one row, prefill
      make_case(1, 2, 2, 129, 17, 80, DType::fp32, causal),       // seq_q > seq_k: 112 rows of zeros
      make_case(1, 2, 1, 1000, 127, 8, DType::bf16, causal),      // seq_q > seq_k, MQA
      make_case(2, 8, 1, 129, 257, 80, DType::bf16, causal),      // MQA, seq_q < seq_k
      make_case(1, 8, 1, 257, 129, 128, DType::fp16, causal),     // GQA 8:1 (MQA), seq_q > seq_k
      make_case(1, 2, 2, 40, 40, 33, DType::bf16, causal),        // odd head_dim: no bf16 pairs
      make_case(2, 4, 2, 200, 200, 100, DType::bf16, causal),     // head_dim 100: register tiles of 12 uneven
      make_case(1, 2, 1, 24, 1000, 64, DType::bf16, causal),      // the fewest rows the panels take
      make_case(1, 4, 2, 100, 900, 64, DType::fp32, top_left),    // PyTorch's is_causal, seq_q < seq_k
      make_case(1, 2, 2, 300, 129, 32, DType::bf16, top_left),    // top-left, seq_q > seq_k: no empty row
  };
}

// Decode shapes (every implementation).
std::vector<Case> decode_cases() {
  return {
      decode_case(1, 1, 1, 1, 8, DType::fp32),
      decode_case(2, 4, 4, 2, 32, DType::fp16),
      decode_case(1, 8, 1, 17, 80, DType::bf16),                 // MQA
      decode_case(1, 2, 2, 129, 8, DType::bf16, Mask::causal),   // causal decode sees every key
      decode_case(2, 16, 2, 1000, 128, DType::fp32),             // GQA 8:1
      decode_case(3, 4, 4, 1000, 256, DType::fp16, Mask::causal),
      decode_case(1, 4, 4, 4097, 64, DType::fp32),
      decode_case(1, 4, 1, 8000, 128, DType::bf16),              // MQA, several splits
  };
}

struct KernelCase {
  std::string impl;  // a registered name
  Case c;
};

// What gtest prints for a failing parameter (instead of the bytes of the struct).
void PrintTo(const KernelCase& param, std::ostream* out) { *out << param.impl << " on " << param.c.label(); }

// Decode cases in the other K/V layouts: variable lengths (both decode implementations), a paged cache
// (cpu.decode-splitk), and forced split counts, some leaving splits empty.
Case with_layout(Case c, std::int64_t page_size, std::vector<std::int64_t> seqlens, std::int64_t splits = 0) {
  if (!seqlens.empty()) {
    c.batch = std::int64_t(seqlens.size());
    c.seq_k = *std::max_element(seqlens.begin(), seqlens.end());
    c.seqlens = std::move(seqlens);
  }
  c.page_size = page_size;
  c.splits = splits;
  c.validate();
  return c;
}

std::vector<Case> varlen_cases() {
  return {with_layout(decode_case(1, 4, 2, 1, 64, DType::fp32), 0, {1000, 17, 4097, 1}),
          with_layout(decode_case(1, 8, 1, 1, 128, DType::bf16), 0, {5, 600, 5})};
}

std::vector<Case> paged_cases() {
  return {with_layout(decode_case(2, 4, 2, 1000, 64, DType::fp32), 16, {}),
          with_layout(decode_case(1, 4, 4, 3000, 128, DType::fp16), 256, {}),
          with_layout(decode_case(1, 4, 2, 1, 64, DType::bf16), 64, {1000, 17, 4097, 1}),
          with_layout(decode_case(1, 2, 2, 2000, 64, DType::fp32), 32, {}, 3),
          with_layout(decode_case(1, 2, 2, 100, 64, DType::fp32), 0, {}, 40)};  // 40 splits of 100 keys
}

// Each CPU implementation on every case of every list that it supports: a decode-only kernel takes the decode,
// variable-length (and, paged, the paged) cases; what it refuses is tested apart (CpuKernelSupports).
std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> list;
  for (const Implementation* impl : cpu_implementations()) {
    for (const std::vector<Case>& cases : {prefill_cases(), decode_cases(), varlen_cases(), paged_cases()}) {
      for (const Case& c : cases) {
        if (impl->supports(c).empty()) list.push_back({impl->name(), c});
      }
    }
  }
  return list;
}

std::string test_name(const testing::TestParamInfo<KernelCase>& info) {
  std::string name = info.param.impl.substr(info.param.impl.find('.') + 1) + "_" + info.param.c.label();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name + "_" + std::to_string(info.index);
}

// Beyond the checker's verdict: the error itself must be small for the dtype (an absolute bound on
// outputs of magnitude ~1: a few units in the last place of the output dtype).
double small_error(DType dtype) {
  switch (dtype) {
    case DType::fp32: return 1e-5;
    case DType::fp16: return 4e-3;
    case DType::bf16: return 3e-2;
    case DType::fp8_e4m3: break;
  }
  return 0.0;
}

class CpuKernel : public testing::TestWithParam<KernelCase> {};

TEST_P(CpuKernel, MatchesReference) {
  const KernelCase& param = GetParam();
  const Implementation* impl = find_implementation(param.impl);
  ASSERT_NE(impl, nullptr) << param.impl;
  ASSERT_EQ(impl->supports(param.c), "");
  const std::unique_ptr<PreparedCase> prepared = impl->prepare(param.c);
  prepared->timed_run();
  const VerifyResult result = check_output(param.c, GeneratedInputs(param.c), prepared->output());
  EXPECT_TRUE(result.passed) << impl->name() << " on " << param.c.label() << ": max_abs_diff "
                             << result.max_abs_diff << ", tolerance " << result.tolerance << " " << result.note;
  EXPECT_LE(result.max_abs_diff, small_error(param.c.dtype));
  EXPECT_GT(result.rows_checked, 0);
}

TEST_P(CpuKernel, SecondRunGivesTheSameOutput) {
  // Workspace is reused across calls and threads: a second run must not depend on the first.
  const KernelCase& param = GetParam();
  const Implementation* impl = find_implementation(param.impl);
  ASSERT_NE(impl, nullptr) << param.impl;
  const std::unique_ptr<PreparedCase> prepared = impl->prepare(param.c);
  prepared->timed_run();
  const HostTensor& out = prepared->output();
  std::vector<float> first(std::size_t(out.elements()));
  for (std::int64_t i = 0; i < out.elements(); ++i) first[std::size_t(i)] = out.get(i);
  prepared->timed_run();
  for (std::int64_t i = 0; i < out.elements(); ++i) ASSERT_EQ(out.get(i), first[std::size_t(i)]) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(OddShapes, CpuKernel, testing::ValuesIn(kernel_cases()), test_name);

// cpu.tiled's code paths: every prefill case under each FAPROBE_MAX_CPU_ISA level this CPU runs (the levels
// above it skip, saying so), checked against the reference, and the record names the path the case and
// the level call for: portable below 24 query rows or at the portable level, AVX512_BF16 dot products for
// bf16 with an even head_dim, the AVX-512 fp32 step otherwise.
struct TiledPathCase {
  cpu::CpuIsa level;
  Case c;
};

void PrintTo(const TiledPathCase& param, std::ostream* out) {
  *out << "cpu.tiled at " << cpu::to_string(param.level) << " on " << param.c.label();
}

// "measured": bf16 with an even head_dim at the bf16 or AMX level, where the fastest of avx512-bf16,
// avx512-fp32 and (at the AMX level, head_dim a multiple of 32) amx-bf16 on this CPU is taken.
std::string expected_tiled_path(cpu::CpuIsa level, const Case& c) {
  if (level == cpu::CpuIsa::portable || c.seq_q < 24) return "portable-fp32";
  if (level >= cpu::CpuIsa::avx512_bf16 && c.dtype == DType::bf16 && c.head_dim % 2 == 0) return "measured";
  return "avx512-fp32";
}

std::vector<TiledPathCase> tiled_path_cases() {
  std::vector<TiledPathCase> list;
  for (cpu::CpuIsa level : test_support::all_cpu_isas()) {
    for (const Case& c : prefill_cases()) list.push_back({level, c});
  }
  return list;
}

class TiledPath : public testing::TestWithParam<TiledPathCase> {};

TEST_P(TiledPath, MatchesReferenceOnThePathItNames) {
  const TiledPathCase& param = GetParam();
  if (const std::string why = test_support::cannot_run(param.level); !why.empty()) GTEST_SKIP() << why;
  const test_support::ScopedMaxCpuIsa cap(param.level);
  const std::unique_ptr<Implementation> impl = cpu::make_tiled();
  const std::unique_ptr<PreparedCase> prepared = impl->prepare(param.c);
  prepared->timed_run();
  const VerifyResult result = check_output(param.c, GeneratedInputs(param.c), prepared->output());
  EXPECT_TRUE(result.passed) << "max_abs_diff " << result.max_abs_diff << ", tolerance " << result.tolerance << " "
                             << result.note;
  EXPECT_LE(result.max_abs_diff, small_error(param.c.dtype));
  const nlohmann::json details = prepared->details();
  const std::string expected = expected_tiled_path(param.level, param.c);
  if (expected == "measured") {
    const bool amx = param.level == cpu::CpuIsa::amx && param.c.head_dim % 32 == 0;
    EXPECT_TRUE(details.at("path") == "avx512-bf16" || details.at("path") == "avx512-fp32" ||
                (amx && details.at("path") == "amx-bf16"))
        << details.dump();
    const std::string note = details.value("path_note", "");
    EXPECT_NE(note.find("bf16 path measured"), std::string::npos) << details.dump();
    // The candidates timed are the ones the level and the case allow, and a case AMX cannot take says why.
    EXPECT_EQ(note.find("amx-bf16 ") != std::string::npos, amx) << details.dump();
    if (param.level == cpu::CpuIsa::amx && !amx) {
      EXPECT_NE(note.find("AMX not used"), std::string::npos) << note;
    }
    return;
  }
  EXPECT_EQ(details.at("path"), expected) << details.dump();
  // A path below the best one this CPU has for the case says why in path_note; the best path needs none.
  // Capped to portable, that is every case on a CPU with AVX-512 and none on a CPU without it (where
  // portable is the best there is).
  bool note_expected = false;
  if (param.level == cpu::CpuIsa::portable) {
    note_expected = cpu::detected_cpu_isa() != cpu::CpuIsa::portable;
  } else {
    note_expected = details.at("path") != "avx512-bf16" && !(param.c.dtype == DType::fp32 && param.c.seq_q >= 24);
  }
  EXPECT_EQ(details.contains("path_note"), note_expected) << details.dump();
}

std::string tiled_path_name(const testing::TestParamInfo<TiledPathCase>& info) {
  std::string name = std::string(cpu::to_string(info.param.level)) + "_" + info.param.c.label();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Levels, TiledPath, testing::ValuesIn(tiled_path_cases()), tiled_path_name);

// cpu.tiled's AMX path forced (FAPROBE_CPU_PATH=amx-bf16) on bf16 cases with the shapes its tiles find hard:
// key counts that are not whole 32-key steps (the padded keys and probability pairs), the causal diagonal
// crossing a step, panels that stop before the key block's end, GQA and MQA, every head_dim it takes. On a
// CPU without AMX (or where Linux refuses the tile state) each case skips and says why.
std::vector<Case> amx_cases() {
  const Mask none = Mask::none, causal = Mask::causal, top_left = Mask::causal_top_left;
  return {
      make_case(1, 2, 2, 32, 32, 32, DType::bf16, none),
      make_case(1, 2, 2, 33, 33, 64, DType::bf16, causal),
      make_case(2, 4, 1, 129, 129, 128, DType::bf16, causal),   // MQA
      make_case(1, 8, 2, 300, 300, 64, DType::bf16, causal),    // GQA 4:1
      make_case(1, 2, 2, 200, 1000, 256, DType::bf16, causal),  // seq_q < seq_k
      make_case(1, 2, 2, 1000, 127, 96, DType::bf16, causal),   // seq_q > seq_k: rows that see no key
      make_case(1, 2, 2, 100, 900, 64, DType::bf16, top_left),
      make_case(1, 1, 1, 517, 517, 160, DType::bf16, none),
  };
}

class AmxPath : public testing::TestWithParam<Case> {};

TEST_P(AmxPath, MatchesTheReference) {
  if (const std::string why = test_support::cannot_run(cpu::CpuIsa::amx); !why.empty()) GTEST_SKIP() << why;
  const Case& c = GetParam();
  const test_support::ScopedCpuPath forced("amx-bf16");
  const std::unique_ptr<Implementation> impl = cpu::make_tiled();
  const std::unique_ptr<PreparedCase> prepared = impl->prepare(c);
  prepared->timed_run();
  EXPECT_EQ(prepared->details().at("path"), "amx-bf16") << prepared->details().dump();
  const VerifyResult result = check_output(c, GeneratedInputs(c), prepared->output());
  EXPECT_TRUE(result.passed) << "max_abs_diff " << result.max_abs_diff << ", tolerance " << result.tolerance << " "
                             << result.note;
  EXPECT_LE(result.max_abs_diff, small_error(c.dtype));
}

std::string amx_case_name(const testing::TestParamInfo<Case>& param_info) {
  return "case" + std::to_string(param_info.index);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AmxPath, testing::ValuesIn(amx_cases()), amx_case_name);

// Both bf16 paths' Qᵀ pairs (the same word transpose) against the plain loop, with panels of fewer than 32
// rows (the rest must be zeros) and pair counts that are not multiples of 16 (head_dim 80, 100).
TEST(AmxPath, QueryPairsPackLikeThePlainLoop) {
  if (const std::string why = test_support::cannot_run(cpu::CpuIsa::avx512); !why.empty()) GTEST_SKIP() << why;
  for (const std::int64_t count : {1, 17, 32}) {
    for (const std::int64_t head_dim : {2, 64, 80, 100, 256}) {
      const std::int64_t stride = 2 * head_dim + 6;
      std::vector<std::uint16_t> rows(std::size_t(count * stride));
      for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::uint16_t(i * 40503u + 7);
      // 64-byte aligned, as the kernels' workspace is (Eigen's aligned_allocator aligns to 16 bytes only when
      // the build's -march has no AVX).
      std::vector<std::uint32_t> storage(std::size_t(head_dim / 2 * 32 + 16), 0xDEADBEEF);
      void* start = storage.data();
      std::size_t space = storage.size() * sizeof(std::uint32_t);
      auto* pairs = static_cast<std::uint32_t*>(std::align(64, std::size_t(head_dim / 2 * 32) * 4, start, space));
      ASSERT_NE(pairs, nullptr);
      cpu::amx::pack_query_pairs(rows.data(), stride, count, head_dim, pairs);
      for (std::int64_t p = 0; p < head_dim / 2; ++p) {
        for (std::int64_t r = 0; r < 32; ++r) {
          const std::uint32_t expected =
              r < count ? std::uint32_t(rows[std::size_t(r * stride + 2 * p)]) |
                              std::uint32_t(rows[std::size_t(r * stride + 2 * p + 1)]) << 16
                        : 0u;
          ASSERT_EQ(pairs[std::size_t(p * 32 + r)], expected) << "count " << count << " head_dim " << head_dim
                                                               << " at [" << p << "][" << r << "]";
        }
      }
    }
  }
}

// The AMX path's Vᵀ (a 16 × 16 word transpose in AVX-512 registers) against the plain loop, with key counts
// that are not whole steps (the padding must be zeros) and rows strided as in a [seq][heads][head_dim] tensor.
TEST(AmxPath, ValuesTransposeLikeThePlainLoop) {
  if (const std::string why = test_support::cannot_run(cpu::CpuIsa::avx512); !why.empty()) GTEST_SKIP() << why;
  for (const std::int64_t cols : {1, 31, 32, 45, 128}) {
    for (const std::int64_t head_dim : {32, 64, 96}) {
      const std::int64_t stride = 3 * head_dim;  // three heads per row
      std::vector<std::uint16_t> values(std::size_t(cols * stride));
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::uint16_t(i * 2654435761u >> 7);
      const std::int64_t padded = cpu::amx::padded_keys(cols);
      std::vector<std::uint16_t> transposed(std::size_t(head_dim * padded), 0xFFFF);
      cpu::amx::transpose_values(values.data() + head_dim, stride, cols, head_dim, transposed.data(), padded);
      for (std::int64_t d = 0; d < head_dim; ++d) {
        for (std::int64_t j = 0; j < padded; ++j) {
          const std::uint16_t expected = j < cols ? values[std::size_t(j * stride + head_dim + d)] : 0;
          ASSERT_EQ(transposed[std::size_t(d * padded + j)], expected) << "cols " << cols << " head_dim " << head_dim
                                                                       << " at [" << d << "][" << j << "]";
        }
      }
    }
  }
}

// The measured choice (cpu/measured_choice.hpp) with planted candidates: a slower right one loses, a faster
// wrong one is never taken, and with none right there is no choice.
TEST(MeasuredChoice, TheFastestRightCandidateWinsAndAWrongOneNever) {
  const std::vector<float> expected(4096, 0.5f);
  const auto slow = [&](std::vector<float>& out) {
    volatile double sink = 0;
    for (int i = 0; i < 2000000; ++i) sink = sink + 1e-9 * i;
    out = expected;
  };
  const auto fast = [&](std::vector<float>& out) { out = expected; };
  const auto wrong = [&](std::vector<float>& out) {
    out = expected;
    out[7] += 0.25f;  // one element off: a broken path that is also the fastest
  };
  const cpu::MeasuredChoice choice =
      cpu::choose_fastest({{"slow", slow}, {"wrong", wrong}, {"fast", fast}}, expected, 1e-2);
  EXPECT_EQ(choice.chosen, 2u) << choice.note;
  EXPECT_NE(choice.note.find("wrong wrong: max |diff| 0.25"), std::string::npos) << choice.note;
  EXPECT_NE(choice.note.find("slow "), std::string::npos) << choice.note;
  EXPECT_EQ(cpu::choose_fastest({{"fast", fast}, {"slow", slow}}, expected, 1e-2).chosen, 0u);
  EXPECT_THROW(cpu::choose_fastest({{"wrong", wrong}}, expected, 1e-2), std::logic_error);
  const auto short_output = [&](std::vector<float>& out) { out.assign(10, 0.5f); };
  EXPECT_THROW(cpu::choose_fastest({{"short", short_output}}, expected, 1e-2), std::logic_error);
}

// `call` refuses `setting` ("VARIABLE=value") with std::invalid_argument naming the variable and listing
// `allowed`.
template <class Call> void expect_refused(Call call, const std::string& setting, const std::string& allowed) {
  const std::string variable = setting.substr(0, setting.find('='));
  try {
    call();
    ADD_FAILURE() << setting << " was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(variable), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(allowed), std::string::npos) << error.what();
  }
}

// FAPROBE_CPU_PATH forces a path where the case can take it, and a value that is not a path is refused naming
// the variable.
TEST(CpuPath, AForcedPathIsTakenAndABadOneRefused) {
  const Case c = make_case(1, 2, 2, 64, 64, 32, DType::bf16, Mask::none);
  const auto path_of = [&] {
    const std::unique_ptr<Implementation> impl = cpu::make_tiled();
    return impl->prepare(c)->details().at("path").get<std::string>();
  };
  {
    const test_support::ScopedCpuPath forced("portable-fp32");
    EXPECT_EQ(path_of(), "portable-fp32");
  }
  if (cpu::detected_cpu_isa() >= cpu::CpuIsa::avx512_bf16) {
    for (const char* path : {"avx512-bf16", "avx512-fp32"}) {
      const test_support::ScopedCpuPath forced(path);
      EXPECT_EQ(path_of(), path);
    }
  }
  if (cpu::detected_cpu_isa() >= cpu::CpuIsa::amx) {
    const test_support::ScopedCpuPath forced("amx-bf16");
    EXPECT_EQ(path_of(), "amx-bf16");
    const test_support::ScopedMaxCpuIsa capped(cpu::CpuIsa::avx512_bf16);  // the cap wins over the forced path
    EXPECT_NE(path_of(), "amx-bf16");
  }
  const test_support::ScopedCpuPath bad("amx");
  expect_refused([] { cpu::cpu_path_setting(); }, "FAPROBE_CPU_PATH=amx",
                 "portable-fp32, avx512-fp32, avx512-bf16, amx-bf16");
}

TEST(CpuIsa, LevelsParseAndABadSettingIsRefusedNamingTheVariable) {
  for (cpu::CpuIsa level : test_support::all_cpu_isas()) EXPECT_EQ(cpu::parse_cpu_isa(cpu::to_string(level)), level);
  EXPECT_EQ(cpu::parse_cpu_isa("AVX512"), std::nullopt);
  EXPECT_EQ(cpu::parse_cpu_isa("avx2"), std::nullopt);
  {
    const test_support::ScopedMaxCpuIsa cap("avx2");
    expect_refused([] { cpu::cpu_isa(); }, "FAPROBE_MAX_CPU_ISA=avx2", "portable, avx512, avx512-bf16, amx");
  }
  {
    const test_support::ScopedMaxCpuIsa cap("portable");
    EXPECT_EQ(cpu::cpu_isa(), cpu::CpuIsa::portable);
  }
  {
    const test_support::ScopedMaxCpuIsa cap("amx");  // a cap above the CPU changes nothing
    EXPECT_EQ(cpu::cpu_isa(), cpu::detected_cpu_isa());
  }
}

// cpu.decode-splitk's choice (FlashDecoding's occupancy argument): the walk and split count it ran with,
// from the record's details.
nlohmann::json splitk_details(const Case& c) {
  const std::unique_ptr<Implementation> impl = cpu::make_decode_splitk();  // outlives its prepared case
  const std::unique_ptr<PreparedCase> prepared = impl->prepare(c);
  prepared->timed_run();
  return prepared->details();
}

TEST(SplitKPlan, SplitsOnlyWhereHeadsLeaveThreadsIdle) {
  const std::int64_t threads = cpu::cpu_threads();
  // One head, long context: the keys are the only parallelism, so they are split (when there are threads).
  const nlohmann::json one_head = splitk_details(decode_case(1, 1, 1, 8192, 64, DType::fp32));
  EXPECT_EQ(one_head.at("walk"), "whole-rows");  // one KV head: its rows are whole rows
  EXPECT_EQ(one_head.at("splits").get<std::int64_t>() > 1, threads > 1) << one_head.dump();
  // As many heads as threads, in cache: every thread has a head; a split would only add the combine.
  const nlohmann::json busy = splitk_details(decode_case(1, threads, threads, 8192, 64, DType::fp32));
  EXPECT_EQ(busy.at("walk"), "per-head");
  EXPECT_EQ(busy.at("splits"), 1) << busy.dump();
  // MQA: whole rows (every head from one row), split across the threads since batch 1 is one unit.
  const nlohmann::json mqa = splitk_details(decode_case(1, 8, 1, 8192, 64, DType::fp32));
  EXPECT_EQ(mqa.at("walk"), "whole-rows");
  EXPECT_EQ(mqa.at("splits").get<std::int64_t>() > 1, threads > 1) << mqa.dump();
  // --splits still forces the count, whatever the heuristic would choose.
  Case forced = decode_case(1, threads, threads, 8192, 64, DType::fp32);
  forced.splits = 5;
  EXPECT_EQ(splitk_details(forced).at("splits"), 5);
}

TEST(CpuKernelRows, RowsThatSeeNoKeyAreZeros) {
  // seq_q > seq_k, causal: rows i < seq_q - seq_k see no key.
  const Case c = make_case(1, 2, 2, 200, 50, 32, DType::fp32, Mask::causal);
  for (const auto& make : {cpu::make_naive, cpu::make_tiled}) {
    const std::unique_ptr<Implementation> impl = make();
    const std::unique_ptr<PreparedCase> prepared = impl->prepare(c);
    prepared->timed_run();
    const HostTensor& out = prepared->output();
    for (std::int64_t h = 0; h < c.heads; ++h) {
      for (std::int64_t row = 0; row < c.seq_q - c.seq_k; ++row) {
        for (double value : out.row(0, row, h)) ASSERT_EQ(value, 0.0) << impl->name() << " row " << row;
      }
      bool any_nonzero = false;
      for (double value : out.row(0, c.seq_q - c.seq_k, h)) any_nonzero |= value != 0.0;
      EXPECT_TRUE(any_nonzero) << impl->name() << ": the first row with a key has output";
    }
  }
}

TEST(CpuKernelSupports, DecodeImplementationsNeedDecodeMode) {
  const Case prefill = make_case(1, 2, 2, 64, 64, 32, DType::fp32, Mask::none);
  const Case one_row_prefill = make_case(1, 2, 2, 1, 64, 32, DType::fp32, Mask::none);
  const Case decode = decode_case(1, 2, 2, 64, 32, DType::fp32);
  for (const auto& make : {cpu::make_decode, cpu::make_decode_splitk}) {
    const std::unique_ptr<Implementation> impl = make();
    EXPECT_NE(impl->supports(prefill).find("--mode decode"), std::string::npos) << impl->name();
    EXPECT_NE(impl->supports(one_row_prefill), "") << impl->name();
    EXPECT_EQ(impl->supports(decode), "") << impl->name();
  }
  for (const auto& make : {cpu::make_naive, cpu::make_tiled}) {
    const std::unique_ptr<Implementation> impl = make();
    EXPECT_EQ(impl->supports(prefill), "") << impl->name();
    EXPECT_EQ(impl->supports(decode), "") << impl->name();
  }
}

TEST(CpuKernelSupports, LayoutsAreRefusedWithAReasonWhereNotTaken) {
  const Case paged = with_layout(decode_case(1, 2, 2, 64, 32, DType::fp32), 16, {});
  const Case varlen = with_layout(decode_case(1, 2, 2, 1, 32, DType::fp32), 0, {64, 3});
  for (const auto& make : {cpu::make_naive, cpu::make_tiled, cpu::make_decode}) {
    EXPECT_NE(make()->supports(paged).find("--page-size"), std::string::npos) << make()->name();
  }
  for (const auto& make : {cpu::make_naive, cpu::make_tiled}) {
    EXPECT_NE(make()->supports(varlen).find("--seqlens"), std::string::npos) << make()->name();
  }
  EXPECT_EQ(cpu::make_decode()->supports(varlen), "");
  EXPECT_EQ(cpu::make_decode_splitk()->supports(varlen), "");
  EXPECT_EQ(cpu::make_decode_splitk()->supports(paged), "");
}

TEST(CpuKernelSupports, NoCpuImplementationTakesFp8) {
  Case prefill = make_case(1, 2, 2, 64, 64, 32, DType::fp32, Mask::none);
  Case decode = decode_case(1, 2, 2, 64, 32, DType::fp32);
  prefill.dtype = decode.dtype = DType::fp8_e4m3;
  for (const Implementation* impl : cpu_implementations()) {
    EXPECT_NE(impl->supports(prefill), "") << impl->name();
    EXPECT_NE(impl->supports(decode), "") << impl->name();
    EXPECT_EQ(impl->device(), "cpu");
  }
}

// The walk above reaches every CPU kernel, and each of them is checked on cases of its own: a kernel that
// refused every case (or left the registry) would drop out of the checks unseen.
TEST(CpuKernelSupports, EveryRegisteredCpuImplementationIsCheckedOnCasesItTakes) {
  const std::vector<KernelCase> cases = kernel_cases();
  std::vector<std::string> names;
  for (const Implementation* impl : cpu_implementations()) names.push_back(impl->name());
  for (const char* built_in : {"cpu.naive", "cpu.tiled", "cpu.decode", "cpu.decode-splitk"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), built_in), names.end()) << built_in << " is not walked";
  }
  for (const std::string& name : names) {
    const auto count = std::count_if(cases.begin(), cases.end(), [&](const KernelCase& k) { return k.impl == name; });
    EXPECT_GE(count, 8) << name << " is checked on " << count << " cases";
  }
}

TEST(CpuKernelSupports, NamesAreTheRegisteredOnes) {
  EXPECT_EQ(cpu::make_naive()->name(), "cpu.naive");
  EXPECT_EQ(cpu::make_tiled()->name(), "cpu.tiled");
  EXPECT_EQ(cpu::make_decode()->name(), "cpu.decode");
  EXPECT_EQ(cpu::make_decode_splitk()->name(), "cpu.decode-splitk");
}

// Peak memory of one run, inputs and output included, as the runner measures it.
std::uint64_t measured_peak(const Implementation& impl, const Case& c) {
  const std::uint64_t before = host_memory().current_bytes();
  host_memory().reset_peaks();
  {
    const std::unique_ptr<PreparedCase> prepared = impl.prepare(c);
    prepared->timed_run();
  }
  return host_memory().counters().peak_bytes - before;
}

TEST(CpuKernelMemory, NaiveGrowsQuadraticallyTiledLinearly) {
  // The seed's table: the naive S and P are O(seq²), FlashAttention's workspace is O(1) per thread.
  const std::unique_ptr<Implementation> naive = cpu::make_naive();
  const std::unique_ptr<Implementation> tiled = cpu::make_tiled();
  Case c = make_case(1, 8, 8, 4096, 4096, 64, DType::fp32, Mask::causal);
  Case doubled = make_case(1, 8, 8, 8192, 8192, 64, DType::fp32, Mask::causal);
  const double naive_ratio = double(naive->predicted_bytes(doubled)) / double(naive->predicted_bytes(c));
  const double tiled_ratio = double(tiled->predicted_bytes(doubled)) / double(tiled->predicted_bytes(c));
  EXPECT_GT(naive_ratio, 3.8);
  EXPECT_LT(naive_ratio, 4.05);
  EXPECT_LE(tiled_ratio, 2.2);
  // S and P: 8 bytes per (batch, head, query row, key): the seed's 8.6 GB at batch 8, heads 32, seq 2048.
  const Case seed_row = make_case(8, 32, 32, 2048, 2048, 128, DType::fp16, Mask::causal);
  EXPECT_NEAR(double(naive->predicted_bytes(seed_row)) - seed_row.min_bytes(), 8.6e9, 0.1e9);

  // Measured peaks agree with the predictions (small enough to run here).
  for (std::int64_t seq : {1024, 2048}) {
    const Case run = make_case(1, 4, 4, seq, seq, 64, DType::fp32, Mask::causal);
    for (const Implementation* impl : {naive.get(), tiled.get()}) {
      const double predicted = double(impl->predicted_bytes(run));
      EXPECT_NEAR(double(measured_peak(*impl, run)), predicted, 0.02 * predicted) << impl->name() << " seq " << seq;
    }
  }
  const Case small = make_case(1, 4, 4, 1024, 1024, 64, DType::fp32, Mask::causal);
  const Case large = make_case(1, 4, 4, 2048, 2048, 64, DType::fp32, Mask::causal);
  const double naive_measured = double(measured_peak(*naive, large)) / double(measured_peak(*naive, small));
  const double tiled_measured = double(measured_peak(*tiled, large)) / double(measured_peak(*tiled, small));
  EXPECT_GT(naive_measured, 3.5);
  EXPECT_LT(naive_measured, 4.05);
  EXPECT_LE(tiled_measured, 2.2);
}

TEST(CpuKernelMemory, PredictionsMatchMeasuredPeaksForEveryDtype) {
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16}) {
    const Case prefill = make_case(2, 4, 2, 200, 300, 80, dtype, Mask::causal);
    const Case decode = decode_case(2, 8, 2, 3000, 128, dtype);
    for (const Implementation* impl : cpu_implementations()) {
      for (const Case& c : {prefill, decode}) {
        if (!impl->supports(c).empty()) continue;
        EXPECT_EQ(measured_peak(*impl, c), impl->predicted_bytes(c)) << impl->name() << " " << c.label();
      }
    }
  }
}

TEST(CpuKernelPrediction, TimesArePositiveAndNaiveIsSlowerUnderCausal) {
  const MachineRates rates;
  const Case c = make_case(1, 8, 8, 4096, 4096, 64, DType::fp32, Mask::causal);
  const double naive = cpu::make_naive()->predicted_seconds(c, rates);
  const double tiled = cpu::make_tiled()->predicted_seconds(c, rates);
  EXPECT_GT(tiled, 0.0);
  EXPECT_GT(naive, tiled);
  const Case decode = decode_case(1, 32, 32, 32768, 128, DType::fp32);
  EXPECT_GT(cpu::make_decode()->predicted_seconds(decode, rates), 0.0);
  EXPECT_GT(cpu::make_decode_splitk()->predicted_seconds(decode, rates), 0.0);
}

}  // namespace
}  // namespace faprobe
