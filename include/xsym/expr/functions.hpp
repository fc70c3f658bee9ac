#ifndef XSYM_EXPR_FUNCTIONS_HPP
#define XSYM_EXPR_FUNCTIONS_HPP

// Functions written with the ops of var.hpp: what numpy and PyTensor users reach for first
// (relu, clip, softmax, logsumexp, variance, outer). Each is
// a small graph of existing nodes, so it fuses, runs on both backends and has its gradient
// from theirs; the profile shows those nodes (a softmax: Max, two Composites, Sum, division).
// take and add_at are nodes of their own (AdvancedSubtensor1, AdvancedIncSubtensor1).
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <limits>
#include <utility>

#include "var.hpp"

namespace xsym {

XSYM_COLD_BEGIN  // building graphs

/// @brief max(x, 0), elementwise (NaN stays NaN, as numpy's maximum).
template <class E, std::size_t N>
var<E, N> relu(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return maximum(x, E(0));
}

/// @brief numpy's clip: minimum(maximum(x, lo), hi); NaN stays NaN.
template <class E, std::size_t N, operand L, operand H>
auto clip(const var<E, N>& x, const L& lo, const H& hi, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return minimum(maximum(x, lo), hi);
}

namespace detail {
// The axis's maximum with infinities replaced by 0, reduced and kept as a broadcastable axis,
// so that x - m is never inf - inf: rows of -inf give exp(-inf) = 0, a row with +inf gives inf.
template <class E, std::size_t N>
std::pair<var<E, N - 1>, var<E, N>> finite_max(const var<E, N>& x, int axis, const char* what) {
  static_assert(std::is_floating_point_v<E>, "xsym: softmax, log_softmax and logsumexp take float tensors");
  const int a = normalize_axis(axis, static_cast<int>(N), what);
  const var<E, N - 1> top = max(x, a);
  const var<E, N - 1> m = switch_(abs(top) < std::numeric_limits<E>::infinity(), top, E(0));
  std::vector<int> pattern;
  for (int d = 0, j = 0; d < static_cast<int>(N); ++d) pattern.push_back(d == a ? -1 : j++);
  return {m, var<E, N>(dimshuffle(m.node(), std::move(pattern)))};
}
}  // namespace detail

/// @brief log(sum(exp(x), axis)), computed without overflow: m + log(sum(exp(x - m))) with m
/// the axis's maximum (its gradient is softmax(x, axis)).
template <class E, std::size_t N>
var<E, N - 1> logsumexp(const var<E, N>& x, int axis = -1, detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::logsumexp: a rank-0 tensor has no axis");
  const detail::at_site site(where);
  const auto [m, m_kept] = detail::finite_max(x, axis, "logsumexp");
  return log(sum(exp(x - m_kept), detail::normalize_axis(axis, static_cast<int>(N), "logsumexp"))) + m;
}

/// @brief exp(x) / sum(exp(x), axis), from x minus the axis's maximum (no overflow).
template <class E, std::size_t N>
var<E, N> softmax(const var<E, N>& x, int axis = -1, detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::softmax: a rank-0 tensor has no axis");
  const detail::at_site site(where);
  const auto e = exp(x - detail::finite_max(x, axis, "softmax").second);
  return e / sum(e, axis, keepdims);
}

/// @brief log(softmax(x, axis)), as (x - m) - log(sum(exp(x - m), axis)): finite where softmax
/// underflows to 0.
template <class E, std::size_t N>
var<E, N> log_softmax(const var<E, N>& x, int axis = -1, detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::log_softmax: a rank-0 tensor has no axis");
  const detail::at_site site(where);
  const auto shifted = x - detail::finite_max(x, axis, "log_softmax").second;
  return shifted - log(sum(exp(shifted), axis, keepdims));
}

/// @brief -sum(targets * log(p), -1): the cross-entropy of each row of probabilities p
/// against one-hot (or soft) target rows.
template <class E, std::size_t N, class T>
auto categorical_crossentropy(const var<E, N>& p, const var<T, N>& targets,
                              detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::categorical_crossentropy: p holds rows of probabilities (rank 1 or more)");
  const detail::at_site site(where);
  return -sum(targets * log(p), static_cast<int>(N) - 1);
}

/// @brief numpy's var (ddof = 0): mean((x - mean(x, axis))², axis). Named variance: var is
/// xsym's tensor type.
template <class E, std::size_t N>
auto variance(const var<E, N>& x, int axis, detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::variance: a rank-0 tensor has no axis");
  const detail::at_site site(where);
  const auto d = x - mean(x, axis, keepdims);
  return mean(d * d, detail::normalize_axis(axis, static_cast<int>(N), "variance"));
}
template <class E, std::size_t N>
auto variance(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  const auto d = x - mean(x);
  return mean(d * d);
}

/// @brief numpy's std (ddof = 0): sqrt(variance(x, axis)). Named stddev: std is C++'s.
template <class E, std::size_t N>
auto stddev(const var<E, N>& x, int axis, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return sqrt(variance(x, axis));
}
template <class E, std::size_t N>
auto stddev(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return sqrt(variance(x));
}

/// @brief The outer product of two vectors: a[i] * b[j].
template <class A, class B>
auto outer(const var<A, 1>& a, const var<B, 1>& b, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return dimshuffle(a, 0, 'x') * dimshuffle(b, 'x', 0);
}

/// @brief Whether every (all) or some (any) element is non-zero, over all axes or one.
template <class E, std::size_t N>
var<bool, 0> all(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  if constexpr (std::is_same_v<E, bool>) return min(x);
  else return min(x != E(0));
}
template <class E, std::size_t N>
var<bool, 0> any(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  if constexpr (std::is_same_v<E, bool>) return max(x);
  else return max(x != E(0));
}
template <class E, std::size_t N>
var<bool, N - 1> all(const var<E, N>& x, int axis, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  if constexpr (std::is_same_v<E, bool>) return min(x, axis);
  else return min(x != E(0), axis);
}
template <class E, std::size_t N>
var<bool, N - 1> any(const var<E, N>& x, int axis, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  if constexpr (std::is_same_v<E, bool>) return max(x, axis);
  else return max(x != E(0), axis);
}

namespace detail {
// Dimension `a` first, the others in order; and the pattern that puts it back.
inline std::pair<std::vector<int>, std::vector<int>> axis_first(int a, int rank) {
  std::vector<int> to{a}, back(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d)
    if (d != a) to.push_back(d);
  for (int k = 0; k < rank; ++k) back[static_cast<std::size_t>(to[static_cast<std::size_t>(k)])] = k;
  return {to, back};
}
template <class I>
constexpr void check_index_type() {
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "xsym: indices are a vector of std::int32_t or std::int64_t");
}
}  // namespace detail

