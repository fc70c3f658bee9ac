#ifndef XSYM_BACKEND_CPU_BLAS_HPP
#define XSYM_BACKEND_CPU_BLAS_HPP

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../../config/unroll.hpp"
#include "../../config/intrinsics.hpp"  // before xtensor and xsimd
#include <xsimd/xsimd.hpp>

#include "../../expr/ndarray.hpp"
#include "caches.hpp"
#include "kernel_table.hpp"
#include "parallel.hpp"
#include "scalar_kernels.hpp"

namespace xsym::cpu {

namespace detail {
// Elements to handle one by one so that loads from a (and every row lda apart) are aligned
// to the vector size: an unaligned 64-byte load from L2 costs two.
// -1 when no peel can align them all (rows not a whole number of vectors apart).
template <class T>
std::int64_t peel_for(const T* a, std::int64_t lda, std::int64_t n) {
  constexpr std::size_t bytes = xsimd::batch<T>::size * sizeof(T);
  const auto addr = reinterpret_cast<std::uintptr_t>(a);
  if (addr % sizeof(T) != 0 || (static_cast<std::size_t>(lda) * sizeof(T)) % bytes != 0) return -1;
  const auto p = static_cast<std::int64_t>(((bytes - addr % bytes) % bytes) / sizeof(T));
  return p <= n ? p : -1;
}

// a + b and a * b, wrapping for integers as numpy's integer products do (signed overflow is
// undefined in C++); plain arithmetic for floats.
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) return wrapping_fn<scalar_op::add>::apply(a, b);
  else return a + b;
}
template <class T>
T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return wrapping_fn<scalar_op::mul>::apply(a, b);
  else return a * b;
}
template <class T>
T mul_add(T s, T a, T b) { return add(s, mul(a, b)); }

// a * b + c, rounded once where the vectors have a fused multiply-add: xsimd 8's fma is a
// product and then a sum on AVX-512 (only its AVX and SSE kinds with FMA have their own),
// twice the instructions and two roundings where AVX2 machines get one. The scalar form
// rounds as the lanes do, so a tail element gets its lanes' bits.
template <class B>
[[gnu::always_inline]] inline B fmadd(const B& a, const B& b, const B& c) {
  if constexpr (std::is_floating_point_v<B>) {
#if defined(__FMA__) || defined(__FMA4__) || defined(__AVX512F__)
    return std::fma(a, b, c);
#else
    return a * b + c;
#endif
  } else {
#if defined(__AVX512F__)
    if constexpr (sizeof(B) == 64 && std::is_same_v<typename B::value_type, float>)
      return B(_mm512_fmadd_ps(a, b, c));
    else if constexpr (sizeof(B) == 64 && std::is_same_v<typename B::value_type, double>)
      return B(_mm512_fmadd_pd(a, b, c));
    else
#endif
      return xsimd::fma(a, b, c);
  }
}

// One vector load, aligned or not, so a loop is written once for both.
template <bool Aligned, class B, class T>
B load(const T* p) {
  if constexpr (Aligned) return B::load_aligned(p);
  else return B::load_unaligned(p);
}

template <class T>
T dot_span(const T* a, const T* b, std::int64_t n) {
  std::int64_t i = 0;
  T s = 0;
  if constexpr (std::is_floating_point_v<T>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
    B s0(T(0)), s1(T(0));
    for (; i + 2 * w <= n; i += 2 * w) {
      s0 = fmadd(B::load_unaligned(a + i), B::load_unaligned(b + i), s0);
      s1 = fmadd(B::load_unaligned(a + i + w), B::load_unaligned(b + i + w), s1);
    }
    s = xsimd::hadd(s0 + s1);
  }
  for (; i < n; ++i) s = mul_add(s, a[i], b[i]);
  return s;
}

// sums[j] = the sum of s[j]'s lanes. With AVX-512, 8 rows are reduced together: halves
// added, then a tree of horizontal adds, all in registers. One reduction per row (xsimd's
// hadd) cost about 10% of a 400 x 784 float32 product, rows being only 49 vectors long.
template <int R, class B, class T>
[[gnu::always_inline]] inline void reduce_rows(const B* s, T* sums) {
#if defined(__AVX512F__)
  if constexpr (R == 8 && std::is_same_v<T, float> && B::size == 16) {
    // Halves added: h[j] holds 8 partial sums of row j; three rounds of pairwise adds leave one.
    __m256 h[8];
XSYM_UNROLL(8)
    for (int j = 0; j < 8; ++j) {
      const __m512 v = s[j];
      h[j] = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    }
    const __m256 a01 = _mm256_hadd_ps(h[0], h[1]), a23 = _mm256_hadd_ps(h[2], h[3]);
    const __m256 a45 = _mm256_hadd_ps(h[4], h[5]), a67 = _mm256_hadd_ps(h[6], h[7]);
    const __m256 b0 = _mm256_hadd_ps(a01, a23), b1 = _mm256_hadd_ps(a45, a67);
    _mm256_storeu_ps(sums, _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31)));
    return;
  } else if constexpr (R == 8 && std::is_same_v<T, double> && B::size == 8) {
    // Halves added: h[j] holds 4 partial sums of row j; two rounds per group of 4 rows.
    __m256d h[8];
XSYM_UNROLL(8)
    for (int j = 0; j < 8; ++j) {
      const __m512d v = s[j];
      h[j] = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    }
XSYM_UNROLL(2)
    for (int q = 0; q < 2; ++q) {
      const __m256d c01 = _mm256_hadd_pd(h[4 * q], h[4 * q + 1]), c23 = _mm256_hadd_pd(h[4 * q + 2], h[4 * q + 3]);
      _mm256_storeu_pd(sums + 4 * q,
                       _mm256_add_pd(_mm256_permute2f128_pd(c01, c23, 0x20), _mm256_permute2f128_pd(c01, c23, 0x31)));
    }
    return;
  }
