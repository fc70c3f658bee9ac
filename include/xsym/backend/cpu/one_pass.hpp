#ifndef XSYM_BACKEND_CPU_ONE_PASS_HPP
#define XSYM_BACKEND_CPU_ONE_PASS_HPP

// y = beta y0 + alpha Aᵀ g, where g is computed row by row from u = A x (a training step's
// two products and the elementwise work between them), reading A once from memory: group by
// group of rows, u for the group, g for the group, then the group's rows again from L2.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "blas.hpp"
#include "elemwise.hpp"

namespace xsym::cpu {

/// @brief Bytes of A from which a OnePassGemv node makes one pass: where A does not stay in the
/// caches between the two products. That is streaming_min_bytes' share of the last-level
/// cache, or four L2s (at least 4 MiB) where that is less: a VM's large shared L3 holds other
/// programs' lines too (an Intel VM's 300 MiB L3: one pass was faster from 6.3 MB of A, see
/// docs/performance.md). Below, A comes back from the caches and the two products in a row are
/// faster (they need no group of rows in L2, and the column product starts where the row
/// product ended). Tests set it to 0.
inline std::int64_t& one_pass_min_bytes() {
  static std::int64_t bytes = std::min(detail::default_streaming_min_bytes(),
                                       std::max<std::int64_t>(4 * detail::l2_cache_bytes(), std::int64_t{4} << 20));
  return bytes;
}

namespace detail {

// Rows of A per group: a group is read a second time from L2, so it takes a quarter of it
// (the rest holds x, the accumulated product and the next group's first lines). A whole
// number of the column product's 16-row blocks.
inline std::int64_t one_pass_group_rows(std::int64_t row_bytes) {
  const std::int64_t rows = l2_cache_bytes() / 4 / std::max<std::int64_t>(row_bytes, 1);
  return std::clamp<std::int64_t>(rows / 16 * 16, 16, 4096);
}

// Partial products: rows go in at most this many parts, fixed by the shapes alone, each summed
// on its own and the parts added in order, so any number of threads gives the same bits.
inline constexpr std::int64_t one_pass_max_parts = 16;

/// The elementwise work of a group: g for rows [r0, r0 + n) from u (n values), written where
/// the product reads it (g + r0).
struct one_pass_rows_fn {
  void (*run)(void* ctx, std::int64_t r0, std::int64_t n, const void* u);
  void* ctx;
};

template <class T>
void one_pass_gemv(const T* a, std::int64_t lda, std::int64_t m, std::int64_t k, const T* x,
                   const one_pass_rows_fn& rows, const T* g, T alpha, const T* y0, T beta, T* y, int threads) {
  const std::int64_t group = one_pass_group_rows(k * static_cast<std::int64_t>(sizeof(T)));
  const std::int64_t groups = (m + group - 1) / group;
  const std::int64_t kp = (k + 15) / 16 * 16;  // each part's sum on its own cache lines
  std::int64_t parts = std::min(groups, one_pass_max_parts);
  parts = std::max<std::int64_t>(1, std::min<std::int64_t>(parts, (std::int64_t{32} << 20) / (kp * static_cast<std::int64_t>(sizeof(T)))));
  const bool from_memory = rows_from_memory<T>(m, k);
  thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> partial;
  partial.resize(static_cast<std::size_t>(parts * kp));
  T* const sums = partial.data();
  auto run_part = [&](std::int64_t p) {
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> u;
    u.resize(static_cast<std::size_t>(group));
    T* acc = sums + p * kp;
    std::fill(acc, acc + k, T(0));
    for (std::int64_t grp = groups * p / parts; grp < groups * (p + 1) / parts; ++grp) {
      const std::int64_t r0 = grp * group, n = std::min(group, m - r0);
      gemv_rows_serial(a + r0 * lda, lda, x, u.data(), n, k, T(1), static_cast<const T*>(nullptr), T(0), from_memory);
      rows.run(rows.ctx, r0, n, u.data());
      for (std::int64_t c = 0; c < n; c += 16) {
        const std::int64_t cols = std::min<std::int64_t>(16, n - c);
        T xs[16];  // alpha folds into the coefficients, as in gemv_columns
        for (std::int64_t j = 0; j < cols; ++j) xs[j] = mul(alpha, g[r0 + c + j]);
        gemv_column_block(a + (r0 + c) * lda, lda, xs, acc, k, cols);
      }
    }
  };
  parallel_chunks(parts, 1, threads, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p) run_part(p);
  });
  // The parts in order into part 0's sums, a whole part at a time (vectorised: per column, a
  // strided walk over the parts cost a tenth of the seeds' step).
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  for (std::int64_t p = 1; p < parts; ++p) {
    const T* part = sums + p * kp;
    std::int64_t j = 0;
    for (; j + w <= k; j += w) (B::load_aligned(sums + j) + B::load_aligned(part + j)).store_aligned(sums + j);
    for (; j < k; ++j) sums[j] = add(sums[j], part[j]);
  }
  for (std::int64_t j = 0; j < k; ++j) y[j] = y0 ? add(mul(beta, y0[j]), sums[j]) : sums[j];
}

template <class T>
void one_pass_typed(const ndarray& a, const ndarray& x, const one_pass_rows_fn& rows, const ndarray& g, double alpha,
                    const ndarray* y0, double beta, ndarray& y, int threads) {
  one_pass_gemv<T>(a.data_as<T>(), a.stride(0), a.shape(0), a.shape(1), x.data_as<T>(), rows, g.data_as<T>(),
                   static_cast<T>(alpha), y0 ? y0->data_as<T>() : nullptr, static_cast<T>(beta), y.data_as<T>(), threads);
}

}  // namespace detail
}  // namespace xsym::cpu

#endif
