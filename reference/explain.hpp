// The mismatch explainer: when a check fails, which usual mistake would explain the output, and where the
// error lives. It adds evidence to a failed check; it never changes the verdict or the tolerance.
//
// Each hypothesis is the attention the case asks for with one thing done the other way: the mask (none,
// causal bottom-right, causal-top-left, the case's diagonal one key off either way), the softmax scale (1,
// 1/d instead of 1/√d; log2(e) applied twice or not at all), K and V swapped, the GQA head mapping
// (query head h reading KV head h % kv_heads instead of h / group), the output left unnormalized or
// normalized twice, the output written (batch, heads, seq, head_dim) where (batch, seq, heads, head_dim)
// was expected, or every tensor (batch, heads, seq, head_dim) read as (batch, seq, heads, head_dim) (files
// saved from PyTorch's layout, when the shapes read that way are a case too). A hypothesis explains the
// output when its largest difference from the output, over the rows looked at, is within the check's
// tolerance; each one that does is a line of the diagnosis.
//
// Cost: the rows looked at are a subset of the check's own (the plan's heads, at most kRows rows of each,
// the worst of them first), so that the twelve or so hypotheses together cost about as much as the check's
// own two references per row: at most 2× the check, and far less on the large cases, where the check reads
// every row of its sampled heads.
//
// Where the error lives is summarized from the errors of the rows the check covers (against the true
// reference, recomputed on the same subset): NaN or Inf; every row from N on; only rows near the causal
// diagonal; only the last partial query block; only the first or the last row of each block of 16..128
// rows; only columns from N on; one batch entry; one query head.
#pragma once
#include <string>
#include <vector>

#include "model/case.hpp"
#include "model/tensor.hpp"
#include "reference/check_plan.hpp"
#include "reference/reference.hpp"

namespace faprobe {

// Lines for verify.diagnosis, or none. `tolerance` is the failed check's.
std::vector<std::string> explain_mismatch(const Case& c, const InputSource& inputs, const HostTensor& output,
                                          double tolerance, const CheckLimits& limits);

}  // namespace faprobe
