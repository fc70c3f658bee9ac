#ifndef XSYM_BACKEND_CPU_PARALLEL_HPP
#define XSYM_BACKEND_CPU_PARALLEL_HPP

#include <algorithm>
#include <cstdint>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace xsym::cpu {

/// @brief How many threads a kernel may use (openmp=True), and from which size it does.
struct parallelism {
  int threads = 1;
  std::int64_t elemwise_minsize = 200000;  // elements of an elementwise node's output
  std::int64_t product_minsize = 32768;    // elements of a matrix-vector product's matrix
};

/// @brief True when this translation unit was compiled with OpenMP (-fopenmp).
inline constexpr bool openmp_compiled_in =
#ifdef _OPENMP
    true;
#else
    false;
#endif

/// @brief Threads OpenMP would use (1 without OpenMP).
inline int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// @brief Runs f(begin, end) over [0, n), split among up to `threads` threads at multiples of
/// `grain`. Kernels pick a grain at which splitting changes no result (whole SIMD blocks, whole
/// rows), so a parallel run computes exactly what a serial one does.
template <class F>
void parallel_chunks(std::int64_t n, std::int64_t grain, int threads, F&& f) {
#ifdef _OPENMP
  const std::int64_t units = (n + grain - 1) / grain;
  const int team = static_cast<int>(std::min<std::int64_t>(threads, units));
  if (team > 1) {
    std::exception_ptr error;  // an exception must not leave an OpenMP region
#pragma omp parallel num_threads(team)
    {
      const std::int64_t id = omp_get_thread_num(), size = omp_get_num_threads();
      const std::int64_t lo = std::min(n, units * id / size * grain);
      const std::int64_t hi = std::min(n, units * (id + 1) / size * grain);
      try {
        if (lo < hi) f(lo, hi);
      } catch (...) {
#pragma omp critical(xsym_parallel_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    return;
  }
#else
  (void)grain;
  (void)threads;
#endif
  f(std::int64_t{0}, n);
}

}  // namespace xsym::cpu

#endif
