#ifndef XSYM_CONFIG_LINKAGE_HPP
#define XSYM_CONFIG_LINKAGE_HPP

// Header-only by default: every definition is inline, and each program that includes xsym
// compiles all of the runtime it reaches (building a function reaches every rewrite and kernel).
//
// With XSYM_COMPILED_LIB defined, a program's files see only the declarations of the runtime's
// entry points (building a function, grad, printing reports, reading flags); their one
// definition is compiled once, in src/xsym_runtime.cpp (the CMake target xsym::runtime). Each
// file then compiles only what it calls directly. Both sides must be built with the same
// XSYM_PROFILING and OpenMP setting and for the same vector instructions (-march): a mismatch
// fails to link, naming the setting. (A typed tree's kernel, compiled in the program, computes
// bit for bit what the runtime's kernels compute only where both use the same instructions.)
#if defined(XSYM_COMPILED_LIB) && !defined(XSYM_BUILDING_RUNTIME)
#define XSYM_RUNTIME_DEFINITIONS 0
#define XSYM_RUNTIME_VARIABLE extern
#else
#define XSYM_RUNTIME_DEFINITIONS 1
#endif

#ifdef XSYM_COMPILED_LIB
#define XSYM_RUNTIME_INLINE
#ifndef XSYM_RUNTIME_VARIABLE
#define XSYM_RUNTIME_VARIABLE
#endif
#else
#define XSYM_RUNTIME_INLINE inline
#define XSYM_RUNTIME_VARIABLE inline
#endif

#ifdef XSYM_COMPILED_LIB
#ifndef XSYM_PROFILING
#define XSYM_LINKAGE_PROFILING 1
#else
#define XSYM_LINKAGE_PROFILING XSYM_PROFILING
#endif
// The vector instructions xsimd chooses from (its default architecture), FMA included: without
// it a fused multiply-add rounds twice.
#if defined(__AVX512BW__)
#define XSYM_LINKAGE_VECTORS avx512bw
#elif defined(__AVX512DQ__)
#define XSYM_LINKAGE_VECTORS avx512dq
#elif defined(__AVX512CD__)
#define XSYM_LINKAGE_VECTORS avx512cd
#elif defined(__AVX512F__)
#define XSYM_LINKAGE_VECTORS avx512f
#elif defined(__AVX2__) && defined(__FMA__)
#define XSYM_LINKAGE_VECTORS avx2_fma
#elif defined(__AVX2__)
#define XSYM_LINKAGE_VECTORS avx2
#elif defined(__AVX__) && defined(__FMA__)
#define XSYM_LINKAGE_VECTORS avx_fma
#elif defined(__AVX__)
#define XSYM_LINKAGE_VECTORS avx
#elif defined(__SSE4_2__)
#define XSYM_LINKAGE_VECTORS sse4_2
#elif defined(__SSE4_1__)
#define XSYM_LINKAGE_VECTORS sse4_1
#elif defined(__SSSE3__)
#define XSYM_LINKAGE_VECTORS ssse3
#elif defined(__SSE3__)
#define XSYM_LINKAGE_VECTORS sse3
#elif defined(__SSE2__)
#define XSYM_LINKAGE_VECTORS sse2
#elif defined(__ARM_NEON)
#define XSYM_LINKAGE_VECTORS neon
#else
#define XSYM_LINKAGE_VECTORS scalar
#endif
#define XSYM_LINKAGE_CAT_(a, b) a##b
#define XSYM_LINKAGE_CAT(a, b) XSYM_LINKAGE_CAT_(a, b)
#define XSYM_LINKAGE_VECTORS_SYMBOL XSYM_LINKAGE_CAT(runtime_built_for_vectors_, XSYM_LINKAGE_VECTORS)

namespace xsym::detail {
// Defined only by the runtime built with the same settings, so a mismatch is a link error
// whose undefined symbol names the setting that differs.
#if XSYM_LINKAGE_PROFILING
extern const int runtime_built_with_XSYM_PROFILING_1;
#else
extern const int runtime_built_with_XSYM_PROFILING_0;
#endif
#ifdef _OPENMP
extern const int runtime_built_with_openmp;
#else
extern const int runtime_built_without_openmp;
#endif
extern const int XSYM_LINKAGE_VECTORS_SYMBOL;
#ifndef XSYM_BUILDING_RUNTIME
// Emitted in every file that includes xsym (internal linkage, kept though unused), so every
// link checks the settings.
[[gnu::used]] static const int* const runtime_settings_check[] = {
#if XSYM_LINKAGE_PROFILING
    &runtime_built_with_XSYM_PROFILING_1,
#else
    &runtime_built_with_XSYM_PROFILING_0,
#endif
#ifdef _OPENMP
    &runtime_built_with_openmp,
#else
    &runtime_built_without_openmp,
#endif
    &XSYM_LINKAGE_VECTORS_SYMBOL,
};
#endif
}  // namespace xsym::detail
#endif

#endif  // XSYM_CONFIG_LINKAGE_HPP