#endif
XSYM_UNROLL(8)
  for (int j = 0; j < R; ++j) sums[j] = xsimd::hadd(s[j]);
}

#if defined(__AVX2__)
// All bits set in the 32-bit parts of lanes [lo, hi) of a 256-bit vector of T, clear elsewhere.
template <class T>
[[gnu::always_inline]] inline __m256i avx2_lane_mask(std::int64_t lo, std::int64_t hi) {
  constexpr int parts = static_cast<int>(sizeof(T) / 4);
  const __m256i lane = parts == 1 ? _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7) : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lo)), lane),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane));
}
#endif

// Lanes [lo, hi) from p[0, hi - lo), the other lanes `fill`; nothing outside is read.
template <class B, class T>
[[gnu::always_inline]] inline B partial_load(const T* p, std::int64_t lo, std::int64_t hi, T fill) {
#if defined(__AVX512F__)
  if constexpr (sizeof(B) == 64) {
    const auto mask = static_cast<std::uint32_t>(((std::uint64_t{1} << hi) - 1) & ~((std::uint64_t{1} << lo) - 1));
    if constexpr (std::is_same_v<T, float>)
      return B(_mm512_mask_loadu_ps(_mm512_set1_ps(fill), static_cast<__mmask16>(mask), p - lo));
    else if constexpr (std::is_same_v<T, double>)
      return B(_mm512_mask_loadu_pd(_mm512_set1_pd(fill), static_cast<__mmask8>(mask), p - lo));
  }
#endif
#if defined(__AVX2__)
  // A masked load: the copy through memory below stalls each load on its stores (a fifth of a
  // product on rows 16 bytes past a cache line, which peel and tail per row).
  if constexpr (sizeof(B) == 32 && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    const __m256i m = avx2_lane_mask<T>(lo, hi);
    if constexpr (std::is_same_v<T, float>)
      return B(_mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p - lo, m), _mm256_castsi256_ps(m)));
    else
      return B(_mm256_blendv_pd(_mm256_set1_pd(fill), _mm256_maskload_pd(p - lo, m), _mm256_castsi256_pd(m)));
  }
#endif
  alignas(64) T buf[B::size];
  for (std::int64_t l = 0; l < static_cast<std::int64_t>(B::size); ++l) buf[l] = l >= lo && l < hi ? p[l - lo] : fill;
  return B::load_aligned(buf);
}

// Lanes [0, n) of v to p[0, n); nothing else is written.
template <class B, class T>
[[gnu::always_inline]] inline void partial_store(const B& v, T* p, std::int64_t n) {
#if defined(__AVX512F__)
  if constexpr (sizeof(B) == 64) {
    const auto mask = static_cast<std::uint32_t>((std::uint64_t{1} << n) - 1);
    if constexpr (std::is_same_v<T, float>) {
      _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask), v);
      return;
    } else if constexpr (std::is_same_v<T, double>) {
      _mm512_mask_storeu_pd(p, static_cast<__mmask8>(mask), v);
      return;
    }
  }
#endif
#if defined(__AVX2__)
  if constexpr (sizeof(B) == 32 && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    const __m256i m = avx2_lane_mask<T>(0, n);
    if constexpr (std::is_same_v<T, float>) _mm256_maskstore_ps(p, m, v);
    else _mm256_maskstore_pd(p, m, v);
    return;
  }
#endif
  alignas(64) T buf[B::size];
  v.store_aligned(buf);
  for (std::int64_t l = 0; l < n; ++l) p[l] = buf[l];
}

