#ifndef XSYM_EXEC_NAIVE_HPP
#define XSYM_EXEC_NAIVE_HPP

// DebugMode's own products and reductions, for its per-node reference (thunk::naive_products):
// plain loops over the elements with the arrays' strides, float sums in float64 and integer
// sums wrapping in 64 bits. They share no code with the kernel tables or BLAS, so a wrong
// product or reduction kernel shows against them.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "thunk.hpp"

namespace xsym::detail {

namespace naive {
template <class T>
using sum_t = std::conditional_t<std::is_floating_point_v<T>, double, std::uint64_t>;
template <class T>
sum_t<T> widen(T v) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<double>(v);
  else return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
}
template <class T>
T narrow(sum_t<T> v) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v);
  else return static_cast<T>(static_cast<std::int64_t>(v));  // modulo 2^bits, as the kernels wrap
}
// A product's alpha or beta as the kernels take it: a double for floats, cast to T for integers.
template <class T>
sum_t<T> factor(double alpha) {
  if constexpr (std::is_floating_point_v<T>) return alpha;
  else return widen(static_cast<T>(alpha));
}
template <class T>
T at(const ndarray& a, std::int64_t i) {
  return a.data_as<T>()[i * a.stride(0)];
}
template <class T>
T at(const ndarray& a, std::int64_t i, std::int64_t j) {
  return a.data_as<T>()[i * a.stride(0) + j * a.stride(1)];
}
template <class F>
void on_product_type(dtype d, F&& f) {
  visit_dtype(d, [&](auto z) {
    if constexpr (std::is_same_v<decltype(z), bool>) throw std::logic_error("xsym: no product of bools");
    else f(z);
  });
}

// y (C-contiguous, m) = alpha op(A) x, or with y0: beta y0 + alpha op(A) x.
inline void gemv(const ndarray& a, bool transpose, const ndarray& x, ndarray& y, double alpha, const ndarray* y0,
                 double beta) {
  const std::int64_t m = a.shape(transpose ? 1 : 0), k = a.shape(transpose ? 0 : 1);
  if (x.shape(0) != k || y.size() != m || (y0 && y0->size() != m))
    throw shape_error("matrix-vector product (DebugMode's reference): shapes " + to_string(a.shape()) + " and " +
                      to_string(x.shape()) + " are not aligned");
  on_product_type(a.type(), [&](auto z) {
    using T = decltype(z);
    T* out = y.data_as<T>();
    for (std::int64_t i = 0; i < m; ++i) {
      sum_t<T> acc = 0;
      for (std::int64_t j = 0; j < k; ++j) acc += widen(transpose ? at<T>(a, j, i) : at<T>(a, i, j)) * widen(at<T>(x, j));
      acc *= factor<T>(alpha);
      if (y0) acc += factor<T>(beta) * widen(at<T>(*y0, i));
      out[i] = narrow<T>(acc);
    }
  });
}

// c (C-contiguous, m x n) = alpha A B, or accumulating c + alpha A B.
inline void dot22(const ndarray& a, const ndarray& b, ndarray& c, double alpha, bool accumulate) {
  const std::int64_t m = a.shape(0), k = a.shape(1), n = b.shape(1);
  if (b.shape(0) != k || c.size() != m * n)
    throw shape_error("matrix product (DebugMode's reference): shapes " + to_string(a.shape()) + " and " +
                      to_string(b.shape()) + " are not aligned");
  on_product_type(c.type(), [&](auto z) {
    using T = decltype(z);
    T* out = c.data_as<T>();
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        sum_t<T> acc = 0;
        for (std::int64_t l = 0; l < k; ++l) acc += widen(at<T>(a, i, l)) * widen(at<T>(b, l, j));
        acc *= factor<T>(alpha);
        if (accumulate) acc += widen(out[i * n + j]);
        out[i * n + j] = narrow<T>(acc);
      }
  });
}

