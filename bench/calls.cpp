// The call-overhead bar's program: built without XTENSOR_USE_XSIMD, so that xt::xtensor has
// xtensor's default allocator, as in a program built on the xsym::xsym target. bench.cpp
// measures the same calls with XTENSOR_USE_XSIMD's 64-byte aligned allocator
// (call_overhead_aligned). Built as bench_calls and, with XSYM_PROFILING=0, bench_calls_noprof.
#include <cstdio>
#include <exception>

#include "call_overhead.hpp"

int main() try {
  bench::bench_calls("call_overhead");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench: %s\n", e.what());
  return 1;
}
