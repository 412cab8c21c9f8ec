// Eigen, included here and nowhere else (tests/test_layers.cpp checks that), so that one place holds what
// its headers need from the compiler.
//
// GCC 12 reports -Wmaybe-uninitialized inside avx512fintrin.h when it inlines Eigen's AVX-512 packet code
// (the matrix-vector products of reference/ among them) with -march=native on a machine with AVX-512: the
// intrinsics start from _mm512_undefined_*(), a value that is uninitialized on purpose (GCC bug 105593,
// fixed in GCC 13; where the inlined value is certain, the same bug says -Wuninitialized). It is a false positive in a system header, not a fault of ours or Eigen's, and with
// FAPROBE_WERROR it failed the build on every AVX-512 server. So this one warning is off for the text of
// Eigen and the intrinsics headers it brings in, which this header includes first; every other warning,
// and this one in faprobe's own code, stays on. CI compiles for -march=x86-64-v4 to keep it so.
#pragma once

#include "model/intrinsics_warnings.hpp"

FAPROBE_INTRINSICS_WARNINGS_OFF
#include <Eigen/Core>
FAPROBE_INTRINSICS_WARNINGS_ON
