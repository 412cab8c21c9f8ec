// Shared by the tests of the flash-style CUDA kernels under the emulator (test_emu_fa1.cpp,
// test_emu_fa2.cpp, test_emu_decode.cpp): running a kernel on a case's inputs, naming cases, and the checks every such kernel
// must pass beyond the output checker: rows that see no key are exact zeros, and the LSE matches a host
// computation in double.
#pragma once
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/attention_args.hpp"
#include "cuda/common/emu/emulator.hpp"
#include "cuda/common/tile_list.hpp"
#include "cuda/launchers.hpp"
#include "model/case.hpp"
#include "model/tensor.hpp"
#include "reference/check.hpp"
#include "reference/reference.hpp"

namespace faprobe {

// What gtest prints for a failing case parameter (instead of the struct's bytes).
inline void PrintTo(const Case& c, std::ostream* out) { *out << c.label(); }

namespace test_support {

// The output of forward(args) on case c's inputs (host memory, for the emulator); the LSE too when lse is
// given (NaN-filled first, so a row the kernel never writes shows).
template <class Forward>
HostTensor run_flash_kernel(const Case& c, Forward&& forward, std::vector<float>* lse = nullptr) {
  const AttentionInputs inputs = make_inputs(c);
  HostTensor output = make_output(c);
  cuda::AttentionArgs args = cuda::attention_args(c, inputs.q.data<std::uint16_t>(), inputs.k.data<std::uint16_t>(),
                                                  inputs.v.data<std::uint16_t>(), output.data<std::uint16_t>());
  if (lse != nullptr) {
    lse->assign(static_cast<std::size_t>(c.batch * c.heads * c.seq_q), std::numeric_limits<float>::quiet_NaN());
    args.lse = lse->data();
  }
  forward(args);
  return output;
}

inline std::string describe(const VerifyResult& r) {
  return "max_abs_diff " + std::to_string(r.max_abs_diff) + " tolerance " + std::to_string(r.tolerance) + " " + r.note;
}

// A gtest parameter name for a case: its label with every non-alphanumeric character as '_', and the index.
inline std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name = info.param.label();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name + "_" + std::to_string(info.index);
}

// Rows that see no key are exactly zero (not merely within tolerance), and never NaN; every other row has
// a non-zero element.
inline void expect_keyless_rows_zero(const Case& c, const HostTensor& output) {
  for (std::int64_t h = 0; h < c.heads; ++h) {
    for (std::int64_t row = 0; row < c.seq_q; ++row) {
      const std::vector<double> values = output.row(0, row, h);
      const bool sees_key = c.visible_keys(row) > 0;
      const bool all_zero = std::all_of(values.begin(), values.end(), [](double x) { return x == 0.0; });
      EXPECT_EQ(all_zero, !sees_key) << "head " << h << " row " << row;
    }
  }
}

// The largest |lse − expected| over rows that see a key, where expected = ln Σ_j exp(scale · q·k_j) over
// those keys, in double; a row that sees none must hold -inf (checked here), every other one a finite value.
inline double worst_lse_error(const Case& c, const std::vector<float>& lse) {
  const GeneratedInputs inputs(c);
  std::vector<double> q(static_cast<std::size_t>(c.head_dim)), k(q.size());
  double worst = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t h = 0; h < c.heads; ++h) {
      for (std::int64_t row = 0; row < c.seq_q; ++row) {
        const float got = lse[static_cast<std::size_t>((b * c.heads + h) * c.seq_q + row)];
        const std::int64_t keys = c.visible_keys(b, row);
        if (keys == 0) {
          EXPECT_EQ(got, -std::numeric_limits<float>::infinity()) << "b" << b << " h" << h << " row " << row;
          continue;
        }
        inputs.row(TensorId::q, b, row, h, q.data());
        std::vector<double> scores;
        for (std::int64_t j = 0; j < keys; ++j) {
          inputs.row(TensorId::k, b, j, c.kv_head_of(h), k.data());
          double dot = 0;
          for (std::size_t d = 0; d < q.size(); ++d) dot += q[d] * k[d];
          scores.push_back(dot * c.scale());
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double s : scores) sum += std::exp(s - max);
        const double expected = max + std::log(sum);
        if (!std::isfinite(got)) {
          ADD_FAILURE() << "LSE not finite at b" << b << " h" << h << " row " << row;
          return std::numeric_limits<double>::infinity();
        }
        worst = std::max(worst, std::abs(got - expected));
      }
    }
  }
  return worst;
}

