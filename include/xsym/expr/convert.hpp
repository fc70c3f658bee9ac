#ifndef XSYM_EXPR_CONVERT_HPP
#define XSYM_EXPR_CONVERT_HPP

#include <concepts>
#include <cstring>
#include <type_traits>

#include "../config/intrinsics.hpp"  // before xtensor and xsimd
#include <xtensor/xtensor.hpp>
#include <xtensor/xarray.hpp>

#include "../config/cold.hpp"
#include "ndarray.hpp"

namespace xsym::detail {

// xtensor containers and adaptors: memory we can read in place through data() and strides().
// Some views declare data() over storage that is an iterator, not memory (xt::flatten of a
// transpose): their data() does not compile, so the storage's own data() must be a pointer.
template <class E>
concept strided_memory = requires(const E& e) {
  e.data();
  e.strides();
  e.shape();
} && (!requires(const E& e) { e.storage(); } || requires(const E& e) {
  { e.storage().data() } -> std::convertible_to<const typename E::value_type*>;
});

// The address of a strided expression's first element: a view's data() is its underlying
// container's buffer, and data_offset() says where the view starts in it.
template <class E>
auto* first_element(E& e) {
  auto* p = e.data();
  if constexpr (requires { e.data_offset(); }) p += e.data_offset();
  return p;
}

XSYM_COLD_BEGIN  // error paths, out of line: not copied into every instantiation below
[[noreturn]] inline void throw_rank_exceeds(std::size_t rank) {
  throw std::invalid_argument("xsym: rank " + std::to_string(rank) + " exceeds max_rank");
}

[[noreturn]] inline void throw_read_as(const ndarray& a, dtype want, std::size_t want_rank) {
  throw std::logic_error("xsym: internal error: value of type " + std::string(dtype_name(a.type())) + "/" +
                         std::to_string(a.rank()) + " read as " + std::string(dtype_name(want)) + "/" +
                         std::to_string(want_rank));
}
XSYM_COLD_END

template <class Shape>
shape_t to_shape(const Shape& s) {
  shape_t out;
  out.rank = static_cast<int>(s.size());
  if (out.rank > max_rank) throw_rank_exceeds(s.size());
  for (int i = 0; i < out.rank; ++i) out[i] = static_cast<std::int64_t>(s[static_cast<std::size_t>(i)]);
  return out;
}

/// An owning copy of an xtensor expression, C-contiguous.
template <class T, class E>
ndarray copy_to_ndarray(const xt::xexpression<E>& expr) {
  if constexpr (std::is_same_v<typename E::value_type, T> && strided_memory<E>) {
    // Memory is read from its first element with its strides, as a call's argument is.
    const E& e = expr.derived_cast();
    if (e.shape().size() > static_cast<std::size_t>(max_rank)) throw_rank_exceeds(e.shape().size());
    ndarray view, out;
    view.rewrap(dtype_of<T>(), e.shape(), e.strides(), const_cast<T*>(first_element(e)));
    view.copy_contiguous_into(out);
    return out;
  }
  // Evaluated in row-major order by xtensor's steppers: its linear assignment of a view of a
  // view with a newaxis (alone or inside an expression) starts at the container's first
  // element, not the view's (xtensor 0.24).
  xt::xarray<T> ev;
  ev.resize(expr.derived_cast().shape());
  xt::assign_data(ev, expr, false);
  ndarray a = ndarray::empty(dtype_of<T>(), to_shape(ev.shape()));
  if (a.size()) std::memcpy(a.data(), ev.data(), a.nbytes());
  return a;
}

/// An xtensor container holding a copy of a runtime array (any strides).
template <class T, std::size_t N>
xt::xtensor<T, N> to_xtensor(const ndarray& value) {
  if (value.on_device()) return to_xtensor<T, N>(on_host(value));
  const ndarray& a = value;  // no copy: each would cost two atomic reference-count updates
  if (a.type() != dtype_of<T>() || a.rank() != static_cast<int>(N))
    throw_read_as(a, dtype_of<T>(), N);
  std::array<std::size_t, N> shape{};
  if constexpr (N > 0)
    for (std::size_t i = 0; i < N; ++i) shape[i] = static_cast<std::size_t>(a.shape(static_cast<int>(i)));
  xt::xtensor<T, N> out(shape);
  if (a.size() == 0) return out;
  if (a.size() == 1) *out.data() = *reinterpret_cast<const T*>(a.data());  // no call for one value
  else if (a.is_c_contiguous()) std::memcpy(out.data(), a.data(), a.nbytes());
  else {
    const ndarray c = a.contiguous();
    std::memcpy(out.data(), c.data(), c.nbytes());
  }
  return out;
}

}  // namespace xsym::detail

#endif
