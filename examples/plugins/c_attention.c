/* c_attention: exact attention for faprobe's plugin ABI (include/faprobe/plugin.h), in plain C99.
 *
 * The idea: every query row is done on its own, in two passes over the keys it sees, in double: the first
 * computes the scaled scores and their maximum, the second sums exp(score - row_max) and the V rows it
 * weights. Nothing is tiled or vectorised; it is meant to be read, and to be obviously right.
 *
 * The loops, for batch entry b, query row s and query head h:
 *     kv_head = h / (heads / kv_heads)                                       (GQA, MQA)
 *     seen    = the keys row s sees: all `keys` of entry b, or under the causal mask (bottom-right aligned)
 *               those with j <= s + keys - seq_q
 *     pass 1  score[j] = scale * Q[b,s,h] . K[b,j,kv_head], row_max = max_j score[j]        (j < seen)
 *     pass 2  row_sum = sum_j exp(score[j] - row_max), acc = sum_j exp(score[j] - row_max) * V[b,j,kv_head]
 *     output  O[b,s,h] = acc / row_sum, LSE[b,h,s] = row_max + ln(row_sum); zeros and -inf when seen == 0.
 * K and V rows are found by one helper, kv_storage_row, for all three layouts (contiguous, variable lengths
 * packed one after the other, paged through the block table). Scores, the query row and the accumulator live
 * in faprobe's workspace (so that faprobe counts them), (seq_k + 2 * head_dim) doubles.
 *
 * Napkin math: FLOPs = 4 * batch * heads * seq_q * avg_keys * head_dim (two per multiply-add, Q.K and P.V),
 * about half the square under a causal mask. Bytes: Q and O are read and written once, batch * seq_q *
 * heads * head_dim elements each; K and V (kv_rows * kv_heads * head_dim elements each) are read once from
 * memory and then again for every query row of every head that shares them, from cache (a (b, kv_head)'s
 * keys are keys * head_dim * 4 bytes in fp32: 256 KiB at 1024 keys and head_dim 64). Scalar double loops
 * run at about 1 FLOP per cycle, so it is compute-bound: batch 1, heads 8, seq 1024, head_dim 64, fp32 is
 * 2.1 GFLOP, measured at 0.7 s (0.3 s causal) on one x86-64 core, 3 GFLOP/s. It is single-threaded and
 * ignores context->threads.
 *
 * Dtypes: fp32 and bf16 (bf16 is the upper 16 bits of an fp32; outputs are rounded to nearest even).
 * With -DFAPROBE_EXAMPLE_OFF_BY_ONE_CAUSAL it is c_attention_off_by_one, with a planted defect: under the
 * causal mask each row sees one key too many, the classic off-by-one that `faprobe verify` must catch.
 * With -DFAPROBE_EXAMPLE_SLOWDOWN_PERCENT=P (0 to 100, default 0) it is a planted regression of known size,
 * for measuring the power of `faprobe ab`: P % of the (b, s, h) rows, spread evenly over them (so also about
 * P % of a causal case's work), are computed a second time, in a pass after all rows, into O and the LSE again,
 * with the same values: as correct, about P % slower (P = 15: 1.13 to 1.17 times the time of P = 0, gcc 12 and
 * clang 14 at -O3, 256 keys, head_dim 64), and under the same name. faprobe_example_rows_repeated() (exported
 * only then, for the tests) counts the rows computed twice since the library was loaded.
 *
 * Build:
 *   cc -std=c99 -O2 -Wall -Wextra -Werror -pedantic -shared -fPIC -I include examples/plugins/c_attention.c -o libc_attention.so -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "faprobe/plugin.h"

#ifdef FAPROBE_EXAMPLE_OFF_BY_ONE_CAUSAL /* the planted defect: a causal row sees one key past its last */
#define CAUSAL_EXTRA_KEYS 1
#define IMPLEMENTATION_NAME "c_attention_off_by_one"
#else
#define CAUSAL_EXTRA_KEYS 0
#define IMPLEMENTATION_NAME "c_attention"
#endif

#ifndef FAPROBE_EXAMPLE_SLOWDOWN_PERCENT /* the planted regression: this percent of the rows done twice */
#define FAPROBE_EXAMPLE_SLOWDOWN_PERCENT 0
#endif
#if FAPROBE_EXAMPLE_SLOWDOWN_PERCENT < 0 || FAPROBE_EXAMPLE_SLOWDOWN_PERCENT > 100
#error "FAPROBE_EXAMPLE_SLOWDOWN_PERCENT is a percent of the rows: 0 to 100"
#endif

/* ---- Elements: fp32 as is, bf16 as the upper half of an fp32. ---- */

