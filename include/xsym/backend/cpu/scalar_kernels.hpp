#ifndef XSYM_BACKEND_CPU_SCALAR_KERNELS_HPP
#define XSYM_BACKEND_CPU_SCALAR_KERNELS_HPP

// The only header that includes xsimd: every vectorized loop of the CPU backend lives here.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../expr/op.hpp"

namespace xsym::cpu {

/// A kernel applies one scalar op to n elements; bit k of scalar_mask says argument k is one
/// value broadcast to all n (so no index arithmetic in the loop).
using kernel_fn = void (*)(void* dst, const void* const* args, unsigned scalar_mask, std::int64_t n);

namespace detail {

// Everything below that computes a value exists once, as macro text: it is compiled here, and
// its text is what backend/cpu/jit.hpp puts into the kernels that cxx compiles, so a compiled
// kernel applies exactly these helpers and the op table's expressions (expr/op_table.hpp).

// f applied lane by lane with the scalar function the tail uses, out of line: pow's path, and
// vlanes_where's, which replaces only the lanes of m (values a vector kernel gets wrong) in the
// vector result r, so that no other lane's value depends on its neighbours.
#define XSYM_VLANES                                                                      \
  template <class X, class F>                                                            \
  [[gnu::noinline]] X vlanes(const X& a, const X& b, F f) {                              \
    using T = typename X::value_type;                                                    \
    alignas(64) T x[X::size], y[X::size];                                                \
    a.store_aligned(x);                                                                  \
    b.store_aligned(y);                                                                  \
    for (std::size_t i = 0; i < X::size; ++i) x[i] = f(x[i], y[i]);                      \
    return X::load_aligned(x);                                                           \
  }                                                                                      \
  template <class X, class M, class F>                                                   \
  [[gnu::noinline]] X vlanes_where(const M& m, const X& r, const X& a, F f) {            \
    using T = typename X::value_type;                                                    \
    alignas(64) T x[X::size], o[X::size], w[X::size];                                    \
    a.store_aligned(x);                                                                  \
    r.store_aligned(o);                                                                  \
    xsimd::select(m, X(1), X(0)).store_aligned(w);                                       \
    for (std::size_t i = 0; i < X::size; ++i)                                            \
      if (w[i] != 0) o[i] = f(x[i]);                                                     \
    return X::load_aligned(o);                                                           \
  }                                                                                      \
  /* Where |a| reaches exp_edge, exp's results are subnormal or near overflow, or a is  \
     inf or NaN: xsimd's exp and expm1 end their range early there (and its float64 exp \
     converts such values to integers out of range), so those lanes take the C          \
     library's function, out of line. */                                                \
  template <class T>                                                                     \
  inline constexpr T exp_edge = sizeof(T) == 4 ? T(87.3) : T(708.3);                     \
  template <class X>                                                                     \
  [[gnu::noinline]] X vexp_edges(const X& a) {                                           \
    using T = typename X::value_type;                                                    \
    const auto in = xsimd::abs(a) < X(exp_edge<T>);                                      \
    return vlanes_where(!in, xsimd::exp(xsimd::select(in, a, X(0))), a,                  \
                        [](T x) { return std::exp(x); });                                \
  }
XSYM_VLANES

// exp of a batch: xsimd's, except on 16-float (AVX-512) batches, where one vscalefps scales by
// 2^k and saturates to 0 or infinity. xsimd builds 2^k from bits and selects both ends of the
// range; it returns 0 from x = -88.38 down and infinity from 88.38 up, where the true results
// are subnormal or still finite. Same reduction and polynomial as xsimd's, so the same values in
// between, in about 80% of the time.
#define XSYM_VEXP_GENERIC                                                                 \
  template <class X>                                                                      \
  X vexp_batch(const X& a) {                                                              \
    using T = typename X::value_type;                                                     \
    if (xsimd::all(xsimd::abs(a) < X(exp_edge<T>))) return xsimd::exp(a);                 \
    return vexp_edges(a);                                                                 \
  }
#define XSYM_VEXP_AVX512                                                                                   \
  template <class A>                                                                                       \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                 \
  xsimd::batch<float, A> vexp_batch(const xsimd::batch<float, A>& a) {                                     \
    /* min and max return their second operand when one is NaN: a NaN goes through */                      \
    const __m512 x = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-104.0f), a));     \
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),          \
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);                  \
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);                                       \
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);                                           \
    __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(1.3997796e-03f), r, _mm512_set1_ps(8.3955629e-03f));         \
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665401e-02f));                                             \
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666277e-01f));                                             \
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000000e-01f));                                             \
    y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));                   \
    return _mm512_scalef_ps(y, k);                                                                         \
  }

// log of a batch: xsimd's, except on 16-float (AVX-512) batches of positive normal numbers,
// which take a table: x = 2^k z with z in [0.6953125, 1.390625) from x's bits, and entry i (z's
// bits 18..22, one vpermt2ps) gives invc ~ 1/z and logc = -log(invc), so that
// log x = k ln2 + logc + log1p(r), r = z invc - 1, |r| < 0.025, where five terms of log1p's
// series are exact to float. k ln2 + logc + r is summed with each rounding error kept
// (Fast2Sum), and added back with the series' tail. No division: the kernel over 1024 floats
// in L1 takes 0.28-0.31 ns per element, where xsimd's steps took 0.38-0.39. As close as
// xsimd's: worst 0.7475 ulp against 0.7535 over every positive normal float, and 0.014% of
// results more than half an ulp off, against 0.62% (bench/log_ulps.cpp).
// scripts/log_table.py makes the tables and says how invc is chosen. A batch with any other
// lane (zero, negative, subnormal, infinite, NaN) takes xsimd's whole path, out of line, so
// that the common path is small enough to be inlined into the kernels' loops. The test for
// such lanes and the common path are functions of their own for chain_loop, which tests four
// batches at once.
#define XSYM_VLOG_GENERIC                                                                           \
  /* zero, negative, subnormal, infinite and NaN lanes take the C library's results */              \
  template <class X>                                                                                \
  X vlog_batch(const X& a) {                                                                        \
    using T = typename X::value_type;                                                               \
    const auto in = a >= X(std::numeric_limits<T>::min()) && a <= X(std::numeric_limits<T>::max()); \
    if (xsimd::all(in)) return xsimd::log(a);                                                       \
    return vlanes_where(!in, xsimd::log(xsimd::select(in, a, X(1))), a, [](T x) { return std::log(x); }); \
  }                                                                                                 \
  template <class X>                                                                                \
  X vlog1p_batch(const X& a) {                                                                      \
    using T = typename X::value_type;                                                               \
    const auto in = a > X(-1) && a <= X(std::numeric_limits<T>::max());                            \
    if (xsimd::all(in)) return xsimd::log1p(a);                                                     \
    return vlanes_where(!in, xsimd::log1p(xsimd::select(in, a, X(0))), a,                           \
                        [](T x) { return std::log1p(x); });                                         \
  }
