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
// Without optimisation GCC 12 defines these two blends as macros whose C-style casts reject
// xsimd's integer batches (which convert to __m512i only implicitly): xsimd's select fails to
// compile at -O0 on every AVX-512BW machine. Where they are macros they become the functions
// that GCC defines when optimising.
#if defined(__AVX512BW__) && defined(_mm512_mask_blend_epi8) && defined(_mm512_mask_blend_epi16)
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
extern __inline __m512i __attribute__((__gnu_inline__, __always_inline__, __artificial__))
_mm512_mask_blend_epi8(__mmask64 u, __m512i a, __m512i w) {
  return (__m512i)__builtin_ia32_blendmb_512_mask((__v64qi)a, (__v64qi)w, u);
}
extern __inline __m512i __attribute__((__gnu_inline__, __always_inline__, __artificial__))
_mm512_mask_blend_epi16(__mmask32 u, __m512i a, __m512i w) {
  return (__m512i)__builtin_ia32_blendmw_512_mask((__v32hi)a, (__v32hi)w, u);
}
#endif
#endif

#endif
