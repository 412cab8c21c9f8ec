// cuda.cudnn's support rule (cudnn.cpp), apart from the GPU it runs on, for the tests: cuDNN's SDPA graph of
// a case checked by the cudnn-frontend's validate() on the host, with no GPU work, for a given architecture.
#pragma once
#include <string>

#include "model/case.hpp"

namespace faprobe::cuda {

// "" when cuDNN's SDPA forward graph for c (fp16 or bf16, faprobe's layout, mask and scale) passes the
// frontend's validate() for an sm_<sm_version> GPU (90 for sm_90) with the cuDNN this process loaded
// (gpu::cudnn_library()); else why not: the dtype, cuDNN unavailable (and why), validate()'s message, or
// what this binary was built without (CUDA, the cudnn-frontend headers).
std::string cudnn_graph_support(const Case& c, int sm_version);

}  // namespace faprobe::cuda