#define XSYM_VLOG_AVX512                                                                                             \
  template <class A>                                                                                                 \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                           \
  inline bool vlog_special_lanes(const xsimd::batch<float, A>& a) {                                                  \
    return _mm512_fpclass_ps_mask(a, 0xFF) != 0;                                                                     \
  }                                                                                                                  \
  /* log(a + low) where |low| is at most half an ulp of a: low enters r as low invc 2^-k, and the */                 \
  /* rounding error of that sum joins the tail (log1p passes 1 + x and its rounding error) */                        \
  template <bool Low, class A>                                                                                       \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                           \
  inline xsimd::batch<float, A> vlog_table(const xsimd::batch<float, A>& a, [[maybe_unused]] __m512 low) {           \
    alignas(64) static constexpr float invc[32] = {                                                                  \
        0x1.6bfa24p+0f, 0x1.640f48p+0f, 0x1.5ca964p+0f, 0x1.5564fap+0f, 0x1.4e77aep+0f, 0x1.47bbccp+0f,              \
        0x1.41525ap+0f, 0x1.3b20d8p+0f, 0x1.352496p+0f, 0x1.2f63fap+0f, 0x1.29e368p+0f, 0x1.248eeep+0f,              \
        0x1.1f81eep+0f, 0x1.1a653ap+0f, 0x1.1599e2p+0f, 0x1.11031cp+0f, 0x1.0cadccp+0f, 0x1.0852e6p+0f,              \
        0x1.038722p+0f, 0x1.000000p+0f, 0x1.f53bf6p-1f, 0x1.e1f452p-1f, 0x1.d43636p-1f, 0x1.c711d4p-1f,              \
        0x1.badefep-1f, 0x1.af1f4ap-1f, 0x1.a42db0p-1f, 0x1.99a968p-1f, 0x1.8f9708p-1f, 0x1.8624d2p-1f,              \
        0x1.7d2536p-1f, 0x1.746c6cp-1f};                                                                             \
    alignas(64) static constexpr float logc[32] = {                                                                  \
        -0x1.685c06p-2f, -0x1.51d6ccp-2f, -0x1.3c56bcp-2f, -0x1.26c50ep-2f, -0x1.11c76ap-2f, -0x1.f9e780p-3f,        \
        -0x1.d1707ap-3f, -0x1.a9944ep-3f, -0x1.824e78p-3f, -0x1.5bd6dep-3f, -0x1.365b36p-3f, -0x1.11616ap-3f,        \
        -0x1.db6deep-4f, -0x1.91f1a2p-4f, -0x1.4bceccp-4f, -0x1.07882ap-4f, -0x1.8bff52p-5f, -0x1.061fa2p-5f,        \
        -0x1.c07bb6p-7f, 0.0f, 0x1.5c2dacp-6f, 0x1.ef69a0p-5f, 0x1.6e32d6p-4f, 0x1.e2d004p-4f,                       \
        0x1.290ddap-3f, 0x1.601e68p-3f, 0x1.94c6f2p-3f, 0x1.c8b076p-3f, 0x1.fbab7ep-3f, 0x1.165524p-2f,              \
        0x1.2e3a2ep-2f, 0x1.45ee94p-2f};                                                                             \
    const __m512i bits = _mm512_castps_si512(a);                                                                     \
    const __m512i t = _mm512_sub_epi32(bits, _mm512_set1_epi32(0x3f320000));                                         \
    /* shifts and the conversion as vector arithmetic: GCC 12 warns that the intrinsics' */                          \
    /* undefined pass-through operand "is used uninitialized" */                                                     \
    const __m512 k = __builtin_convertvector((__v16si)t >> 23, __v16sf);                                             \
    const __m512i high = _mm512_and_si512(t, _mm512_set1_epi32(-8388608)); /* k, in the exponent field */            \
    const __m512 z = _mm512_castsi512_ps(_mm512_sub_epi32(bits, high));                                              \
    const __m512i i = (__m512i)((__v16su)t >> 18);                                                                   \
    const __m512 ic = _mm512_permutex2var_ps(_mm512_load_ps(invc), i, _mm512_load_ps(invc + 16));                    \
    const __m512 lc = _mm512_permutex2var_ps(_mm512_load_ps(logc), i, _mm512_load_ps(logc + 16));                    \
    __m512 r = _mm512_fmsub_ps(z, ic, _mm512_set1_ps(1.0f));                                                         \
    __m512 r_err = _mm512_setzero_ps();                                                                              \
    if constexpr (Low) {                                                                                             \
      const __m512 d = _mm512_scalef_ps(_mm512_mul_ps(low, ic), _mm512_sub_ps(_mm512_setzero_ps(), k));              \
      /* Fast2Sum: |r| >= |d| but where r is within an ulp of 0 and logc != 0 makes the error moot */                \
      const __m512 sum = _mm512_add_ps(r, d);                                                                        \
      r_err = _mm512_sub_ps(d, _mm512_sub_ps(sum, r));                                                               \
      r = sum;                                                                                                       \
    }                                                                                                                \
    const __m512 r2 = _mm512_mul_ps(r, r);                                                                           \
    /* log1p(r) = r + r^2 q, q = -1/2 + r/3 + r^2 (-1/4 + r/5) */                                                    \
    const __m512 q = _mm512_fmadd_ps(r2, _mm512_fmadd_ps(r, _mm512_set1_ps(0x1.99999ap-3f), _mm512_set1_ps(-0.25f)), \
                                     _mm512_fmadd_ps(r, _mm512_set1_ps(0x1.555556p-2f), _mm512_set1_ps(-0.5f)));     \
    /* k ln2_hi is exact (ln2_hi has 15 bits); each sum below keeps its rounding error */                            \
    const __m512 kh = _mm512_mul_ps(k, _mm512_set1_ps(0x1.62e4p-1f));                                                \
    const __m512 hi = _mm512_add_ps(kh, lc);                                                                         \
    const __m512 hi_err = _mm512_add_ps(_mm512_sub_ps(kh, hi), lc);                                                  \
    const __m512 s = _mm512_add_ps(hi, r);                                                                           \
    const __m512 s_err = _mm512_add_ps(_mm512_sub_ps(hi, s), r);                                                     \
    const __m512 tail = _mm512_fmadd_ps(r2, q, _mm512_fmadd_ps(k, _mm512_set1_ps(0x1.7f7d1cp-20f),                   \
                                                         _mm512_add_ps(_mm512_add_ps(hi_err, s_err), r_err)));       \
    return _mm512_add_ps(s, tail);                                                                                   \
  }                                                                                                                  \
  template <class A>                                                                                                 \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                           \
  inline xsimd::batch<float, A> vlog_common(const xsimd::batch<float, A>& a) {                                       \
    return vlog_table<false>(a, _mm512_setzero_ps());                                                                \
  }                                                                                                                  \
  /* the special lanes (fpclass 0xFF: zero, negative, subnormal, infinite, NaN) take the */                          \
  /* C library's log, the others the table's, as in a batch without special lanes */                                \
  template <class A>                                                                                                 \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                           \
  [[gnu::noinline]] xsimd::batch<float, A> vlog_special(const xsimd::batch<float, A>& a) {                           \
    const xsimd::batch_bool<float, A> m(_mm512_fpclass_ps_mask(a, 0xFF));                                            \
    return vlanes_where(m, vlog_common(xsimd::select(m, xsimd::batch<float, A>(1.0f), a)), a,                         \
                        [](float x) { return std::log(x); });                                                        \
  }                                                                                                                  \
  template <class A>                                                                                                 \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                           \
  inline xsimd::batch<float, A> vlog_batch(const xsimd::batch<float, A>& a) {                                        \
    return vlog_special_lanes(a) ? vlog_special(a) : vlog_common(a);                                                 \
  }                                                                                                                  \
  /* log1p(x) = log(u + c), u = 1 + x rounded and c its rounding error (TwoSum): the table */                        \
  /* log of u with c folded into r */                                                                                \
  template <class A>                                                                                                 \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                           \
  inline xsimd::batch<float, A> vlog1p_common(const xsimd::batch<float, A>& a) {                                     \
    const __m512 one = _mm512_set1_ps(1.0f);                                                                         \
    const __m512 u = _mm512_add_ps(one, a);                                                                          \
    const __m512 one_part = _mm512_sub_ps(u, a), a_part = _mm512_sub_ps(u, one_part); /* TwoSum */                   \
    const __m512 c = _mm512_add_ps(_mm512_sub_ps(one, one_part), _mm512_sub_ps(a, a_part));                          \
    return vlog_table<true>(xsimd::batch<float, A>(u), c);                                                           \
  }                                                                                                                  \
  /* NaN, infinities and x <= -1 take the C library's log1p (vlog1p keeps -0) */                                     \
  template <class A>                                                                                                 \
    requires(sizeof(typename xsimd::batch<float, A>::register_type) == 64)                                           \
  inline xsimd::batch<float, A> vlog1p_batch(const xsimd::batch<float, A>& a) {                                      \
    const __mmask16 special = _mm512_fpclass_ps_mask(a, 0x99) | _mm512_cmp_ps_mask(a, _mm512_set1_ps(-1.0f), _CMP_LE_OQ); \
    if (special == 0) return vlog1p_common(a);                                                                       \
    const xsimd::batch_bool<float, A> m(special);                                                                    \
    return vlanes_where(m, vlog1p_common(xsimd::select(m, xsimd::batch<float, A>(0.5f), a)), a,                       \
                        [](float x) { return std::log1p(x); });                                                      \
  }

