#ifndef XSYM_BACKEND_CPU_ONE_PASS_HPP
#define XSYM_BACKEND_CPU_ONE_PASS_HPP

// y = beta y0 + alpha Aᵀ g, where g is computed row by row from u = A x (a training step's
// two products and the elementwise work between them), reading A once from memory: group by
// group of rows, u for the group (with the previous group's rows read again from L2 for the
// column product, in the same loop), then g for the group.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "blas.hpp"
#include "elemwise.hpp"

namespace xsym::cpu {

/// @brief Bytes of A from which a OnePassGemv node makes one pass: where A does not stay in the
/// caches between the two products. That is streaming_min_bytes' share of the last-level
/// cache where a core reads that cache fast (llc_near_core: AMD's L3). Elsewhere it is that
/// share or two L2s (at least 4 MiB), whichever is less: a server's shared L3 gives one core a
/// fraction of L2's bandwidth (docs/performance.md, "Where one pass starts to pay"). Below, A
/// comes back from the caches and the two products in a row are faster (they need no group of
/// rows in L2, and the column product starts where the row product ended). Tests set it to 0.
inline std::int64_t& one_pass_min_bytes() {
  static std::int64_t bytes =
      detail::llc_near_core()
          ? detail::default_streaming_min_bytes()
          : std::min(detail::default_streaming_min_bytes(),
                     std::max<std::int64_t>(2 * detail::l2_cache_bytes(), std::int64_t{4} << 20));
  return bytes;
}

namespace detail {

// Rows of A per group: a group is read a second time from L2 while the next one comes in, so
// it takes a quarter of it (half of L2 measured slower). A whole number of the column
// product's 16-row blocks.
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

// The column product of R rows of the previous group (or block), y[e] += sum_j xs[j] A[j, e], done inside
// the next group's row product (gemv_row_block's side work) on the same elements e: the FMAs
// and the loads from L2 overlap the rows coming from memory, where one phase after the other
// leaves memory idle during the column product. Each y[e] takes the rows' terms in order, one
// FMA each, as gemv_column_block does: the same bits. The side work also asks L2 for the next
// row block, element by element as the loop goes: from memory, the hardware prefetcher alone
// left the row loads waiting (docs/performance.md, "One pass over X").
// Where a coefficient is subnormal (Subnormal), its terms go as in gemv_column_strip_subnormal:
// left out where they cannot change y, so that no FMA takes an assist for nothing.
template <bool Aligned, bool Subnormal, class T, int R = 8>
struct column_side_work {
  using B = xsimd::batch<T>;
  const T* a;        // the R rows, lda apart
  std::int64_t lda;
  std::int64_t off;  // a minus the row block's first row: the row pointers serve both loads
  const T* xs;       // R coefficients, copied into c
  T* y;              // y + i is on a vector's boundary where the row loads are (Aligned)
  std::int64_t k;
  const T* ahead;    // the next row block's first row, or null
  subnormal_terms<T> terms{};
  T scaled[R]{};     // Subnormal: |xs[j]| 2^64 where xs[j] is subnormal, else 0 (once a block)
  T c[R]{};

  void take_coefficients() {
    for (int j = 0; j < R; ++j) c[j] = xs[j];
  }

