// Force-included by the AddressSanitizer build (Makefile, SANITIZE_FLAGS), which compiles at -O0
// with -march=native. At -O0 GCC 12's avx512bwintrin.h defines _mm512_mask_blend_epi8 and
// _epi16 as macros that cast their arguments to vector types, and xsimd 8.1's integer select
// (instantiated by its float64 log) passes them batches, which such a cast does not take. The
// inline functions that optimized builds get instead take the batches through their conversion.
#pragma once
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512BW__) && !defined(__OPTIMIZE__)
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
inline __m512i _mm512_mask_blend_epi8(__mmask64 u, __m512i a, __m512i w) {
  return (__m512i)__builtin_ia32_blendmb_512_mask((__v64qi)a, (__v64qi)w, u);
}
inline __m512i _mm512_mask_blend_epi16(__mmask32 u, __m512i a, __m512i w) {
  return (__m512i)__builtin_ia32_blendmw_512_mask((__v32hi)a, (__v32hi)w, u);
}
#endif