// Lane l of v to lane (l + by) mod w.
template <class B>
[[gnu::always_inline]] inline B rotate_lanes(const B& v, std::int64_t by) {
  using T = typename B::value_type;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
#if defined(__AVX512F__)
  if constexpr (sizeof(B) == 64 && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    using I = std::conditional_t<std::is_same_v<T, float>, std::int32_t, std::int64_t>;
    alignas(64) I from[w];  // lane c takes lane (c - by) mod w
    for (std::int64_t c = 0; c < w; ++c) from[c] = static_cast<I>((c - by + w) % w);
    if constexpr (std::is_same_v<T, float>) return B(_mm512_permutexvar_ps(_mm512_load_si512(from), v));
    else return B(_mm512_permutexvar_pd(_mm512_load_si512(from), v));
  }
#endif
#if defined(__AVX2__)
  if constexpr (sizeof(B) == 32 && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    // One lane-crossing permute of 32-bit parts (a double's two parts move together): part q
    // of lane c takes part q of lane (c - by) mod w, the indices computed in registers.
    const __m256i by_v = _mm256_set1_epi32(static_cast<int>(by)), wrap = _mm256_set1_epi32(static_cast<int>(w - 1));
    __m256i idx;
    if constexpr (std::is_same_v<T, float>) {
      idx = _mm256_and_si256(_mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), by_v), wrap);
    } else {
      const __m256i lane = _mm256_and_si256(_mm256_sub_epi32(_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), by_v), wrap);
      idx = _mm256_or_si256(_mm256_slli_epi32(lane, 1), _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1));
    }
    if constexpr (std::is_same_v<T, float>) return B(_mm256_permutevar8x32_ps(v, idx));
    else return B(_mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(v), idx)));
  }
#endif
  alignas(64) T lanes[w], moved[w];
  v.store_aligned(lanes);
  for (std::int64_t l = 0; l < w; ++l) moved[(l + by) % w] = lanes[l];
  return B::load_aligned(moved);
}

// y[r] = dot(A[r, :], x), R rows at a time: each load of x serves R rows, and R independent
// accumulators keep both FMA units busy (4 chains would wait on the FMA latency).
// A row is summed in one order wherever it sits (its address, its place among the rows): lane
// c sums the elements whose index is c modulo the vector size, in order, then the lanes are
// reduced. Where the loads start at an aligned element p (the peel), lane l holds class
// (p + l) mod w; the elements before p and after the last whole vector go in the same lanes
// as partial vectors (the other lanes add -0: x is -0 there, A +0), and the lanes are put
// back in class order before the reduction. The last rows of A (n < R) take a block too, its
// other rows repeating the last one (the lanes' reduction differs between block sizes).
// `side` does other work at each step of the loop over k, on the same elements: peel(p) for
// [0, p), step(i, row) for [i, i + w) (row: the block's R row pointers), tail(i) for [i, k)
// (one pass: another block's column product).
struct no_side_work {
  void peel(std::int64_t) const {}
  template <class T>
  void step(std::int64_t, const T* const*) const {}
  void tail(std::int64_t) const {}
};
// With side work (one pass) always inlined: its loop is the kernel's whole time, and out of line
// the side work's fields are reloaded at every step (a tree's g inlined beside it made GCC stop
// inlining it).
template <int R, bool Aligned, class T, class Side = no_side_work>
[[gnu::always_inline]] inline void gemv_row_block_inline(const T* a, std::int64_t lda, std::int64_t n, const T* x, T* y,
                                                         std::int64_t k, std::int64_t peel, T alpha, const T* y0, T beta,
                                                         const Side& side = {}) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  const T* row[R];
XSYM_UNROLL(8)
  for (int j = 0; j < R; ++j) row[j] = a + std::min<std::int64_t>(j, n - 1) * lda;
  // Every loop over j unrolled, so the accumulators live in registers: an array the compiler
  // keeps in memory is zeroed with `rep stos` per block, which cost 10% of the product.
  B s[R];
XSYM_UNROLL(8)
  for (int j = 0; j < R; ++j) s[j] = B(T(0));
  if (peel > 0) {  // elements [0, peel), in lanes [w - peel, w)
    const B xv = partial_load<B>(x, w - peel, w, T(-0.0));
XSYM_UNROLL(8)
    for (int j = 0; j < R; ++j) s[j] = fmadd(partial_load<B>(row[j], w - peel, w, T(0)), xv, s[j]);
    side.peel(peel);
  }
  std::int64_t i = peel;
  for (; i + w <= k; i += w) {
    const B xv = B::load_unaligned(x + i);
XSYM_UNROLL(8)
    for (int j = 0; j < R; ++j) s[j] = fmadd(load<Aligned, B>(row[j] + i), xv, s[j]);
    side.step(i, row);
  }
  if (i < k) {  // elements [i, k), in lanes [0, k - i)
    const B xv = partial_load<B>(x + i, 0, k - i, T(-0.0));
XSYM_UNROLL(8)
    for (int j = 0; j < R; ++j) s[j] = fmadd(partial_load<B>(row[j] + i, 0, k - i, T(0)), xv, s[j]);
    side.tail(i);
  }
  if (peel > 0) {
XSYM_UNROLL(8)
    for (int j = 0; j < R; ++j) s[j] = rotate_lanes(s[j], peel);
  }
  T sums[R];
  reduce_rows<R>(s, sums);
  for (int j = 0; j < n; ++j) y[j] = (y0 ? beta * y0[j] : T(0)) + alpha * sums[j];
}
template <int R, bool Aligned, class T, class Side = no_side_work>
void gemv_row_block(const T* a, std::int64_t lda, std::int64_t n, const T* x, T* y, std::int64_t k, std::int64_t peel,
                    T alpha, const T* y0, T beta, const Side& side = {}) {
  if constexpr (std::is_same_v<Side, no_side_work>) gemv_row_block_inline<R, Aligned>(a, lda, n, x, y, k, peel, alpha, y0, beta);
  else gemv_row_block_inline<R, Aligned>(a, lda, n, x, y, k, peel, alpha, y0, beta, side);
}

