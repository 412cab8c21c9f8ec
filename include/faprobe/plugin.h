/* faprobe's plugin ABI, version 1: attention implementations in a shared library, measured and verified by
 * faprobe like its own (`faprobe sweep --plugin ./libmine.so`).
 *
 * Copy this header into your project or include it from a faprobe checkout (`#include "faprobe/plugin.h"`
 * with `-I <checkout>/include`). It is plain C (C99, also valid
 * C++ and CUDA C++), depends on nothing but <stddef.h> and <stdint.h>, and carries no faprobe internals: a
 * plugin built against it links against nothing of faprobe's.
 *
 * THE CONTRACT
 *   A plugin exports one function, faprobe_plugin_entry (FAPROBE_PLUGIN_ENTRY below declares it), that
 *   returns a faprobe_plugin: the ABI version it was built for and an array of implementations. faprobe
 *   calls it once, right after loading the library, and keeps the library loaded until it exits; the
 *   structures it returns (names, arrays) must stay valid for as long.
 *
 *   Each implementation is registered as `plugin.<name>` and is then an implementation like `cpu.tiled`: it
 *   appears in `faprobe list` with its support table, and sweep, verify, run and compare treat it like a
 *   built-in one. For every (implementation, case) faprobe
 *     1. asks supports(case); a reason string makes an `unsupported` record with that reason;
 *     2. allocates Q, K, V and O (and the LSE, where the implementation says it writes one) on the
 *        implementation's device in the layouts below, fills Q, K and V with its input generator, and a
 *        workspace of workspace_bytes(case) bytes;
 *     3. fills O (and the LSE) with NaN, calls run once and checks O (and the LSE) against its float64
 *        reference: an element run does not write stays NaN and fails the check;
 *     4. times further calls of run: host wall clock around the call for a CPU implementation, CUDA events
 *        recorded on `stream` before and after the call for a CUDA one (so run must queue all its work on
 *        `stream`, and may return before it finishes).
 *   Peak memory (`memory.peak_bytes` in the record) counts faprobe's tensors, the workspace and whatever run
 *   takes through context->allocate; memory the plugin gets any other way (malloc, cudaMalloc) is invisible
 *   to it, so take scratch memory through allocate or workspace.
 *
 * THREADS, OWNERSHIP, ERRORS
 *   - faprobe calls supports, workspace_bytes and run from one thread, one call at a time. run may use
 *     threads of its own (OpenMP, std::thread), joined before it returns; context->threads says how many
 *     CPU threads the user asked for (--threads).
 *   - Every pointer faprobe passes is owned by faprobe and valid only during the call that receives it.
 *     The plugin must not free them, nor keep them after the call returns.
 *   - supports() returns NULL for a supported case, else a NUL-terminated reason ("head_dim must be 64 or
 *     128") that stays valid until the next call into the plugin (a string literal, or a static buffer).
 *     It is called often (`faprobe list` asks 256 cases): keep it cheap and free of side effects.
 *   - run returns 0 on success; any other value fails the case (a `failed` record) with the message the
 *     plugin wrote into context->error (NUL-terminated, at most context->error_size bytes with the NUL).
 *   - A plugin that crashes takes down the process that called it. faprobe runs each case of a plugin in a
 *     child process by default (--isolate; --no-isolate turns it off), and asks supports and
 *     workspace_bytes in a forked child too, so a crash or a hang in any of them costs one `failed` record
 *     and the sweep goes on. A workspace_bytes over 2^50 fails the case. What the plugin prints on stdout
 *     goes to faprobe's stderr.
 *
 * LAYOUTS (all row-major, element sizes as the dtype says; see faprobe_dtype)
 *   Q, O: (batch, seq_q, heads, head_dim): element [b][s][h][d] at ((b*seq_q + s)*heads + h)*head_dim + d.
 *   K, V: kv_rows storage rows of (kv_heads, head_dim): head h of storage row r at (r*kv_heads + h)*head_dim.
 *         Where key `j` (0 <= j < keys of entry b) of batch entry b lives:
 *           contiguous (page_size == 0):  row seq_starts[b] + j
 *               equal lengths: seq_starts[b] = b*seq_k, i.e. the usual (batch, seq_k, kv_heads, head_dim);
 *               variable lengths (seqlens != NULL, decode only): the entries packed one after the other,
 *               flash-attention's varlen layout with cu_seqlens = seq_starts;
 *           paged (page_size > 0):        row block_table[b*pages_per_seq + j/page_size]*page_size + j%page_size
 *               pages of page_size rows anywhere in a pool (flash-attention's KV-cache API: k_cache,
 *               v_cache and block_table; vLLM's PagedAttention); rows of a page past its entry's last key
 *               hold NaN, so a kernel that reads them and lets them reach O fails the check.
 *         The keys of entry b: seqlens[b] when seqlens != NULL, else seq_k; always equal to
 *         seq_starts[b+1] - seq_starts[b], in every layout. Widen block_table entries to 64 bits before
 *         multiplying by page_size (a pool may exceed 2^31 elements).
 *   LSE:  fp32 (batch, heads, seq_q), flash-attention's softmax_lse: ln sum_j exp(scale * q.k_j) over the
 *         keys the row sees (natural log, scaled scores), -INFINITY for a row that sees no key.
 *   Attention: O[b,s,h] = softmax_j(scale * Q[b,s,h] . K[b,j,h/(heads/kv_heads)]) . V[...] (GQA/MQA: query
 *         head h reads KV head h / (heads / kv_heads)). Causal masks are bottom-right aligned: query row s
 *         sees keys j <= s + keys - seq_q; a row that sees no key outputs zeros.
 *   fp8_e4m3: Q, K, V hold e4m3 codes of value / fp8_scale (the real value is code * fp8_scale, the same
 *         scale for all three); O is bf16.
 *
 * VERSIONING
 *   FAPROBE_PLUGIN_ABI_VERSION changes whenever a structure here changes incompatibly; faprobe refuses a
 *   plugin built for another version, naming both (exit status 2). Fields are only ever added at the end of
 *   faprobe_case, faprobe_tensors and faprobe_run_context (which faprobe fills), so version 1 plugins read
 *   them unchanged.
 */