/// @brief numpy's take: x's entries at the integer indices idx along `axis` (negative indices
/// count from the end; one out of range is an index_error naming it). Along the first axis it
/// is one AdvancedSubtensor1 node, a gather of rows (a minibatch: take(X, batch)); along
/// another, the same between two dimshuffles. Its gradient adds the adjoints back at the
/// indices, repeated ones summed (AdvancedIncSubtensor1).
template <class E, std::size_t N, class I>
var<E, N> take(const var<E, N>& x, const var<I, 1>& idx, int axis = 0,
               detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::take: a rank-0 tensor has no axis to index");
  detail::check_index_type<I>();
  const detail::at_site site(where);
  const int a = detail::normalize_axis(axis, static_cast<int>(N), "take");
  if (a == 0) return var<E, N>(detail::take(x.node(), idx.node()));
  auto [to, back] = detail::axis_first(a, static_cast<int>(N));
  const var_ptr moved = detail::take(detail::dimshuffle(x.node(), std::move(to)), idx.node());
  return var<E, N>(detail::dimshuffle(moved, std::move(back)));
}

/// @brief numpy's np.add.at as a value: a copy of x with y's rows added at the rows idx names
/// (y has one row per index; repeated indices add up). Theano's inc_subtensor(x[idx], y). y
/// broadcasts as numpy's does, along the dimensions its type marks broadcastable (a `row`
/// added at every index) and, of lower rank, along new leading ones (a rank-0 y everywhere).
template <class E, std::size_t N, class I, std::size_t M>
var<E, N> add_at(const var<E, N>& x, const var<I, 1>& idx, const var<E, M>& y,
                 detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::add_at: a rank-0 tensor has no rows");
  static_assert(M <= N, "xsym::add_at: the values added have a higher rank than the tensor they are added to");
  static_assert(!std::is_same_v<E, bool>, "xsym::add_at: adding is not defined on bool tensors");
  detail::check_index_type<I>();
  const detail::at_site site(where);
  var_ptr v = y.node();
  if constexpr (M < N) {
    std::vector<int> pattern(N - M, -1);
    for (int d = 0; d < static_cast<int>(M); ++d) pattern.push_back(d);
    v = detail::dimshuffle(v, std::move(pattern));
  }
  return var<E, N>(detail::inc_rows(x.node(), v, idx.node()));
}

