#ifndef XSYM_BACKEND_CPU_SCALAR_KERNELS_HPP
#define XSYM_BACKEND_CPU_SCALAR_KERNELS_HPP

// Each op's kernel: the op table's expression over arrays, vectorized with xsimd, with the cases
// of one-value arguments hoisted out of the loop.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "../../config/intrinsics.hpp"  // before xtensor and xsimd
#include <xsimd/xsimd.hpp>

#include "../../expr/op.hpp"
#include "vector_math.hpp"

namespace xsym::cpu {

/// A kernel applies one scalar op to n elements; bit k of scalar_mask says argument k is one
/// value broadcast to all n (so no index arithmetic in the loop).
using kernel_fn = void (*)(void* dst, const void* const* args, unsigned scalar_mask, std::int64_t n);

namespace detail {

// One functor per row of the op table: its expression on scalars and on xsimd batches alike,
// from arguments a (and b). A comparison's gives a bool, or a batch's mask. Special rows
// (switch, cast, identity) have kernels of their own. Always inlined, as are the vector
// functions they call (vector_math.hpp): at -O2 GCC called the larger ones (log, sigmoid) out
// of line from the kernels' loops, 1.5 times slower than at -O3.
template <scalar_op S>
struct fn;
#define XSYM_FN_ROW(S, R, ...)                                   \
  template <>                                                    \
  struct fn<scalar_op::S> {                                      \
    template <class X>                                           \
    [[gnu::always_inline]] static R apply([[maybe_unused]] X a,  \
                                          [[maybe_unused]] X b) { \
      return __VA_ARGS__;                                        \
    }                                                            \
  };
#define XSYM_FN_wrapping(S, ...) XSYM_FN_ROW(S, X, __VA_ARGS__)
#define XSYM_FN_any(S, ...) XSYM_FN_ROW(S, X, __VA_ARGS__)
#define XSYM_FN_floating(S, ...) XSYM_FN_ROW(S, X, __VA_ARGS__)
#define XSYM_FN_comparison(S, ...) XSYM_FN_ROW(S, auto, __VA_ARGS__)
#define XSYM_FN_special(S, ...)
#define XSYM_FN_bitwise(S, ...) XSYM_FN_ROW(S, X, __VA_ARGS__)
#define XSYM_FN(S, name, arity, infix, family, flops, derivative, ...) XSYM_FN_##family(S, __VA_ARGS__)
XSYM_OP_TABLE(XSYM_FN)
#undef XSYM_FN
#undef XSYM_FN_special
#undef XSYM_FN_bitwise
#undef XSYM_FN_comparison
#undef XSYM_FN_floating
#undef XSYM_FN_any
#undef XSYM_FN_wrapping
#undef XSYM_FN_ROW

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
    if (i < n && !(sa && sb)) {  // the tail as one batch (tail_batch); d may be a or b
      alignas(64) T ta[w], tb[w], td[w];
      const std::int64_t r = n - i;
      const B av = sa ? B(a[0]) : tail_batch<B>(a + i, r, ta);
      const B bv = Arity == 1 ? av : sb ? B(b[0]) : tail_batch<B>(b + i, r, tb);
      F::apply(av, bv).store_aligned(td);
      for (std::int64_t j = 0; j < r; ++j) d[i + j] = td[j];
      return;
    }
  }
  if (!sa && !sb) {
    for (; i < n; ++i) d[i] = F::apply(a[i], b[i]);
  } else if (sa && !sb) {
    for (; i < n; ++i) d[i] = F::apply(a[0], b[i]);
  } else if (!sa && sb) {
    for (; i < n; ++i) d[i] = F::apply(a[i], b[0]);
  } else {
    T v;
    if constexpr (Simd && simd_type<T>) {  // a batch's bits, as every other element gets
      alignas(64) T r[xsimd::batch<T>::size];
      F::apply(xsimd::batch<T>(a[0]), xsimd::batch<T>(b[0])).store_aligned(r);
      v = r[0];
    } else {
      v = F::apply(a[0], b[0]);
    }
    for (; i < n; ++i) d[i] = v;
  }
}