#ifndef FAPROBE_PLUGIN_H
#define FAPROBE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAPROBE_PLUGIN_ABI_VERSION 1

/* The element types. Storage: fp32 4 bytes; fp16 (IEEE binary16) and bf16 2 bytes; fp8_e4m3 1 byte (OCP
 * e4m3fn). The output O has the input dtype, except fp8_e4m3, whose output is bf16. */
typedef enum faprobe_dtype {
  FAPROBE_DTYPE_FP32 = 0,
  FAPROBE_DTYPE_FP16 = 1,
  FAPROBE_DTYPE_BF16 = 2,
  FAPROBE_DTYPE_FP8_E4M3 = 3
} faprobe_dtype;

typedef enum faprobe_mask { FAPROBE_MASK_NONE = 0, FAPROBE_MASK_CAUSAL = 1 } faprobe_mask;

/* decode: seq_q is 1 (one new query per batch entry), and the entries may have keys of their own lengths. */
typedef enum faprobe_mode { FAPROBE_MODE_PREFILL = 0, FAPROBE_MODE_DECODE = 1 } faprobe_mode;

/* Where an implementation's buffers live and how it is timed. */
typedef enum faprobe_device {
  FAPROBE_DEVICE_CPU = 0,  /* host memory; wall clock around run */
  FAPROBE_DEVICE_CUDA = 1  /* device memory on CUDA device 0; CUDA events on `stream` around run */
} faprobe_device;

/* Flags of an implementation. */
#define FAPROBE_WRITES_LSE 1u /* run writes tensors->lse; faprobe then checks it against the reference */

/* One attention problem: every field of faprobe's case. Integers are int64_t, enums int32_t. */
typedef struct faprobe_case {
  int64_t batch;     /* batch entries */
  int64_t heads;     /* query heads */
  int64_t kv_heads;  /* key/value heads; heads % kv_heads == 0 (MHA: equal, GQA, MQA: 1) */
  int64_t seq_q;     /* query rows per entry (1 in decode) */
  int64_t seq_k;     /* keys per entry; with seqlens, the longest entry's */
  int64_t head_dim;
  int32_t dtype;     /* a faprobe_dtype */
  int32_t mask;      /* a faprobe_mask */
  int32_t mode;      /* a faprobe_mode */
  int32_t reserved;  /* 0 */
  uint64_t seed;     /* the input generator's seed (inputs are already filled; for the curious) */
  int64_t page_size; /* 0: contiguous K/V; else a paged cache with pages of this many keys (16..256, 2^n) */
  const int64_t* seqlens; /* decode: batch key lengths, one per entry; NULL: every entry has seq_k keys.
                           * A host pointer, also for CUDA (kernels read tensors->seq_starts instead) */
  int64_t splits;    /* split-K implementations: key splits the user asked for; 0 = your own choice */
  float scale;       /* the softmax scale 1/sqrt(head_dim), rounded to float (the reference uses double) */
  float fp8_scale;   /* fp8_e4m3: the real value of an input code is code * fp8_scale; 1 otherwise */
} faprobe_case;

