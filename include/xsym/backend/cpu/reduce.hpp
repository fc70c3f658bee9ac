#ifndef XSYM_BACKEND_CPU_REDUCE_HPP
#define XSYM_BACKEND_CPU_REDUCE_HPP

#include <bit>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../config/unroll.hpp"
#include "../../expr/ndarray.hpp"
#include "../../expr/op.hpp"
#include "kernel_table.hpp"
#include "scalar_kernels.hpp"

namespace xsym::cpu {

namespace detail {
// Integer sums and products wrap around on overflow, as numpy's int64 accumulators do (signed
// overflow is undefined in C++): combined as the elementwise kernels do (wrapping_fn), and
// summed in the unsigned type of the same width (sum_chains).
template <class Acc>
struct wrapping_type {
  using type = Acc;
};
template <class Acc>
  requires(std::is_integral_v<Acc> && !std::is_same_v<Acc, bool> && sizeof(Acc) >= sizeof(unsigned))
struct wrapping_type<Acc> {
  using type = std::make_unsigned_t<Acc>;
};
template <class Acc>
struct reducer {
  reduce_op op;
  Acc identity() const {
    switch (op) {
      case reduce_op::prod: return Acc(1);
      case reduce_op::max: return std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                                          : std::numeric_limits<Acc>::lowest();
      case reduce_op::min: return std::numeric_limits<Acc>::has_infinity ? std::numeric_limits<Acc>::infinity()
                                                                          : std::numeric_limits<Acc>::max();
      default: return Acc(0);
    }
  }
  Acc combine(Acc a, Acc b) const {
    switch (op) {
      case reduce_op::prod:
        if constexpr (std::is_same_v<Acc, bool>) return a && b;
        else if constexpr (std::is_integral_v<Acc>) return wrapping_fn<scalar_op::mul>::apply(a, b);
        else return a * b;
      case reduce_op::max: return b > a || b != b ? b : a;  // NaN wins, as in numpy
      case reduce_op::min: return b < a || b != b ? b : a;
      default:
        if constexpr (std::is_integral_v<Acc> && !std::is_same_v<Acc, bool>) return wrapping_fn<scalar_op::add>::apply(a, b);
        else return a + b;
    }
  }
};

// Accumulate sums and products in double (floats) or int64 (ints); max/min in the input type.
template <class In>
using acc_t = std::conditional_t<std::is_floating_point_v<In>, double,
                                 std::conditional_t<std::is_same_v<In, bool>, std::int64_t, std::int64_t>>;

// Kept axes first, reduced axes last, each with its own strides.
struct reduce_layout {
  shape_t kept, red;
  std::array<std::int64_t, max_rank> kept_st{}, red_st{};
  std::int64_t count = 0;
};

// p[i..n) summed in Acc as four partial sums: independent chains the compiler can pipeline.
// Integers are summed in unsigned partial sums (wrapping, as numpy's do). Not as wrapping_fn
// on signed ones: GCC 12's loop vectorizer at -O3 (AVX2, AVX-512) miscompiles that pattern,
// int32 sums of 8 or more elements came out wrong.
template <class Acc, class In>
[[gnu::always_inline]] inline Acc sum_chains(const In* p, std::int64_t i, std::int64_t n) {
  using S = typename wrapping_type<Acc>::type;
  S s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<S>(static_cast<Acc>(p[i]));
    s1 += static_cast<S>(static_cast<Acc>(p[i + 1]));
    s2 += static_cast<S>(static_cast<Acc>(p[i + 2]));
    s3 += static_cast<S>(static_cast<Acc>(p[i + 3]));
  }
  // At most 3 left, written out: GCC made a loop of unknown count a chain of compares and jumps
  // around the adds (short rows, docs/performance.md).
  if (i < n) {
    s0 += static_cast<S>(static_cast<Acc>(p[i]));
    if (i + 1 < n) {
      s0 += static_cast<S>(static_cast<Acc>(p[i + 1]));
      if (i + 2 < n) s0 += static_cast<S>(static_cast<Acc>(p[i + 2]));
    }
  }
  return static_cast<Acc>((s0 + s1) + (s2 + s3));
}

// A run of n float or double values summed in double, in vectors where the CPU has them: eight
// or sixteen partial sums instead of four scalar chains, and a smaller error for it. The order
// differs from a running sum; so does numpy's (pairwise). The values come from `v`:
// v.block(i) points at values [i, i + sum_block), v.rest(i, n) at [i, n) (fewer than
// sum_block), each asked for once and in order, so a reader that computes them (a fused
// program, a typed tree) sums them in the order, and to the bits, of their array.
#if defined(__AVX512F__)
inline constexpr std::int64_t sum_block = 32;
#elif defined(__AVX__)
inline constexpr std::int64_t sum_block = 16;
#else
inline constexpr std::int64_t sum_block = 4;  // four scalar chains
#endif
// Where the values after the whole blocks are: an array's at p[i, n) (its own pointer, so
// that the array's sum compiles to one loop over one index, as a plain loop over p would; a
// second index into a second pointer slowed short rows, docs/performance.md), a computed
// reader's at rest(i, n)[0, n - i).
template <class Values>
inline constexpr bool in_place_v = requires { requires Values::in_place; };

template <class In, class Values>
double sum_values(Values& v, std::int64_t n) {
  std::int64_t i = 0;
  double vectors = 0;  // added to the chains, as in every path: a sum of -0 values is +0
  // The rest: p[k, end).
  auto rest = [&](const In*& p, std::int64_t& k, std::int64_t& end) {
    if constexpr (in_place_v<Values>) {
      p = v.p;
      k = i;
      end = n;
    } else {
      p = v.rest(i, n);
      k = 0;
      end = n - i;
    }
  };
  const In* p = nullptr;
  std::int64_t k = 0, end = 0;
#if defined(__AVX512F__)
  if (n >= 8) {
    __m512d s[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    for (; i + 32 <= n; i += 32) {
      const In* b = v.block(i);
XSYM_UNROLL(4)
      for (int q = 0; q < 4; ++q) {
        if constexpr (std::is_same_v<In, float>) s[q] = _mm512_add_pd(s[q], _mm512_cvtps_pd(_mm256_loadu_ps(b + 8 * q)));
        else s[q] = _mm512_add_pd(s[q], _mm512_loadu_pd(b + 8 * q));
      }
    }
    rest(p, k, end);
    for (; k + 8 <= end; k += 8) {  // what is left a vector at a time: rows of 8 to 31 values too
      if constexpr (std::is_same_v<In, float>) s[0] = _mm512_add_pd(s[0], _mm512_cvtps_pd(_mm256_loadu_ps(p + k)));
      else s[0] = _mm512_add_pd(s[0], _mm512_loadu_pd(p + k));
    }
    vectors = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s[0], s[1]), _mm512_add_pd(s[2], s[3])));
  } else {
    rest(p, k, end);
  }
  return vectors + sum_chains<double>(p, k, end);