static float bf16_to_float(uint16_t bits) {
  uint32_t wide = (uint32_t)bits << 16; /* bf16 is an fp32 with the low 16 mantissa bits cut off */
  float value;
  memcpy(&value, &wide, sizeof value);
  return value;
}

static uint16_t float_to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  if (isnan(value)) return (uint16_t)((bits >> 16) | 0x0040u); /* keep it a NaN: set the quiet bit */
  /* Round to nearest, ties to even: add just under half of the dropped part's unit (0x7FFF), plus one
   * when the kept part is odd, so that an exact half rounds towards the even neighbour. */
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static double load_element(const void* data, int32_t dtype, int64_t index) {
  if (dtype == FAPROBE_DTYPE_BF16) return bf16_to_float(((const uint16_t*)data)[index]);
  return ((const float*)data)[index];
}

static void store_element(void* data, int32_t dtype, int64_t index, double value) {
  if (dtype == FAPROBE_DTYPE_BF16) {
    ((uint16_t*)data)[index] = float_to_bf16((float)value);
  } else {
    ((float*)data)[index] = (float)value;
  }
}

/* ---- The case's geometry (the header's LAYOUTS section). ---- */

/* The keys of batch entry b. */
static int64_t keys_of(const faprobe_case* c, int64_t b) { return c->seqlens != NULL ? c->seqlens[b] : c->seq_k; }

/* How many of its entry's keys query row s sees: keys 0 .. seen - 1. */
static int64_t visible_keys(const faprobe_case* c, int64_t s, int64_t keys) {
  int64_t seen;
  if (c->mask != FAPROBE_MASK_CAUSAL) return keys;
  /* Bottom-right aligned: the last query row sees every key, row s the keys j <= s + keys - seq_q. */
  seen = s + keys - c->seq_q + 1 + CAUSAL_EXTRA_KEYS;
  if (seen < 0) return 0;
  return seen < keys ? seen : keys;
}

/* The storage row of K and V that holds key j of batch entry b. */
static int64_t kv_storage_row(const faprobe_case* c, const faprobe_tensors* t, int64_t b, int64_t j) {
  if (c->page_size == 0) return t->seq_starts[b] + j; /* contiguous, equal or variable lengths */
  return (int64_t)t->block_table[b * t->pages_per_seq + j / c->page_size] * c->page_size + j % c->page_size;
}

/* Element index of Q[b][s][h][0] (and of O's). */
static int64_t query_offset(const faprobe_case* c, int64_t b, int64_t s, int64_t h) {
  return ((b * c->seq_q + s) * c->heads + h) * c->head_dim;
}

/* Element index of head kv_head of K's (and V's) storage row `row`. */
static int64_t kv_offset(const faprobe_case* c, int64_t row, int64_t kv_head) {
  return (row * c->kv_heads + kv_head) * c->head_dim;
}

/* ---- One query row. ---- */

/* Scratch for one row, carved out of the workspace. */
typedef struct row_scratch {
  double* score; /* seq_k: the scaled scores of the keys the row sees */
  double* query; /* head_dim: the query row, converted once */
  double* acc;   /* head_dim: sum_j exp(score[j] - row_max) * V[j] */
} row_scratch;

/* Inlined at both of its calls: without, gcc 12 -O3 inlines it only while there is one (the normal build), and
 * the build that repeats 1 % of the rows ran 8 % slower, not 1 % (256 keys, head_dim 64). */
#if defined(__GNUC__)
#define ROW_INLINE __attribute__((always_inline)) inline
#else
#define ROW_INLINE inline
#endif

static ROW_INLINE void attend_row(const faprobe_case* c, const faprobe_tensors* t, int64_t b, int64_t s, int64_t h,
                                  const row_scratch* scratch) {
  const int64_t head_dim = c->head_dim;
  const int64_t kv_head = h / (c->heads / c->kv_heads);
  const int64_t keys = keys_of(c, b);
  const int64_t seen = visible_keys(c, s, keys);
  const int64_t q_at = query_offset(c, b, s, h);
  const int64_t lse_at = (b * c->heads + h) * c->seq_q + s;
  double row_max = -INFINITY, row_sum = 0.0;
  int64_t j, d;

  if (seen == 0) { /* a row that sees no key: zeros, and the log of an empty sum */
    for (d = 0; d < head_dim; ++d) store_element(t->o, c->dtype, q_at + d, 0.0);
    if (t->lse != NULL) t->lse[lse_at] = -INFINITY;
    return;
  }

  for (d = 0; d < head_dim; ++d) scratch->query[d] = load_element(t->q, c->dtype, q_at + d);

  /* Pass 1: the scaled scores and their maximum. */
  for (j = 0; j < seen; ++j) {
    const int64_t k_at = kv_offset(c, kv_storage_row(c, t, b, j), kv_head);
    double dot = 0.0;
    for (d = 0; d < head_dim; ++d) dot += scratch->query[d] * load_element(t->k, c->dtype, k_at + d);
    scratch->score[j] = (double)c->scale * dot;
    if (scratch->score[j] > row_max) row_max = scratch->score[j];
  }

  /* Pass 2: exp(score - row_max) is at most 1, so neither the sum nor the weighted V sum overflows. */
  for (d = 0; d < head_dim; ++d) scratch->acc[d] = 0.0;
  for (j = 0; j < seen; ++j) {
    const int64_t v_at = kv_offset(c, kv_storage_row(c, t, b, j), kv_head);
    const double p = exp(scratch->score[j] - row_max);
    row_sum += p;
    for (d = 0; d < head_dim; ++d) scratch->acc[d] += p * load_element(t->v, c->dtype, v_at + d);
  }

  for (d = 0; d < head_dim; ++d) store_element(t->o, c->dtype, q_at + d, scratch->acc[d] / row_sum);
  if (t->lse != NULL) t->lse[lse_at] = (float)(row_max + log(row_sum));
}