inline void dot(const ndarray& a, const ndarray& b, ndarray& out) {
  if (a.shape(0) != b.shape(0))
    throw shape_error("vector dot product (DebugMode's reference): shapes " + to_string(a.shape()) + " and " +
                      to_string(b.shape()) + " are not aligned");
  on_product_type(a.type(), [&](auto z) {
    using T = decltype(z);
    sum_t<T> acc = 0;
    for (std::int64_t i = 0; i < a.shape(0); ++i) acc += widen(at<T>(a, i)) * widen(at<T>(b, i));
    *out.data_as<T>() = narrow<T>(acc);
  });
}

// out (C-contiguous, the kept axes) = in reduced over o.axes, visiting in's elements in C
// order: sums and products in float64 (floats) or wrapping 64-bit integers, a mean's sum in
// float64, max and min in the input's type with NaN winning, as numpy's.
// The loop over in is instantiated per input type alone, the store per pair of types: every
// program compiles this reference in, and the 25 pairs of whole loops were 6% of a program's text.
template <class In>
void reduce_typed(const op& o, const ndarray& in, ndarray& out) {
  using Wide = sum_t<In>;
  const bool extreme = o.reduction == reduce_op::max || o.reduction == reduce_op::min;
  const int rank = in.rank();
  std::uint32_t reduced = 0;
  for (int d : o.axes) reduced |= std::uint32_t{1} << d;
  std::array<std::int64_t, max_rank> out_step{}, idx{};
  std::int64_t count = 1, step = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if ((reduced >> d) & 1u) {
      count *= in.shape(d);
    } else {
      out_step[static_cast<std::size_t>(d)] = step;
      step *= in.shape(d);
    }
  }
  if (count == 0 && extreme)
    throw shape_error("zero-size array to a reduction (" + std::string(reduce_name(o.reduction)) +
                      ") which has no identity; input shape " + to_string(in.shape()));
  const auto n_out = static_cast<std::size_t>(out.size());
  std::vector<In> ext(extreme ? n_out : 0);
  std::vector<std::uint8_t> seen(extreme ? n_out : 0, 0);
  std::vector<Wide> acc(extreme ? 0 : n_out, o.reduction == reduce_op::prod ? Wide(1) : Wide(0));
  std::vector<double> mean_acc(o.reduction == reduce_op::mean ? n_out : 0, 0.0);
  const In* src = in.data_as<In>();
  for (std::int64_t e = 0, total = in.size(); e < total; ++e) {
    std::int64_t off = 0, at_out = 0;
    for (int d = 0; d < rank; ++d) {
      off += idx[static_cast<std::size_t>(d)] * in.stride(d);
      at_out += idx[static_cast<std::size_t>(d)] * out_step[static_cast<std::size_t>(d)];
    }
    const In v = src[off];
    const auto u = static_cast<std::size_t>(at_out);
    if (extreme) {
      const bool better = o.reduction == reduce_op::max ? v > ext[u] : v < ext[u];
      if (!seen[u] || v != v || (ext[u] == ext[u] && better)) ext[u] = v;  // a NaN, once taken, stays
      seen[u] = 1;
    } else if (o.reduction == reduce_op::mean) {
      mean_acc[u] += static_cast<double>(v);
    } else if (o.reduction == reduce_op::prod) {
      acc[u] *= widen(v);
    } else {
      acc[u] += widen(v);
    }
    for (int d = rank - 1; d >= 0; --d) {  // the next index in C order
      if (++idx[static_cast<std::size_t>(d)] < in.shape(d)) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
  visit_dtype(out.type(), [&](auto zo) {
    using Out = decltype(zo);
    Out* dst = out.data_as<Out>();
    for (std::size_t k = 0; k < n_out; ++k) {
      if (extreme) dst[k] = static_cast<Out>(ext[k]);
      else if (o.reduction == reduce_op::mean) dst[k] = static_cast<Out>(mean_acc[k] / static_cast<double>(count));
      else if constexpr (std::is_floating_point_v<In>) dst[k] = static_cast<Out>(acc[k]);
      else dst[k] = static_cast<Out>(static_cast<std::int64_t>(acc[k]));
    }
  });
}

inline void reduce(const op& o, const ndarray& in, ndarray& out) {
  visit_dtype(in.type(), [&](auto zi) { reduce_typed<decltype(zi)>(o, in, out); });
}
}  // namespace naive

}  // namespace xsym::detail

#endif