#elif defined(__AVX__)
  if (n >= 4) {
    __m256d s[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    for (; i + 16 <= n; i += 16) {
      const In* b = v.block(i);
XSYM_UNROLL(4)
      for (int q = 0; q < 4; ++q) {
        if constexpr (std::is_same_v<In, float>) s[q] = _mm256_add_pd(s[q], _mm256_cvtps_pd(_mm_loadu_ps(b + 4 * q)));
        else s[q] = _mm256_add_pd(s[q], _mm256_loadu_pd(b + 4 * q));
      }
    }
    rest(p, k, end);
    for (; k + 4 <= end; k += 4) {
      if constexpr (std::is_same_v<In, float>) s[0] = _mm256_add_pd(s[0], _mm256_cvtps_pd(_mm_loadu_ps(p + k)));
      else s[0] = _mm256_add_pd(s[0], _mm256_loadu_pd(p + k));
    }
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(s[0], s[1]), _mm256_add_pd(s[2], s[3])));
    vectors = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  } else {
    rest(p, k, end);
  }
  return vectors + sum_chains<double>(p, k, end);
#else
  // sum_chains' four chains, four values at a time.
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; i + 4 <= n; i += 4) {
    const In* b = v.block(i);
    s0 += static_cast<double>(b[0]);
    s1 += static_cast<double>(b[1]);
    s2 += static_cast<double>(b[2]);
    s3 += static_cast<double>(b[3]);
  }
  if (i < n) {
    rest(p, k, end);
    for (; k < end; ++k) s0 += static_cast<double>(p[k]);
  }
  return vectors + ((s0 + s1) + (s2 + s3));
