// The shared shell of the CPU implementations: inputs and output on the host through the counting
// allocator, wall-clock timing of forward(), and the output filled with NaN before a checked run
// (PreparedCase::poison_outputs), so that rows forward() does not write fail the check. A CPU
// implementation overrides forward() and the predictions; none produces an LSE.
#pragma once
#include <chrono>
#include <memory>

#include "model/implementation.hpp"
#include "model/tensor.hpp"

namespace faprobe::cpu {

// Query/key/value/output of one forward call, with the case they belong to. K and V are stored as
// `layout` says: key `key` of batch entry b is storage row layout.storage_row(b, key) (row r of head h at
// element (r · kv_heads + h) · head_dim); for a contiguous equal-length case that is k.offset(b, key, h).
struct ForwardArgs {
  const Case& c;
  const HostTensor& q;
  const HostTensor& k;
  const HostTensor& v;
  HostTensor& o;
  const KvLayout& layout;
};

class CpuImplementation : public Implementation {
 public:
  std::string device() const override { return "cpu"; }
  std::string supports(const Case& c) const override;  // the CPU dtypes and K/V layouts; subclasses add limits
  // Whether forward() takes --mask causal-top-left (it does when it masks by c.visible_keys alone).
  virtual bool top_left_mask() const { return false; }
  // The K/V layouts forward() takes beyond contiguous equal lengths (ForwardArgs::layout finds the rows).
  virtual KvLayouts kv_layouts() const { return {}; }
  // Fills args.o: the timed work, and nothing else (a 7 µs decode case showed the cost of writing its plan
  // into the record's details on every sample: 0.2–0.4 µs).
  virtual void forward(const ForwardArgs& args) const = 0;
  // Writes what forward() will choose for this case (path, block sizes, splits, threads) into the record's
  // details: once per case, when it is prepared, outside the timed region.
  virtual void describe(const Case& c, nlohmann::json& details) const {
    (void)c;
    (void)details;
  }
  std::unique_ptr<PreparedCase> prepare(const Case& c) const override;
};

int cpu_threads();  // OpenMP threads the CPU kernels use

}  // namespace faprobe::cpu
