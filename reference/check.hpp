// The checker: compares an implementation's output with the float64 reference, on every row of small
// cases and on sampled rows of sampled heads of large ones. It returns a result; it never prints or exits.
//
// Tolerance (flash-attention's rule of thumb): a case passes when
//   max_abs_diff <= 2 · max |plain − reference| + floor(dtype)
// where "plain" is the same rows computed plainly in the case's precision (HeadReference::plain_row), and
// the floor is 1e-6 (fp32), 1e-4 (fp16), 1e-3 (bf16), 1e-2 (fp8_e4m3). The tolerance is never widened to
// make a kernel pass. A non-finite output fails, and so does a non-finite reference row (an input the row
// reads is NaN or infinite, which only files given to `verify` can hold): a NaN difference must never
// slip past the maxima as "not greater than the tolerance".
//
// fp8_e4m3 (inputs e4m3 with per-tensor scales, output bf16; src/fp8.hpp): "plain" is FlashAttention-3's
// FP8 forward done plainly (HeadReference::plain_fp8_row): S = (Q_fp8·K_fp8ᵀ)·scale_q·scale_k·scale in fp32,
// P̃ = exp(S − max S) in fp32 rounded to e4m3 without a scale (P̃ is in [0, 1]) for P·V, V dequantized by
// its scale, fp32 accumulation, O = Σ e4m3(P̃)·V / Σ P̃ rounded to bf16. P̃ carries 3 fraction bits (up to
// 6 % per probability), so plain's own error is typically 1e-2 to 5e-2 and sets the tolerance; a kernel
// whose online softmax rounds P̃ against a running max instead differs from the reference by about as much
// (tests/test_check.cpp: an FA-3-style kernel with block_k 1 to 176 stays below 0.55 of the tolerance). The
// floor is 1e-2, ten times bf16's: the output is bf16, whose half step is up to 1.6e-2 for |O| in [4, 6], and
// it matters only where plain happens to be nearly exact (rows that see one or two keys); it stays far below
// what a dropped scale (a factor 64 on O or on the scores) does.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/case.hpp"
#include "model/tensor.hpp"
#include "reference/reference.hpp"

namespace faprobe {

struct CheckLimits {
  double full_check_macs = 1 << 27;  // check every row when batch·heads·seq_q·avg_k·head_dim is below
  std::int64_t sampled_heads = 4;    // otherwise this many (batch, head) pairs ...
  std::int64_t sampled_rows = 64;    // ... and this many query rows in each
};

struct CheckPlan {
  bool every_row = false;
  std::vector<std::pair<std::int64_t, std::int64_t>> heads;  // (batch entry, query head)
  std::vector<std::int64_t> rows;                            // query rows checked in each of them
};

struct VerifyResult {
  double max_abs_diff = 0;
  double max_rel_diff = 0;  // |o − ref| / max(|ref|, 1e-3), maximised over elements
  double tolerance = 0;
  std::int64_t rows_checked = 0;
  std::int64_t heads_checked = 0;
  bool passed = false;
  std::string note;  // why it failed, when it did (e.g. "NaN at b0 h3 row 17")
};

void to_json(nlohmann::json& out, const VerifyResult& result);
void from_json(const nlohmann::json& in, VerifyResult& result);

double tolerance_floor(DType dtype);

// Which rows of which heads a check covers: all of them for small cases; else the first and last
// (batch, head) plus seeded picks, and in each the first and last row, the causal diagonal's edge (the
// first row that sees a key, and the rows around it), block boundaries, and evenly spaced rows.
CheckPlan plan_check(const Case& c, const CheckLimits& limits = {});

// Checks `output` (shaped like Q) against the reference computed from `inputs`.
VerifyResult check_output(const Case& c, const InputSource& inputs, const HostTensor& output,
                          const CheckLimits& limits = {});

}  // namespace faprobe