#endif
}
// An array's values, where they lie.
template <class In>
struct array_values {
  static constexpr bool in_place = true;  // sum_values reads the rest at p + i itself
  const In* p;
  const In* block(std::int64_t i) const { return p + i; }
  const In* rest(std::int64_t i, std::int64_t) const { return p + i; }
};
template <class In>
double sum_contiguous(const In* p, std::int64_t n) {
  array_values<In> v{p};
  return sum_values<In>(v, n);
}

#if defined(__AVX512F__)
// Eight rows of 8, 16 or 24 values (whole vectors, fewer than a block) summed at once, each to
// sum_contiguous' bits: a row's vector sum as sum_values forms it, then the eight vectors
// reduced together, pairing lanes as _mm512_reduce_add_pd does for one (the upper half plus the
// lower, three times), then the empty chains' +0. One row at a time, the reduction's shuffles
// and the call were most of a short row's cost.
// s[0] of sum_values' four vectors as it reduces them: (s0 + s1) + (s2 + s3), the others zero.
[[gnu::always_inline]] inline __m512d row_total(__m512d s) {
  const __m512d z = _mm512_setzero_pd();
  return _mm512_add_pd(_mm512_add_pd(s, z), _mm512_add_pd(z, z));
}
template <class In>
[[gnu::always_inline]] inline __m512d row_vectors(const In* p, std::int64_t n) {
  __m512d s = _mm512_setzero_pd();
  for (std::int64_t k = 0; k < n; k += 8) {
    if constexpr (std::is_same_v<In, float>) s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_loadu_ps(p + k)));
    else s = _mm512_add_pd(s, _mm512_loadu_pd(p + k));
  }
  return row_total(s);
}
// Eight rows' vectors (row_total) to their sums, in 256-bit halves (no 512-bit lane crossing,
// which some cores split in two).
inline void reduce_rows8(const __m512d* v, double* out) {
  __m256d t3[8];
XSYM_UNROLL(8)
  for (int r = 0; r < 8; ++r)  // each row's upper 256 bits plus its lower
    t3[r] = _mm256_add_pd(_mm512_extractf64x4_pd(v[r], 1), _mm512_castpd512_pd256(v[r]));
  __m256d t6[4];
XSYM_UNROLL(4)
  for (int q = 0; q < 4; ++q)  // rows 2q, 2q + 1: upper 128 bits plus lower
    t6[q] = _mm256_add_pd(_mm256_permute2f128_pd(t3[2 * q], t3[2 * q + 1], 0x31),
                          _mm256_permute2f128_pd(t3[2 * q], t3[2 * q + 1], 0x20));
XSYM_UNROLL(2)
  for (int q = 0; q < 2; ++q) {  // lane 0 plus lane 1, rows in the order 0 2 1 3, put back in order
    const __m256d sums = _mm256_add_pd(_mm256_add_pd(_mm256_unpacklo_pd(t6[2 * q], t6[2 * q + 1]),
                                                     _mm256_unpackhi_pd(t6[2 * q], t6[2 * q + 1])),
                                       _mm256_setzero_pd());
    _mm256_storeu_pd(out + 4 * q, _mm256_permute4x64_pd(sums, 0xD8));
  }
}
template <class In>
void sum_rows8(const In* const* rows, std::int64_t n, double* out) {
  __m512d v[8];
XSYM_UNROLL(8)
  for (int r = 0; r < 8; ++r) v[r] = row_vectors(rows[r], n);
  reduce_rows8(v, out);
}
#endif

// ---- vector paths for float and double: sums and means, max and min -----------------------
// One op's combine without a switch per element, on a value or on a batch of lanes (each lane
// combined exactly as the scalar is: NaN wins, and a later value replaces only a greater one).
// Lanes test NaN with isnan: xsimd 8's AVX-512 `b != b` is an ordered compare, false for NaN.
template <reduce_op R, class A>
A combine_as(A a, A b) {
  if constexpr (R == reduce_op::max) return b > a || b != b ? b : a;
  else if constexpr (R == reduce_op::min) return b < a || b != b ? b : a;
  else return a + b;
}
template <reduce_op R, class B>
B combine_lanes(B a, B b) {
  if constexpr (R == reduce_op::max) return xsimd::select((b > a) | xsimd::isnan(b), b, a);
  else if constexpr (R == reduce_op::min) return xsimd::select((b < a) | xsimd::isnan(b), b, a);
  else return a + b;
}