// Whether a product reads A from memory: more of it than the caches keep between calls (the
// streaming threshold, which is a share of the last-level cache).
template <class T>
bool rows_from_memory(std::int64_t m, std::int64_t k) {
  return m * k * static_cast<std::int64_t>(sizeof(T)) >= streaming_min_bytes();
}

// y = alpha A x, or with y0 (which may be y itself) beta y0 + alpha A x. from_memory: A comes
// from memory (rows_from_memory), where each block of 8 rows would start with 8 misses at once
// and wait for them; the first line of each of the next block's rows is asked for while a
// block is summed (docs/performance.md, "Row products from memory"). From the caches that
// costs more than it saves.
template <class T>
void gemv_rows_serial(const T* a, std::int64_t lda, const T* x, T* y, std::int64_t m, std::int64_t k, T alpha,
                      const T* y0, T beta, bool from_memory = false) {
  std::int64_t r = 0;
  if constexpr (std::is_floating_point_v<T>) {
    const std::int64_t peel = peel_for(a, lda, k);
    auto blocks = [&](auto aligned) {
      constexpr bool al = decltype(aligned)::value;
      const std::int64_t p = al ? peel : 0;
      for (; r < m; r += 8) {
        if (from_memory)
          for (std::int64_t j = r + 8; j < std::min<std::int64_t>(r + 16, m); ++j) __builtin_prefetch(a + j * lda);
        gemv_row_block<8, al>(a + r * lda, lda, std::min<std::int64_t>(8, m - r), x, y + r, k, p, alpha,
                              y0 ? y0 + r : y0, beta);
      }
    };
    if (peel >= 0) blocks(std::true_type{});
    else blocks(std::false_type{});
  }
  for (; r < m; ++r) y[r] = add(y0 ? mul(beta, y0[r]) : T(0), mul(alpha, dot_span(a + r * lda, x, k)));
}

template <class T>
void gemv_rows(const T* a, std::int64_t lda, const T* x, T* y, std::int64_t m, std::int64_t k, T alpha, const T* y0,
               T beta, int threads = 1) {
  // Threads take whole blocks of 8 rows: each row is summed as on one thread.
  const bool from_memory = rows_from_memory<T>(m, k);
  parallel_chunks(m, 8, threads, [&](std::int64_t lo, std::int64_t hi) {
    gemv_rows_serial(a + lo * lda, lda, x, y + lo, hi - lo, k, alpha, y0 ? y0 + lo : y0, beta, from_memory);
  });
}

// y[i, i + Q vectors) += sum_j xs[j] * A[j, i...], Q accumulators (every q loop unrolled, so
// they live in registers at -O2 too).
template <int Q, class T>
[[gnu::always_inline]] inline void gemv_column_strip(const T* a, std::int64_t lda, const T* xs, T* y, std::int64_t i,
                                                     std::int64_t cols) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  B s[Q];
XSYM_UNROLL(8)
  for (int q = 0; q < Q; ++q) s[q] = B::load_unaligned(y + i + q * w);
  for (std::int64_t j = 0; j < cols; ++j) {
    const B xc(xs[j]);
    const T* col = a + j * lda + i;
XSYM_UNROLL(8)
    for (int q = 0; q < Q; ++q) s[q] = fmadd(B::load_unaligned(col + q * w), xc, s[q]);
  }
XSYM_UNROLL(8)
  for (int q = 0; q < Q; ++q) s[q].store_unaligned(y + i + q * w);
}

// A subnormal coefficient makes every FMA that takes it a microcode assist on Intel cores
// (docs/performance.md, "Subnormal numbers"). A gradient step makes some: a saturated sigmoid's
// gradient times the learning rate.
// |v|'s bits: tests by them touch no subnormal number (a compare of one takes an assist too).
template <class T>
auto magnitude_bits(T v) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U u;
  std::memcpy(&u, &v, sizeof u);
  return static_cast<U>(u & ~(U(1) << (8 * sizeof(T) - 1)));
}
template <class T>
bool is_subnormal(T v) {
  const auto u = magnitude_bits(v);
  return u != 0 && u < (decltype(u){1} << (std::numeric_limits<T>::digits - 1));
}
template <class T>
bool any_subnormal(const T* xs, std::int64_t cols) {
  bool any = false;
  for (std::int64_t j = 0; j < cols; ++j) any |= is_subnormal(xs[j]);
  return any;
}

}  // namespace detail

namespace testing {
/// Test-only: whether the column products leave out the terms that cannot change y where a
/// coefficient is subnormal: -1 as this core's FMAs measure (detail::subnormal_terms_pay), 1
/// always, 0 never. Either way y gets the FMA chain's bits.
inline int& subnormal_terms() {
  static int v = -1;
  return v;
}
/// Test-only: subnormal_terms() set to a value while it lives, then put back.
struct subnormal_terms_set {
  int saved = subnormal_terms();
  explicit subnormal_terms_set(int v) { subnormal_terms() = v; }
  ~subnormal_terms_set() { subnormal_terms() = saved; }
  subnormal_terms_set(const subnormal_terms_set&) = delete;
  subnormal_terms_set& operator=(const subnormal_terms_set&) = delete;
};
}  // namespace testing