/* The buffers of one case, on the implementation's device (host pointers for FAPROBE_DEVICE_CPU, device
 * pointers on device 0 for FAPROBE_DEVICE_CUDA), the index arrays seq_starts and block_table included.
 * See LAYOUTS above. */
typedef struct faprobe_tensors {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;                 /* NULL unless the implementation has FAPROBE_WRITES_LSE */
  int64_t kv_rows;            /* storage rows of K and V (with a page pool's padding) */
  const int32_t* seq_starts;  /* batch + 1 entries, never NULL, in every layout: the running total of the
                               * entries' key counts (seq_starts[0] = 0; entry b has seq_starts[b+1] -
                               * seq_starts[b] keys), flash-attention's cu_seqlens_k */
  const int32_t* block_table; /* paged: batch * pages_per_seq pool pages, -1 past an entry's last; else NULL */
  int64_t pages_per_seq;      /* paged: the block table's columns; else 0 */
  void* workspace;            /* workspace_bytes(case) bytes, uninitialised; NULL when that is 0 */
  size_t workspace_bytes;
} faprobe_tensors;

/* What run gets besides the buffers. */
typedef struct faprobe_run_context {
  void* stream;  /* FAPROBE_DEVICE_CUDA: the cudaStream_t to queue all work on; NULL for the CPU */
  int32_t threads;  /* CPU threads to use, >= 1: --threads, or all cores (per-thread scratch: allocate) */
  int32_t reserved; /* 0 */
  /* Scratch memory on the implementation's device, counted in the record's peak and workspace bytes.
   * allocate returns NULL when there is none to give; memory not released by the end of the case is
   * released then. For CUDA it is stream-ordered on `stream`. Call as context->allocate(context->allocator, n). */
  void* (*allocate)(void* allocator, size_t bytes);
  void (*release)(void* allocator, void* pointer);
  void* allocator;
  char* error;       /* where run writes why it failed (NUL-terminated) */
  size_t error_size; /* bytes available at error, the NUL included; at least 256 */
} faprobe_run_context;

typedef struct faprobe_implementation faprobe_implementation;
struct faprobe_implementation {
  /* The name after `plugin.`: letters, digits, '_', '-' and '.', at most 64 characters, unique among the
   * implementations faprobe has loaded. */
  const char* name;
  int32_t device;  /* a faprobe_device */
  uint32_t flags;  /* FAPROBE_WRITES_LSE or 0 */
  /* NULL when the case is supported, else the reason (see THREADS, OWNERSHIP, ERRORS). Required. */
  const char* (*supports)(const faprobe_implementation* self, const faprobe_case* c);
  /* Bytes of workspace faprobe allocates for the case (tensors->workspace). May be NULL: none. */
  uint64_t (*workspace_bytes)(const faprobe_implementation* self, const faprobe_case* c);
  /* One forward pass: fills tensors->o (and tensors->lse with FAPROBE_WRITES_LSE). Returns 0, or nonzero
   * with a message in context->error. Required. */
  int (*run)(const faprobe_implementation* self, const faprobe_case* c, const faprobe_tensors* tensors,
             const faprobe_run_context* context);
  void* user_data;  /* the plugin's own; faprobe never reads it */
};

typedef struct faprobe_plugin {
  uint32_t abi_version;  /* FAPROBE_PLUGIN_ABI_VERSION of the header the plugin was built with */
  uint32_t implementation_count;
  const faprobe_implementation* implementations;
} faprobe_plugin;

#define FAPROBE_PLUGIN_ENTRY_SYMBOL "faprobe_plugin_entry"

#if defined(_WIN32)
#define FAPROBE_PLUGIN_EXPORT __declspec(dllexport)
#else
#define FAPROBE_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Declares the entry point; define it once in the plugin:
 *   FAPROBE_PLUGIN_ENTRY { static const faprobe_plugin plugin = {FAPROBE_PLUGIN_ABI_VERSION, 1, &mine};
 *                          return &plugin; } */
#ifdef __cplusplus
#define FAPROBE_PLUGIN_ENTRY extern "C" FAPROBE_PLUGIN_EXPORT const faprobe_plugin* faprobe_plugin_entry(void)
#else
#define FAPROBE_PLUGIN_ENTRY FAPROBE_PLUGIN_EXPORT const faprobe_plugin* faprobe_plugin_entry(void)
#endif

typedef const faprobe_plugin* (*faprobe_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* FAPROBE_PLUGIN_H */
