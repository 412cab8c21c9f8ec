// The host-side entry points of faprobe's CUDA kernels, one function per kernel, each callable two ways:
// Target::gpu launches the nvcc-compiled kernel on a CUDA stream (defined only in CUDA builds, in the
// kernels' .cu files), Target::emulator runs the same kernel body under the CPU emulation
// (cuda/common/emu/) on host memory (defined in every build, in each kernel's *_emulated.cpp). Pointers are
// device pointers for the GPU and host pointers for the emulator; nothing here includes a CUDA header, so
// the implementations (kernels/cuda/*.cpp) are plain C++ for both.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/dtype.hpp"
#include "model/inputs.hpp"

namespace faprobe::cuda {

enum class Target { gpu, emulator };

// True when this binary was built with the CUDA kernels (FAPROBE_ENABLE_CUDA).
bool built_with_cuda();

// An attention problem as the kernels see it: (batch, seq, heads, head_dim) row-major tensors of dtype
// (fp16 or bf16 for the tensor-core kernels), bottom-right causal, K/V with kv_heads heads.
struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // (batch, heads, seq_q) natural-log sum of exponentials; may be null
  void* workspace = nullptr;  // a kernel's global scratch, <kernel>_workspace_bytes(args) bytes
  DType dtype = DType::fp16;
  std::int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 64;
  bool causal = false;
  float scale = 0.125f;  // 1/sqrt(head_dim)
  // fp8_e4m3 (src/model/fp8.hpp): the per-tensor scales (FA-3's descales), real value = e4m3 value · scale; 1 for
  // the other dtypes. O is then in output_dtype(dtype), bf16.
  float q_scale = 1.0f, k_scale = 1.0f, v_scale = 1.0f;
  // Where K and V rows live (docs/DESIGN.md, "A case"; src/model/kv_layout.hpp). The prefill kernels take the
  // default, contiguous (batch, seq_k) tensors; the decode kernels take any layout.
  std::int64_t kv_rows = 0;                   // rows of the K and V storage; 0: batch · seq_k
  const std::int32_t* seq_starts = nullptr;   // batch + 1 logical row offsets (cu_seqlens); seq_k is the longest
  const std::int32_t* block_table = nullptr;  // paged: (batch, pages_per_seq) pool pages; null: contiguous
  std::int64_t page_size = 0, pages_per_seq = 0;
  std::int64_t splits = 1;                    // decode: CTAs sharing one entry's keys (1: no split)
};

// Where a kernel runs: the target and, for the GPU, the cudaStream_t (as void*, null = default stream).
struct Launch {
  Target target = Target::emulator;
  void* stream = nullptr;
};

// --- Device input generator (cuda/common/fill_inputs.cuh): writes count elements of dtype, element i
// being round_to(dtype, input_value(key, i, distribution)) (src/model/inputs.hpp), bit-identical to the host's
// make_inputs: for fp8_e4m3 the e4m3 code of input_value / fp8_input_scale_of(distribution) (src/model/fp8.hpp).
void fill_input(const Launch& launch, void* data, DType dtype, std::size_t count, std::uint64_t key,
                InputDistribution distribution);
// Q or K of an fp8_e4m3 case under incoherent processing (src/model/incoherent.hpp): rows of head_dim e4m3
// codes (a power of two up to 256), row r rotated from the generator's elements r · head_dim ... with the
// signs of signs_key and stored with the scale 2^incoherent_scale_exponent(head_dim, distribution); count
// elements (a multiple of head_dim). Bit-identical to make_inputs(c, QkTransform::incoherent).
void fill_rotated_input(const Launch& launch, void* data, std::size_t count, int head_dim, std::uint64_t key,
                        InputDistribution distribution, std::uint64_t signs_key);
// A paged K or V pool (fill_paged_values in fill_inputs.cuh): pages · page_size rows of row_width
// elements; row r of page p is logical row page_first_row[p] + r when r < page_valid_rows[p], else NaN.
// The two arrays (pages entries each) live on the target.
struct PagedFill {
  std::size_t pages = 0, row_width = 0;
  int page_size = 0;
  const std::int32_t* page_first_row = nullptr;
  const std::int32_t* page_valid_rows = nullptr;
};
void fill_paged_input(const Launch& launch, void* data, DType dtype, std::uint64_t key, InputDistribution distribution,
                      const PagedFill& paged);

// --- cuda.naive's softmax (cuda/naive/softmax.cuh): reads the fp32 scores S (batch·heads rows of seq_q x
// seq_k, contiguous), writes P = softmax(scale · S) with the bottom-right causal mask applied by index (no
// mask tensor), in dtype (fp32, fp16 or bf16), same layout. A row that sees no key is all zeros.
struct SoftmaxArgs {
  const float* scores = nullptr;
  void* probs = nullptr;
  DType dtype = DType::fp32;
  std::int64_t batch_heads = 1, seq_q = 1, seq_k = 1;
  bool causal = false;
  float scale = 1.0f;
};
void naive_softmax(const Launch& launch, const SoftmaxArgs& args);

// --- cuda.fa1 (cuda/fa1/): FlashAttention-1's parallelization, one CTA per (batch, head). ---
// "" when the kernel has an instantiation for the case's dtype and head_dim, else the reason.
std::string fa1_supports(DType dtype, std::int64_t head_dim);
// Tile sizes and launch shape, for the record's details: block_q, block_k, threads, shared_bytes.
struct KernelShape {
  int block_q = 0, block_k = 0, threads = 0;
  std::size_t shared_bytes = 0;
};
KernelShape fa1_shape(DType dtype, std::int64_t head_dim);
// Bytes of AttentionArgs::workspace fa1_forward needs: O, row max and row sum in fp32 between key blocks.
std::size_t fa1_workspace_bytes(const AttentionArgs& args);
void fa1_forward(const Launch& launch, const AttentionArgs& args);

// cuda.fa2's and cuda.fa3's entry points are in their folders: cuda/fa2/fa2_launch.hpp, cuda/fa3/fa3_launch.hpp.

// --- cuda.decode and cuda.decode-splitk (cuda/decode/): decode attention (seq_q = 1) over any K/V layout;
// with args.splits > 1 the keys of each entry are split over that many CTAs and a combine kernel merges them.
std::string decode_supports(DType dtype, std::int64_t head_dim);  // "" or the reason, as fa1_supports
// block_q is the query heads one CTA takes (a GQA group, at most 16), block_k a warp's key block.
KernelShape decode_shape(DType dtype, std::int64_t head_dim);
// CTAs of the attention kernel resident per SM, for the split heuristic: the CUDA occupancy calculator on
// the GPU; under the emulator the estimate for the device it stands for (an H200: 228 KiB of shared memory
// and 2048 threads per SM).
int decode_ctas_per_sm(const Launch& launch, DType dtype, std::int64_t head_dim);
// Bytes of AttentionArgs::workspace decode_forward needs: split-K's fp32 partial outputs and LSEs, 0 when
// args.splits = 1.
std::size_t decode_workspace_bytes(const AttentionArgs& args);
// Throws std::invalid_argument on what the kernels cannot run (naming it).
void decode_forward(const Launch& launch, const AttentionArgs& args);

}  // namespace faprobe::cuda
