// cuda_attention: exact attention on the GPU for faprobe's plugin ABI (include/faprobe/plugin.h), in one
// small CUDA kernel with fp32 arithmetic throughout and no tensor cores.
//
// The idea: one thread block computes one query row of one head, walking the keys the row sees in chunks
// with the online softmax: a chunk's scaled scores go to shared memory, the running maximum and sum are
// updated and the output accumulator is rescaled, then the chunk's V rows are added in, weighted by
// exp(score - row_max). The LSE falls out at the end as row_max + ln(row_sum).
//
// Tiling: the grid is (seq_q, heads, batch), 128 threads (4 warps) a block. The query row and the output
// accumulator (head_dim fp32 each) and one chunk of kChunk scores sit in shared memory. Scores: warp w takes
// the chunk's keys w, w + 4, ..., its 32 lanes splitting head_dim (coalesced K reads) and summing with
// shuffles. P.V: thread t owns output dimensions t, t + 128, ... and adds every key of the chunk into them
// (coalesced V reads). K and V rows are found by one helper, kv_storage_row, for the contiguous, variable
// length and paged layouts; entry b has seq_starts[b + 1] - seq_starts[b] keys (the logical rows are packed,
// in every layout). Query head h reads KV head h / (heads / kv_heads); causal masks are bottom-right aligned.
//
// Napkin math: FLOPs = 4 * batch * heads * seq_q * avg_keys * head_dim. K and V are read once per query row
// and head, 2 * batch * heads * seq_q * avg_keys * head_dim elements, from L2 after the first time: one
// 2-byte load per multiply-add. Batch 1, heads 16, seq 4096, head_dim 128, bf16: 137 GFLOP and 137 GB of
// cache traffic against 34 MB of K and V in memory, so it is bound by L2 bandwidth (several TB/s): tens of
// milliseconds, where a tensor-core flash kernel takes well under one. It is an example, not a contender.
// Written and compiled without a GPU: these figures are estimates, not measurements.
//
// Build:
//   nvcc -O2 -std=c++17 -arch=sm_80 -Xcompiler -fPIC -shared -I include examples/plugins/cuda_attention.cu -o libcuda_attention.so
#include <cmath>
#include <cstdint>
#include <cstdio>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "faprobe/plugin.h"

