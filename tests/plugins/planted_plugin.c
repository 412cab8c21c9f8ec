/* Planted plugins: one source, one defect per build (PLANT_<KIND>, tests/CMakeLists.txt), each what a
 * user's library can get wrong and what faprobe must refuse or catch (tests/test_plugins.cpp):
 *   loading      ABI_VERSION (built for version 999), NO_ENTRY (exports no faprobe_plugin_entry),
 *                BAD_NAME, NULL_RUN, BAD_DEVICE, TWICE (one name twice), NULL_ENTRY (entry returns NULL);
 *   running      RUN_FAILS (returns 3 with a message), WRITES_NOTHING (returns 0, O untouched),
 *                SKIPS_LSE (claims the LSE, writes O only: a copy of K's first rows, which is wrong too,
 *                but the LSE check must say so on its own), ALLOCATES (takes 1 MiB of scratch through
 *                context->allocate, writes nothing), BAD_UTF8 (run fails with a message that is not UTF-8),
 *                PRINTS_STDOUT (printf("dbg"), no newline, in supports and in run), CHATTY_STDERR (run writes
 *                1 MiB to stderr per call);
 *   entry points SUPPORTS_CRASHES, SUPPORTS_HANGS, WORKSPACE_CRASHES, WORKSPACE_HANGS (at seq_k 64 only; other
 *                cases are supported and run as WRITES_NOTHING), WORKSPACE_HUGE (asks for 2^64 - 1 bytes);
 *   damaged      CONSTRUCTOR_CRASHES (a constructor that crashes while the library loads).
 * The output of the running kinds is wrong on purpose; only the check's verdict and the record matter. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "faprobe/plugin.h"

#if defined(PLANT_SUPPORTS_CRASHES) || defined(PLANT_WORKSPACE_CRASHES) || defined(PLANT_CONSTRUCTOR_CRASHES)
static void crash(void) {
  signal(SIGSEGV, SIG_DFL); /* past any handler a sanitizer installed: die as a real crash would */
  raise(SIGSEGV);
}
#endif
#if defined(PLANT_SUPPORTS_HANGS) || defined(PLANT_WORKSPACE_HANGS)
static void hang(void) {
  for (;;) sleep(1);
}
#endif
#if defined(PLANT_CONSTRUCTOR_CRASHES)
__attribute__((constructor)) static void crash_while_loading(void) { crash(); }
#endif

static const char* supports_fp32(const faprobe_implementation* self, const faprobe_case* c) {
  (void)self;
#if defined(PLANT_SUPPORTS_CRASHES)
  if (c->seq_k == 64) crash();
#elif defined(PLANT_SUPPORTS_HANGS)
  if (c->seq_k == 64) hang();
#elif defined(PLANT_PRINTS_STDOUT)
  printf("dbg");
#endif
  return c->dtype == FAPROBE_DTYPE_FP32 ? NULL : "fp32 only";
}

#if defined(PLANT_WORKSPACE_CRASHES) || defined(PLANT_WORKSPACE_HANGS) || defined(PLANT_WORKSPACE_HUGE)
static uint64_t workspace_bytes(const faprobe_implementation* self, const faprobe_case* c) {
  (void)self;
#if defined(PLANT_WORKSPACE_CRASHES)
  if (c->seq_k == 64) crash();
#elif defined(PLANT_WORKSPACE_HANGS)
  if (c->seq_k == 64) hang();
#else
  (void)c;
  return ~(uint64_t)0;
#endif
  return 0;
}
#define WORKSPACE workspace_bytes
#else
#define WORKSPACE NULL
#endif

#if !defined(PLANT_NULL_RUN)
static int run(const faprobe_implementation* self, const faprobe_case* c, const faprobe_tensors* tensors,
               const faprobe_run_context* context) {
  (void)self;
  (void)c;
  (void)tensors;
  (void)context;
#if defined(PLANT_RUN_FAILS)
  strncpy(context->error, "planted: the kernel refused to launch", context->error_size - 1);
  return 3;
#elif defined(PLANT_BAD_UTF8)
  strncpy(context->error, "planted: bad \xff\xfe bytes \xc3", context->error_size - 1);
  return 3;
#elif defined(PLANT_PRINTS_STDOUT)
  printf("dbg");
  return 0;
#elif defined(PLANT_CHATTY_STDERR)
  {
    static char line[1024];
    int i;
    memset(line, 'x', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\n';
    for (i = 0; i < 1024; ++i) fwrite(line, 1, sizeof(line), stderr);
    return 0;
  }
#elif defined(PLANT_SKIPS_LSE)
  memset(tensors->o, 0, (size_t)(c->batch * c->seq_q * c->heads * c->head_dim) * sizeof(float));
  return 0;
#elif defined(PLANT_ALLOCATES)
  {
    const size_t bytes = (size_t)1 << 20;
    char* scratch = (char*)context->allocate(context->allocator, bytes);
    if (scratch == NULL) {
      strncpy(context->error, "no scratch memory", context->error_size - 1);
      return 1;
    }
    memset(scratch, 0, bytes);
    context->release(context->allocator, scratch);
    return 0;
  }
#else
  return 0; /* WRITES_NOTHING, and every loading kind (never run) */
#endif
}
#endif

#if defined(PLANT_BAD_NAME)
#define NAME "has space"
#else
#define NAME PLANT_NAME /* the kind, "run_fails": a name of its own, so that any of them load together */
#endif

#if defined(PLANT_BAD_DEVICE)
#define DEVICE 7
#else
#define DEVICE FAPROBE_DEVICE_CPU
#endif

#if defined(PLANT_SKIPS_LSE)
#define FLAGS FAPROBE_WRITES_LSE
#else
#define FLAGS 0u
#endif

#if defined(PLANT_NULL_RUN)
#define RUN NULL
#else
#define RUN run
#endif

static const faprobe_implementation implementations[] = {
    {NAME, DEVICE, FLAGS, supports_fp32, WORKSPACE, RUN, NULL},
    {NAME, DEVICE, FLAGS, supports_fp32, WORKSPACE, RUN, NULL}, /* listed only by TWICE */
};

#if defined(PLANT_TWICE)
#define COUNT 2u
#else
#define COUNT 1u
#endif

#if defined(PLANT_ABI_VERSION)
#define ABI_VERSION 999u
#else
#define ABI_VERSION FAPROBE_PLUGIN_ABI_VERSION
#endif

#if defined(PLANT_NO_ENTRY)
FAPROBE_PLUGIN_EXPORT const faprobe_plugin* some_other_entry(void) {
  (void)implementations;
  return NULL;
}
#else
FAPROBE_PLUGIN_ENTRY {
#if defined(PLANT_NULL_ENTRY)
  (void)implementations;
  return NULL;
#else
  static const faprobe_plugin plugin = {ABI_VERSION, COUNT, implementations};
  return &plugin;
#endif
}
#endif