namespace detail {
// Whether an FMA with a subnormal coefficient costs this core much more than one with a normal
// coefficient: a microcode assist of about 95 cycles on Intel cores, against a few percent on
// AMD's Zen 3, where the tests that leave such terms out cost the column product twice its time
// (docs/performance.md, "Subnormal numbers"). Timed once, when a product first meets a subnormal
// coefficient: 8 chains of 128 FMAs each way, the least of 5 rounds, more than 4 times slower.
template <class T>
[[gnu::noinline, gnu::cold]] bool subnormal_fma_slow() {  // out of the products' loops
  using B = xsimd::batch<T>;
  auto chains = [](T c) {
    volatile T one = T(1), coefficient = c;  // unknown to the compiler
    B s[8], a(one), x(coefficient);
    for (auto& v : s) v = a;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 128; ++i)
XSYM_UNROLL(8)
      for (int j = 0; j < 8; ++j) s[j] = fmadd(a, x, s[j]);
    const auto took = std::chrono::steady_clock::now() - start;
    B sum = s[0];
    for (int j = 1; j < 8; ++j) sum = sum + s[j];
    volatile T sink = xsimd::hadd(sum);
    (void)sink;
    return took;
  };
  auto normal = std::chrono::steady_clock::duration::max(), subnormal = normal;
  for (int round = 0; round < 5; ++round) {
    normal = std::min(normal, chains(T(0.5)));
    subnormal = std::min(subnormal, chains(std::numeric_limits<T>::denorm_min() * T(8)));
  }
  return subnormal > 4 * std::max(normal, decltype(normal){1});
}
template <class T>
[[gnu::always_inline]] inline bool subnormal_terms_pay() {
  if (testing::subnormal_terms() >= 0) return testing::subnormal_terms() == 1;
  static const bool slow = subnormal_fma_slow<T>();
  return slow;
}

// gemv_column_strip where some coefficients are subnormal: a term A xs[j] that cannot change
// y[i] is left out, the others take the same FMA, so y gets the same bits. A term is left out
// where |A| |xs[j] 2^64| < |y| 2^(64 - p - 3) (p: the mantissa's bits): under half of the
// smaller half ulp next to y, whatever the rounding of the test. Both sides are normal numbers,
// so the test takes no assist. Where y is 0, or a lane is NaN, the FMA runs.
template <class T>
struct subnormal_terms {
  static constexpr int p = std::numeric_limits<T>::digits;
  T margin = std::ldexp(T(1), 64 - p - 3);
  // A subnormal's bits times this are its value times 2^64, exactly.
  T up = std::ldexp(T(1), 64 + std::numeric_limits<T>::min_exponent - p);
  T scaled(T c) const { return static_cast<T>(magnitude_bits(c)) * up; }  // |c| 2^64
  // The lanes where the term a c (scaled_c: |c| 2^64) cannot change s.
  template <class B>
  [[gnu::always_inline]] auto left_out(const B& a, const B& scaled_c, const B& s) const {
    return xsimd::abs(a) * scaled_c < xsimd::abs(s) * B(margin);
  }
};

template <int Q, bool Full, class T>
void gemv_column_strip_subnormal(const T* a, std::int64_t lda, const T* xs, T* y, std::int64_t i, std::int64_t cols,
                                 std::int64_t lanes) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  const subnormal_terms<T> terms;
  // Lanes at or past `lanes` (the last partial vector) take no part: they count as left out.
  B idx;
  {
    alignas(64) T at[w];
    for (std::int64_t l = 0; l < w; ++l) at[l] = static_cast<T>(l);
    idx = B::load_aligned(at);
  }
  auto load_y = [&](int q) {
    return Full || q * w + w <= lanes ? B::load_unaligned(y + i + q * w)
                                      : partial_load<B>(y + i + q * w, 0, lanes - q * w, T(0));
  };
  auto load_a = [&](const T* col, int q) {
    return Full || q * w + w <= lanes ? B::load_unaligned(col + q * w)
                                      : partial_load<B>(col + q * w, 0, lanes - q * w, T(0));
  };
  B s[Q];
XSYM_UNROLL(8)
  for (int q = 0; q < Q; ++q) s[q] = load_y(q);
  for (std::int64_t j = 0; j < cols; ++j) {
    const B xc(xs[j]);
    const T* col = a + j * lda + i;
    if (!is_subnormal(xs[j])) {
XSYM_UNROLL(8)
      for (int q = 0; q < Q; ++q) s[q] = fmadd(load_a(col, q), xc, s[q]);
      continue;
    }
    const B scaled(terms.scaled(xs[j]));
XSYM_UNROLL(8)
    for (int q = 0; q < Q; ++q) {
      const B av = load_a(col, q);
      auto left_out = terms.left_out(av, scaled, s[q]);
      if (!Full) left_out = left_out || idx >= B(static_cast<T>(lanes - q * w));
      if (!xsimd::all(left_out)) s[q] = fmadd(av, xc, s[q]);
    }
  }