namespace {

constexpr int kWarpSize = 32;
constexpr int kThreads = 128;  // 4 warps: a few keys in flight per block, and small enough to stay simple
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kChunk = 64;           // keys whose scores are in shared memory at once (16 per warp)
constexpr int64_t kMaxHeadDim = 1024;  // query and accumulator in shared memory: 8 KiB at most
constexpr int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z (heads, batch)

// Everything the kernel needs of the case and its tensors (device pointers).
struct Params {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  const int32_t* seq_starts;   // batch + 1 logical row offsets
  const int32_t* block_table;  // paged: (batch, pages_per_seq) pool pages
  int64_t heads, kv_heads, seq_q, head_dim, page_size, pages_per_seq;
  float scale;
  bool causal;
};

__device__ float to_float(__half x) { return __half2float(x); }
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ void store_float(__half* out, float x) { *out = __float2half_rn(x); }
__device__ void store_float(__nv_bfloat16* out, float x) { *out = __float2bfloat16_rn(x); }

// How many of its entry's keys query row s sees: keys 0 .. seen - 1 (causal: j <= s + keys - seq_q).
__device__ int64_t visible_keys(const Params& p, int64_t s, int64_t keys) {
  if (!p.causal) return keys;
  const int64_t seen = s + keys - p.seq_q + 1;
  return seen < 0 ? 0 : (seen < keys ? seen : keys);
}

// The storage row of K and V that holds key j of batch entry b.
__device__ int64_t kv_storage_row(const Params& p, int64_t b, int64_t j) {
  if (p.page_size == 0) return p.seq_starts[b] + j;
  return int64_t(p.block_table[b * p.pages_per_seq + j / p.page_size]) * p.page_size + j % p.page_size;
}

__device__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

template <class T> __global__ void __launch_bounds__(kThreads) attention_kernel(Params p) {
  extern __shared__ float shared[];  // query[head_dim], acc[head_dim], score[kChunk]
  __shared__ int64_t chunk_rows[kChunk];  // the storage rows of the chunk's keys
  float* query = shared;
  float* acc = query + p.head_dim;
  float* score = acc + p.head_dim;

  const int64_t s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int tid = int(threadIdx.x), warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int64_t head_dim = p.head_dim;
  const int64_t kv_head = h / (p.heads / p.kv_heads);
  const int64_t keys = p.seq_starts[b + 1] - p.seq_starts[b];
  const int64_t seen = visible_keys(p, s, keys);
  const int64_t q_at = ((b * p.seq_q + s) * p.heads + h) * head_dim;
  const int64_t lse_at = (b * p.heads + h) * p.seq_q + s;
  const T* q = static_cast<const T*>(p.q) + q_at;
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  T* o = static_cast<T*>(p.o) + q_at;

  if (seen == 0) {  // a row that sees no key: zeros, and the log of an empty sum
    for (int64_t d = tid; d < head_dim; d += kThreads) store_float(&o[d], 0.0f);
    if (tid == 0 && p.lse != nullptr) p.lse[lse_at] = -INFINITY;
    return;
  }
  for (int64_t d = tid; d < head_dim; d += kThreads) {
    query[d] = to_float(q[d]);
    acc[d] = 0.0f;
  }

  float row_max = -INFINITY, row_sum = 0.0f;  // the same in every thread: all compute them from shared memory
  for (int64_t chunk_start = 0; chunk_start < seen; chunk_start += kChunk) {
    const int n = int(seen - chunk_start < kChunk ? seen - chunk_start : kChunk);
    if (tid < n) chunk_rows[tid] = kv_storage_row(p, b, chunk_start + tid);
    __syncthreads();  // the rows, and (first chunk) the query row

    // Scores: a warp per key, the lanes splitting head_dim.
    for (int i = warp; i < n; i += kWarps) {
      const T* k_row = k + (chunk_rows[i] * p.kv_heads + kv_head) * head_dim;
      float dot = 0.0f;
      for (int64_t d = lane; d < head_dim; d += kWarpSize) dot += query[d] * to_float(k_row[d]);
      dot = warp_sum(dot);
      if (lane == 0) score[i] = p.scale * dot;
    }
    __syncthreads();

    // The online softmax step: the new maximum, the factor that rescales what came before (0 for the first
    // chunk, whose row_max is -inf), then the chunk's probabilities in place of its scores.
    float chunk_max = -INFINITY;
    for (int i = 0; i < n; ++i) chunk_max = fmaxf(chunk_max, score[i]);
    const float new_max = fmaxf(row_max, chunk_max);
    const float correction = expf(row_max - new_max);
    __syncthreads();  // every thread has read the scores before they are overwritten
    if (tid < n) score[tid] = expf(score[tid] - new_max);
    __syncthreads();
    float chunk_sum = 0.0f;
    for (int i = 0; i < n; ++i) chunk_sum += score[i];
    row_sum = row_sum * correction + chunk_sum;
    row_max = new_max;

    // P.V: each thread its own output dimensions, the chunk's keys in turn.
    for (int64_t d = tid; d < head_dim; d += kThreads) {
      float sum = acc[d] * correction;
      for (int i = 0; i < n; ++i) sum += score[i] * to_float(v[(chunk_rows[i] * p.kv_heads + kv_head) * head_dim + d]);
      acc[d] = sum;
    }
    __syncthreads();  // before the next chunk overwrites chunk_rows and score
  }

  for (int64_t d = tid; d < head_dim; d += kThreads) store_float(&o[d], acc[d] / row_sum);
  if (tid == 0 && p.lse != nullptr) p.lse[lse_at] = row_max + logf(row_sum);
}

const char* cuda_attention_supports(const faprobe_implementation*, const faprobe_case* c) {
  if (c->dtype != FAPROBE_DTYPE_FP16 && c->dtype != FAPROBE_DTYPE_BF16) return "dtype must be fp16 or bf16";
  if (c->head_dim > kMaxHeadDim) return "head_dim must be at most 1024";
  if (c->heads > kMaxGridYZ || c->batch > kMaxGridYZ) return "heads and batch must be at most 65535";
  if (c->seq_q > INT32_MAX) return "seq_q must be below 2^31";
  return nullptr;
}

void write_error(const faprobe_run_context* context, const char* what, cudaError_t error) {
  if (context->error_size == 0) return;
  std::snprintf(context->error, context->error_size, "%s: %s", what, cudaGetErrorString(error));
}

int cuda_attention_run(const faprobe_implementation*, const faprobe_case* c, const faprobe_tensors* t,
                       const faprobe_run_context* context) {
  if (c->batch == 0 || c->heads == 0 || c->seq_q == 0) return 0;  // nothing to compute (and no empty grid)
  Params params{};
  params.q = t->q;
  params.k = t->k;
  params.v = t->v;
  params.o = t->o;
  params.lse = t->lse;
  params.seq_starts = t->seq_starts;
  params.block_table = t->block_table;
  params.heads = c->heads;
  params.kv_heads = c->kv_heads;
  params.seq_q = c->seq_q;
  params.head_dim = c->head_dim;
  params.page_size = c->page_size;
  params.pages_per_seq = t->pages_per_seq;
  params.scale = c->scale;
  params.causal = c->mask == FAPROBE_MASK_CAUSAL;
  const dim3 grid(unsigned(c->seq_q), unsigned(c->heads), unsigned(c->batch));
  const size_t shared_bytes = size_t(2 * c->head_dim + kChunk) * sizeof(float);
  const cudaStream_t stream = static_cast<cudaStream_t>(context->stream);
  if (c->dtype == FAPROBE_DTYPE_FP16) {
    attention_kernel<__half><<<grid, kThreads, shared_bytes, stream>>>(params);
  } else {
    attention_kernel<__nv_bfloat16><<<grid, kThreads, shared_bytes, stream>>>(params);
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    write_error(context, "cuda_attention: kernel launch failed", error);
    return 1;
  }
  return 0;
}

// name, device, flags, supports, workspace_bytes (none), run, user_data
const faprobe_implementation cuda_attention = {"cuda_attention",   FAPROBE_DEVICE_CUDA, FAPROBE_WRITES_LSE,
                                               cuda_attention_supports, nullptr, cuda_attention_run, nullptr};

}  // namespace

FAPROBE_PLUGIN_ENTRY {
  static const faprobe_plugin plugin = {FAPROBE_PLUGIN_ABI_VERSION, 1, &cuda_attention};
  return &plugin;
}
