#ifndef XSYM_BACKEND_CPU_VECTOR_MATH_HPP
#define XSYM_BACKEND_CPU_VECTOR_MATH_HPP

// The functions the op table's expressions call (vexp, vlog, vsigmoid, ...), on scalars and on
// xsimd batches alike, as code and as the text that cxx's kernels compile.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../config/intrinsics.hpp"  // before xtensor and xsimd
#include <xsimd/xsimd.hpp>

#include "../../expr/op_table.hpp"

namespace xsym::cpu::detail {


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
  /* Where |a| reaches exp_edge, xsimd's expm1 ends its range early (its results are    \
     subnormal or near overflow there, or a is inf or NaN): such lanes take the C         \
     library's function, out of line. */                                                \
  template <class T>                                                                     \
  inline constexpr T exp_edge = sizeof(T) == 4 ? T(87.3) : T(708.3);
XSYM_VLANES

// exp of a batch: xsimd's reduction and polynomial, so xsimd's values where its range holds, but
// no lane that needs the C library: xsimd's exp returns 0 from x = -88.38 down and infinity from
// 88.38 up (float), where the true results are subnormal or still finite. Here 2^k is applied as
// two normal factors (on 16-float AVX-512 batches by one vscalefps, which saturates to 0 or
// infinity), so the loops that call it keep no branch and no call.
#define XSYM_VEXP_GENERIC                                                                 \
  /* double: xsimd's reduction and rational form (fdlibm's) on x clamped to              \
     [-746, 709.8]; 2^k as two normal factors, each built from k's bits by adding         \
     1.5 * 2^52 (no conversion to integers, which AVX2 lacks for doubles) */              \
  template <class A>                                                                      \
  [[gnu::always_inline]] inline xsimd::batch<double, A> vexp_batch(const xsimd::batch<double, A>& a) {                  \
    using X = xsimd::batch<double, A>;                                                    \
    using I = xsimd::batch<std::int64_t, A>;                                              \
    const X x = xsimd::min(X(709.8), xsimd::max(X(-746.0), a));                           \
    const X k = xsimd::nearbyint(x * X(1.44269504088896338700e+00));                      \
    const X hi = xsimd::fnma(k, X(6.93147180369123816490e-01), x);                        \
    const X lo = k * X(1.90821492927058770002e-10);                                       \
    const X r = hi - lo, t = r * r;                                                       \
    X p = xsimd::fma(t, X(4.13813679705723846039e-08), X(-1.65339022054652515390e-06));   \
    p = xsimd::fma(t, p, X(6.61375632143793436117e-05));                                  \
    p = xsimd::fma(t, p, X(-2.77777777770155933842e-03));                                 \
    p = xsimd::fma(t, p, X(1.66666666666666019037e-01));                                  \
    const X c = xsimd::fnma(t, p, r);                                                     \
    const X y = X(1.0) - ((lo - (r * c) / (X(2.0) - c)) - hi);                            \
    const X k1 = xsimd::floor(k * X(0.5)), k2 = k - k1;                                   \
    const X magic(0x1.8p52);                                                              \
    return y * xsimd::bitwise_cast<X>((xsimd::bitwise_cast<I>(k1 + magic) + I(1023)) << 52) * \
           xsimd::bitwise_cast<X>((xsimd::bitwise_cast<I>(k2 + magic) + I(1023)) << 52);  \
  }                                                                                       \
  /* float: xsimd's reduction and polynomial on x clamped to [-104, 88.8]; y in          \
     [0.7, 1.42] and k = round(x / ln 2) in [-150, 128] come back apart */               \
  template <class A>                                                                      \
  [[gnu::always_inline]] inline xsimd::batch<float, A> vexp_core(const xsimd::batch<float, A>& x,                       \
                                   xsimd::batch<std::int32_t, A>& k) {                    \
    using X = xsimd::batch<float, A>;                                                     \
    const X kf = xsimd::nearbyint(x * X(1.44269504088896341f));                           \
    X r = xsimd::fnma(kf, X(0.693359375f), x);                                            \
    r = xsimd::fnma(kf, X(-2.12194440e-4f), r);                                           \
    X y = xsimd::fma(X(1.3997796e-03f), r, X(8.3955629e-03f));                            \
    y = xsimd::fma(y, r, X(4.1665401e-02f));                                              \
    y = xsimd::fma(y, r, X(1.6666277e-01f));                                              \
    y = xsimd::fma(y, r, X(5.0000000e-01f));                                              \
    k = xsimd::to_int(kf);                                                                \
    return xsimd::fma(y, r * r, r) + X(1.0f);                                             \
  }                                                                                       \
  /* 2^k as two normal factors: a subnormal result rounds once, a large one overflows    \
     to inf, so no lane needs the C library and the loop has no branch. A NaN goes       \
     through the clamps: x86's min and max return their second operand then, NEON's NaN. */ \
  template <class A>                                                                      \
  [[gnu::always_inline]] inline xsimd::batch<float, A> vexp_batch(const xsimd::batch<float, A>& a) {                    \
    using X = xsimd::batch<float, A>;                                                     \
    using I = xsimd::batch<std::int32_t, A>;                                              \
    I k;                                                                                  \
    const X y = vexp_core(xsimd::min(X(88.8f), xsimd::max(X(-104.0f), a)), k);            \
    const I k1 = k >> 1, k2 = k - k1;                                                     \
    return y * xsimd::bitwise_cast<X>((k1 + I(127)) << 23) *                              \
           xsimd::bitwise_cast<X>((k2 + I(127)) << 23);                                   \
  }                                                                                       \
  /* exp(a) for a <= 0: k <= 0, so 2^(k + 64) is normal and 2^-64 a constant factor */    \
  template <class A>                                                                      \
  [[gnu::always_inline]] inline xsimd::batch<float, A> vexp_nonpos_batch(const xsimd::batch<float, A>& a) {             \
    using X = xsimd::batch<float, A>;                                                     \
    using I = xsimd::batch<std::int32_t, A>;                                              \
    I k;                                                                                  \
    const X y = vexp_core(xsimd::max(X(-104.0f), a), k);                                  \
    return y * xsimd::bitwise_cast<X>((k + I(127 + 64)) << 23) * X(0x1p-64f);            \
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
// (Fast2Sum), and added back with the series' tail. No division, so faster than xsimd's steps,
// and at least as close over every positive normal float (bench/log_ulps.cpp measures both).
// scripts/log_table.py makes the tables and says how invc is chosen. A batch with any other
// lane (zero, negative, subnormal, infinite, NaN) takes xsimd's whole path, out of line, so
// that the common path is small enough to be inlined into the kernels' loops. The test for
// such lanes and the common path are functions of their own for chain_loop, which tests four
// batches at once.
#define XSYM_VLOG_GENERIC                                                                           \
  /* double: zero, negative, subnormal, infinite and NaN lanes take the C library's results */       \
  template <class X>                                                                                \
  X vlog_batch(const X& a) {                                                                        \
    using T = typename X::value_type;                                                               \
    const auto in = a >= X(std::numeric_limits<T>::min()) && a <= X(std::numeric_limits<T>::max()); \
    if (xsimd::all(in)) return xsimd::log(a);                                                       \
    return vlanes_where(!in, xsimd::log(xsimd::select(in, a, X(1))), a, [](T x) { return std::log(x); }); \
  }                                                                                                 \
  /* float: log(2^k z) = k ln 2 + log1p(f), z in [0.707, 1.414) from a's bits, f = z - 1,          \
     log1p(f) = f - f^2/2 + f^3 P(f) (Cephes' logf polynomial): within 1 ulp of the exact log     \
     over every positive float (subnormals scaled by 2^23 first), no division, and zero,          \
     negative, infinite and NaN lanes chosen by selects, so the loop has no branch */             \
  template <class A>                                                                                \
  [[gnu::always_inline]] inline xsimd::batch<float, A> vlog_batch(const xsimd::batch<float, A>& a) {                              \
    using X = xsimd::batch<float, A>;                                                               \
    using I = xsimd::batch<std::int32_t, A>;                                                        \
    const auto sub = a < X(std::numeric_limits<float>::min());                                      \
    I ix = xsimd::bitwise_cast<I>(xsimd::select(sub, a * X(0x1p23f), a)) + I(0x3f800000 - 0x3f3504f3); \
    const X k = xsimd::to_float((ix >> 23) - I(0x7f)) - xsimd::select(sub, X(23.0f), X(0.0f));    \
    ix = (ix & I(0x007fffff)) + I(0x3f3504f3);                                                      \
    const X f = xsimd::bitwise_cast<X>(ix) - X(1.0f);                                               \
    const X f2 = f * f;                                                                             \
    X p = xsimd::fma(X(7.0376836292E-2f), f, X(-1.1514610310E-1f));                                 \
    p = xsimd::fma(p, f, X(1.1676998740E-1f));                                                      \
    p = xsimd::fma(p, f, X(-1.2420140846E-1f));                                                     \
    p = xsimd::fma(p, f, X(1.4249322787E-1f));                                                      \
    p = xsimd::fma(p, f, X(-1.6668057665E-1f));                                                     \
    p = xsimd::fma(p, f, X(2.0000714765E-1f));                                                      \
    p = xsimd::fma(p, f, X(-2.4999993993E-1f));                                                     \
    p = xsimd::fma(p, f, X(3.3333331174E-1f));                                                      \
    X y = xsimd::fma(k, X(-2.12194440e-4f), f * f2 * p); /* ln 2 = 0.693359375 - 2.12194440e-4 */ \
    y = xsimd::fma(f2, X(-0.5f), y);                                                                \
    X r = xsimd::fma(k, X(0.693359375f), f + y);                                                    \
    r = xsimd::select(a == X(std::numeric_limits<float>::infinity()), a, r);                        \
    r = xsimd::select(a == X(0.0f), X(-std::numeric_limits<float>::infinity()), r);                 \
    return xsimd::select(a >= X(0.0f), r, X(std::numeric_limits<float>::quiet_NaN()));              \
  }                                                                                                 \
  template <class X>                                                                                \
  X vlog1p_batch(const X& a) {                                                                      \
    using T = typename X::value_type;                                                               \
    const auto in = a > X(-1) && a <= X(std::numeric_limits<T>::max());                            \
    /* log1p(x) is x for a subnormal x; arithmetic on one costs an assist on Intel cores */        \
    const auto tiny = xsimd::abs(a) < X(std::numeric_limits<T>::min()) && a != X(0);                \
    const bool all_in = xsimd::all(in);                                                             \
    if (all_in && !xsimd::any(tiny)) return xsimd::log1p(a);                                        \
    if (xsimd::all(tiny)) return a;                                                                 \
    const auto plain = in && !tiny;                                                                 \
    const X r = xsimd::log1p(xsimd::select(plain, a, X(0)));                                        \
    if (all_in) return xsimd::select(tiny, a, r); /* no lane for the C library */                   \
    return xsimd::select(tiny, a, vlanes_where(!in, r, a, [](T x) { return std::log1p(x); }));      \
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
    /* |x| < 2^-25: log1p(x) is x (every such float checked); the polynomial's terms would be */                     \
    /* subnormal, and arithmetic on those costs an assist on Intel cores */                                          \
    const __mmask16 tiny = _mm512_cmplt_epu32_mask(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)), \
                                                   _mm512_set1_epi32(0x33000000));                                   \
    if ((special | tiny) == 0) return vlog1p_common(a);                                                              \
    if (tiny == 0xFFFF) return a; /* exp(-|x|) of large |x|: a softplus's every lane */                              \
    const xsimd::batch_bool<float, A> m(special), t(tiny);                                                           \
    const xsimd::batch_bool<float, A> aside(static_cast<__mmask16>(special | tiny));                                 \
    const xsimd::batch<float, A> r = vlog1p_common(xsimd::select(aside, xsimd::batch<float, A>(0.5f), a));           \
    if (special == 0) return xsimd::select(t, a, r); /* the call out of line only for the C library's lanes */       \
    return xsimd::select(t, a, vlanes_where(m, r, a, [](float x) { return std::log1p(x); }));                        \
  }

