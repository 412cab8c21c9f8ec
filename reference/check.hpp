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
// fp8_e4m3 (inputs e4m3 with per-tensor scales, output bf16; src/fp8.hpp): "plain" is FlashAttention-3's FP8
// forward done plainly (HeadReference::plain_fp8_row): S = (Q_fp8·K_fp8ᵀ)·scale_q·scale_k·scale in fp32, P̃ =
// exp(S − max S) in fp32 rounded to e4m3 without a scale (P̃ is in [0, 1]) for P·V, V dequantized by its scale,
// both products added as Hopper's e4m3 adder adds them (model/fp8_accumulation.hpp), O = Σ e4m3(P̃)·V / Σ P̃
// rounded to bf16. P̃ carries 3 fraction bits (up to 6 % per probability), so plain's own error is typically
// 1e-2 to 5e-2 and sets the tolerance; a kernel whose online softmax rounds P̃ against a running max instead
// differs from the reference by about as much (tests/test_check.cpp: an FA-3-style kernel with block_k 1 to 176
// stays below 0.55 of the tolerance). The floor is 1e-2, ten times bf16's: the output is bf16, whose half step
// is up to 1.6e-2 for |O| in [4, 6], and it matters only where plain happens to be nearly exact (rows that see
// one or two keys); it stays far below what a dropped scale (a factor 64 on O or on the scores) does.
//
// The LSE (where an implementation produces one: the flash-style CUDA kernels; LseTensor, model/tensor.hpp)
// is checked on the same rows, against the float64 log-sum-exp ln Σ_j exp(scale · q·k_j) over the keys each
// row sees (natural log, scaled scores), by the same rule:
//   lse_max_abs_diff <= 2 · max |plain_lse − reference_lse| + lse_tolerance_floor(dtype)
// where plain_lse is the LSE computed plainly in fp32 (HeadReference::plain_row), the precision every kernel
// holds its scores and row sums in, whatever the dtype: fp32 dot products (for fp8_e4m3 added as Hopper's e4m3
// tensor core adds them, model/fp8_accumulation.hpp, since that is where an fp8 kernel's scores lose their
// precision), fp32 exp, sum and log. Its error grows with head_dim (the dot products) and with the number of
// keys (the row sum, summed serially: the plain end of the range). The floor is 1e-5 for fp32, fp16 and bf16,
// for what plain does not share with a kernel: ex2.approx (2^-22 relative per term, 2e-7 on the LSE), the
// log2(e) folded into the scale and the ln 2 of the result (an ulp of a value near 16 is 1e-6), and on a GPU the
// tensor cores' fp32 accumulation, which truncates rather than rounds (Fasi et al. 2021; up to about 3e-6 on a
// score at head_dim 128 by that bound), with a margin. It is 2.5e-4 for fp8_e4m3, whose plain scores already
// carry the adder's truncation: on the H200's 600 fp8 records (results/h200/2026-12-04) the GPU's LSE error
// equals plain's at worst where rows see one key, and about twice plain's on a few rows of long causal cases, up
// to 2.5e-4; the floor, about one truncation step of the adder (2^-13 relative) on a score of magnitude 2, keeps
// every recorded GPU error at or below 0.58 of its tolerance (tests/test_fp8_h200.cpp). Both floors are orders
// below the defects the check is there for: a k-group of the scores' products left out, log2 written for the
// natural log (a factor 1.44), a dropped scale, one row's LSE written to its neighbour's place (differences of
// order 0.1 to 1), a row left unwritten (NaN).
// A row that sees no key (causal with seq_q > seq_k) must hold −inf exactly (ln 0, what the kernels and the
// reference write; flash-attention writes +inf there, which fails here), and every other row a finite
// value: NaN anywhere, ±inf where keys are seen, or a finite value where none is fails whatever the
// tolerance.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/case.hpp"
#include "model/tensor.hpp"
#include "reference/check_plan.hpp"
#include "reference/reference.hpp"

namespace faprobe {

struct VerifyResult {
  double max_abs_diff = 0;
  double max_rel_diff = 0;  // |o − ref| / max(|ref|, 1e-3), maximised over elements
  double tolerance = 0;
  std::int64_t rows_checked = 0;
  std::int64_t heads_checked = 0;
  bool passed = false;      // the output and, when lse_checked, the LSE within their tolerances
  // The LSE, on the same rows (the top of this file): whether there was one to check, and when there was, the
  // largest |lse − reference| (+inf where a row's LSE is ±inf or finite against the reference's value, NaN
  // where it is NaN; 0 for a row that sees no key and holds −inf) and its tolerance.
  bool lse_checked = false;
  double lse_max_abs_diff = 0;
  double lse_tolerance = 0;
  // Why it failed, when it did: "non-finite output (NaN) at batch 0 head 3 row 17 col 0, in 64 of 258 rows
  // checked", "max_abs_diff 0.31 > tolerance 0.002 at batch 1 head 0 row 5", "LSE off by 0.69 at batch 0 head
  // 1 row 17 (tolerance 1.1e-05)".
  std::string note;
  // When the output failed: what explains it and where its error lives (reference/explain.hpp); evidence
  // only, never part of the verdict.
  std::vector<std::string> diagnosis;
  // fp8_e4m3 (add_exact_inputs_error): O against the float64 attention of the generator's unquantized values,
  // on the same rows: the root mean square over their elements and the largest |difference|. Informational,
  // never part of the verdict.
  bool exact_inputs_checked = false;
  double exact_inputs_o_rms = 0;
  double exact_inputs_o_max_abs = 0;
};

// The record's `verify` object: max_abs_diff, max_rel_diff, tolerance, rows_checked, heads_checked, passed,
// lse_checked (always), lse_max_abs_diff and lse_tolerance (when lse_checked), note (when not empty),
// exact_inputs_o_rms and exact_inputs_o_max_abs (when exact_inputs_checked; absent otherwise). A
// non-finite difference is written as null (JSON has no NaN or Infinity) and read back as NaN. Records
// written before the LSE check existed have no lse_checked: read as not checked.
void to_json(nlohmann::json& out, const VerifyResult& result);
void from_json(const nlohmann::json& in, VerifyResult& result);

double tolerance_floor(DType dtype);
double lse_tolerance_floor(DType dtype);

// Checks `output` (shaped like Q) against the reference computed from `inputs`, and `lse` too when given
// (an implementation's PreparedCase::lse(); null: it produces none, lse_checked stays false).
VerifyResult check_output(const Case& c, const InputSource& inputs, const HostTensor& output,
                          const LseTensor* lse = nullptr, const CheckLimits& limits = {});

// The error a user of a quantized case sees: `output` against the float64 attention of the generator's own
// values (GeneratedInputs::exact(c): neither rounded to the dtype nor transformed; incoherent processing leaves
// that attention unchanged), on the rows and heads plan_check(c, limits) chooses, so it costs one more
// reference per checked KV head and row. Sets result's exact_inputs_checked, exact_inputs_o_rms and
// exact_inputs_o_max_abs; never `passed`. The harness adds it to every fp8_e4m3 record it checks.
void add_exact_inputs_error(const Case& c, const HostTensor& output, VerifyResult& result,
                            const CheckLimits& limits = {});

}  // namespace faprobe