XSYM_VEXP_GENERIC
XSYM_VLOG_GENERIC
#if defined(__AVX512F__)
XSYM_VEXP_AVX512
XSYM_VLOG_AVX512
#endif

#define XSYM_KERNEL_HELPERS                                                       \
  /* the float AVX-512 exp saturates to 0 and inf where C's does, with subnormal \
     results; the generic one sends edge lanes to the C library */                \
  template <class X>                                                              \
  X vexp(X a) {                                                                   \
    if constexpr (std::is_arithmetic_v<X>) return std::exp(a);                    \
    else return vexp_batch(a);                                                    \
  }                                                                               \
  /* below -ln 2, exp(x) - 1 loses nothing and is closer than xsimd's expm1 */   \
  template <class X>                                                              \
  [[gnu::noinline]] X vexpm1_slow(const X& a) {                                   \
    using T = typename X::value_type;                                             \
    const auto in = xsimd::abs(a) < X(exp_edge<T>);                               \
    const X x = xsimd::select(in, a, X(0));                                       \
    X r = xsimd::select(a == X(0), a, xsimd::expm1(x)); /* keeps -0 */            \
    const auto low = a < X(T(-0.693147180559945309));                             \
    if (xsimd::any(low)) r = xsimd::select(low, vexp_batch(x) - X(1), r);         \
    if (xsimd::all(in)) return r;                                                 \
    return vlanes_where(!in, r, a, [](T x) { return std::expm1(x); });            \
  }                                                                               \
  template <class X>                                                              \
  X vexpm1(X a) {                                                                 \
    if constexpr (std::is_arithmetic_v<X>) {                                      \
      return std::expm1(a);                                                       \
    } else {                                                                      \
      using T = typename X::value_type;                                           \
      if (xsimd::all(a >= X(T(-0.693147180559945309)) && a < X(exp_edge<T>)))    \
        return xsimd::select(a == X(0), a, xsimd::expm1(a)); /* keeps -0 */       \
      return vexpm1_slow(a);                                                      \
    }                                                                             \
  }                                                                               \
  template <class X>                                                              \
  X vlog(X a) {                                                                   \
    if constexpr (std::is_arithmetic_v<X>) return std::log(a);                    \
    else return vlog_batch(a);                                                    \
  }                                                                               \
  template <class X>                                                              \
  X vlog1p(X a) {                                                                 \
    if constexpr (std::is_arithmetic_v<X>) return std::log1p(a);                  \
    else return xsimd::select(a == X(0), a, vlog1p_batch(a)); /* keeps -0 */      \
  }                                                                               \
  /* tanh is +-1 in float and double from |a| = 20 on: larger, infinite and NaN  \
     lanes never reach xsimd's exp (which converts them to integers out of range) */ \
  template <class X>                                                              \
  [[gnu::noinline]] X vtanh_edges(const X& a) {                                   \
    const auto in = xsimd::abs(a) < X(20);                                        \
    const X t = xsimd::tanh(xsimd::select(in, a, X(0)));                          \
    return xsimd::select(in, t, xsimd::select(xsimd::isnan(a), a, xsimd::copysign(X(1), a))); \
  }                                                                               \
  template <class X>                                                              \
  X vtanh(X a) {                                                                  \
    if constexpr (std::is_arithmetic_v<X>) {                                      \
      return std::tanh(a);                                                        \
    } else {                                                                      \
      if (xsimd::all(xsimd::abs(a) < X(20))) return xsimd::tanh(a);               \
      return vtanh_edges(a);                                                      \
    }                                                                             \
  }                                                                               \
  /* 1 / (1 + exp(-a)), except where exp(-a) would overflow: there 1 + exp(a)    \
     rounds to 1, and sigmoid(a) is exp(a) (a subnormal down to -103.97 in float) */ \
  template <class X>                                                              \
  [[gnu::noinline]] X vsigmoid_low(const X& a) {                                  \
    using T = typename X::value_type;                                             \
    const auto low = a < X(-exp_edge<T>);                                         \
    const X e = vexp(xsimd::select(low, a, -a));                                  \
    return xsimd::select(low, e, X(1) / (X(1) + e));                              \
  }                                                                               \
  template <class X>                                                              \
  X vsigmoid(X a) {                                                               \
    if constexpr (std::is_arithmetic_v<X>) {                                      \
      return a < -exp_edge<X> ? std::exp(a) : X(1) / (X(1) + std::exp(-a));       \
    } else {                                                                      \
      using T = typename X::value_type;                                           \
      if (xsimd::all(a >= X(-exp_edge<T>))) return X(1) / (X(1) + vexp(-a));      \
      return vsigmoid_low(a);                                                     \
    }                                                                             \
  }                                                                               \
  /* -a as a sign flip: xsimd's AVX-512 negation is 0 - a, which turns -(+0)     \
     into +0; -0 - a is -a for every a. */                                        \
  template <class X>                                                              \
  X vneg(X a) {                                                                   \
    if constexpr (std::is_arithmetic_v<X>) return -a;                             \
    else return X(-0.0) - a;                                                      \
  }                                                                               \
  /* pow lane by lane with the C library's (correctly rounded in practice, with   \
     C's special values): xsimd's is up to 99 ulp off and wrong at 0, 1, inf and  \
     NaN. */                                                                      \
  template <class X>                                                              \
  X vpow(X a, X b) {                                                              \
    if constexpr (std::is_arithmetic_v<X>) {                                      \
      return std::pow(a, b);                                                      \
    } else {                                                                      \
      using T = typename X::value_type;                                           \
      return vlanes(a, b, [](T x, T y) { return std::pow(x, y); });               \
    }                                                                             \
  }                                                                               \
  template <class X>                                                              \
  X vsqrt(X a) {                                                                  \
    if constexpr (std::is_arithmetic_v<X>) return std::sqrt(a);                   \
    else return xsimd::sqrt(a);                                                   \
  }                                                                               \
  template <class X>                                                              \
  X vmax(X a, X b) {                                                              \
    if constexpr (std::is_arithmetic_v<X>) return a < b ? b : a;                  \
    else return xsimd::max(a, b);                                                 \
  }                                                                               \
  /* numpy's maximum and minimum: a NaN in either operand is the result, and a tie \
     (-0 against +0) is the first operand, in a batch as in the tail. */           \
  template <class X>                                                              \
  X vmaximum(X a, X b) {                                                          \
    if constexpr (std::is_integral_v<X>) return a < b ? b : a;                    \
    else if constexpr (std::is_arithmetic_v<X>) return b != b || a < b ? b : a;   \
    else return xsimd::select(xsimd::isnan(b) | (a < b), b, a);                   \
  }                                                                               \
  template <class X>                                                              \
  X vminimum(X a, X b) {                                                          \
    if constexpr (std::is_integral_v<X>) return b < a ? b : a;                    \
    else if constexpr (std::is_arithmetic_v<X>) return b != b || b < a ? b : a;   \
    else return xsimd::select(xsimd::isnan(b) | (b < a), b, a);                   \
  }                                                                               \
  template <class X>                                                              \
  X vabs(X a) {                                                                   \
    if constexpr (std::is_integral_v<X>) return a < 0 ? X(-a) : a;                \
    else return xsimd::abs(a);                                                    \
  }                                                                               \
  /* sigmoid and softplus of u and of -u all follow from e = exp(-|u|), one exp  \
     for all four: sigmoid(a) = 1/(1+e) where a >= 0, else e/(1+e);              \
     softplus(a) = max(a, 0) + log1p(e). |a| = |u| for a = u or -u. */           \
  struct exp_neg_abs_fn {                                                         \
    template <class X>                                                            \
    static X apply(X a, X) {                                                      \
      return vexp(-xsimd::abs(a));                                                \
    }                                                                             \
  };                                                                              \
  /* r = 1/(1+e) serves sigmoid(u) and sigmoid(-u) alike: the pair shares one   \
     division (e * r may differ from sigmoid_from_exp's quotient by an ulp) */    \
  struct recip_1p_fn {                                                            \
    template <class X>                                                            \
    static X apply(X e, X) {                                                      \
      return X(1) / (X(1) + e);                                                   \
    }                                                                             \
  };                                                                              \
  struct sigmoid_from_recip_fn {                                                  \
    template <class X>                                                            \
    static X apply(X a, X e, X r) {                                               \
      if constexpr (std::is_arithmetic_v<X>) return a >= X(0) ? r : e * r;        \
      else return xsimd::select(a >= X(0), r, e * r);                             \
    }                                                                             \
  };                                                                              \
  /* one division, (a >= 0 ? 1 : e) / (1 + e): e * r rounds once more */         \
  struct sigmoid_from_exp_fn {                                                    \
    template <class X>                                                            \
    static X apply(X a, X e) {                                                    \
      if constexpr (std::is_arithmetic_v<X>) return (a >= X(0) ? X(1) : e) / (X(1) + e); \
      else return xsimd::select(a >= X(0), X(1), e) / (X(1) + e);                 \
    }                                                                             \
  };                                                                              \
  struct softplus_from_log1p_fn {                                                 \
    template <class X>                                                            \
    static X apply(X a, X l) {                                                    \
      return vmax(a, X(0)) + l;                                                   \
    }                                                                             \
  };

