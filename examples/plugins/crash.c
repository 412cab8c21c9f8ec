/* crash: a plugin whose run() crashes, for testing how faprobe survives one.
 *
 * It claims every fp32 case on the CPU, then writes through a null pointer. Run in-process
 * (`--no-isolate`) the crash takes faprobe down with it; under --isolate, faprobe's default, each case runs
 * in a child process, and the crash becomes one `failed` record while the sweep goes on.
 *
 * Build:
 *   cc -std=c99 -O2 -Wall -Wextra -Werror -pedantic -shared -fPIC -I include examples/plugins/crash.c -o libcrash.so
 */
#include <stddef.h>

#include "faprobe/plugin.h"

static const char* crash_supports(const faprobe_implementation* self, const faprobe_case* c) {
  (void)self;
  return c->dtype == FAPROBE_DTYPE_FP32 ? NULL : "dtype must be fp32";
}

static int crash_run(const faprobe_implementation* self, const faprobe_case* c, const faprobe_tensors* tensors,
                     const faprobe_run_context* context) {
  /* volatile: the compiler may neither drop the store nor assume it away as undefined behaviour. */
  volatile int* volatile nowhere = NULL;
  (void)self;
  (void)c;
  (void)tensors;
  (void)context;
  *nowhere = 1; /* SIGSEGV */
  return 0;
}

static const faprobe_implementation crash = {
    .name = "crash",
    .device = FAPROBE_DEVICE_CPU,
    .flags = 0,
    .supports = crash_supports,
    .workspace_bytes = NULL,
    .run = crash_run,
    .user_data = NULL};

FAPROBE_PLUGIN_ENTRY {
  static const faprobe_plugin plugin = {FAPROBE_PLUGIN_ABI_VERSION, 1, &crash};
  return &plugin;
}