// A tensor-core kernel's refusals: supports(dtype, head_dim) names fp16/bf16 and the instantiated head
// dims with the value refused, and forward throws std::invalid_argument for it.
template <class Supports, class Forward>
void expect_refuses_with_reasons(Supports&& supports, Forward&& forward, std::int64_t unsupported_head_dim) {
  EXPECT_EQ(supports(DType::fp16, 128), "");
  EXPECT_EQ(supports(DType::bf16, 256), "");
  const std::string dtype_reason = supports(DType::fp32, 128);
  EXPECT_NE(dtype_reason.find("fp16 and bf16"), std::string::npos) << dtype_reason;
  const std::string dim_reason = supports(DType::fp16, unsupported_head_dim);
  EXPECT_NE(dim_reason.find("64, 128 and 256"), std::string::npos) << dim_reason;
  EXPECT_NE(dim_reason.find(std::to_string(unsupported_head_dim)), std::string::npos) << dim_reason;
  cuda::AttentionArgs args;
  args.dtype = DType::fp16;
  args.head_dim = unsupported_head_dim;
  EXPECT_THROW(forward(cuda::Launch{cuda::Target::emulator, nullptr}, args), std::invalid_argument);
}

// A case and one of the tiles of a tiled kernel (cuda.fa2, cuda.fa3) to run it in.
struct TiledCase {
  Case c;
  cuda::Tile tile;
};
inline void PrintTo(const TiledCase& t, std::ostream* out) { *out << t.c.label() << " tile " << t.tile.name(); }
inline std::string tiled_case_name(const testing::TestParamInfo<TiledCase>& info) {
  return case_name(testing::TestParamInfo<Case>(info.param.c, info.index)) + "_" + info.param.tile.name();
}
// Every case in every tile the list instantiates for its dtype and head_dim.
inline std::vector<TiledCase> in_every_tile(const std::vector<Case>& cases, const cuda::TileList& list) {
  std::vector<TiledCase> tiled;
  for (const Case& c : cases)
    for (const cuda::TileInstantiation& i : list)
      if (i.dtype == c.dtype && i.head_dim == c.head_dim) tiled.push_back({c, i.tile});
  return tiled;
}
// Every instantiation of the list is run by some case (so none escapes a verify matrix).
inline void expect_every_instantiation_covered(const std::vector<TiledCase>& cases, const cuda::TileList& list) {
  for (const cuda::TileInstantiation& i : list) {
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const TiledCase& t) {
      return t.c.dtype == i.dtype && t.c.head_dim == i.head_dim && t.tile == i.tile;
    })) << to_string(i.dtype) << " d" << i.head_dim << " " << i.tile.name() << " is run by no case";
  }
}

// A planted defect is caught where it matters and harmless where it cannot show: the production kernel
// (run) passes `matters`, the defective one (run_defect) fails it and passes `harmless`.
template <class Run, class RunDefect>
void expect_defect_caught(const char* defect, const Case& matters, const Case& harmless, const char* why_harmless,
                          Run&& run, RunDefect&& run_defect) {
  const VerifyResult good = check_output(matters, GeneratedInputs(matters), run(matters));
  EXPECT_TRUE(good.passed) << describe(good);
  const VerifyResult bad = check_output(matters, GeneratedInputs(matters), run_defect(matters));
  EXPECT_FALSE(bad.passed) << defect << " not caught: " << describe(bad);
  const VerifyResult same = check_output(harmless, GeneratedInputs(harmless), run_defect(harmless));
  EXPECT_TRUE(same.passed) << why_harmless << ": " << describe(same);
}

// What an emulated verify of c costs, printed (reported, never asserted); the output must still pass.
template <class Run>
void report_emulated_cost(const char* kernel, const Case& c, Run&& run) {
  const auto start = std::chrono::steady_clock::now();
  const HostTensor output = run(c);
  const auto ran = std::chrono::steady_clock::now();
  const VerifyResult result = check_output(c, GeneratedInputs(c), output);
  const auto checked = std::chrono::steady_clock::now();
  EXPECT_TRUE(result.passed) << describe(result);
  const auto seconds = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
  std::printf("emulated %s %s: run %.2f s, check %.2f s (%lld rows checked)\n", kernel, c.label().c_str(),
              seconds(start, ran), seconds(ran, checked), static_cast<long long>(result.rows_checked));
}

// The emulator's varied schedules (emulator.hpp) must not change a correct kernel's output by a single bit:
// run forward on c under the default schedule and three seeded ones and compare every element's bits.
template <class Forward>
void expect_same_output_under_schedules(const Case& c, Forward forward) {
  const HostTensor by_default = forward(c);
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const emu::ScopedSchedule schedule(seed);
    const HostTensor seeded = forward(c);
    ASSERT_EQ(seeded.elements(), by_default.elements());
    std::int64_t differing = 0;
    for (std::int64_t i = 0; i < seeded.elements(); ++i) {
      const float a = by_default.get(i), b = seeded.get(i);
      if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++differing;
    }
    EXPECT_EQ(differing, 0) << c.label() << ": schedule seed " << seed << " changed " << differing << " elements";
  }
}

}  // namespace test_support
}  // namespace faprobe