XSYM_KERNEL_HELPERS

// One functor per row of the op table: its expression on scalars and on xsimd batches alike,
// from arguments a (and b). A comparison's gives a bool, or a batch's mask. Special rows
// (switch, cast, identity) have kernels of their own.
template <scalar_op S>
struct fn;
#define XSYM_FN_VALUE(S, ...)                                    \
  template <>                                                    \
  struct fn<scalar_op::S> {                                      \
    template <class X>                                           \
    static X apply([[maybe_unused]] X a, [[maybe_unused]] X b) { \
      return __VA_ARGS__;                                        \
    }                                                            \
  };
#define XSYM_FN_wrapping XSYM_FN_VALUE
#define XSYM_FN_any XSYM_FN_VALUE
#define XSYM_FN_floating XSYM_FN_VALUE
#define XSYM_FN_comparison(S, ...)                                  \
  template <>                                                       \
  struct fn<scalar_op::S> {                                         \
    template <class X>                                              \
    static auto apply([[maybe_unused]] X a, [[maybe_unused]] X b) { \
      return __VA_ARGS__;                                           \
    }                                                               \
  };
#define XSYM_FN_special(S, ...)
#define XSYM_FN(S, name, arity, infix, family, flops, derivative, ...) XSYM_FN_##family(S, __VA_ARGS__)
XSYM_OP_TABLE(XSYM_FN)
#undef XSYM_FN
#undef XSYM_FN_special
#undef XSYM_FN_comparison
#undef XSYM_FN_floating
#undef XSYM_FN_any
#undef XSYM_FN_wrapping
#undef XSYM_FN_VALUE

/// The text of the exp and log helpers and XSYM_KERNEL_HELPERS, and of an op's expression in
/// a and b (null for the special rows: switch, cast, identity).
inline constexpr const char* vlanes_text = XSYM_STRINGIFY(XSYM_VLANES);
inline constexpr const char* vexp_generic_text = XSYM_STRINGIFY(XSYM_VEXP_GENERIC);
inline constexpr const char* vexp_avx512_text = XSYM_STRINGIFY(XSYM_VEXP_AVX512);
inline constexpr const char* vlog_generic_text = XSYM_STRINGIFY(XSYM_VLOG_GENERIC);
inline constexpr const char* vlog_avx512_text = XSYM_STRINGIFY(XSYM_VLOG_AVX512);
inline constexpr const char* kernel_helpers_text = XSYM_STRINGIFY(XSYM_KERNEL_HELPERS);
inline const char* op_expression_text(scalar_op s) {
  switch (s) {
#define XSYM_OP_TEXT(S, name, arity, infix, family, flops, derivative, ...) \
  case scalar_op::S: return op_family::family == op_family::special ? nullptr : #__VA_ARGS__;
    XSYM_OP_TABLE(XSYM_OP_TEXT)
#undef XSYM_OP_TEXT
  }
  return nullptr;
}

template <scalar_op S>
constexpr bool is_comparison = info(S).comparison;

template <scalar_op S, class T>
bool compare(T a, T b) {
  return fn<S>::apply(a, b);
}

template <class T>
constexpr bool simd_type = std::is_same_v<T, float> || std::is_same_v<T, double>;

// dst[i] = F::apply(a[i], b[i]) with the scalar cases hoisted out of the loop.
template <class F, int Arity, class T, bool Simd>
void arith(void* dstv, const void* const* args, unsigned mask, std::int64_t n) {
  T* d = static_cast<T*>(dstv);
  const T* a = static_cast<const T*>(args[0]);
  const T* b = Arity > 1 ? static_cast<const T*>(args[1]) : a;
  const bool sa = mask & 1u, sb = Arity > 1 ? (mask & 2u) != 0 : sa;
  std::int64_t i = 0;
  if constexpr (Simd && simd_type<T>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
    if (!sa && !sb) {
      for (; i + w <= n; i += w) F::apply(B::load_unaligned(a + i), B::load_unaligned(b + i)).store_unaligned(d + i);
    } else if (sa && !sb) {
      const B av(a[0]);
      for (; i + w <= n; i += w) F::apply(av, B::load_unaligned(b + i)).store_unaligned(d + i);
    } else if (!sa && sb) {
      const B bv(b[0]);
      for (; i + w <= n; i += w) F::apply(B::load_unaligned(a + i), bv).store_unaligned(d + i);
    }
  }
  if (!sa && !sb) {
    for (; i < n; ++i) d[i] = F::apply(a[i], b[i]);
  } else if (sa && !sb) {
    for (; i < n; ++i) d[i] = F::apply(a[0], b[i]);
  } else if (!sa && sb) {
    for (; i < n; ++i) d[i] = F::apply(a[i], b[0]);
  } else {
    const T v = F::apply(a[0], b[0]);
    for (; i < n; ++i) d[i] = v;
  }
}