// A batch of doubles read from In: floats widened (one conversion instruction where the CPU has
// one), doubles as they are.
template <class In>
xsimd::batch<double> load_wide(const In* p) {
  using B = xsimd::batch<double>;
  if constexpr (std::is_same_v<In, double>) {
    return B::load_unaligned(p);
  } else {
#if defined(__AVX512F__)
    if constexpr (B::size == 8) return B(_mm512_cvtps_pd(_mm256_loadu_ps(p)));
#elif defined(__AVX__)
    if constexpr (B::size == 4) return B(_mm256_cvtps_pd(_mm_loadu_ps(p)));
#endif
    alignas(64) double t[B::size];
    for (std::size_t k = 0; k < B::size; ++k) t[k] = static_cast<double>(p[k]);
    return B::load_aligned(t);
  }
}

// Columns: acc[k] (k < K) combined with p[r * rstride + k] for r < rows, in vectors across the
// columns. Max and min take the rows in order, one chain per column: the scalar loop's bits,
// which one of two equal zeros and which NaN included. Sums (in double) take even and odd rows
// in two chains, added at the end: a fixed order, whatever the values.
template <reduce_op R, class In, class Acc>
void accumulate_columns(const In* p, std::int64_t rstride, std::int64_t rows, std::int64_t K, Acc* acc) {
  constexpr bool sum = R != reduce_op::max && R != reduce_op::min;
  static_assert(!sum || std::is_same_v<Acc, double>, "xsym: floating sums accumulate in double");
  using B = xsimd::batch<Acc>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  auto load = [](const In* q) {
    if constexpr (sum) return load_wide(q);
    else return B::load_unaligned(q);
  };
  // nb batches of columns from k: four where they fit, then one at a time.
  auto block = [&]<int nb>(std::int64_t k) {
    B a[nb], b[nb];
XSYM_UNROLL(4)
    for (int q = 0; q < nb; ++q) {
      a[q] = B::load_unaligned(acc + k + q * w);
      b[q] = B(Acc(0));
    }
    const In* row = p + k;
    std::int64_t r = 0;
    if constexpr (sum) {
      for (; r + 2 <= rows; r += 2, row += 2 * rstride)
XSYM_UNROLL(4)
        for (int q = 0; q < nb; ++q) {
          a[q] = a[q] + load(row + q * w);
          b[q] = b[q] + load(row + rstride + q * w);
        }
    }
    for (; r < rows; ++r, row += rstride)
XSYM_UNROLL(4)
      for (int q = 0; q < nb; ++q) a[q] = combine_lanes<R>(a[q], load(row + q * w));
XSYM_UNROLL(4)
    for (int q = 0; q < nb; ++q) {
      if constexpr (sum) a[q] = a[q] + b[q];
      a[q].store_unaligned(acc + k + q * w);
    }
  };
  std::int64_t k = 0;
  for (; k + 4 * w <= K; k += 4 * w) block.template operator()<4>(k);
  for (; k + w <= K; k += w) block.template operator()<1>(k);
  for (; k < K; ++k) {
    Acc a = acc[k], b = Acc(0);
    const In* q = p + k;
    std::int64_t r = 0;
    if constexpr (sum)
      for (; r + 2 <= rows; r += 2, q += 2 * rstride) {
        a += static_cast<Acc>(q[0]);
        b += static_cast<Acc>(q[rstride]);
      }
    for (; r < rows; ++r, q += rstride) a = combine_as<R>(a, static_cast<Acc>(*q));
    acc[k] = sum ? a + b : a;
  }
}

