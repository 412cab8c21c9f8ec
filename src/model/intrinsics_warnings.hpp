// FAPROBE_INTRINSICS_WARNINGS_OFF / _ON: around the #include of a header full of x86 intrinsics (Eigen's,
// <immintrin.h>), they turn off GCC 12's false -Wmaybe-uninitialized and -Wuninitialized inside the
// AVX-512 intrinsics (GCC bug 105593: model/eigen.hpp says more) for that header's text alone; every
// warning stays on in faprobe's own code. Nothing on other compilers.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define FAPROBE_INTRINSICS_WARNINGS_OFF                                                          \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define FAPROBE_INTRINSICS_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define FAPROBE_INTRINSICS_WARNINGS_OFF
#define FAPROBE_INTRINSICS_WARNINGS_ON
#endif