// Loops of exactly 64: GCC's -O2 vectorizer (the "very cheap" model) takes only loops that need
// no scalar epilogue, and a bool result has no xsimd store worth using.
template <scalar_op S, class T>
void comparison(void* dstv, const void* const* args, unsigned mask, std::int64_t n) {
  bool* d = static_cast<bool*>(dstv);
  const T* a = static_cast<const T*>(args[0]);
  const T* b = static_cast<const T*>(args[1]);
  constexpr std::int64_t chunk = 64;
  std::int64_t i = 0;
  if (mask == 0) {
    for (; i + chunk <= n; i += chunk)
      for (std::int64_t j = 0; j < chunk; ++j) d[i + j] = compare<S>(a[i + j], b[i + j]);
  } else if (mask == 2u) {
    const T bv = b[0];
    for (; i + chunk <= n; i += chunk)
      for (std::int64_t j = 0; j < chunk; ++j) d[i + j] = compare<S>(a[i + j], bv);
  } else if (mask == 1u) {
    const T av = a[0];
    for (; i + chunk <= n; i += chunk)
      for (std::int64_t j = 0; j < chunk; ++j) d[i + j] = compare<S>(av, b[i + j]);
  }
  const std::int64_t ia = (mask & 1u) ? 0 : 1, ib = (mask & 2u) ? 0 : 1;
  for (; i < n; ++i) d[i] = compare<S>(a[i * ia], b[i * ib]);
}

template <class T>
void select(void* dstv, const void* const* args, unsigned mask, std::int64_t n) {
  T* d = static_cast<T*>(dstv);
  const bool* c = static_cast<const bool*>(args[0]);
  const T* a = static_cast<const T*>(args[1]);
  const T* b = static_cast<const T*>(args[2]);
  const std::int64_t ic = (mask & 1u) ? 0 : 1, ia = (mask & 2u) ? 0 : 1, ib = (mask & 4u) ? 0 : 1;
  for (std::int64_t i = 0; i < n; ++i) d[i] = c[i * ic] ? a[i * ia] : b[i * ib];
}

template <class From, class To>
void convert(void* dstv, const void* const* args, unsigned mask, std::int64_t n) {
  To* d = static_cast<To*>(dstv);
  const From* a = static_cast<const From*>(args[0]);
  if (mask & 1u) {
    const To v = xsym::convert_value<To>(a[0]);
    for (std::int64_t i = 0; i < n; ++i) d[i] = v;
  } else {
    for (std::int64_t i = 0; i < n; ++i) d[i] = xsym::convert_value<To>(a[i]);
  }
}

// int32 and int64 add, sub, mul, neg, sqr and abs wrap around on overflow, as numpy's do: in
// an unsigned type at least as wide as unsigned int (where C++'s signed overflow is undefined,
// and a narrow unsigned type would be promoted to int), then back (modular since C++20).
template <scalar_op S>
struct wrapping_fn {
  template <class X>
  static X apply(X a, [[maybe_unused]] X b) {
    using W = std::conditional_t<(sizeof(X) <= sizeof(unsigned)), unsigned, unsigned long long>;
    const W x = static_cast<W>(a), y = static_cast<W>(b);
    if constexpr (S == scalar_op::add) return static_cast<X>(x + y);
    else if constexpr (S == scalar_op::sub) return static_cast<X>(x - y);
    else if constexpr (S == scalar_op::mul) return static_cast<X>(x * y);
    else if constexpr (S == scalar_op::neg) return static_cast<X>(W(0) - x);
    else if constexpr (S == scalar_op::sqr) return static_cast<X>(x * x);
    else return a < 0 ? static_cast<X>(W(0) - x) : a;  // abs: the most negative value stays itself
  }
};
template <scalar_op S>
constexpr bool wraps = info(S).family == op_family::wrapping;

// The kernel of op S on element type T; null where T has none (arithmetic on bool, a
// floating-point function of an integer type, which the graph computes in float64).
template <scalar_op S, class T, bool Simd>
constexpr kernel_fn typed_kernel() {
  if constexpr (info(S).family == op_family::special) {
    return nullptr;
  } else if constexpr (is_comparison<S>) {
    return &comparison<S, T>;
  } else {
    constexpr bool float_only = info(S).float_only;
    if constexpr (std::is_same_v<T, bool>) return nullptr;
    else if constexpr (float_only && !std::is_floating_point_v<T>) return nullptr;
    else if constexpr (wraps<S> && std::is_integral_v<T>) return &arith<wrapping_fn<S>, info(S).arity, T, false>;
    else return &arith<fn<S>, info(S).arity, T, Simd && simd_type<T>>;  // integers: one scalar kernel serves both
  }
}

// Every arithmetic op and comparison on element type T (switch, cast and identity depend on a
// second type: kernel_table.hpp looks them up).
template <class T, bool Simd>
kernel_fn elementwise_kernel(scalar_op op) {
  switch (op) {
#define XSYM_CASE(S, ...) \
  case scalar_op::S: return typed_kernel<scalar_op::S, T, Simd>();
    XSYM_OP_TABLE(XSYM_CASE)
#undef XSYM_CASE
  }
  return nullptr;
}

/// @brief The CPU-only kernels behind shared sigmoid/softplus (see exp_neg_abs_fn).
enum class shared_exp_kernel { exp_neg_abs, sigmoid_from_exp, softplus_from_log1p, recip_1p, sigmoid_from_recip };

// dst[i] = F::apply(a[i], b[i], c[i]); an argument that is one value is read at 0.
template <class F, class T>
void arith3(void* dstv, const void* const* args, unsigned mask, std::int64_t n) {
  T* d = static_cast<T*>(dstv);
  const T* a = static_cast<const T*>(args[0]);
  const T* b = static_cast<const T*>(args[1]);
  const T* c = static_cast<const T*>(args[2]);
  std::int64_t i = 0;
  if (mask == 0) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
    for (; i + w <= n; i += w)
      F::apply(B::load_unaligned(a + i), B::load_unaligned(b + i), B::load_unaligned(c + i)).store_unaligned(d + i);
  }
  const std::int64_t ia = (mask & 1u) ? 0 : 1, ib = (mask & 2u) ? 0 : 1, ic = (mask & 4u) ? 0 : 1;
  for (; i < n; ++i) d[i] = F::apply(a[i * ia], b[i * ib], c[i * ic]);
}