// Max or min of a contiguous run of n >= 1 values, with the scalar loop's bits: the value from
// lanes, then where lanes could pick another element than the loop would, the loop's own
// choice: the last NaN (each NaN replaces the one before), or the first zero of either sign (a
// zero equal to the one held does not replace it).
template <reduce_op R, class T>
T extreme_contiguous(const T* p, std::int64_t n) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  // Without NaN, a ternary the compiler makes one max or min instruction (no branch on values).
  auto pick = [](T m, T v) {
    if constexpr (R == reduce_op::max) return v > m ? v : m;
    else return v < m ? v : m;
  };
  T m = p[0];
  bool nan = false;
  if (n >= w) {
    B a = B::load_unaligned(p);
    std::int64_t i = w;
    if (n >= 2 * w) {
      B c = B::load_unaligned(p + w);
      for (i = 2 * w; i + 2 * w <= n; i += 2 * w) {
        a = combine_lanes<R>(a, B::load_unaligned(p + i));
        c = combine_lanes<R>(c, B::load_unaligned(p + i + w));
      }
      a = combine_lanes<R>(a, c);
    }
    for (; i + w <= n; i += w) a = combine_lanes<R>(a, B::load_unaligned(p + i));
    if (i < n) a = combine_lanes<R>(a, B::load_unaligned(p + n - w));  // the last batch again, overlapped
    nan = xsimd::any(xsimd::isnan(a));
    alignas(64) T lanes[w];
    a.store_aligned(lanes);
    m = lanes[0];
    for (std::int64_t k = 1; k < w; ++k) m = pick(m, lanes[k]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      nan |= p[i] != p[i];
      m = pick(m, p[i]);
    }
  }
  if (nan) {
    for (std::int64_t k = n - 1;; --k)
      if (p[k] != p[k]) return p[k];
  }
  if (m == T(0)) {
    for (std::int64_t k = 0;; ++k)
      if (p[k] == T(0)) return p[k];
  }
  return m;
}

/// @brief The position of the first maximum (R max) or minimum of p[0, n), n >= 1, a NaN
/// counting as the extreme (the first NaN's), as numpy's argmax: the value from lanes, then
/// the first element equal to it (of equal zeros, the first of either sign).
template <reduce_op R, class T>
std::int64_t arg_extreme_contiguous(const T* p, std::int64_t n) {
  if (n < static_cast<std::int64_t>(xsimd::batch<T>::size)) {  // under a batch: one walk, numpy's definition
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < n; ++j) {
      const T v = p[j], b = p[best];
      if (b != b) break;
      if (v != v) return j;
      if (R == reduce_op::max ? b < v : v < b) best = j;
    }
    return best;
  }
  const T m = extreme_contiguous<R>(p, n);
  const bool nan = m != m;
#if defined(__AVX512F__)
  // A batch at a time: the first lane equal to m (or NaN), without a branch per element.
  constexpr std::int64_t w = 64 / static_cast<std::int64_t>(sizeof(T));
  auto match = [&](const T* q) -> unsigned {
    if constexpr (std::is_same_v<T, float>) {
      const __m512 x = _mm512_loadu_ps(q);
      return nan ? _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q) : _mm512_cmp_ps_mask(x, _mm512_set1_ps(m), _CMP_EQ_OQ);
    } else {
      const __m512d x = _mm512_loadu_pd(q);
      return nan ? _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q) : _mm512_cmp_pd_mask(x, _mm512_set1_pd(m), _CMP_EQ_OQ);
    }
  };
  if (n >= w) {
    std::int64_t k = 0;
    for (; k + w <= n; k += w)
      if (const unsigned bits = match(p + k)) return k + std::countr_zero(bits);
    // The last batch again, overlapped: its lanes before k matched nothing.
    return n - w + std::countr_zero(match(p + n - w));
  }
#endif
  std::int64_t k = 0;
  if (nan) {
    while (p[k] == p[k]) ++k;
  } else {
    while (p[k] != m) ++k;
  }
  return k;
}

// The reduced axes as one run of `count` values `stride` apart; false where they are not one.
inline bool one_run(const reduce_layout& l, std::int64_t& stride) {
  stride = 1;
  int last = -1;
  for (int d = 0; d < l.red.rank; ++d)
    if (l.red[d] != 1) {
      const auto du = static_cast<std::size_t>(d);
      if (last >= 0 && l.red_st[static_cast<std::size_t>(last)] != l.red_st[du] * l.red[d]) return false;
      last = d;
    }
  if (last >= 0) stride = l.red_st[static_cast<std::size_t>(last)];
  return true;
}

