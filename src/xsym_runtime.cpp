// The runtime's entry points, compiled once for programs built with XSYM_COMPILED_LIB
// (see include/xsym/config/linkage.hpp). Build it with the programs' XSYM_PROFILING and
// OpenMP settings and vector instructions (-march).
#ifndef XSYM_COMPILED_LIB
#define XSYM_COMPILED_LIB
#endif
#define XSYM_BUILDING_RUNTIME
#include "xsym/xsym.hpp"

namespace xsym::detail {
#if XSYM_LINKAGE_PROFILING
extern const int runtime_built_with_XSYM_PROFILING_1 = 1;
#else
extern const int runtime_built_with_XSYM_PROFILING_0 = 1;
#endif
#ifdef _OPENMP
extern const int runtime_built_with_openmp = 1;
#else
extern const int runtime_built_without_openmp = 1;
#endif
extern const int XSYM_LINKAGE_VECTORS_SYMBOL = 1;
}  // namespace xsym::detail