// Rows of a lone binary op (compiled_program::rows, elemwise.hpp's rows path): the argument
// whose bit of `column` is set (CA or CB) is one value per row (a column along the rows, or
// one value for the node: step 0), a register for the row; the other walks its row. Each row is
// computed as arith computes a span: batches, then the last len % w elements as one batch over
// copies. Two columns (an output one element wide) never reach it: rows are 64 bytes or more.
template <class F, class T, bool CA, bool CB>
void arith_rows_of(const std::byte* a0, std::int64_t sa, const std::byte* b0, std::int64_t sb, std::byte* out,
                   std::int64_t out_step, std::int64_t rows, std::int64_t len) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* a = reinterpret_cast<const T*>(a0 + r * sa);
    const T* b = reinterpret_cast<const T*>(b0 + r * sb);
    T* d = reinterpret_cast<T*>(out + r * out_step);
    const B av(a[0]), bv(b[0]);
    std::int64_t i = 0;
    for (; i + w <= len; i += w)
      F::apply(CA ? av : B::load_unaligned(a + i), CB ? bv : B::load_unaligned(b + i)).store_unaligned(d + i);
    if (i < len) {
      alignas(64) T ta[w], tb[w], td[w];
      const std::int64_t left = len - i;
      F::apply(CA ? av : tail_batch<B>(a + i, left, ta), CB ? bv : tail_batch<B>(b + i, left, tb)).store_aligned(td);
      for (std::int64_t j = 0; j < left; ++j) d[i + j] = td[j];
    }
  }
}
template <class F, class T>
void arith_rows(const std::byte* const* in, const std::uint8_t* map, const std::int64_t* step, std::uint64_t column,
                std::byte* out, std::int64_t out_step, std::int64_t rows, std::int64_t len, bool) {
  const bool ca = (column >> map[0]) & 1u, cb = (column >> map[1]) & 1u;
  const std::byte *a = in[map[0]], *b = in[map[1]];
  const std::int64_t sa = step[map[0]], sb = step[map[1]];
  if (ca) arith_rows_of<F, T, true, false>(a, sa, b, sb, out, out_step, rows, len);
  else if (cb) arith_rows_of<F, T, false, true>(a, sa, b, sb, out, out_step, rows, len);
  else arith_rows_of<F, T, false, false>(a, sa, b, sb, out, out_step, rows, len);
}
/// The rows kernel of a lone op (see arith_rows): +, -, * and / of float or double, the ops a
/// column or a row vector meets most (scaling, centring); null for any other.
using arith_rows_fn = void (*)(const std::byte* const*, const std::uint8_t*, const std::int64_t*, std::uint64_t,
                               std::byte*, std::int64_t, std::int64_t, std::int64_t, bool);
template <class T>
arith_rows_fn rows_kernel_of(scalar_op op) {
  switch (op) {
    case scalar_op::add: return &arith_rows<fn<scalar_op::add>, T>;
    case scalar_op::sub: return &arith_rows<fn<scalar_op::sub>, T>;
    case scalar_op::mul: return &arith_rows<fn<scalar_op::mul>, T>;
    case scalar_op::true_div: return &arith_rows<fn<scalar_op::true_div>, T>;
    default: return nullptr;
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
  } else if constexpr (info(S).family == op_family::bitwise) {
    if constexpr (std::is_integral_v<T>) return &arith<fn<S>, info(S).arity, T, false>;  // bool too
    else return nullptr;
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

// dst[i] = F::apply(a[i], b[i], c[i]) on batches; an argument that is one value is read at 0.
template <class F, class T>
void arith3(void* dstv, const void* const* args, unsigned mask, std::int64_t n) {
  T* d = static_cast<T*>(dstv);
  const T* a = static_cast<const T*>(args[0]);
  const T* b = static_cast<const T*>(args[1]);
  const T* c = static_cast<const T*>(args[2]);
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  const bool sa = mask & 1u, sb = mask & 2u, sc = mask & 4u;
  const auto at = [](const T* p, bool one, std::int64_t i) { return one ? B(p[0]) : B::load_unaligned(p + i); };
  std::int64_t i = 0;
  for (; i + w <= n; i += w) F::apply(at(a, sa, i), at(b, sb, i), at(c, sc, i)).store_unaligned(d + i);
  if (i < n) {  // the tail as one batch (tail_batch)
    alignas(64) T ta[w], tb[w], tc[w], td[w];
    const std::int64_t r = n - i;
    const auto tail = [&](const T* p, bool one, T* buf) { return one ? B(p[0]) : tail_batch<B>(p + i, r, buf); };
    F::apply(tail(a, sa, ta), tail(b, sb, tb), tail(c, sc, tc)).store_aligned(td);
    for (std::int64_t j = 0; j < r; ++j) d[i + j] = td[j];
  }
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

}  // namespace detail

}  // namespace xsym::cpu

#endif