// Sums, means, max and min of floats and doubles in vectors; false where reduce_loop's own
// paths run: products, sums along contiguous runs or over a whole array (sum_contiguous), and
// layouts whose last kept axis is not contiguous or has one element.
template <class In, class Acc, class Out>
bool reduce_vectors(const op& o, const reduce_layout& l, const In* src, Out* dst) {
  const reduce_op rop = o.reduction == reduce_op::mean ? reduce_op::sum : o.reduction;
  if (rop == reduce_op::prod || l.count == 0) return false;
  auto run = [&]<reduce_op R>() {
    using A = std::conditional_t<R == reduce_op::sum, double, In>;
    auto finish = [&](A v) {
      if (o.reduction == reduce_op::mean) return static_cast<Out>(static_cast<double>(v) / static_cast<double>(l.count));
      return static_cast<Out>(v);
    };
    std::int64_t rstride = 1;
    const bool run1 = one_run(l, rstride);
    const int kr = l.kept.rank;
    if constexpr (R != reduce_op::sum) {
      // Rows: each output reduces a contiguous run.
      if (run1 && (rstride == 1 || l.count == 1)) {
        std::int64_t j = 0;
        xsym::detail::for_each_offset(kr ? l.kept : shape_t{{1}, 1}, l.kept_st, [&](std::int64_t koff) {
          dst[j++] = finish(extreme_contiguous<R>(src + koff, l.count));
        });
        return true;
      }
    }
    // Columns: the last kept axis is contiguous; its outputs accumulate row after row.
    if (kr == 0 || l.kept[kr - 1] < 2 || l.kept_st[static_cast<std::size_t>(kr - 1)] != 1) return false;
    const std::int64_t K = l.kept[kr - 1];
    shape_t outer = l.kept;
    outer.rank = kr - 1;
    thread_local std::vector<A> acc;
    acc.resize(static_cast<std::size_t>(K));
    std::int64_t j = 0;
    // The reduced axes but the last, where they are not one run: their rows in C order.
    shape_t lead = l.red;
    std::int64_t last_n = l.count, last_st = rstride;
    if (!run1) {
      lead.rank = l.red.rank - 1;
      last_n = l.red[l.red.rank - 1];
      last_st = l.red_st[static_cast<std::size_t>(l.red.rank - 1)];
    }
    xsym::detail::for_each_offset(outer.rank ? outer : shape_t{{1}, 1}, l.kept_st, [&](std::int64_t koff) {
      std::fill(acc.begin(), acc.end(), reducer<A>{R}.identity());
      if (run1) accumulate_columns<R, In, A>(src + koff, last_st, last_n, K, acc.data());
      else
        xsym::detail::for_each_offset(lead, l.red_st, [&](std::int64_t roff) {
          accumulate_columns<R, In, A>(src + koff + roff, last_st, last_n, K, acc.data());
        });
      for (std::int64_t k = 0; k < K; ++k) dst[j++] = finish(acc[static_cast<std::size_t>(k)]);
    });
    return true;
  };
  // Only the paths this loop's types can take are compiled: max and min where the accumulator
  // is the input's type, sums where it is double (reduce_typed).
  switch (rop) {
    case reduce_op::max:
      if constexpr (std::is_same_v<Acc, In>) return run.template operator()<reduce_op::max>();
      else return false;
    case reduce_op::min:
      if constexpr (std::is_same_v<Acc, In>) return run.template operator()<reduce_op::min>();
      else return false;
    default:
      if constexpr (std::is_same_v<Acc, double>) return run.template operator()<reduce_op::sum>();
      else return false;
  }
}