/* ---- The planted regression (FAPROBE_EXAMPLE_SLOWDOWN_PERCENT). ---- */

/* Rows computed a second time since the library was loaded (run is called one call at a time). */
static uint64_t rows_repeated = 0;

/* Whether row `row` (of rows counted (b * seq_q + s) * heads + h) is one of the repeated share: those where
 * floor(row * P / 100) steps up, which spreads floor(rows * P / 100) of them evenly over the rows. */
static int is_repeated_row(int64_t row) {
  const int64_t percent = FAPROBE_EXAMPLE_SLOWDOWN_PERCENT;
  return (row + 1) * percent / 100 > row * percent / 100;
}

#if FAPROBE_EXAMPLE_SLOWDOWN_PERCENT > 0
/* For the tests: faprobe never calls it (the plugin ABI has no field for it). */
FAPROBE_PLUGIN_EXPORT uint64_t faprobe_example_rows_repeated(void);
FAPROBE_PLUGIN_EXPORT uint64_t faprobe_example_rows_repeated(void) { return rows_repeated; }
#endif

/* ---- The implementation's functions. ---- */

static const char* c_attention_supports(const faprobe_implementation* self, const faprobe_case* c) {
  (void)self;
  if (c->dtype != FAPROBE_DTYPE_FP32 && c->dtype != FAPROBE_DTYPE_BF16) return "dtype must be fp32 or bf16";
  return NULL;
}

static uint64_t c_attention_workspace_bytes(const faprobe_implementation* self, const faprobe_case* c) {
  (void)self;
  return (uint64_t)(c->seq_k + 2 * c->head_dim) * sizeof(double);
}

static int c_attention_run(const faprobe_implementation* self, const faprobe_case* c, const faprobe_tensors* t,
                           const faprobe_run_context* context) {
  row_scratch scratch;
  int64_t b, s, h;
  (void)self;
  if (t->workspace == NULL || t->workspace_bytes < c_attention_workspace_bytes(self, c)) {
    if (context->error_size > 0) snprintf(context->error, context->error_size, "the workspace is missing or too small");
    return 1;
  }
  scratch.score = (double*)t->workspace;
  scratch.query = scratch.score + c->seq_k;
  scratch.acc = scratch.query + c->head_dim;

  for (b = 0; b < c->batch; ++b) {
    for (s = 0; s < c->seq_q; ++s) {
      for (h = 0; h < c->heads; ++h) attend_row(c, t, b, s, h, &scratch);
    }
  }
  /* The planted regression: the repeated rows done again, written over the first results (the stores into O,
   * a pointer from faprobe, keep the compiler from dropping the work). A pass of its own, so that the loop
   * above is compiled as in the normal build. */
  if (FAPROBE_EXAMPLE_SLOWDOWN_PERCENT > 0) {
    for (b = 0; b < c->batch; ++b) {
      for (s = 0; s < c->seq_q; ++s) {
        for (h = 0; h < c->heads; ++h) {
          if (!is_repeated_row((b * c->seq_q + s) * c->heads + h)) continue;
          attend_row(c, t, b, s, h, &scratch);
          ++rows_repeated;
        }
      }
    }
  }
  return 0;
}

static const faprobe_implementation c_attention = {
    .name = IMPLEMENTATION_NAME,
    .device = FAPROBE_DEVICE_CPU,
    .flags = FAPROBE_WRITES_LSE,
    .supports = c_attention_supports,
    .workspace_bytes = c_attention_workspace_bytes,
    .run = c_attention_run,
    .user_data = NULL};

FAPROBE_PLUGIN_ENTRY {
  static const faprobe_plugin plugin = {FAPROBE_PLUGIN_ABI_VERSION, 1, &c_attention};
  return &plugin;
}