template <class T>
kernel_fn shared_exp_kernel_for(shared_exp_kernel k) {
  static_assert(std::is_floating_point_v<T>, "shared sigmoid/softplus kernels are for float and double");
  switch (k) {
    case shared_exp_kernel::exp_neg_abs: return &arith<exp_neg_abs_fn, 1, T, true>;
    case shared_exp_kernel::sigmoid_from_exp: return &arith<sigmoid_from_exp_fn, 2, T, true>;
    case shared_exp_kernel::softplus_from_log1p: return &arith<softplus_from_log1p_fn, 2, T, true>;
    case shared_exp_kernel::recip_1p: return &arith<recip_1p_fn, 1, T, true>;
    case shared_exp_kernel::sigmoid_from_recip: return &arith3<sigmoid_from_recip_fn, T>;
  }
  return nullptr;
}

// A non-temporal store of a whole batch to an address aligned to its size (x86: SSE2, AVX,
// AVX-512 registers), and the fence that orders such stores; as text too, for the kernels cxx
// compiles (the intrinsics are declared whatever the target; only the batch size in use is
// instantiated).
#define XSYM_NT_STORE                                                 \
  template <class V, class U>                                         \
  void nt_store(const V& v, U* p) {                                   \
    constexpr std::size_t bytes = sizeof(typename V::register_type); \
    constexpr bool f = std::is_same_v<U, float>;                      \
    if constexpr (bytes == 64) {                                      \
      if constexpr (f) _mm512_stream_ps(p, v);                        \
      else _mm512_stream_pd(p, v);                                    \
    } else if constexpr (bytes == 32) {                               \
      if constexpr (f) _mm256_stream_ps(p, v);                        \
      else _mm256_stream_pd(p, v);                                    \
    } else if constexpr (bytes == 16) {                               \
      if constexpr (f) _mm_stream_ps(p, v);                           \
      else _mm_stream_pd(p, v);                                       \
    } else {                                                          \
      v.store_aligned(p);                                             \
    }                                                                 \
  }                                                                   \
  inline void stream_fence() { _mm_sfence(); }
#define XSYM_NT_STORE_FALLBACK     \
  template <class V, class U>      \
  void nt_store(const V& v, U* p) { \
    v.store_aligned(p);            \
  }                                \
  inline void stream_fence() {}
#if defined(__SSE2__)
XSYM_NT_STORE
inline constexpr bool nt_stores = true;
#else
XSYM_NT_STORE_FALLBACK
inline constexpr bool nt_stores = false;
#endif
inline constexpr const char* nt_store_text = XSYM_STRINGIFY(XSYM_NT_STORE);
inline constexpr const char* nt_store_fallback_text = XSYM_STRINGIFY(XSYM_NT_STORE_FALLBACK);

/// A run of elementwise steps, each taking the one before's result, in one pass: acc = arg 0,
/// then link k (4 bits of codes) makes acc = acc OP b with b the next argument (codes 0-3:
/// add, sub, mul, div), or b OP acc (codes 4-7), or acc = OP(acc) with no argument (codes
/// 8-12: chain_unary_ops). The running value stays in registers: one load per argument and
/// one store per element, where separate kernels store and reload every intermediate. With
/// `stream`, the results from dst's first cache line on leave with non-temporal stores (the
/// caller fences).
using chain_fn = void (*)(void* dst, const void* const* args, unsigned scalar_mask, std::int64_t n,
                          std::uint32_t codes, int links, bool stream);
inline constexpr int max_chain_links = 7;
/// A link's 4-bit code: acc OP b, or b OP acc with link_reversed added, or OP(acc).
enum chain_link : unsigned {
  link_add = 0, link_sub = 1, link_mul = 2, link_div = 3,
  link_reversed = 4,
  link_neg = 8, link_sqr = 9, link_abs = 10, link_exp = 11, link_log = 12,
};
inline constexpr unsigned first_unary_link = link_neg;
/// The op of each unary link, from link_neg on.
inline constexpr scalar_op chain_unary_ops[] = {scalar_op::neg, scalar_op::sqr, scalar_op::abs, scalar_op::exp,
                                                scalar_op::log};
static_assert(std::size(chain_unary_ops) == link_log - link_neg + 1, "one unary op per unary link code");
constexpr unsigned chain_link_code(std::uint32_t codes, int k) { return (codes >> (4 * k)) & 15u; }

// A unary link on a value or a batch: the separate kernel's function, so the same bits.
template <class X>
X chain_unary(X a, unsigned code) {
  switch (code) {
    case link_neg: return fn<scalar_op::neg>::apply(a, a);
    case link_sqr: return fn<scalar_op::sqr>::apply(a, a);
    case link_abs: return fn<scalar_op::abs>::apply(a, a);
    case link_exp: return fn<scalar_op::exp>::apply(a, a);
    default: return fn<scalar_op::log>::apply(a, a);
  }
}

// One link on one value: the same IEEE operation, in the same order, as the separate kernel,
// so a chain's results are bitwise theirs.
template <class T>
T chain_link(T acc, T b, unsigned code) {
  switch (code) {
    case link_add: case link_add + link_reversed: return acc + b;  // b + acc is acc + b, bitwise
    case link_sub: return acc - b;
    case link_sub + link_reversed: return b - acc;
    case link_mul: case link_mul + link_reversed: return acc * b;
    case link_div: return acc / b;
    case link_div + link_reversed: return b / acc;
    default: return chain_unary(acc, code);
  }
}

// The links decoded once: each one's code, and for links with an argument, where it is and
// whether it is one value broadcast. The separate kernels compute a step whose arguments are
// all broadcast values once, as a scalar, and every later step's input is an array: a chain
// whose arg 0 is broadcast computes a leading unary link the same way (`lead`, `start`), which
// matters where a batch and a scalar give different bits (exp, log).
template <class T>
struct chain_plan {
  unsigned code[max_chain_links];
  const T* from[max_chain_links];
  bool broadcast[max_chain_links];
  const T* first = nullptr;
  T* dst = nullptr;
  bool first_broadcast = false;
  int links = 0, start = 0;
  T lead{};

  // Filled in place: chain_loop's plans live in an array, and a temporary copied into it is
  // read back with wider loads than its fields were written with, a stalled store forward
  // each (a quarter of the chain loop's time on the logistic regression's 400 elements).
  void set(void* d, const void* const* args, unsigned mask, std::uint32_t codes, int n_links) {
    dst = static_cast<T*>(d);
    links = n_links;
    start = 0;
    int j = 1;
    for (int k = 0; k < links; ++k) {
      code[k] = chain_link_code(codes, k);
      from[k] = nullptr;
      broadcast[k] = true;
      if (code[k] < first_unary_link) {
        from[k] = static_cast<const T*>(args[j]);
        broadcast[k] = ((mask >> j) & 1u) != 0;
        ++j;
      }
    }
    first = static_cast<const T*>(args[0]);
    first_broadcast = (mask & 1u) != 0;
    if (first_broadcast) {
      lead = first[0];
      if (links > 0 && code[0] >= first_unary_link) lead = chain_unary(lead, code[start++]);
    }
  }
  // The first argument that is an array, not one value (nullptr when none is).
  const T* first_array() const {
    if (!first_broadcast) return first;
    for (int k = 0; k < links; ++k)
      if (from[k] && !broadcast[k]) return from[k];
    return nullptr;
  }
  T scalar(std::int64_t i) const {
    T acc = first[first_broadcast ? 0 : i];
    for (int k = 0; k < links; ++k) acc = chain_link(acc, from[k] ? from[k][broadcast[k] ? 0 : i] : acc, code[k]);
    return acc;
  }
};