// The loop for one (input, accumulator, output) type triple; `dst` is C-contiguous.
template <class In, class Acc, class Out>
void reduce_loop(const op& o, const reduce_layout& l, const In* src, Out* dst) {
  const shape_t& kept = l.kept;
  const shape_t& red = l.red;
  const auto& kept_st = l.kept_st;
  const auto& red_st = l.red_st;
  const std::int64_t count = l.count;
  detail::reducer<Acc> r{o.reduction == reduce_op::mean ? reduce_op::sum : o.reduction};
  const bool red_contig = red.rank == 0 || [&] {
    std::int64_t e = 1;
    for (int d = red.rank - 1; d >= 0; --d) {
      if (red[d] != 1 && red_st[static_cast<std::size_t>(d)] != e) return false;
      e *= red[d];
    }
    return true;
  }();
  if constexpr (std::is_floating_point_v<In>)
    if (reduce_vectors<In, Acc, Out>(o, l, src, dst)) return;
  auto finish = [&](Acc acc) {
    return o.reduction == reduce_op::mean ? static_cast<Out>(static_cast<double>(acc) / static_cast<double>(count))
                                          : static_cast<Out>(acc);
  };
#if defined(__AVX512F__)
  if constexpr (std::is_floating_point_v<In> && std::is_same_v<Acc, double>) {
    if (red_contig && count % 8 == 0 && count > 0 && count < sum_block &&
        (o.reduction == reduce_op::sum || o.reduction == reduce_op::mean)) {
      const In* rows[8];
      double sums[8];
      int k = 0;
      std::int64_t j = 0;
      xsym::detail::for_each_offset(kept.rank ? kept : shape_t{{1}, 1}, kept_st, [&](std::int64_t koff) {
        rows[k++] = src + koff;
        if (k < 8) return;
        sum_rows8(rows, count, sums);
        for (int q = 0; q < 8; ++q) dst[j++] = finish(sums[q]);
        k = 0;
      });
      for (int q = 0; q < k; ++q) dst[j++] = finish(sum_contiguous(rows[q], count));
      return;
    }
  }
#endif
  std::int64_t j = 0;
  xsym::detail::for_each_offset(kept.rank ? kept : shape_t{{1}, 1}, kept_st, [&](std::int64_t koff) {
    Acc acc = r.identity();
    const In* p = count ? src + koff : src;  // an empty input may have no buffer: no offset from null
    if (red_contig) {
      if constexpr (std::is_floating_point_v<In> && std::is_same_v<Acc, double>) {
        if (o.reduction == reduce_op::sum || o.reduction == reduce_op::mean) acc = sum_contiguous(p, count);
        else
          for (std::int64_t i = 0; i < count; ++i) acc = r.combine(acc, static_cast<Acc>(p[i]));
      } else if (o.reduction == reduce_op::sum || o.reduction == reduce_op::mean) {
        acc = sum_chains<Acc>(p, 0, count);
      } else {
        for (std::int64_t i = 0; i < count; ++i) acc = r.combine(acc, static_cast<Acc>(p[i]));
      }
    } else {
      xsym::detail::for_each_offset(red, red_st, [&](std::int64_t roff) {
        acc = r.combine(acc, static_cast<Acc>(p[roff]));
      });
    }
    dst[j++] = finish(acc);
  });
}

// Into `out`: the loop for the dtype the runtime gives it (Natural) runs straight into it; any
// other dtype gets Wide (the value before its final cast, so the same result as a direct cast)
// and then the cast kernel.
template <class In, class Acc, class Natural, class Wide>
void reduce_into(const op& o, const reduce_layout& l, const ndarray& in, ndarray& out) {
  if (out.type() == dtype_of<Natural>()) return reduce_loop<In, Acc, Natural>(o, l, in.data_as<In>(), out.data_as<Natural>());
  ndarray tmp = ndarray::empty(dtype_of<Wide>(), out.shape());
  reduce_loop<In, Acc, Wide>(o, l, in.data_as<In>(), tmp.data_as<Wide>());
  const void* args[1] = {tmp.data()};
  xsym::detail::visit_dtype(out.type(), [&](auto zo) { convert<Wide, decltype(zo)>(out.data(), args, 0, out.size()); });
}
}  // namespace detail

namespace detail {
// Kept axes first, reduced axes last, with in's strides.
inline reduce_layout layout_of(const op& o, const ndarray& in) {
  const int rank = in.rank();
  std::uint32_t reduced = 0;  // bit d: axis d is reduced (a mask, not a vector: no allocation per call)
  for (int a : o.axes) reduced |= std::uint32_t{1} << a;
  detail::reduce_layout l;
  for (int d = 0; d < rank; ++d) {
    if ((reduced >> d) & 1u) {
      l.red_st[static_cast<std::size_t>(l.red.rank)] = in.stride(d);
      l.red[l.red.rank++] = in.shape(d);
    } else {
      l.kept_st[static_cast<std::size_t>(l.kept.rank)] = in.stride(d);
      l.kept[l.kept.rank++] = in.shape(d);
    }
  }
  l.count = l.red.size();
  return l;
}
}  // namespace detail

/// @brief Reduces `in` over op.axes into `out` (already allocated with the kept dimensions).
inline void run_reduce(const op& o, const ndarray& in, ndarray& out) {
  const detail::reduce_layout l = detail::layout_of(o, in);
  // Over bool, max and min are logical or and and (all, any), whose identities false and
  // true the loops start from: numpy's any([]) is False, all([]) True.
  if (l.count == 0 && (o.reduction == reduce_op::max || o.reduction == reduce_op::min) && in.type() != dtype::bool_)
    throw shape_error("zero-size array to a reduction (" + std::string(reduce_name(o.reduction)) +
                      ") which has no identity; input shape " + to_string(in.shape()));
  kernels_of(in.type()).reduce(o, l, in, out);
}