  void elements(std::int64_t lo, std::int64_t hi) const {
    for (std::int64_t e = lo; e < hi; ++e) {
      T v = y[e];
      for (int j = 0; j < R; ++j) v = fmadd(a[j * lda + e], c[j], v);
      y[e] = v;
    }
  }
  void peel(std::int64_t p) const { elements(0, p); }
  [[gnu::always_inline]] void step(std::int64_t i, const T* const* row) const {
    B v = load<Aligned, B>(y + i);
XSYM_UNROLL(8)
    for (int j = 0; j < R; ++j) {
      const B av = load<Aligned, B>(row[j] + off + i);
      if constexpr (Subnormal) {
        if (scaled[j] != T(0) && xsimd::all(terms.left_out(av, B(scaled[j]), v))) continue;
      }
      v = fmadd(av, B(c[j]), v);
    }
    if constexpr (Aligned) v.store_aligned(y + i);
    else v.store_unaligned(y + i);
    if (ahead)  // into L2 (locality 2: prefetcht1 on x86)
XSYM_UNROLL(8)
      for (int j = 0; j < R; ++j) __builtin_prefetch(ahead + j * lda + i, 0, 2);
  }
  void tail(std::int64_t i) const { elements(i, k); }
};

// y = beta y0 + the parts' sums (kp apart) added in order into part 0's, a whole part at a time
// (vectorised: per column, a strided walk over the parts cost a tenth of the seeds' step).
template <class T>
void add_parts(T* sums, std::int64_t kp, std::int64_t parts, std::int64_t k, const T* y0, T beta, T* y) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  for (std::int64_t p = 1; p < parts; ++p) {
    const T* part = sums + p * kp;
    std::int64_t j = 0;
    for (; j + w <= k; j += w) (B::load_unaligned(sums + j) + B::load_unaligned(part + j)).store_unaligned(sums + j);
    for (; j < k; ++j) sums[j] = add(sums[j], part[j]);
  }
  for (std::int64_t j = 0; j < k; ++j) y[j] = y0 ? add(mul(beta, y0[j]), sums[j]) : sums[j];
}

template <class T>
void one_pass_gemv(const T* a, std::int64_t lda, std::int64_t m, std::int64_t k, const T* x,
                   const one_pass_rows_fn& rows, const T* g, T alpha, const T* y0, T beta, T* y, int threads) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  const std::int64_t group = one_pass_group_rows(k * static_cast<std::int64_t>(sizeof(T)));
  const std::int64_t groups = (m + group - 1) / group;
  // Rows are aligned alike or not at all (peel_for): where they are, each part's sum starts
  // `shift` elements into its lines, so that y + i is aligned where the row loads are.
  const std::int64_t peel = peel_for(a, lda, k);
  const std::int64_t shift = peel > 0 ? w - peel : 0;
  const std::int64_t kp = (k + shift + 15) / 16 * 16;  // each part's sum on its own cache lines
  std::int64_t parts = std::min(groups, one_pass_max_parts);
  parts = std::max<std::int64_t>(1, std::min<std::int64_t>(parts, (std::int64_t{32} << 20) / (kp * static_cast<std::int64_t>(sizeof(T)))));
  const bool from_memory = rows_from_memory<T>(m, k);
  thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> partial;
  partial.resize(static_cast<std::size_t>(parts * kp));
  T* const sums = partial.data() + shift;
  auto first_group = [&](std::int64_t p) { return groups * p / parts; };
  // Parts [lo, hi) on one thread: group by group, u for the group's rows with the previous
  // group's column product inside (into its own part's sum), then g for the group.
  auto run_parts = [&](std::int64_t lo, std::int64_t hi) {
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> u;
    u.resize(static_cast<std::size_t>(group));
    for (std::int64_t p = lo; p < hi; ++p) std::fill(sums + p * kp, sums + p * kp + k, T(0));
    auto run = [&](auto aligned) {
      constexpr bool al = decltype(aligned)::value;
      const std::int64_t pl = al ? peel : 0;
      const std::int64_t row_end = std::min(m, first_group(hi) * group);  // this thread's rows end
      std::int64_t p = lo, prev0 = 0, prevn = 0;
      T* prev_acc = nullptr;
      for (std::int64_t grp = first_group(lo); grp <= first_group(hi); ++grp) {
        const std::int64_t r0 = grp * group, n = grp < first_group(hi) ? std::min(group, m - r0) : 0;
        while (n > 0 && grp >= first_group(p + 1)) ++p;
        const T* ar = a + r0 * lda;
        const T* ac = a + prev0 * lda;
        std::int64_t c = 0;
        for (; c + 8 <= std::min(n, prevn); c += 8) {
          T xs[8];  // alpha folds into the coefficients, as in gemv_columns
          for (int j = 0; j < 8; ++j) xs[j] = mul(alpha, g[prev0 + c + j]);
          if (from_memory)  // the next block's first lines, as gemv_rows_serial asks for them
            for (std::int64_t j = c + 8; j < std::min<std::int64_t>(c + 16, n); ++j) __builtin_prefetch(ar + j * lda);
          const T* ahead = r0 + c + 16 <= row_end ? ar + (c + 8) * lda : nullptr;
          auto fused = [&](auto subnormal) {
            column_side_work<al, decltype(subnormal)::value, T> side{ac + c * lda, lda, ac - ar, xs, prev_acc, k, ahead};
            side.take_coefficients();
            if constexpr (decltype(subnormal)::value)
              for (int j = 0; j < 8; ++j) side.scaled[j] = is_subnormal(xs[j]) ? side.terms.scaled(xs[j]) : T(0);
            gemv_row_block<8, al>(ar + c * lda, lda, 8, x, u.data() + c, k, pl, T(1), static_cast<const T*>(nullptr), T(0), side);
          };
          if (any_subnormal(xs, 8) && subnormal_terms_pay<T>()) fused(std::true_type{});
          else fused(std::false_type{});
        }
        if (c < n)
          gemv_rows_serial(ar + c * lda, lda, x, u.data() + c, n - c, k, T(1), static_cast<const T*>(nullptr), T(0), from_memory);
        for (; c < prevn; c += 16) {
          const std::int64_t cols = std::min<std::int64_t>(16, prevn - c);
          T xs[16];
          for (std::int64_t j = 0; j < cols; ++j) xs[j] = mul(alpha, g[prev0 + c + j]);
          gemv_column_block(ac + c * lda, lda, xs, prev_acc, k, cols);
        }
        if (n > 0) rows.run(rows.ctx, r0, n, u.data());
        prev0 = r0;
        prevn = n;
        prev_acc = sums + p * kp;
      }
    };
    if (peel >= 0) run(std::true_type{});
    else run(std::false_type{});
  };
  parallel_chunks(parts, 1, threads, [&](std::int64_t lo, std::int64_t hi) { run_parts(lo, hi); });
  add_parts(sums, kp, parts, k, y0, beta, y);
}

