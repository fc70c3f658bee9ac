#ifndef XSYM_CONFIG_INTRINSICS_HPP
#define XSYM_CONFIG_INTRINSICS_HPP

// The x86 intrinsic headers, included before xtensor and xsimd bring them in. GCC 12.2's
// AVX-512 intrinsics pass an uninitialised vector to their masked builtins, and with -Wall GCC
// warns (-Wuninitialized, -Wmaybe-uninitialized) at every use it inlines: about 60 warnings
// for a one-line program built with -march=native on an AVX-512 machine, none of them about the
// program. GCC fixed its headers in later releases. Warnings are silenced by where they point,
// so these two are off only for lines of the intrinsic headers, and only where xsym is
// included before them.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#endif