// exp and log give other bits on a batch than on a scalar; the elements before the first cache
// line, which chain_loop computes as scalars, would then differ from the separate kernels'.
inline constexpr unsigned chain_exp_link = link_exp;  // this code and the next: exp and log
inline bool chain_is_exact(std::uint32_t codes, int links) {
  for (int k = 0; k < links; ++k)
    if (chain_link_code(codes, k) >= chain_exp_link) return false;
  return true;
}

/// One chain of a run of several (chain_loop, chains): its result and arguments as chain_fn
/// takes them.
struct chain_call {
  void* dst;
  const void* const* args;
  unsigned scalar_mask;
  std::uint32_t codes;
  int links;
};
inline constexpr int max_fused_chains = 8;

// chain_loop's main loop uses GCC's and clang's labels as values (not nvcc's front end, nor
// other compilers: those keep the switch).
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__NVCOMPILER)
#define XSYM_THREADED_CHAINS 1
#define XSYM_CHAIN_LOOP_ALIGN [[gnu::aligned(64)]]
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#if defined(__clang__)
#pragma GCC diagnostic ignored "-Wgnu-label-as-value"
#endif
#else
#define XSYM_THREADED_CHAINS 0
#define XSYM_CHAIN_LOOP_ALIGN
#endif
// Runs chains in order over the same n elements, four batches at a time: every chain on these
// batches before any goes on to the next, so a chain reads the ones before it while they are
// still in L1 and one pass covers the lot (xent is three chains). Per element the order of the
// operations is that of running the chains one after the other, so the results are the same.
// NT (one chain only): the results from dst's first cache line on leave with non-temporal
// stores, the elements before it computed as scalars (the same operations, so the same bits,
// for chains of arithmetic; see chain). A template parameter, so that the ordinary loop is
// compiled as if streaming did not exist.
// Its start is on a cache line: where the linker put it decided how fast its threaded loop ran
// ((x + y + z) * 2 over 1e5 floats: 1.07 of Eigen's time starting 16 bytes into a line, 1.15
// starting 32 bytes in, 1.06-1.10 on the line).
template <class T, bool NT>
XSYM_CHAIN_LOOP_ALIGN void chain_loop(const chain_call* calls, int n_chains, std::int64_t n) {
  chain_plan<T> plans[max_fused_chains];
  for (int c = 0; c < n_chains; ++c) {
    const chain_call& cc = calls[c];
    plans[c].set(cc.dst, cc.args, cc.scalar_mask, cc.codes, cc.links);
  }
  std::int64_t i = 0;
  if constexpr (simd_type<T>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
    // U batches at once; the switch is per link and per U batches, not per element.
    auto run = [&]<int U>(std::integral_constant<int, U>, const chain_plan<T>& plan, std::int64_t at) {
      B acc[U];
      for (int u = 0; u < U; ++u) acc[u] = plan.first_broadcast ? B(plan.lead) : B::load_unaligned(plan.first + at + u * w);
      for (int k = plan.start; k < plan.links; ++k) {
        const unsigned code = plan.code[k];
        if (code >= first_unary_link) {
          for (int u = 0; u < U; ++u) acc[u] = chain_unary(acc[u], code);
          continue;
        }
        const T* p = plan.from[k];
        B b[U];
        if (plan.broadcast[k])
          for (int u = 0; u < U; ++u) b[u] = B(p[0]);
        else
          for (int u = 0; u < U; ++u) b[u] = B::load_unaligned(p + at + u * w);
        switch (code) {
          case link_add: case link_add + link_reversed: for (int u = 0; u < U; ++u) acc[u] = acc[u] + b[u]; break;
          case link_sub: for (int u = 0; u < U; ++u) acc[u] = acc[u] - b[u]; break;
          case link_sub + link_reversed: for (int u = 0; u < U; ++u) acc[u] = b[u] - acc[u]; break;
          case link_mul: case link_mul + link_reversed: for (int u = 0; u < U; ++u) acc[u] = acc[u] * b[u]; break;
          case link_div: for (int u = 0; u < U; ++u) acc[u] = acc[u] / b[u]; break;
          default: for (int u = 0; u < U; ++u) acc[u] = b[u] / acc[u]; break;
        }
      }
      for (int u = 0; u < U; ++u) {
        if constexpr (NT) nt_store(acc[u], plan.dst + at + u * w);
        else acc[u].store_unaligned(plan.dst + at + u * w);
      }
    };
    // The elements before dst's first cache line as scalars, so that every batch stores a
    // whole line: when streaming, and for one chain without exp or log (whose scalars give the
    // batches' bits) whose first array argument sits as far past a line as dst does, over a
    // span long enough to pay for them. Arrays from one allocator that aligns to less than 64
    // bytes (xtensor's default gives 16) then all load and store whole lines, where each
    // access would split two; where only dst is off, aligning it would split the loads instead.
    const auto line_offset = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64; };
    const std::uintptr_t dst_offset = line_offset(plans[0].dst);
    if (NT || (n_chains == 1 && n >= 8 * w && dst_offset != 0 && chain_is_exact(calls[0].codes, calls[0].links) &&
               (!plans[0].first_array() || line_offset(plans[0].first_array()) == dst_offset)))
      for (const std::int64_t head = std::min(n, static_cast<std::int64_t>((64 - dst_offset) % 64 / sizeof(T))); i < head;
           ++i)
        plans[0].dst[i] = plans[0].scalar(i);
#if XSYM_THREADED_CHAINS
    // The main loop as threaded code: each link's body jumps straight to the next one's, and
    // each chain's store to the next chain's first load. The switch above spends a shift, a
    // bounds check, a table jump and a branch per link and per four batches: (x + y + z) * 2
    // over 1e5 floats took 0.186-0.194 ns per element with it, 0.175-0.177 threaded,
    // 0.170-0.172 as a fixed loop.
    constexpr int U = 4;
    static void* const vector_link[13] = {&&add_v, &&sub_v, &&mul_v, &&div_v, &&add_v, &&rsub_v, &&mul_v,
                                          &&rdiv_v, &&neg_u, &&sqr_u, &&abs_u, &&exp_u, &&log_u};
    static void* const scalar_link[13] = {&&add_s, &&sub_s, &&mul_s, &&div_s, &&add_s, &&rsub_s, &&mul_s,
                                          &&rdiv_s, &&neg_u, &&sqr_u, &&abs_u, &&exp_u, &&log_u};
    // The chains flattened into one sequence of operations k: a later chain's first load, the
    // links, and each chain's store; from[k] and value[k] are operation k's array or one value.
    constexpr int max_ops = max_fused_chains * (max_chain_links + 2);
    void* next[max_ops];
    const T* from[max_ops];
    T* to[max_ops];
    T value[max_ops];
    int n_ops = 0;
    for (int c = 0; c < n_chains; ++c) {
      const chain_plan<T>& plan = plans[c];
      if (c > 0) {  // chain 0's first load opens the loop body
        next[n_ops] = plan.first_broadcast ? &&first_s : &&first_v;
        from[n_ops] = plan.first;
        value[n_ops++] = plan.lead;
      }
      for (int k = plan.start; k < plan.links; ++k) {
        const unsigned code = plan.code[k];
        next[n_ops] = plan.broadcast[k] ? scalar_link[code] : vector_link[code];
        from[n_ops] = plan.from[k];
        value[n_ops++] = plan.from[k] && plan.broadcast[k] ? plan.from[k][0] : T{};
      }
      next[n_ops] = c + 1 < n_chains ? &&store_next : &&store_last;
      to[n_ops++] = plan.dst;
    }
    const T* first = plans[0].first;
    T* const last_dst = plans[n_chains - 1].dst;  // in a register, as the one chain's dst was
    const bool first_broadcast = plans[0].first_broadcast;
    const B lead(plans[0].lead);
    B acc[U], b[U];
    int k = 0;
    for (; i + U * w <= n; i += U * w) {
      for (int u = 0; u < U; ++u) acc[u] = first_broadcast ? lead : B::load_unaligned(first + i + u * w);
      k = 0;
      goto *next[0];
#define XSYM_CHAIN_VECTOR for (int u = 0; u < U; ++u) b[u] = B::load_unaligned(from[k] + i + u * w);
#define XSYM_CHAIN_SCALAR for (int u = 0; u < U; ++u) b[u] = B(value[k]);
#define XSYM_CHAIN_LINK(label, load, expr)        \
  label:                                          \
    load for (int u = 0; u < U; ++u) acc[u] = expr; \
    goto *next[++k];
      XSYM_CHAIN_LINK(first_v, XSYM_CHAIN_VECTOR, b[u])
      XSYM_CHAIN_LINK(first_s, XSYM_CHAIN_SCALAR, b[u])
      XSYM_CHAIN_LINK(add_v, XSYM_CHAIN_VECTOR, acc[u] + b[u])
      XSYM_CHAIN_LINK(sub_v, XSYM_CHAIN_VECTOR, acc[u] - b[u])
      XSYM_CHAIN_LINK(rsub_v, XSYM_CHAIN_VECTOR, b[u] - acc[u])
      XSYM_CHAIN_LINK(mul_v, XSYM_CHAIN_VECTOR, acc[u] * b[u])
      XSYM_CHAIN_LINK(div_v, XSYM_CHAIN_VECTOR, acc[u] / b[u])
      XSYM_CHAIN_LINK(rdiv_v, XSYM_CHAIN_VECTOR, b[u] / acc[u])
      XSYM_CHAIN_LINK(add_s, XSYM_CHAIN_SCALAR, acc[u] + b[u])
      XSYM_CHAIN_LINK(sub_s, XSYM_CHAIN_SCALAR, acc[u] - b[u])
      XSYM_CHAIN_LINK(rsub_s, XSYM_CHAIN_SCALAR, b[u] - acc[u])
      XSYM_CHAIN_LINK(mul_s, XSYM_CHAIN_SCALAR, acc[u] * b[u])
      XSYM_CHAIN_LINK(div_s, XSYM_CHAIN_SCALAR, acc[u] / b[u])
      XSYM_CHAIN_LINK(rdiv_s, XSYM_CHAIN_SCALAR, b[u] / acc[u])
      XSYM_CHAIN_LINK(neg_u, , fn<scalar_op::neg>::apply(acc[u], acc[u]))
      XSYM_CHAIN_LINK(sqr_u, , fn<scalar_op::sqr>::apply(acc[u], acc[u]))
      XSYM_CHAIN_LINK(abs_u, , fn<scalar_op::abs>::apply(acc[u], acc[u]))
      XSYM_CHAIN_LINK(exp_u, , fn<scalar_op::exp>::apply(acc[u], acc[u]))
    log_u:
      // Where the table log runs (vlog_common), one test for special lanes in the four batches:
      // the common path alone schedules them together (xent over 1e5 floats: 0.71 ns per
      // element, 0.77 testing each batch). If any has one, each batch takes the kernel's log.
      if constexpr (requires(const B& a) { vlog_common(a); }) {
        bool special = false;
        for (int u = 0; u < U; ++u) special |= vlog_special_lanes(acc[u]);
        if (!special) {
          for (int u = 0; u < U; ++u) acc[u] = vlog_common(acc[u]);
          goto *next[++k];
        }
      }
      for (int u = 0; u < U; ++u) acc[u] = fn<scalar_op::log>::apply(acc[u], acc[u]);
      goto *next[++k];
#undef XSYM_CHAIN_LINK
#undef XSYM_CHAIN_SCALAR
#undef XSYM_CHAIN_VECTOR
    store_next:
      for (int u = 0; u < U; ++u) acc[u].store_unaligned(to[k] + i + u * w);
      goto *next[++k];
    store_last:
      for (int u = 0; u < U; ++u) {
        if constexpr (NT) nt_store(acc[u], last_dst + i + u * w);
        else acc[u].store_unaligned(last_dst + i + u * w);
      }
    }
#else
    for (; i + 4 * w <= n; i += 4 * w)
      for (int c = 0; c < n_chains; ++c) run(std::integral_constant<int, 4>{}, plans[c], i);
#endif
    // The rest chain by chain: batches, then scalars, at the positions a lone chain uses.
    for (int c = 0; c < n_chains; ++c) {
      std::int64_t j = i;
      for (; j + w <= n; j += w) run(std::integral_constant<int, 1>{}, plans[c], j);
      for (; j < n; ++j) plans[c].dst[j] = plans[c].scalar(j);
    }
  } else {
    for (int c = 0; c < n_chains; ++c)
      for (std::int64_t j = 0; j < n; ++j) plans[c].dst[j] = plans[c].scalar(j);
  }
}
#if XSYM_THREADED_CHAINS
#pragma GCC diagnostic pop
#endif

