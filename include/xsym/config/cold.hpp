#ifndef XSYM_CONFIG_COLD_HPP
#define XSYM_CONFIG_COLD_HPP

// XSYM_COLD_BEGIN ... XSYM_COLD_END around code that runs when a function is built, a flag is
// parsed or a report printed, never per call: GCC compiles it at -O1, which cuts the time to
// compile every program that includes xsym (all of it is inline). Only where the program is
// built at -O2 or -O3 (so -O0 and -Os builds are left as they are), and only on GCC: clang and
// nvcc see nothing. Define XSYM_NO_COLD_OPTIMIZE to compile everything at the program's level.
// Hot code must not call small functions from such a region: GCC does not inline across it.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__INTEL_COMPILER) && \
    defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__) && !defined(XSYM_NO_COLD_OPTIMIZE)
#define XSYM_COLD_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"O1\")")
#define XSYM_COLD_END _Pragma("GCC pop_options")
#else
#define XSYM_COLD_BEGIN
#define XSYM_COLD_END
#endif

#endif