XSYM_UNROLL(8)
  for (int q = 0; q < Q; ++q) {
    if (Full || q * w + w <= lanes) s[q].store_unaligned(y + i + q * w);
    else partial_store(s[q], y + i + q * w, lanes - q * w);
  }
}

// y += sum_c x[c] * A[:, c] when A's columns are contiguous (a transposed row-major matrix).
// Columns go in blocks of 16: for each strip of 8 vectors of y, the block's 16 columns are
// summed in registers and y is loaded and stored once per block, not once per column.
template <class T>
void gemv_column_block(const T* a, std::int64_t lda, const T* xs, T* y, std::int64_t m, std::int64_t cols) {
  std::int64_t i = 0;
  if constexpr (std::is_floating_point_v<T>) {
    if (any_subnormal(xs, cols) && subnormal_terms_pay<T>()) {
      using B = xsimd::batch<T>;
      constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
      for (; i + 8 * w <= m; i += 8 * w) gemv_column_strip_subnormal<8, true>(a, lda, xs, y, i, cols, 8 * w);
      // The last vectors as below: in one strip, not one chain of dependent FMAs each.
      if (i + 4 * w <= m) {
        gemv_column_strip_subnormal<4, true>(a, lda, xs, y, i, cols, 4 * w);
        i += 4 * w;
      }
      if (i + 2 * w <= m) {
        gemv_column_strip_subnormal<2, true>(a, lda, xs, y, i, cols, 2 * w);
        i += 2 * w;
      }
      for (; i < m; i += w) gemv_column_strip_subnormal<1, false>(a, lda, xs, y, i, cols, std::min(w, m - i));
      return;
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
    for (; i + 8 * w <= m; i += 8 * w) gemv_column_strip<8>(a, lda, xs, y, i, cols);
    // The last vectors (fewer than 8) in one strip: one at a time, each is a chain of
    // dependent FMAs that waits on their latency.
    if (i + 4 * w <= m) {
      gemv_column_strip<4>(a, lda, xs, y, i, cols);
      i += 4 * w;
    }
    if (i + 2 * w <= m) {
      gemv_column_strip<2>(a, lda, xs, y, i, cols);
      i += 2 * w;
    }
    if (i + w <= m) {
      gemv_column_strip<1>(a, lda, xs, y, i, cols);
      i += w;
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (i < m) {  // the last outputs (fewer than a vector): one partial vector, as the lanes compute
      using B = xsimd::batch<T>;
      B s = partial_load<B>(y + i, 0, m - i, T(0));
      for (std::int64_t j = 0; j < cols; ++j) s = fmadd(partial_load<B>(a + j * lda + i, 0, m - i, T(0)), B(xs[j]), s);
      partial_store(s, y + i, m - i);
      i = m;
    }
  }
  for (; i < m; ++i) {
    T s = y[i];
    for (std::int64_t j = 0; j < cols; ++j) s = mul_add(s, a[j * lda + i], xs[j]);
    y[i] = s;
  }
}

template <class T>
void gemv_columns(const T* a, std::int64_t lda, const T* x, T* y_out, std::int64_t m, std::int64_t k, T alpha,
                  const T* y0, T beta, int threads = 1) {
  // Accumulating: the product is summed apart, then added once. Summing 400 small terms
  // straight into a y of larger magnitude would lose their low bits (float32 drifts).
  // On cache lines, as y's strips are: a vector load or store across two lines costs two.
  // The sum goes straight into y_out where that is on a cache line and does not overlap y0: a
  // buffer of its own would be one more array's lines for a training step to bring back to L1.
  T* y = y_out;
  const auto out_at = reinterpret_cast<std::uintptr_t>(y_out), y0_at = reinterpret_cast<std::uintptr_t>(y0);
  const auto bytes = static_cast<std::uintptr_t>(m) * sizeof(T);
  const bool own_sum = y0 && (out_at % 64 != 0 || (y0_at < out_at + bytes && out_at < y0_at + bytes));
  if (own_sum) {
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> product;
    product.assign(static_cast<std::size_t>(m), T(0));
    y = product.data();
  } else {
    std::fill(y, y + m, T(0));
  }
  constexpr std::int64_t block = 16;
  // The first elements of every column go on their own when that aligns the vector loads of A,
  // as in the row product (xtensor's default allocator gives 16-byte aligned matrices: 25% of
  // this product's time here). The strips start after the peel whatever the threads, so every
  // element is summed as on one thread.
  std::int64_t peel = 0;
  if constexpr (std::is_floating_point_v<T>) peel = std::max<std::int64_t>(0, peel_for(a, lda, m));
  // Column blocks go from the last to the first. A gradient step runs the row product over
  // the same matrix just before, ending at its last rows: when the matrix does not fit in L2
  // (the seeds' 400 x 784 floats on a 1 MiB L2), those rows are the ones still there; forward,
  // every block would come from L3.
  auto run_block = [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t c = k > 0 ? (k - 1) / block * block : -1; c >= 0; c -= block) {
      const std::int64_t cols = std::min(block, k - c);
      T xs[block];  // alpha folds into the coefficients: one multiply per column
      for (std::int64_t j = 0; j < cols; ++j) xs[j] = mul(alpha, x[c + j]);
      gemv_column_block(a + c * lda + lo, lda, xs, y + lo, hi - lo, cols);
    }
  };
  if (peel > 0) run_block(0, peel);
  // Threads take strips of y, each a whole number of 8-vector strips.
  std::int64_t grain = 64;
  if constexpr (std::is_floating_point_v<T>) grain = 8 * static_cast<std::int64_t>(xsimd::batch<T>::size);
  parallel_chunks(m - peel, grain, threads, [&](std::int64_t lo, std::int64_t hi) { run_block(peel + lo, peel + hi); });
  if (y0) {
    // beta y0 + the product in one pass (beta == 1 gives y0 + product exactly, FMA or not).
    if constexpr (std::is_floating_point_v<T>) {
      using B = xsimd::batch<T>;
      constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
      const std::int64_t vectors_end = m / w * w;
      const B bv(beta);
      for (std::int64_t i = 0; i < vectors_end; i += w)
        fmadd(bv, B::load_unaligned(y0 + i), B::load_unaligned(y + i)).store_unaligned(y_out + i);
      for (std::int64_t i = vectors_end; i < m; ++i) y_out[i] = fmadd(beta, y0[i], y[i]);  // as the lanes
    } else {
      for (std::int64_t i = 0; i < m; ++i) y_out[i] = add(mul(beta, y0[i]), y[i]);
    }
  }
}
}  // namespace detail

