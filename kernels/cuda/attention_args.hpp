// The AttentionArgs of a case over its four tensors (wherever they live: device memory, or host memory for
// the emulator): the one place a Case becomes a kernel's view of the problem.
#pragma once
#include "cuda/launchers.hpp"
#include "model/case.hpp"
#include "model/fp8.hpp"

namespace faprobe::cuda {

// transform: what the implementation did to Q and K before quantizing them (model/incoherent.hpp), which sets
// their fp8 descales (Case::fp8_descale).
inline AttentionArgs attention_args(const Case& c, const void* q, const void* k, const void* v, void* o,
                                    QkTransform transform = QkTransform::none) {
  AttentionArgs args;
  args.q = q;
  args.k = k;
  args.v = v;
  args.o = o;
  args.dtype = c.dtype;
  args.batch = c.batch;
  args.heads = c.heads;
  args.kv_heads = c.kv_heads;
  args.seq_q = c.seq_q;
  args.seq_k = c.seq_k;
  args.head_dim = c.head_dim;
  args.causal = c.causal();
  args.scale = float(c.scale());
  if (c.dtype == DType::fp8_e4m3) {
    args.q_scale = c.fp8_descale(TensorId::q, transform);
    args.k_scale = c.fp8_descale(TensorId::k, transform);
    args.v_scale = c.fp8_descale(TensorId::v, transform);
  }
  return args;
}

}  // namespace faprobe::cuda