XSYM_VEXP_GENERIC
XSYM_VLOG_GENERIC
#if defined(__AVX512F__)
XSYM_VEXP_AVX512
XSYM_VLOG_AVX512
#endif

// tail_batch's floats as masked loads: a vector load of values just stored one by one waits
// for the stores (two or three times a one-element call's whole cost). Only where the target
// has the instructions (clang declares the intrinsics only then; nvcc's front end never).
#if defined(__AVX512F__) && !defined(__CUDACC__)
#define XSYM_TAIL_LOADS_512                                                                   \
  if constexpr (sizeof(B) == 64 && std::is_same_v<T, float>) {                                \
    const B v(_mm512_mask_loadu_ps(_mm512_set1_ps(p[r - 1]), static_cast<__mmask16>((1u << r) - 1u), p)); \
    v.store_aligned(buf);                                                                     \
    return v;                                                                                 \
  }                                                                                           \
  if constexpr (sizeof(B) == 64 && std::is_same_v<T, double>) {                               \
    const B v(_mm512_mask_loadu_pd(_mm512_set1_pd(p[r - 1]), static_cast<__mmask8>((1u << r) - 1u), p)); \
    v.store_aligned(buf);                                                                     \
    return v;                                                                                 \
  }
#else
#define XSYM_TAIL_LOADS_512
#endif
#if defined(__AVX__) && !defined(__CUDACC__)
#define XSYM_TAIL_LOADS_256                                                                   \
  if constexpr (sizeof(B) == 32 && std::is_same_v<T, float>) {                                \
    const __m256 in = _mm256_cmp_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7),                   \
                                    _mm256_set1_ps(static_cast<float>(r)), _CMP_LT_OQ);       \
    const B v(_mm256_blendv_ps(_mm256_set1_ps(p[r - 1]), _mm256_maskload_ps(p, _mm256_castps_si256(in)), in)); \
    v.store_aligned(buf);                                                                     \
    return v;                                                                                 \
  }                                                                                           \
  if constexpr (sizeof(B) == 32 && std::is_same_v<T, double>) {                               \
    const __m256d in = _mm256_cmp_pd(_mm256_setr_pd(0, 1, 2, 3),                              \
                                     _mm256_set1_pd(static_cast<double>(r)), _CMP_LT_OQ);     \
    const B v(_mm256_blendv_pd(_mm256_set1_pd(p[r - 1]), _mm256_maskload_pd(p, _mm256_castpd_si256(in)), in)); \
    v.store_aligned(buf);                                                                     \
    return v;                                                                                 \
  }