// A chain over one element: chain_plan's scalar path without its set-up (the seeds'
// call-overhead function is one chain of three links).
template <class T>
void chain_one(void* dst, const void* const* args, std::uint32_t codes, int links) {
  T acc = *static_cast<const T*>(args[0]);
  for (int k = 0, j = 1; k < links; ++k) {
    const unsigned code = chain_link_code(codes, k);
    acc = code >= first_unary_link ? chain_unary(acc, code) : chain_link(acc, *static_cast<const T*>(args[j++]), code);
  }
  *static_cast<T*>(dst) = acc;
}

template <class T>
void chain(void* dstv, const void* const* args, unsigned mask, std::int64_t n, std::uint32_t codes, int links,
           bool stream) {
  const chain_call call{dstv, args, mask, codes, links};
  if constexpr (simd_type<T> && nt_stores)
    if (stream && reinterpret_cast<std::uintptr_t>(dstv) % (chain_is_exact(codes, links) ? sizeof(T) : 64) == 0)
      return chain_loop<T, true>(&call, 1, n);
  chain_loop<T, false>(&call, 1, n);
}

/// The link code of an instruction that may be a chain's link (float32 and float64 only): add, sub, mul, true_div, and the unary ops in
/// chain_unary_ops; -1 for any other op or dtype.
inline int chain_code(const instruction& ins) {
  if (ins.in_type != ins.out_type || (ins.in_type != dtype::float32 && ins.in_type != dtype::float64)) return -1;
  switch (ins.op) {
    case scalar_op::add: return link_add;
    case scalar_op::sub: return link_sub;
    case scalar_op::mul: return link_mul;
    case scalar_op::true_div: return link_div;
    default: break;
  }
  for (unsigned k = 0; k < std::size(chain_unary_ops); ++k)
    if (ins.op == chain_unary_ops[k]) return static_cast<int>(first_unary_link + k);
  return -1;
}
/// Several chains of one dtype over the same span (see chain_loop).
using chains_fn = void (*)(const chain_call* calls, int n_chains, std::int64_t n);
}  // namespace detail

namespace testing {
/// Test-only: when false, functions built afterwards run their chains step by step even where
/// they would run them in one pass (detail::chain_loop with several chains), for comparison.
inline bool& one_pass_chains() {
  static bool on = true;
  return on;
}
}  // namespace testing

}  // namespace xsym::cpu

#endif