// A matrix the caches keep between the two products (below one_pass_min_bytes), where g has
// a compiled kernel: blocks of 4 rows, each block's row product, g for its rows, then its
// column product while the rows are still in L1 (4 rows of 784 floats: 12.5 KB). Reading A
// once from L1 instead of twice from L2 or L3 pays only where g's call costs little next to
// a block (docs/performance.md, "What the seeds' 400 rows need"): an interpreted program's
// fixed cost per call is more than a block's products.
inline constexpr std::int64_t one_pass_block_rows = 4;

// Parts of the blocks, fixed by m alone (at most 4, so one thread adds at most 3 partial sums;
// each part at least 16 blocks): any number of threads gives the same bits.
inline std::int64_t one_pass_block_parts(std::int64_t m) {
  const std::int64_t blocks = (m + one_pass_block_rows - 1) / one_pass_block_rows;
  return std::clamp<std::int64_t>(blocks / 16, 1, 4);
}

// y = beta y0 + alpha Aᵀ g, g computed block by block by g_of(r0, n, u) from u = A x. Each
// part's sum takes its blocks' rows in order (gemv_column_block, one FMA per row); the parts are
// added in order. u is the row product's bits for blocks of 4 rows (gemv_row_block<4>). g_of is
// a typed tree's g inlined into the loop (typed_kernel.hpp's typed_blocks), or a call.
template <class T, class G>
void one_pass_blocks_with(const T* a, std::int64_t lda, std::int64_t m, std::int64_t k, const T* x, const G& g_of,
                          const T* g, T alpha, const T* y0, T beta, T* y, int threads) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size), R = one_pass_block_rows;
  const std::int64_t blocks = (m + R - 1) / R, parts = one_pass_block_parts(m);
  const std::int64_t peel = peel_for(a, lda, k);
  const std::int64_t shift = peel > 0 ? w - peel : 0;
  const std::int64_t kp = (k + shift + 15) / 16 * 16;  // each part's sum on its own cache lines
  thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> partial;
  partial.resize(static_cast<std::size_t>(parts * kp));
  T* const sums = partial.data() + shift;
  auto first_block = [&](std::int64_t p) { return blocks * p / parts; };
  auto run_parts = [&](std::int64_t lo, std::int64_t hi) {
    auto run = [&](auto aligned) {
      constexpr bool al = decltype(aligned)::value;
      const std::int64_t pl = al ? peel : 0;
      T u[R], xs[R];  // xs: the previous block's coefficients (alpha folded in, as in gemv_columns)
      for (std::int64_t p = lo; p < hi; ++p) {
        T* acc = sums + p * kp;
        std::fill(acc, acc + k, T(0));
        const T* prev = nullptr;  // the previous block's rows, whose column product is pending
        std::int64_t prevn = 0;
        for (std::int64_t blk = first_block(p); blk < first_block(p + 1); ++blk) {
          const std::int64_t r0 = blk * R, n = std::min(R, m - r0);
          const T* ar = a + r0 * lda;
          // The previous block's column product inside this block's row product, from L1 while
          // this block's rows come in; a last block short of R rows takes no side work, nor do
          // subnormal coefficients where their terms are left out (gemv_column_block's own path,
          // the same bits: one variant less for every program to compile).
          if (prev && n == R && prevn == R && !(any_subnormal(xs, R) && subnormal_terms_pay<T>())) {
            column_side_work<al, false, T, R> side{prev, lda, prev - ar, xs, acc, k, nullptr};
            side.take_coefficients();
            gemv_row_block_inline<R, al>(ar, lda, n, x, u, k, pl, T(1), static_cast<const T*>(nullptr), T(0), side);
          } else {
            if (prev) gemv_column_block(prev, lda, xs, acc, k, prevn);
            gemv_row_block<R, al>(ar, lda, n, x, u, k, pl, T(1), static_cast<const T*>(nullptr), T(0));
          }
          g_of(r0, n, static_cast<const T*>(u));
          for (std::int64_t j = 0; j < n; ++j) xs[j] = mul(alpha, g[r0 + j]);
          prev = ar;
          prevn = n;
        }
        if (prev) gemv_column_block(prev, lda, xs, acc, k, prevn);
      }
    };
    if (peel >= 0) run(std::true_type{});
    else run(std::false_type{});
  };
  parallel_chunks(parts, 1, threads, [&](std::int64_t lo, std::int64_t hi) { run_parts(lo, hi); });
  add_parts(sums, kp, parts, k, y0, beta, y);
}

template <class T>
void one_pass_blocks(const T* a, std::int64_t lda, std::int64_t m, std::int64_t k, const T* x,
                     const one_pass_rows_fn& rows, const T* g, T alpha, const T* y0, T beta, T* y, int threads) {
  one_pass_blocks_with<T>(
      a, lda, m, k, x, [&](std::int64_t r0, std::int64_t n, const T* u) { rows.run(rows.ctx, r0, n, u); }, g, alpha, y0,
      beta, y, threads);
}

template <class T>
void one_pass_blocks_typed(const ndarray& a, const ndarray& x, const one_pass_rows_fn& rows, const ndarray& g,
                           double alpha, const ndarray* y0, double beta, ndarray& y, int threads) {
  one_pass_blocks<T>(a.data_as<T>(), a.stride(0), a.shape(0), a.shape(1), x.data_as<T>(), rows, g.data_as<T>(),
                     static_cast<T>(alpha), y0 ? y0->data_as<T>() : nullptr, static_cast<T>(beta), y.data_as<T>(),
                     threads);
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