#else
#define XSYM_TAIL_LOADS_256
#endif
#define XSYM_TAIL_LOADS XSYM_TAIL_LOADS_512 XSYM_TAIL_LOADS_256

#define XSYM_KERNEL_HELPERS                                                       \
  /* the float AVX-512 exp saturates to 0 and inf where C's does, with subnormal \
     results; the generic one sends edge lanes to the C library */                \
  template <class X>                                                              \
  [[gnu::always_inline]] inline X vexp(X a) {                                                                   \
    if constexpr (std::is_arithmetic_v<X>) return std::exp(a);                    \
    else return vexp_batch(a);                                                    \
  }                                                                               \
  /* exp(a) where a <= 0 or NaN (sigmoid's and softplus's exp(-|u|)) */           \
  template <class X>                                                              \
  [[gnu::always_inline]] inline X vexp_nonpos(X a) {                                                            \
    if constexpr (std::is_arithmetic_v<X>) return std::exp(a);                    \
    else if constexpr (std::is_same_v<typename X::value_type, float> &&           \
                       sizeof(typename X::register_type) < 64)                    \
      return vexp_nonpos_batch(a);                                                \
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
  [[gnu::always_inline]] inline X vexpm1(X a) {                                                                 \
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
  [[gnu::always_inline]] inline X vlog(X a) {                                                                   \
    if constexpr (std::is_arithmetic_v<X>) return std::log(a);                    \
    else return vlog_batch(a);                                                    \
  }                                                                               \
  template <class X>                                                              \
  [[gnu::always_inline]] inline X vlog1p(X a) {                                                                 \
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
  [[gnu::always_inline]] inline X vtanh(X a) {                                                                  \
    if constexpr (std::is_arithmetic_v<X>) {                                      \
      return std::tanh(a);                                                        \
    } else {                                                                      \
      if (xsimd::all(xsimd::abs(a) < X(20))) return xsimd::tanh(a);               \
      return vtanh_edges(a);                                                      \
    }                                                                             \
  }                                                                               \
  /* one division, (a >= 0 ? 1 : e) / (1 + e): e * r rounds once more */         \
  struct sigmoid_from_exp_fn {                                                    \
    template <class X>                                                            \
    static X apply(X a, X e) {                                                    \
      if constexpr (std::is_arithmetic_v<X>) return (a >= X(0) ? X(1) : e) / (X(1) + e); \
      else return xsimd::select(a >= X(0), X(1), e) / (X(1) + e);                 \
    }                                                                             \
  };                                                                              \
  /* from e = exp(-|a|), which never overflows (sigmoid(a) is e, subnormal, down to \
     -103.97 in float) */                                                          \
  template <class X>                                                              \
  [[gnu::always_inline]] inline X vsigmoid(X a) {                                                               \
    if constexpr (std::is_arithmetic_v<X>)                                        \
      return sigmoid_from_exp_fn::apply(a, std::exp(-std::abs(a)));               \
    else                                                                          \
      return sigmoid_from_exp_fn::apply(a, vexp_nonpos(-xsimd::abs(a)));          \
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
  /* f (a C library function) on each value: correctly rounded in practice, with   \
     C's special values; out of line for batches */                               \
  template <class X, class F>                                                     \
  X vlane1(X a, F f) {                                                            \
    if constexpr (std::is_arithmetic_v<X>) {                                      \
      return static_cast<X>(f(a));                                                \
    } else {                                                                      \
      using T = typename X::value_type;                                           \
      return vlanes(a, a, [f](T x, T) { return static_cast<T>(f(x)); });          \
    }                                                                             \
  }                                                                               \
  /* exact: floor, ceil, and round half to even (the default rounding mode). */   \
  /* floor and ceil keep a's sign: xsimd's generic forms (below SSE4.1)     */    \
  /* gave +0 for floor(-0.0) and ceil(-0.5).                               */     \
  template <class X>                                                              \
  X vfloor(X a) {                                                                 \
    if constexpr (std::is_arithmetic_v<X>) return std::floor(a);                  \
    else return xsimd::copysign(xsimd::floor(a), a);                              \
  }                                                                               \
  template <class X>                                                              \
  X vceil(X a) {                                                                  \
    if constexpr (std::is_arithmetic_v<X>) return std::ceil(a);                   \
    else return xsimd::copysign(xsimd::ceil(a), a);                               \
  }                                                                               \
  template <class X>                                                              \
  X vround_even(X a) {                                                            \
    if constexpr (std::is_arithmetic_v<X>) return std::nearbyint(a);              \
    else return xsimd::nearbyint(a);                                              \
  }                                                                               \
  /* numpy's floor division and modulo of one pair (npy_divmod for floats) */      \
  template <class T>                                                              \
  T floordiv1(T a, T b) {                                                         \
    if constexpr (std::is_integral_v<T>) {                                        \
      using U = std::make_unsigned_t<T>;                                          \
      if (b == 0) return T(0);                                                    \
      if (b == T(-1)) return static_cast<T>(U(0) - static_cast<U>(a));            \
      const T q = static_cast<T>(a / b);                                          \
      return a % b != 0 && ((a < 0) != (b < 0)) ? static_cast<T>(q - 1) : q;     \
    } else {                                                                      \
      if (b == 0) return a / b;                                                   \
      const T m = std::fmod(a, b);                                                \
      T d = (a - m) / b;                                                          \
      if (m != 0 && ((b < 0) != (m < 0))) d -= T(1);                              \
      if (d == 0) return std::copysign(T(0), a / b);                              \
      T f = std::floor(d);                                                        \
      if (d - f > T(0.5)) f += T(1);                                              \
      return f;                                                                   \
    }                                                                             \
  }                                                                               \
  template <class T>                                                              \
  T mod1(T a, T b) {                                                              \
    if constexpr (std::is_integral_v<T>) {                                        \
      if (b == 0 || b == T(-1)) return T(0);                                      \
      const T r = static_cast<T>(a % b);                                          \
      return r != 0 && ((r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;          \
    } else {                                                                      \
      const T m = std::fmod(a, b);                                                \
      if (b == 0) return m;                                                       \
      if (m == 0) return std::copysign(T(0), b);                                  \
      return (b < 0) != (m < 0) ? m + b : m;                                      \
    }                                                                             \
  }                                                                               \
  template <class X>                                                              \
  X vfloordiv(X a, X b) {                                                         \
    if constexpr (std::is_arithmetic_v<X>) return floordiv1(a, b);                \
    else return vlanes(a, b, [](auto x, auto y) { return floordiv1(x, y); });     \
  }                                                                               \
  template <class X>                                                              \
  X vmod(X a, X b) {                                                              \
    if constexpr (std::is_arithmetic_v<X>) return mod1(a, b);                     \
    else return vlanes(a, b, [](auto x, auto y) { return mod1(x, y); });          \
  }                                                                               \
  /* bitwise ops exist for integers and bool only (the graph refuses floats) */   \
  template <class X>                                                              \
  X vbitand(X a, X b) {                                                           \
    if constexpr (std::is_integral_v<X>) return static_cast<X>(a & b);            \
    else return a;                                                                \
  }                                                                               \
  template <class X>                                                              \
  X vbitor(X a, X b) {                                                            \
    if constexpr (std::is_integral_v<X>) return static_cast<X>(a | b);            \
    else return a;                                                                \
  }                                                                               \
  template <class X>                                                              \
  X vbitxor(X a, X b) {                                                           \
    if constexpr (std::is_integral_v<X>) return static_cast<X>(a ^ b);            \
    else return a;                                                                \
  }                                                                               \
  template <class X>                                                              \
  X vinvert(X a) {                                                                \
    if constexpr (std::is_same_v<X, bool>) return !a;                             \
    else if constexpr (std::is_integral_v<X>) return static_cast<X>(~a);          \
    else return a;                                                                \
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
      return vexp_nonpos(-xsimd::abs(a));                                         \
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
      /* where r is 1 (e below half an ulp of 1), e r is e: a subnormal e is not   \
         multiplied (an assist on Intel cores) */                                 \
      if constexpr (std::is_arithmetic_v<X>) return a >= X(0) ? r : r == X(1) ? e : e * r; \
      else {                                                                      \
        const auto one = r == X(1);                                               \
        return xsimd::select(a >= X(0), r, xsimd::select(one, e, xsimd::select(one, X(0), e) * r)); \
      }                                                                           \
    }                                                                             \
  };                                                                              \
  struct softplus_from_log1p_fn {                                                 \
    template <class X>                                                            \
    static X apply(X a, X l) {                                                    \
      return vmax(a, X(0)) + l;                                                   \
    }                                                                             \
  };                                                                              \
  /* A span's last r < w elements as one batch: p's r values, the other lanes     \
     repeating the last of them (which computes nothing the span's own elements   \
     do not: no new division by zero or overflow). The vectorised kernels take    \
     their tails so, and an element gets a batch's bits wherever it sits (a       \
     batch's exp and the C library's differ in the last bit). The batch is also   \
     stored to buf, where callers may read it. */                                 \
  template <class B, class T>                                                     \
  [[gnu::always_inline]] inline B tail_batch(const T* p, std::int64_t r, T* buf) { \
    XSYM_TAIL_LOADS                                                               \
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(B::size); ++j)         \
      buf[j] = p[j < r ? j : r - 1];                                              \
    return B::load_aligned(buf);                                                  \
  }

XSYM_KERNEL_HELPERS

/// The text of the exp and log helpers and XSYM_KERNEL_HELPERS, for the kernels cxx compiles.
inline constexpr const char* vlanes_text = XSYM_STRINGIFY(XSYM_VLANES);
inline constexpr const char* vexp_generic_text = XSYM_STRINGIFY(XSYM_VEXP_GENERIC);
inline constexpr const char* vexp_avx512_text = XSYM_STRINGIFY(XSYM_VEXP_AVX512);
inline constexpr const char* vlog_generic_text = XSYM_STRINGIFY(XSYM_VLOG_GENERIC);
inline constexpr const char* vlog_avx512_text = XSYM_STRINGIFY(XSYM_VLOG_AVX512);
inline constexpr const char* kernel_helpers_text = XSYM_STRINGIFY(XSYM_KERNEL_HELPERS);
}  // namespace xsym::cpu::detail

#endif