/// @brief numpy's argmax and argmin: the int64 position of the first maximum (minimum) along
/// `axis`, or over all of x in C order; a NaN counts as the extreme. Argmax/Argmin nodes.
#define XSYM_ARG_REDUCTION(fname, rop)                                                                   \
  template <class E, std::size_t N>                                                                       \
  var<std::int64_t, 0> fname(const var<E, N>& x, detail::source_site where = detail::source_site::current()) { \
    const detail::at_site site(where);                                                                    \
    return var<std::int64_t, 0>(detail::arg_reduce(x.node(), reduce_op::rop, 0, true));                  \
  }                                                                                                       \
  template <class E, std::size_t N>                                                                       \
  var<std::int64_t, N - 1> fname(const var<E, N>& x, int axis,                                           \
                                 detail::source_site where = detail::source_site::current()) {           \
    static_assert(N >= 1, "xsym::" #fname ": a rank-0 tensor has no axis");                             \
    const detail::at_site site(where);                                                                    \
    return var<std::int64_t, N - 1>(detail::arg_reduce(x.node(), reduce_op::rop, axis, false));           \
  }
XSYM_ARG_REDUCTION(argmax, max)
XSYM_ARG_REDUCTION(argmin, min)
#undef XSYM_ARG_REDUCTION

/// @brief x with the region a slice took replaced by y (y broadcast to it, cast to x's dtype):
/// numpy's x[1:-1] = y as a value, Theano's set_subtensor(x[1:-1], y). An IncSubtensor node,
/// which writes into x's buffer when x is an intermediate that dies there.
template <class E, std::size_t R, std::size_t N, operand Y>
var<E, N> set_subtensor(const sliced<E, R, N>& region, const Y& y,
                        detail::source_site where = detail::source_site::current()) {
  static_assert(detail::operand_traits<Y>::rank <= R, "xsym::set_subtensor: the value has more dimensions than the region");
  const detail::at_site site(where);
  detail::use_typed(y);
  return var<E, N>(detail::inc_subtensor(region.base(), detail::lift<E>(y), region.slices(), true));
}
/// @brief x with y added to the region a slice took: numpy's x[1:-1] += y as a value.
template <class E, std::size_t R, std::size_t N, operand Y>
var<E, N> inc_subtensor(const sliced<E, R, N>& region, const Y& y,
                        detail::source_site where = detail::source_site::current()) {
  static_assert(detail::operand_traits<Y>::rank <= R, "xsym::inc_subtensor: the value has more dimensions than the region");
  static_assert(!std::is_same_v<E, bool>, "xsym::inc_subtensor: adding is not defined on bool tensors");
  // numpy's x[...] += y refuses a float y for an int x (same_kind casting) rather than truncate.
  static_assert(!std::is_floating_point_v<typename detail::operand_traits<Y>::elem> || std::is_floating_point_v<E>,
                "xsym::inc_subtensor: a floating-point value added into an integer tensor would be truncated "
                "(numpy's same_kind casting refuses it): cast the value to the tensor's type "
                "(xsym::cast<...>(y) or static_cast), or the tensor to a float type");
  const detail::at_site site(where);
  detail::use_typed(y);
  return var<E, N>(detail::inc_subtensor(region.base(), detail::lift<E>(y), region.slices(), false));
}
template <class E, std::size_t N, class Y>
void set_subtensor(const var<E, N>&, const Y&) {
  static_assert(sizeof(E) == 0, "xsym::set_subtensor takes a slice, x(xsym::range(1, -1)), not a whole tensor; "
                                "keep the slice's own type (auto) so that it remembers x");
}
template <class E, std::size_t N, class Y>
void inc_subtensor(const var<E, N>&, const Y&) {
  static_assert(sizeof(E) == 0, "xsym::inc_subtensor takes a slice, x(xsym::range(1, -1)), not a whole tensor; "
                                "keep the slice's own type (auto) so that it remembers x");
}

/// @brief numpy's reshape: x's elements in C order with shape `dims`, one of which may be -1
/// (the extent that keeps the size): reshape(x, {-1, 28}). A view when x is C-contiguous.
template <class E, std::size_t N, std::size_t M>
var<E, M> reshape(const var<E, N>& x, const std::int64_t (&dims)[M],
                  detail::source_site where = detail::source_site::current()) {
  static_assert(M <= 4, "xsym::reshape: symbolic tensors have rank 0 to 4");
  const detail::at_site site(where);
  return var<E, M>(detail::reshape(x.node(), std::vector<std::int64_t>(dims, dims + M)));
}
/// @brief x's elements in C order as a vector (numpy's ravel; a view when x is C-contiguous).
template <class E, std::size_t N>
var<E, 1> flatten(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return var<E, 1>(detail::reshape(x.node(), {-1}));
}

/// @brief numpy's concatenate: the tensors end to end along `axis` (equal extents elsewhere),
/// one Join node; its gradient gives each its part back (Split views).
template <class E, std::size_t N>
var<E, N> concatenate(const std::vector<var<E, N>>& xs, int axis = 0,
                      detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::concatenate: rank-0 tensors have no axis to join along");
  const detail::at_site site(where);
  std::vector<var_ptr> nodes;
  for (const auto& x : xs) nodes.push_back(x.node());
  return var<E, N>(detail::join(std::move(nodes), axis));
}
template <class E, std::size_t N>
var<E, N> concatenate(std::initializer_list<var<E, N>> xs, int axis = 0,
                      detail::source_site where = detail::source_site::current()) {
  return concatenate(std::vector<var<E, N>>(xs), axis, where);
}
/// @brief numpy's stack: the tensors (of one shape) along a new axis.
template <class E, std::size_t N>
var<E, N + 1> stack(std::initializer_list<var<E, N>> xs, int axis = 0,
                    detail::source_site where = detail::source_site::current()) {
  return stack(std::vector<var<E, N>>(xs), axis, where);
}
template <class E, std::size_t N>
var<E, N + 1> stack(const std::vector<var<E, N>>& xs, int axis = 0,
                    detail::source_site where = detail::source_site::current()) {
  static_assert(N + 1 <= 4, "xsym::stack: symbolic tensors have rank 0 to 4");
  const detail::at_site site(where);
  const int a = detail::normalize_axis(axis, static_cast<int>(N) + 1, "stack");
  std::vector<int> pattern;
  for (int d = 0, j = 0; d <= static_cast<int>(N); ++d) pattern.push_back(d == a ? -1 : j++);
  std::vector<var_ptr> nodes;
  for (const auto& x : xs) nodes.push_back(detail::dimshuffle(x.node(), pattern));
  return var<E, N + 1>(detail::join(std::move(nodes), a));
}
/// @brief numpy's split at indices: split(x, {2, 5}) is x[:2], x[2:5], x[5:] along `axis`
/// (Subtensor views).
template <class E, std::size_t N>
std::vector<var<E, N>> split(const var<E, N>& x, const std::vector<std::int64_t>& indices, int axis = 0,
                             detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::split: a rank-0 tensor has no axis to split");
  const detail::at_site site(where);
  const int a = detail::normalize_axis(axis, static_cast<int>(N), "split");
  std::vector<var<E, N>> parts;
  for (std::size_t i = 0; i <= indices.size(); ++i) {
    std::vector<slice_spec> slices(static_cast<std::size_t>(a) + 1);
    slice_spec& s = slices.back();
    s.has_start = i > 0;
    s.start = i > 0 ? indices[i - 1] : 0;
    s.has_stop = i < indices.size();
    s.stop = i < indices.size() ? indices[i] : 0;
    parts.emplace_back(detail::subtensor(x.node(), std::move(slices)));
  }
  return parts;
}

/// @brief An extent of an array to make: a C++ integer or an int32/int64 scalar tensor
/// (x.shape(0), shape(x, 1)).
struct extent {
  var_ptr node;
  template <std::integral I>
    requires(!std::is_same_v<I, bool>)
  extent(I n)  // NOLINT: implicit, so that {3, n} reads as a shape
      : node(detail::make_constant(detail::scalar_array(static_cast<std::int64_t>(n)))) {
    if (n < 0) throw graph_error("xsym: extent " + std::to_string(n) + " is negative");
  }
  template <class I>
    requires(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>)
  extent(const var<I, 0>& v) : node(v.node()) {}  // NOLINT
};

namespace detail {
template <std::size_t M>
std::vector<var_ptr> extent_nodes(const extent (&dims)[M]) {
  std::vector<var_ptr> r;
  for (const extent& e : dims) r.push_back(e.node);
  return r;
}
}  // namespace detail

/// @brief x's extent along axis i as an int64 scalar (Theano's x.shape[i], a Shape_i node).
template <class E, std::size_t N>
var<std::int64_t, 0> shape(const var<E, N>& x, int i, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return var<std::int64_t, 0>(detail::shape_prod(x.node(), {detail::normalize_axis(i, static_cast<int>(N), "shape")}, dtype::int64));
}
/// @brief x's shape as an int64 vector.
template <class E, std::size_t N>
var<std::int64_t, 1> shape(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::shape: a rank-0 tensor's shape is empty; ask for an axis of a tensor");
  const detail::at_site site(where);
  std::vector<var<std::int64_t, 0>> parts;
  for (int d = 0; d < static_cast<int>(N); ++d) parts.push_back(shape(x, d, where));
  return stack(parts, 0, where);
}

/// @brief Theano's alloc: an array of shape `dims` filled with `value` broadcast to it (value a
/// C++ number or a tensor of lower or equal rank). An Alloc node.
template <class T, std::size_t K, std::size_t M>
var<T, M> alloc(const var<T, K>& value, const extent (&dims)[M],
                detail::source_site where = detail::source_site::current()) {
  static_assert(K <= M, "xsym::alloc: the value has more dimensions than the array");
  const detail::at_site site(where);
  return var<T, M>(detail::alloc(value.node(), detail::extent_nodes(dims)));
}
/// @brief numpy's full: an array of shape `dims` filled with `value`, of element type T.
template <class T = floatX, std::size_t M, class V>
  requires std::is_arithmetic_v<V>
var<T, M> full(const extent (&dims)[M], V value, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return var<T, M>(detail::alloc(detail::lift<T>(value), detail::extent_nodes(dims)));
}
/// @brief numpy's zeros and ones: zeros<float>({3, n}).
template <class T = floatX, std::size_t M>
var<T, M> zeros(const extent (&dims)[M], detail::source_site where = detail::source_site::current()) {
  return full<T>(dims, 0, where);
}
template <class T = floatX, std::size_t M>
var<T, M> ones(const extent (&dims)[M], detail::source_site where = detail::source_site::current()) {
  return full<T>(dims, 1, where);
}
/// @brief An array of x's shape and type filled with value (numpy's full_like, zeros_like, ones_like).
template <class E, std::size_t N, class V>
  requires std::is_arithmetic_v<V>
var<E, N> full_like(const var<E, N>& x, V value, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  std::vector<var_ptr> dims;
  for (int d = 0; d < static_cast<int>(N); ++d) dims.push_back(detail::shape_prod(x.node(), {d}, dtype::int64));
  return var<E, N>(detail::alloc(detail::lift<E>(value), std::move(dims)));
}
template <class E, std::size_t N>
var<E, N> zeros_like(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  return full_like(x, 0, where);
}
template <class E, std::size_t N>
var<E, N> ones_like(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  return full_like(x, 1, where);
}

namespace detail {
// arange's element type: T if given, else the operands' (a C++ integer is int64, a C++ floating
// number double).
template <class X>
using arange_elem_t = std::conditional_t<is_var_v<X>, typename operand_traits<X>::elem,
                                         std::conditional_t<std::is_floating_point_v<X>, double, std::int64_t>>;
template <class... X> struct promote_all;
template <class X> struct promote_all<X> { using type = X; };
template <class X, class Y, class... Z> struct promote_all<X, Y, Z...> {
  using type = typename promote_all<promote_t<X, Y>, Z...>::type;
};
template <class T, class... X>
using arange_t = std::conditional_t<std::is_void_v<T>, typename promote_all<arange_elem_t<X>...>::type, T>;
}  // namespace detail

/// @brief numpy's arange: start, start + step, ... while before stop (C++ numbers or scalar
/// tensors). An ARange node; a zero step is an error when it runs.
template <class T = void, operand A, operand B, operand C>
auto arange(const A& start, const B& stop, const C& step, detail::source_site where = detail::source_site::current()) {
  static_assert(detail::operand_traits<A>::rank == 0 && detail::operand_traits<B>::rank == 0 &&
                    detail::operand_traits<C>::rank == 0,
                "xsym::arange: start, stop and step are scalars");
  using R = detail::arange_t<T, A, B, C>;
  static_assert(!std::is_same_v<R, bool>, "xsym::arange: no bool ranges");
  const detail::at_site site(where);
  return var<R, 1>(detail::arange(detail::lift<R>(start), detail::lift<R>(stop), detail::lift<R>(step), dtype_of<R>()));
}
template <class T = void, operand A, operand B>
auto arange(const A& start, const B& stop, detail::source_site where = detail::source_site::current()) {
  return arange<detail::arange_t<T, A, B>>(start, stop, 1, where);
}
template <class T = void, operand B>
auto arange(const B& stop, detail::source_site where = detail::source_site::current()) {
  return arange<detail::arange_t<T, B>>(0, stop, 1, where);
}

/// @brief numpy's eye: an n x m matrix (m = n by default) with ones on diagonal k.
template <class T = floatX>
var<T, 2> eye(const extent& n, std::optional<extent> m = std::nullopt, std::int64_t k = 0,
              detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  const var<std::int64_t, 1> rows(detail::arange(detail::make_constant(detail::scalar_array<std::int64_t>(0)), n.node,
                                                 detail::make_constant(detail::scalar_array<std::int64_t>(1)), dtype::int64));
  const var<std::int64_t, 1> cols(detail::arange(detail::make_constant(detail::scalar_array<std::int64_t>(0)),
                                                 (m ? *m : n).node,
                                                 detail::make_constant(detail::scalar_array<std::int64_t>(1)), dtype::int64));
  const var<std::int64_t, 2> r(detail::dimshuffle(rows.node(), {0, -1}));
  const var<std::int64_t, 2> c(detail::dimshuffle(cols.node(), {-1, 0}));
  return cast<T>(r + k == c);
}

/// @brief numpy's cumsum along `axis` (of the flattened x without one): a CumOp node; its
/// gradient is the adjoint's running sum from the end.
template <class E, std::size_t N>
var<E, N> cumsum(const var<E, N>& x, int axis, detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::cumsum: a rank-0 tensor has no axis");
  const detail::at_site site(where);
  return var<E, N>(detail::cumulative(x.node(), reduce_op::sum, axis));
}
template <class E, std::size_t N>
var<E, 1> cumsum(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  return cumsum(flatten(x, where), 0, where);
}
/// @brief numpy's cumprod along `axis` (no gradient: grad refuses it).
template <class E, std::size_t N>
var<E, N> cumprod(const var<E, N>& x, int axis, detail::source_site where = detail::source_site::current()) {
  static_assert(N >= 1, "xsym::cumprod: a rank-0 tensor has no axis");
  const detail::at_site site(where);
  return var<E, N>(detail::cumulative(x.node(), reduce_op::prod, axis));
}

/// @brief Matrix products batch by batch: (b, n, k) with (b, k, m) gives (b, n, m); with a
/// (b, k) batch of vectors, (b, n). A BatchedDot node.
template <class A, class B, std::size_t NB>
auto batched_dot(const var<A, 3>& a, const var<B, NB>& b, detail::source_site where = detail::source_site::current()) {
  static_assert(NB == 2 || NB == 3, "xsym::batched_dot: the second operand is (b, k, m) or (b, k)");
  const detail::at_site site(where);
  using R = promote_t<A, B>;
  if constexpr (NB == 3) {
    return var<R, 3>(detail::batched_dot(a.node(), b.node()));
  } else {
    const var_ptr product = detail::batched_dot(a.node(), detail::dimshuffle(b.node(), {0, 1, -1}));
    return var<R, 2>(detail::dimshuffle(product, {0, 1}));
  }
}

/// @brief numpy's tensordot: the sum over a's axes `axes_a` paired with b's `axes_b`; the
/// result has a's other axes, then b's. Written as transposes, reshapes and one dot.
template <class A, std::size_t NA, class B, std::size_t NB, std::size_t K>
auto tensordot(const var<A, NA>& a, const var<B, NB>& b, const int (&axes_a)[K], const int (&axes_b)[K],
               detail::source_site where = detail::source_site::current()) {
  static_assert(K <= NA && K <= NB, "xsym::tensordot: more axes than the tensors have");
  static_assert(NA + NB - 2 * K <= 4, "xsym::tensordot: the result would have more than 4 dimensions");
  const detail::at_site site(where);
  using R = promote_t<A, B>;
  const std::vector<int> ca = detail::normalize_axes(std::vector<int>(axes_a, axes_a + K), static_cast<int>(NA), "tensordot");
  const std::vector<int> cb = detail::normalize_axes(std::vector<int>(axes_b, axes_b + K), static_cast<int>(NB), "tensordot");
  std::vector<int> fa, fb, pa, pb;
  for (int d = 0; d < static_cast<int>(NA); ++d)
    if (std::find(ca.begin(), ca.end(), d) == ca.end()) fa.push_back(d);
  for (int d = 0; d < static_cast<int>(NB); ++d)
    if (std::find(cb.begin(), cb.end(), d) == cb.end()) fb.push_back(d);
  // The pairs in the caller's order (normalize_axes sorts), as numpy pairs them.
  for (std::size_t i = 0; i < K; ++i) {
    pa.push_back(axes_a[i] < 0 ? axes_a[i] + static_cast<int>(NA) : axes_a[i]);
    pb.push_back(axes_b[i] < 0 ? axes_b[i] + static_cast<int>(NB) : axes_b[i]);
  }
  std::vector<int> order_a = fa, order_b = pb;
  order_a.insert(order_a.end(), pa.begin(), pa.end());
  order_b.insert(order_b.end(), fb.begin(), fb.end());
  // Paired axes of other extents are an error that names them (the reshapes below would
  // otherwise report shapes the caller never wrote).
  var_ptr bc = b.node();
  if constexpr (K > 0) {
    std::vector<var_ptr> same;
    std::string as, bs;
    for (std::size_t i = 0; i < K; ++i) {
      same.push_back((shape(a, pa[i], where) == shape(b, pb[i], where)).node());
      as += (i ? ", " : "") + std::to_string(pa[i]);
      bs += (i ? ", " : "") + std::to_string(pb[i]);
    }
    bc = detail::check(b.node(), std::move(same),
                       "tensordot: a's axes (" + as + ") and b's axes (" + bs + ") differ in extent");
  }
  const var_ptr at = detail::dimshuffle(detail::cast(a.node(), dtype_of<R>()), order_a);
  const var_ptr bt = detail::dimshuffle(detail::cast(bc, dtype_of<R>()), order_b);
  const var_ptr m = detail::shape_prod(a.node(), fa, dtype::int64), k = detail::shape_prod(a.node(), pa, dtype::int64);
  const var_ptr n = detail::shape_prod(b.node(), fb, dtype::int64);
  const var_ptr product = detail::dot(detail::reshape_to(at, {m, k}), detail::reshape_to(bt, {k, n}));
  std::vector<var_ptr> out;
  for (int d : fa) out.push_back(detail::shape_prod(a.node(), {d}, dtype::int64));
  for (int d : fb) out.push_back(detail::shape_prod(b.node(), {d}, dtype::int64));
  return var<R, NA + NB - 2 * K>(detail::reshape_to(product, std::move(out)));
}
/// @brief tensordot over a's last n axes and b's first n, as numpy's tensordot(a, b, n).
template <std::size_t Nax, class A, std::size_t NA, class B, std::size_t NB>
auto tensordot(const var<A, NA>& a, const var<B, NB>& b, detail::source_site where = detail::source_site::current()) {
  static_assert(Nax >= 1 && Nax <= NA && Nax <= NB, "xsym::tensordot<n>: n must be at least 1 and at most either rank");
  int axes_a[Nax], axes_b[Nax];
  for (std::size_t i = 0; i < Nax; ++i) {
    axes_a[i] = static_cast<int>(NA - Nax + i);
    axes_b[i] = static_cast<int>(i);
  }
  return tensordot(a, b, axes_a, axes_b, where);
}

/// @brief x, with conditions checked when it runs: each a bool scalar; a false one is an
/// assertion_error carrying `message` (an Assert node, Theano's assert_op).
template <class E, std::size_t N, class... C>
  requires(std::is_same_v<C, var<bool, 0>> && ...)
var<E, N> check(const var<E, N>& x, const std::string& message, const C&... conditions) {
  return var<E, N>(detail::check(x.node(), {conditions.node()...}, message));
}

/// @brief -log(p[i, labels[i]]) for each row i of probabilities p, against int class labels;
/// a label outside [0, classes) is an assertion_error.
template <class E, class I>
  requires(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>)
var<E, 1> categorical_crossentropy(const var<E, 2>& p, const var<I, 1>& labels,
                                   detail::source_site where = detail::source_site::current()) {
  static_assert(std::is_floating_point_v<E>, "xsym::categorical_crossentropy: p holds float probabilities");
  const detail::at_site site(where);
  const auto classes = shape(p, 1, where);
  const auto one_per_row = check(labels, "categorical_crossentropy: the labels are not one per row of p",
                                 shape(labels, 0, where) == shape(p, 0, where));
  const auto checked = check(one_per_row, "categorical_crossentropy: a label is outside [0, number of classes)",
                             all(one_per_row >= I(0)), all(cast<std::int64_t>(one_per_row) < classes));
  const var<I, 2> column(detail::dimshuffle(checked.node(), {0, -1}));
  const var<std::int64_t, 2> classes_row(detail::dimshuffle(arange(classes, where).node(), {-1, 0}));
  // The label's entry selected, not p times a one-hot row: 0 * NaN elsewhere would be NaN.
  return -log(sum(switch_(cast<std::int64_t>(column) == classes_row, p, E(0)), 1));
}

/// @brief x != x and |x| == inf, elementwise (false for integers).
template <class E, std::size_t N>
var<bool, N> isnan(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return x != x;
}
template <class E, std::size_t N>
var<bool, N> isinf(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  static_assert(std::is_floating_point_v<E>, "xsym::isinf takes float tensors (an integer is never infinite)");
  const detail::at_site site(where);
  return abs(x) == std::numeric_limits<E>::infinity();
}

/// @brief -1, 0 or 1 by the sign of x (0 for ±0; NaN stays NaN), in x's type.
template <class E, std::size_t N>
var<E, N> sign(const var<E, N>& x, detail::source_site where = detail::source_site::current()) {
  static_assert(!std::is_same_v<E, bool>, "xsym::sign is not defined on bool tensors");
  const detail::at_site site(where);
  // NaN is the only x that is neither above, below nor equal to 0: it stays x; the rest give +0
  // (x * 0 would keep -0's sign, numpy's sign(-0.0) is +0).
  return switch_(x > E(0), E(1), switch_(x < E(0), E(-1), switch_(x == x, E(0), x)));
}
XSYM_COLD_END

}  // namespace xsym

#endif