// ---- a reduction in blocks (careduce_fusion: exec/cpu_nodes.hpp, reduce_fused_node) ---------
// A block of a larger reduction whose reduced axes include the blocks' axis: sums, means and
// products accumulate in double as run_reduce's do, max and min in the input's type; each
// block's result is combined into acc in block order with the loop's own rule (max and min
// keep the last NaN and the first of equal values, as one loop over all blocks would).
namespace detail {
template <class In>
void reduce_block_typed(const op& s, const ndarray& block, ndarray& acc, ndarray& part, bool first) {
  const reduce_layout l = layout_of(s, block);
  auto run = [&]<class Acc>() {
    Acc* a = acc.data_as<Acc>();
    reduce_loop<In, Acc, Acc>(s, l, block.data_as<In>(), first ? a : part.data_as<Acc>());
    if (first) return;
    const reducer<Acc> r{s.reduction};
    const Acc* p = part.data_as<Acc>();
    for (std::int64_t k = 0, n = acc.size(); k < n; ++k) a[k] = r.combine(a[k], p[k]);
  };
  if (s.reduction == reduce_op::max || s.reduction == reduce_op::min) run.template operator()<In>();
  else run.template operator()<double>();
}
}  // namespace detail

/// @brief The dtype reduce_block accumulates a float input's blocks in.
inline dtype block_acc_type(const op& o, dtype in) {
  return o.reduction == reduce_op::max || o.reduction == reduce_op::min ? in : dtype::float64;
}
/// @brief Reduces a C-contiguous float or double block into acc (block_acc_type, the kept
/// shape), or combines it with what acc holds (`first` false; `part` is scratch of acc's shape).
/// A mean is o's sum here (reduction sum), divided by finish_blocks.
inline void reduce_block(const op& o, const ndarray& block, ndarray& acc, ndarray& part, bool first) {
  if (o.reduction == reduce_op::mean) throw std::logic_error("xsym: reduce_block sums a mean's blocks (reduction sum)");
  const auto f = kernels_of(block.type()).reduce_block;  // the block's dtype's, compiled where the program has it
  if (!f) throw std::logic_error("xsym: reduce_block takes float32 or float64 blocks");
  f(o, block, acc, part, first);
}
/// @brief out from the blocks' acc: a mean divided by `count`, the reduced elements of all blocks.
inline void finish_blocks(const op& o, const ndarray& acc, std::int64_t count, ndarray& out) {
  auto write = [&]<class Acc, class Out>() {
    const Acc* a = acc.data_as<Acc>();
    Out* d = out.data_as<Out>();
    for (std::int64_t k = 0, n = out.size(); k < n; ++k)
      d[k] = o.reduction == reduce_op::mean ? static_cast<Out>(static_cast<double>(a[k]) / static_cast<double>(count))
                                            : static_cast<Out>(a[k]);
  };
  auto to = [&]<class Acc>() {
    if (out.type() == dtype::float32) write.template operator()<Acc, float>();
    else if (out.type() == dtype::float64) write.template operator()<Acc, double>();
    else throw std::logic_error("xsym: finish_blocks writes float32 or float64");
  };
  if (acc.type() == dtype::float32) to.template operator()<float>();
  else to.template operator()<double>();
}

namespace detail {
// run_reduce for an input of type In. Only the loops for the output dtype the runtime gives
// (reduce_result_type; the input's for max/min) are compiled, not one per (input, output) pair.
template <class In>
void reduce_typed(const op& o, const reduce_layout& l, const ndarray& in, ndarray& out) {
  using Acc = acc_t<In>;
  if (o.reduction == reduce_op::max || o.reduction == reduce_op::min) reduce_into<In, In, In, In>(o, l, in, out);
  // The mean of integers sums in double from the start, as numpy's does: an int64 sum would wrap first.
  else if (o.reduction == reduce_op::mean)
    reduce_into<In, std::conditional_t<std::is_floating_point_v<In>, Acc, double>, float_result_t<In>, double>(o, l, in, out);
  else reduce_into<In, Acc, sum_result_t<In>, Acc>(o, l, in, out);
}
}  // namespace detail

}  // namespace xsym::cpu

#endif
