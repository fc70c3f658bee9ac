#ifndef XSYM_CONFIG_LINKAGE_HPP
#define XSYM_CONFIG_LINKAGE_HPP

// Header-only by default: every definition is inline, and each program that includes xsym
// compiles all of the runtime it reaches (building a function reaches every rewrite and kernel).
//
// With XSYM_COMPILED_LIB defined, a program's files see only the declarations of the runtime's
// entry points (building a function, grad, printing reports, reading flags); their one
// definition is compiled once, in src/xsym_runtime.cpp (the CMake target xsym::runtime). Each
// file then compiles only what it calls directly. Both sides must be built with the same
// XSYM_PROFILING and OpenMP setting: a mismatch fails to link, naming the setting.
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
};
#endif
}  // namespace xsym::detail
#endif

#endif  // XSYM_CONFIG_LINKAGE_HPP