/// @brief y = alpha op(A) x, op(A) = A or Aᵀ; A may be row-major or a transposed view of one.
/// Accumulating, y = beta y0 + alpha op(A) x, where y0 is C-contiguous (null: y0 is y itself).
inline void run_gemv(const ndarray& a_in, bool transpose, const ndarray& x_in, ndarray& y, double alpha = 1.0,
                     bool accumulate = false, const parallelism& par = {}, const ndarray* y0 = nullptr,
                     double beta = 1.0) {
  std::int64_t m = a_in.shape(0), k = a_in.shape(1);
  std::int64_t rs = a_in.stride(0), cs = a_in.stride(1);
  if (transpose) {
    std::swap(m, k);
    std::swap(rs, cs);
  }
  if (x_in.shape(0) != k)
    throw shape_error("matrix-vector product: matrix has shape (" + std::to_string(m) + ", " + std::to_string(k) +
                      (transpose ? ") after transposition" : ")") + ", vector has shape " + to_string(x_in.shape()) +
                      " (" + std::to_string(k) + " != " + std::to_string(x_in.shape(0)) + ")");
  // Copies only where needed: copying an ndarray costs two atomic reference-count updates,
  // four per product in a training step.
  ndarray x_copy, a_copy;
  const ndarray& x = x_in.is_c_contiguous() ? x_in : (x_copy = x_in.contiguous());
  const ndarray* ap = &a_in;
  if (!(cs == 1 || k == 1) && !(rs == 1 || m == 1)) {
    a_copy = a_in.contiguous();
    ap = &a_copy;
    rs = a_copy.stride(transpose ? 1 : 0);
    cs = a_copy.stride(transpose ? 0 : 1);
  }
  const ndarray& a = *ap;
  const auto gemv = kernels_of(a.type()).gemv;
  if (!gemv) throw std::logic_error("xsym: no matrix-vector product on " + std::string(dtype_name(a.type())));
  gemv(a, rs, cs, x, y, m, k, alpha, accumulate, y0, beta, par);
}

namespace detail {
// run_gemv for element type T, the matrix's strides resolved (row- or column-contiguous).
template <class T>
void gemv_typed(const ndarray& a, std::int64_t rs, std::int64_t cs, const ndarray& x, ndarray& y, std::int64_t m,
                std::int64_t k, double alpha, bool accumulate, const ndarray* y0, double beta, const parallelism& par) {
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  const int threads = m * k >= par.product_minsize ? par.threads : 1;
  const T* y0p = !accumulate ? nullptr : y0 ? y0->data_as<T>() : y.data_as<T>();
  if (cs == 1 || k == 1) gemv_rows(a.data_as<T>(), rs, x.data_as<T>(), y.data_as<T>(), m, k, al, y0p, be, threads);
  else gemv_columns(a.data_as<T>(), cs, x.data_as<T>(), y.data_as<T>(), m, k, al, y0p, be, threads);
}
}  // namespace detail

/// @brief Inner product of two vectors.
inline void run_dot(const ndarray& a_in, const ndarray& b_in, ndarray& out) {
  if (a_in.shape(0) != b_in.shape(0))
    throw shape_error("vector dot product: shapes " + to_string(a_in.shape()) + " and " + to_string(b_in.shape()) +
                      " are not aligned");
  const auto dot = kernels_of(a_in.type()).dot;
  if (!dot) throw std::logic_error("xsym: no dot product on " + std::string(dtype_name(a_in.type())));
  dot(a_in.contiguous(), b_in.contiguous(), out);
}

