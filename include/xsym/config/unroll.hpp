#ifndef XSYM_CONFIG_UNROLL_HPP
#define XSYM_CONFIG_UNROLL_HPP

// XSYM_UNROLL(n) before a loop: GCC's `#pragma GCC unroll n`, which keeps a kernel's
// accumulators in registers. nvcc's front end does not know the pragma and warns at each
// (20 warnings for a one-function program that includes <xsym/gpu.hpp>); with the warning
// suppressed for it, nvcc passes it on to the host compiler.
#define XSYM_PRAGMA(text) _Pragma(#text)
#if defined(__NVCC__)
#define XSYM_UNROLL(n) \
  XSYM_PRAGMA(nv_diagnostic push) XSYM_PRAGMA(nv_diag_suppress 1675) XSYM_PRAGMA(GCC unroll n) XSYM_PRAGMA(nv_diagnostic pop)
#elif defined(__GNUC__)
#define XSYM_UNROLL(n) XSYM_PRAGMA(GCC unroll n)
#else
#define XSYM_UNROLL(n)
#endif

#endif
