// Only in the portable build (FAPROBE_PORTABLE_BINARY): keeps the binary startable on glibc 2.35 (Ubuntu
// 22.04, a common GPU machine) when it is built against glibc 2.36 or newer. The static libstdc++ of GCC 12
// links std::random_device (pulled in by its string instantiations; faprobe never calls it), which binds
// arc4random@GLIBC_2.36, and the dynamic loader then refuses to start the program on an older glibc. This
// definition satisfies that reference inside the binary, from getrandom(2) (glibc 2.25), so no GLIBC_2.36
// symbol is needed. scripts/build-device reports the newest glibc symbol version the binary needs.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" std::uint32_t arc4random() {
  std::uint32_t value = 0;
  for (;;) {
    const ssize_t got = getrandom(&value, sizeof value, 0);
    if (got == static_cast<ssize_t>(sizeof value)) return value;
    if (got < 0 && errno != EINTR) std::abort();  // as glibc's arc4random: no failure is reported
  }
}