namespace detail {
template <class T>
void dot_typed(const ndarray& a, const ndarray& b, ndarray& out) {
  *out.data_as<T>() = dot_span(a.data_as<T>(), b.data_as<T>(), a.size());
}
}  // namespace detail

/// @brief C = A B for matrices (or, accumulating, C += alpha A B); BLAS for floating types,
/// a plain loop for integers.
inline void run_dot22(const ndarray& a_in, const ndarray& b_in, ndarray& c, double alpha = 1.0, bool accumulate = false) {
  const std::int64_t m = a_in.shape(0), k = a_in.shape(1), n = b_in.shape(1);
  if (b_in.shape(0) != k)
    throw shape_error("matrix product: shapes " + to_string(a_in.shape()) + " and " + to_string(b_in.shape()) +
                      " are not aligned (" + std::to_string(k) + " != " + std::to_string(b_in.shape(0)) + ")");
  if (m == 0 || n == 0) return;
  const auto dot22 = kernels_of(c.type()).dot22;
  if (!dot22) throw std::logic_error("xsym: no matrix product on " + std::string(dtype_name(c.type())));
  dot22(a_in, b_in, c, alpha, accumulate);
}

namespace testing {
/// Test-only: the largest size or leading dimension handed to BLAS, whose arguments are int. A
/// test lowers it to run what larger ones take on small matrices.
inline std::int64_t& blas_int_limit() {
  static std::int64_t limit = std::numeric_limits<int>::max();
  return limit;
}
}  // namespace testing

namespace detail {
// How BLAS reads a matrix: row-major or its transpose, with a leading dimension BLAS accepts
// (positive, at least the row length, at most `limit`: a reversed, overlapping or broadcast
// layout is not one); anything else is copied into `keep` first.
inline std::pair<CBLAS_TRANSPOSE, std::int64_t> blas_layout(const ndarray& x, ndarray& keep, std::int64_t limit) {
  const std::int64_t r = x.shape(0), c = x.shape(1), rs = x.stride(0), cs = x.stride(1);
  if ((cs == 1 || c <= 1) && (r <= 1 || (rs >= std::max<std::int64_t>(1, c) && rs <= limit)))
    return {CblasNoTrans, r <= 1 ? std::max<std::int64_t>(1, c) : rs};
  if ((rs == 1 || r <= 1) && (c <= 1 || (cs >= std::max<std::int64_t>(1, r) && cs <= limit)))
    return {CblasTrans, c <= 1 ? std::max<std::int64_t>(1, r) : cs};
  keep = x.contiguous();
  return {CblasNoTrans, std::max<std::int64_t>(1, c)};
}

// run_dot22 for element type T: BLAS for floating types, a plain loop for integers.
template <class T>
void dot22_typed(const ndarray& a_in, const ndarray& b_in, ndarray& c, double alpha, bool accumulate) {
  const std::int64_t m = a_in.shape(0), k = a_in.shape(1), n = b_in.shape(1);
  // Every element's sum over k, in 64-bit indices: the integer product, and a floating one
  // whose sizes BLAS's int arguments cannot hold.
  auto plain = [&] {
    const T* ap = a_in.data_as<T>();
    const T* bp = b_in.data_as<T>();
    T* cp = c.data_as<T>();
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        T s = 0;
        for (std::int64_t p = 0; p < k; ++p) s = mul_add(s, ap[i * a_in.stride(0) + p * a_in.stride(1)], bp[p * b_in.stride(0) + j * b_in.stride(1)]);
        const T scaled = std::is_floating_point_v<T> ? mul(static_cast<T>(alpha), s) : s;
        cp[i * n + j] = accumulate ? add(cp[i * n + j], mul(static_cast<T>(alpha), s)) : scaled;
      }
  };
  if constexpr (std::is_floating_point_v<T>) {
    const std::int64_t limit = testing::blas_int_limit();
    ndarray ka, kb;
    auto [ta, lda] = blas_layout(a_in, ka, limit);
    auto [tb, ldb] = blas_layout(b_in, kb, limit);
    const T* ap = (ka.has_value() ? ka : a_in).template data_as<T>();
    const T* bp = (kb.has_value() ? kb : b_in).template data_as<T>();
    lda = std::max<std::int64_t>(lda, ta == CblasNoTrans ? k : m);
    ldb = std::max<std::int64_t>(ldb, tb == CblasNoTrans ? n : k);
    if (std::max({m, n, k, lda, ldb}) > limit) return plain();
    if (k == 0) {
      if (!accumulate)
        for (std::int64_t i = 0; i < m * n; ++i) c.data_as<T>()[i] = T(0);
      return;
    }
    const T beta = accumulate ? T(1) : T(0);
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), static_cast<float>(alpha), ap, int(lda), bp, int(ldb),
                  beta, c.data_as<float>(), int(n));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, ap, int(lda), bp, int(ldb), beta,
                  c.data_as<double>(), int(n));
  } else {
    plain();
  }
}
}  // namespace detail

}  // namespace xsym::cpu

#endif
