#ifndef XSYM_EXPR_VAR_HPP
#define XSYM_EXPR_VAR_HPP

#include <cmath>
#include <concepts>
#include <cstdio>
#include <string>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>

#include "../config/cold.hpp"
#include "../config/config.hpp"
#include "convert.hpp"
#include "typed.hpp"
#include "variable.hpp"

namespace xsym {

template <class Elem, std::size_t N> class var;
template <class Elem, std::size_t N> class shared_var;
template <class Elem, std::size_t R, std::size_t N> class sliced;
template <class X> struct is_var : std::false_type {};
template <class E, std::size_t N> struct is_var<var<E, N>> : std::true_type {};
template <class E, std::size_t N> struct is_var<shared_var<E, N>> : std::true_type {};
template <class E, std::size_t R, std::size_t N> struct is_var<sliced<E, R, N>> : std::true_type {};
template <class Tree> struct is_var<typed<Tree>> : std::true_type {};

// ---- slices: x(xsym::range(1, -1), 0), numpy's x[1:-1, 0] -------------------------------------

namespace placeholders {
/// @brief An absent end of a range, as in xtensor: range(_, -1) is numpy's :-1.
struct placeholder_t {};
inline constexpr placeholder_t _{};
}  // namespace placeholders

/// @brief One end of a range: an integer (negative counts from the end) or placeholders::_.
struct slice_bound {
  bool has = false;
  std::int64_t value = 0;
  slice_bound(placeholders::placeholder_t) {}  // NOLINT: implicit, as an integer is
  template <std::integral I>
    requires(!std::is_same_v<I, bool>)
  slice_bound(I v) : has(true), value(static_cast<std::int64_t>(v)) {}  // NOLINT
};

/// @brief A basic slice of one axis, made by range() or all().
struct range_t {
  slice_spec spec;
};

/// @brief numpy's start:stop:step; a negative step walks backwards (range(_, _, -1) reverses).
inline range_t range(slice_bound start, slice_bound stop, std::int64_t step = 1) {
  return {{start.value, stop.value, step, start.has, stop.has, false}};
}
/// @brief A whole axis, numpy's `:`.
inline range_t all() { return {}; }

namespace detail {
template <class S>
inline constexpr bool is_slice_arg_v = std::is_same_v<S, range_t> || (std::integral<S> && !std::is_same_v<S, bool>);
template <class S>
slice_spec to_slice(const S& s) {
  if constexpr (std::is_same_v<S, range_t>) return s.spec;
  else return {static_cast<std::int64_t>(s), 0, 1, true, false, true};
}
// A slicing call's first index (an integer if Index), with the user's line: a call whose
// indices are a pack takes no defaulted source_location, but its first index's conversion can.
template <bool Index>
struct located_slice {
  slice_spec spec;
  source_site where;
  template <class S>
    requires(is_slice_arg_v<S> && std::is_integral_v<S> == Index)
  located_slice(const S& s, source_site w = source_site::current()) : spec(to_slice(s)), where(w) {}  // NOLINT
};
}  // namespace detail
template <class X> inline constexpr bool is_var_v = is_var<std::remove_cvref_t<X>>::value;

namespace detail {
// An operand that remembers the user's line: operators cannot take a defaulted
// std::source_location, but the conversion to their parameter can.
// A typed expression converts only to its own located<typed<Tree>>: its operators keep its tree.
template <class V>
struct located {
  const V& v;
  detail::source_site where;
  template <class D>
    requires(std::is_same_v<D, V> || (std::is_base_of_v<V, D> && !is_typed_v<D>))
  located(const D& x, detail::source_site w = detail::source_site::current()) : v(x), where(w) {}  // NOLINT: implicit
};
template <scalar_op S, class A, class B> auto binary(const A& a, const B& b);
template <scalar_op S, class A> auto unary(const A& a);
XSYM_COLD_BEGIN  // the error path, out of line: not copied into every var<T, N> built
[[noreturn]] inline void throw_held_as(const variable& node, dtype want, int want_rank) {
  throw std::logic_error("xsym: internal error: node of type " + std::string(dtype_name(node.type)) + " rank " +
                         std::to_string(node.rank) + " held as " + std::string(dtype_name(want)) + " rank " +
                         std::to_string(want_rank));
}
XSYM_COLD_END
}  // namespace detail

/// @brief A symbolic tensor of element type Elem and rank N: a handle on a graph node.
///
/// Rank and dtype are part of the type, so rank errors are compile errors; shapes are
/// checked when a compiled function runs.
template <class Elem, std::size_t N>
class var {
  static_assert(is_element_type_v<Elem>, "xsym tensors hold bool, std::int32_t, std::int64_t, float or double");
  static_assert(N <= 4, "xsym symbolic tensors have rank 0 to 4");

 public:
  using value_type = Elem;
  static constexpr std::size_t rank = N;

  explicit var(var_ptr node) : m_node(std::move(node)) {
    detail::use_element_type<Elem>();
    if (m_node->type != dtype_of<Elem>() || m_node->rank != static_cast<int>(N))
      detail::throw_held_as(*m_node, dtype_of<Elem>(), static_cast<int>(N));
  }
  // A copy (moves copy too) is a var of its own: an expression builds its node before it is
  // copied into one, so the copy never needs the expression's operands.
  var(const var& o) : m_node(o.node()) {}
  var& operator=(const var& o) {
    m_node = o.node();
    m_lower = nullptr;
    return *this;
  }

  /// @brief The graph node; an expression (typed) builds its nodes here, on first use.
  const var_ptr& node() const {
    if (!m_node) [[unlikely]] m_lower(*this);
    return m_node;
  }
  const std::string& name() const { return node()->name; }

  /// @brief The transpose (dimensions reversed), Theano's x.T.
  var T() const;

  /// @brief numpy's basic slicing, one argument per leading axis: x(range(1, -1)) is x[1:-1],
  /// x(all(), 0) is x[:, 0] (an integer drops its axis). A view (a Subtensor node); pass it to
  /// set_subtensor or inc_subtensor to get x with that region replaced or incremented.
  template <class... S>
    requires(detail::is_slice_arg_v<S> && ...)
  auto operator()(detail::located_slice<true> first, const S&... s) const {
    static_assert(1 + sizeof...(S) <= N, "xsym: more indices than the tensor has dimensions");
    return slice_at<1 + (std::size_t{std::is_integral_v<S>} + ... + 0)>(first.where, {first.spec, detail::to_slice(s)...});
  }
  template <class... S>
    requires(detail::is_slice_arg_v<S> && ...)
  auto operator()(detail::located_slice<false> first, const S&... s) const {
    static_assert(1 + sizeof...(S) <= N, "xsym: more indices than the tensor has dimensions");
    return slice_at<(std::size_t{std::is_integral_v<S>} + ... + 0)>(first.where, {first.spec, detail::to_slice(s)...});
  }
  /// @brief The extent of axis i (negative counts from the end) as an int64 scalar, Theano's
  /// x.shape[i] (a Shape_i node); xsym::shape(x) is the whole shape.
  var<std::int64_t, 0> shape(int i, detail::source_site where = detail::source_site::current()) const {
    static_assert(N >= 1, "xsym: a rank-0 tensor has no axis");
    const detail::at_site site(where);
    const int a = i < 0 ? i + static_cast<int>(N) : i;
    if (a < 0 || a >= static_cast<int>(N))
      throw graph_error("xsym: axis " + std::to_string(i) + " is out of range for a rank-" + std::to_string(N) + " tensor");
    return var<std::int64_t, 0>(detail::shape_prod(node(), {a}, dtype::int64));
  }

  /// @brief One axis: x[range(1, -1)] or x[3].
  auto operator[](detail::located_slice<true> s) const { return slice_at<1>(s.where, {s.spec}); }
  auto operator[](detail::located_slice<false> s) const { return slice_at<0>(s.where, {s.spec}); }

  // Elementwise operators, found by argument-dependent lookup. The operand converted to
  // located<Self> carries the line of the expression, recorded on the node it makes.
// B_OK: the right operands a var on the left takes. == and != take numbers only: C++20 also
// tries b == a (and !(a == b) for !=), and between two var types each friend converted the
// other side, an ambiguity (var == var and var != var are templates below).
#define XSYM_OPERATOR_FOR(Self, sym, sop, B_OK)                                          \
  template <class B>                                                                     \
    requires(B_OK)                                                                       \
  friend auto operator sym(detail::located<Self> a, const B& b) {                        \
    const detail::at_site site(a.where);                                                 \
    return detail::binary<scalar_op::sop>(a.v, b);                                       \
  }                                                                                      \
  template <class A>                                                                     \
    requires std::is_arithmetic_v<A>                                                     \
  friend auto operator sym(const A& a, detail::located<Self> b) {                        \
    const detail::at_site site(b.where);                                                 \
    return detail::binary<scalar_op::sop>(a, b.v);                                       \
  }
#define XSYM_BINARY_OPERATOR(Self, sym, sop) XSYM_OPERATOR_FOR(Self, sym, sop, is_var_v<B> || std::is_arithmetic_v<B>)
#define XSYM_NUMBER_OPERATOR(Self, sym, sop) XSYM_OPERATOR_FOR(Self, sym, sop, std::is_arithmetic_v<B>)
#define XSYM_UNARY_OPERATOR(Self, sym, sop)           \
  friend auto operator sym(detail::located<Self> a) { \
    const detail::at_site site(a.where);              \
    return detail::unary<scalar_op::sop>(a.v);        \
  }
#define XSYM_ELEMWISE_OPERATORS(Self)        \
  XSYM_BINARY_OPERATOR(Self, +, add)         \
  XSYM_BINARY_OPERATOR(Self, -, sub)         \
  XSYM_BINARY_OPERATOR(Self, *, mul)         \
  XSYM_BINARY_OPERATOR(Self, /, true_div)    \
  XSYM_BINARY_OPERATOR(Self, >, gt)          \
  XSYM_BINARY_OPERATOR(Self, <, lt)          \
  XSYM_BINARY_OPERATOR(Self, >=, ge)         \
  XSYM_BINARY_OPERATOR(Self, <=, le)         \
  XSYM_NUMBER_OPERATOR(Self, ==, eq)         \
  XSYM_NUMBER_OPERATOR(Self, !=, neq)        \
  XSYM_BINARY_OPERATOR(Self, %, mod)         \
  XSYM_BINARY_OPERATOR(Self, &, bit_and)     \
  XSYM_BINARY_OPERATOR(Self, |, bit_or)      \
  XSYM_BINARY_OPERATOR(Self, ^, bit_xor)     \
  XSYM_UNARY_OPERATOR(Self, ~, invert)       \
  XSYM_UNARY_OPERATOR(Self, -, neg)
  XSYM_ELEMWISE_OPERATORS(var)


 protected:
  // An expression's var: no node until node() asks `lower` to build it (set_node).
  using lower_fn = void (*)(const var&);
  explicit var(lower_fn lower, var_ptr node) noexcept : m_node(std::move(node)), m_lower(lower) {}
  void set_node(var_ptr n) const { m_node = std::move(n); }
  const var_ptr& built_node() const { return m_node; }

 private:
  template <std::size_t Dropped>
  auto slice_at(const detail::source_site& where, std::vector<slice_spec> slices) const {
    const detail::at_site site(where);
    var_ptr view = detail::subtensor(node(), slices);
    return sliced<Elem, N - Dropped, N>(std::move(view), node(), std::move(slices));
  }

  mutable var_ptr m_node;
  lower_fn m_lower = nullptr;
};

/// @brief A slice of a rank-N tensor, itself of rank R: a var that remembers what it was cut
/// from, so that set_subtensor and inc_subtensor can write it back.
template <class Elem, std::size_t R, std::size_t N>
class sliced : public var<Elem, R> {
 public:
  sliced(var_ptr view, var_ptr base, std::vector<slice_spec> slices)
      : var<Elem, R>(std::move(view)), m_base(std::move(base)), m_slices(std::move(slices)) {}
  const var_ptr& base() const { return m_base; }
  const std::vector<slice_spec>& slices() const { return m_slices; }

 private:
  var_ptr m_base;
  std::vector<slice_spec> m_slices;
};

namespace detail {
// What a typed expression holds: its tree's leaves (handles, C++ numbers) and each op's line.
// Building it copies handles and numbers; it allocates nothing.
template <class Tree>
struct tree_data;
template <class T, std::size_t N>
struct tree_data<tree::leaf<T, N>> {
  var_ptr node;
};
template <class T>
struct tree_data<tree::number<T>> {
  T value;
};
template <scalar_op S, class... A>
struct tree_data<tree::apply<S, A...>> {
  std::tuple<tree_data<A>...> args;
  source_site where;
  var_ptr built;  // the node, where the expression this subtree came from had built it already
};

// The run-time nodes of a tree, as the eager operators would have made them: operands first,
// in order, each op's nodes marked with its line.
template <class T, std::size_t N>
var_ptr lower_tree(const tree_data<tree::leaf<T, N>>& d) { return d.node; }
template <class T>
var_ptr lower_tree(const tree_data<tree::number<T>>& d) { return make_constant(scalar_array(d.value)); }
template <scalar_op S, class... A>
var_ptr lower_tree(const tree_data<tree::apply<S, A...>>& d) {
  if (d.built) return d.built;
  const at_site site(d.where, true);
  std::vector<var_ptr> in;
  in.reserve(sizeof...(A));
  std::apply([&](const auto&... a) { (in.push_back(lower_tree(a)), ...); }, d.args);
  return elemwise(S, std::move(in));
}
}  // namespace detail

/// @brief An elementwise expression whose type is its tree (expr/typed.hpp). It holds its
/// leaves and builds its run-time nodes when first used as a var (node()); its operators
/// extend the tree.
template <class Tree>
class typed : public var<typename Tree::value_type, Tree::rank> {
  using base = var<typename Tree::value_type, Tree::rank>;

 public:
  using tree_type = Tree;
  explicit typed(detail::tree_data<Tree> data) noexcept : base(&lower, nullptr), m_data(std::move(data)) {}
  typed(const typed& o) noexcept : base(&lower, o.built_node()), m_data(o.m_data) {}
  typed& operator=(const typed& o) noexcept {
    if (this != &o) {
      this->set_node(o.built_node());
      m_data = o.m_data;
    }
    return *this;
  }
  // `auto e = x + y; e = e * 2;` assigns another tree: said here rather than by overload resolution.
  template <class Other>
  typed& operator=(const typed<Other>&) {
    static_assert(sizeof(Other) == 0,
                  "xsym: an expression's type is its tree, so `e = e * 2` assigns another type; declare e as "
                  "xsym::var<T, N> (every expression converts to it)");
    return *this;
  }
  /// @brief The leaves and lines the tree was built from; with its node where built already.
  detail::tree_data<Tree> data() const {
    detail::tree_data<Tree> d = m_data;
    d.built = this->built_node();
    return d;
  }
  XSYM_ELEMWISE_OPERATORS(typed)

 private:
  static void lower(const base& self) {
    const auto& t = static_cast<const typed&>(self);
    t.set_node(detail::lower_tree(t.m_data));
  }
  detail::tree_data<Tree> m_data;
};
#undef XSYM_ELEMWISE_OPERATORS
#undef XSYM_UNARY_OPERATOR
#undef XSYM_NUMBER_OPERATOR
#undef XSYM_BINARY_OPERATOR
#undef XSYM_OPERATOR_FOR

/// @brief Elementwise a == b and a != b of two vars of any types (the forms C++20 also tries,
/// b == a and !(a == b), tie with them and lose as rewritten).
template <class A, class B>
  requires(is_var_v<A> && is_var_v<B>)
auto operator==(const A& a, const B& b) {
  return detail::binary<scalar_op::eq>(a, b);
}
template <class A, class B>
  requires(is_var_v<A> && is_var_v<B>)
auto operator!=(const A& a, const B& b) {
  return detail::binary<scalar_op::neq>(a, b);
}

namespace detail {
template <class A, class B>
inline constexpr bool var_beside_array_v =
    (is_var_v<A> && xt::is_xexpression<std::remove_cvref_t<B>>::value) ||
    (xt::is_xexpression<std::remove_cvref_t<A>>::value && is_var_v<B>);
template <class...>
inline constexpr bool always_false_v = false;
}  // namespace detail

// An xtensor array beside a var: xtensor's own operator would take the var as a scalar and build
// an xt::xfunction that no xsym call accepts. These win (more constrained) and say what to write.
#define XSYM_ARRAY_BESIDE_VAR(sym)                                                                   \
  template <class A, class B>                                                                        \
    requires detail::var_beside_array_v<A, B>                                                        \
  void operator sym(A&&, B&&) {                                                                      \
    static_assert(detail::always_false_v<A, B>,                                                      \
                  "xsym: an xtensor array beside a symbolic tensor: wrap the array in "              \
                  "xsym::constant(array), or make it an input");                                     \
  }
XSYM_ARRAY_BESIDE_VAR(+)
XSYM_ARRAY_BESIDE_VAR(-)
XSYM_ARRAY_BESIDE_VAR(*)
XSYM_ARRAY_BESIDE_VAR(/)
XSYM_ARRAY_BESIDE_VAR(%)
XSYM_ARRAY_BESIDE_VAR(&)
XSYM_ARRAY_BESIDE_VAR(|)
XSYM_ARRAY_BESIDE_VAR(^)
XSYM_ARRAY_BESIDE_VAR(<)
XSYM_ARRAY_BESIDE_VAR(>)
XSYM_ARRAY_BESIDE_VAR(<=)
XSYM_ARRAY_BESIDE_VAR(>=)
XSYM_ARRAY_BESIDE_VAR(==)
XSYM_ARRAY_BESIDE_VAR(!=)
#undef XSYM_ARRAY_BESIDE_VAR

/// @brief A shared variable: a symbolic tensor whose value lives between calls and can be updated.
template <class Elem, std::size_t N>
class shared_var : public var<Elem, N> {
 public:
  using var<Elem, N>::var;

  /// @brief A copy of the current value; in a MonitorMode callback, of the value its call read.
  xt::xtensor<Elem, N> get_value() const {
    auto& s = *this->node()->shared;
    if (const auto* read = detail::values_in_callback())
      for (const auto& [sv, v] : *read)
        if (sv == &s) return detail::to_xtensor<Elem, N>(v);
    std::lock_guard lock(s.mutex);
    return detail::to_xtensor<Elem, N>(s.value);
  }

  /// @brief Replaces the value (its shape may change; its rank and dtype may not).
  template <class E>
  void set_value(const xt::xexpression<E>& value) {
    using vt = typename E::value_type;
    static_assert(std::is_same_v<vt, Elem>, "shared_var::set_value: the value's element type must match the variable's");
    ndarray a = detail::copy_to_ndarray<Elem>(value);
    if (a.rank() != static_cast<int>(N))
      throw std::invalid_argument("xsym: set_value on shared variable '" + this->name() + "' of rank " +
                                  std::to_string(N) + " got a value of rank " + std::to_string(a.rank()));
    auto& s = *this->node()->shared;
    std::lock_guard lock(s.mutex);
    s.value = std::move(a);
  }
  void set_value(Elem value)
    requires(N == 0)
  {
    auto& s = *this->node()->shared;
    std::lock_guard lock(s.mutex);
    s.value = detail::scalar_array(value);
  }
};


/// @brief A symbolic tensor, or a C++ number that mixes with one (`1 - y`, `0.01 * w`).
template <class X>
concept symbolic = is_var_v<X>;
template <class X>
concept operand = symbolic<X> || std::is_arithmetic_v<std::remove_cvref_t<X>>;

XSYM_COLD_BEGIN  // building graphs, never per call
namespace detail {
template <class X, bool = is_var_v<X>> struct operand_traits {
  using elem = std::remove_cvref_t<X>;
  static constexpr std::size_t rank = 0;
  static constexpr bool weak = true;  // a C++ number takes the tensor's type when it can
};
template <class X> struct operand_traits<X, true> {
  using elem = typename std::remove_cvref_t<X>::value_type;
  static constexpr std::size_t rank = std::remove_cvref_t<X>::rank;
  static constexpr bool weak = false;
};

// The type a C++ number becomes next to a tensor of type T: T, unless the number would not
// fit its kind (a fraction next to ints gives double, as numpy does).
template <class T, class S>
using weak_combine_t = std::conditional_t<
    std::is_floating_point_v<S> && !std::is_floating_point_v<T>, double,
    std::conditional_t<std::is_same_v<T, bool> && !std::is_same_v<S, bool>, std::int64_t, T>>;

template <class A, class B>
struct combined {
  using ta = typename operand_traits<A>::elem;
  using tb = typename operand_traits<B>::elem;
  static constexpr bool wa = operand_traits<A>::weak, wb = operand_traits<B>::weak;
  using type = std::conditional_t<wa, weak_combine_t<tb, std::conditional_t<std::is_same_v<ta, bool>, bool, ta>>,
               std::conditional_t<wb, weak_combine_t<ta, tb>, promote_t<ta, tb>>>;
  static constexpr std::size_t rank = std::max(operand_traits<A>::rank, operand_traits<B>::rank);
};

[[noreturn]] inline void throw_number_does_not_fit(const std::string& number, dtype t) {
  throw graph_error("xsym: the C++ number " + number + " does not fit the tensor's element type " +
                    std::string(dtype_name(t)) + " (it would wrap around or overflow); cast the tensor to a wider type "
                    "first, e.g. xsym::cast<std::int64_t>(x) or xsym::cast<double>(x)");
}

template <class C, class X>
var_ptr lift(const X& x) {
  if constexpr (is_var_v<X>) {
    return x.node();
  } else {
    // An integer that the tensor's integer type cannot hold would become another number.
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool> && std::is_integral_v<X> && !std::is_same_v<X, bool>)
      if (!std::in_range<C>(x)) throw_number_does_not_fit(std::to_string(x), dtype_of<C>());
    // A finite double beyond float's range would become infinity (a conversion C++ leaves undefined).
    if constexpr (std::is_same_v<C, float> && std::is_same_v<X, double>)
      if (std::isfinite(x) && std::fabs(x) >= 0x1.ffffffp+127) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", x);
        throw_number_does_not_fit(buf, dtype_of<C>());
      }
    return make_constant(scalar_array(static_cast<C>(x)));
  }
}

// A C++ number, or a tensor of element type T: an operand a typed tree takes without a cast.
template <class X, class T>
inline constexpr bool of_type_v = std::is_arithmetic_v<X> || std::is_same_v<typename operand_traits<X>::elem, T>;

// An operand's part of a typed tree: its own tree's data, its handle, or a C++ number as T
// (checked as lift checks it).
template <class T, class X>
auto leaf_data(const X& x) {
  if constexpr (is_typed_v<X>) return x.data();
  else if constexpr (is_var_v<X>) return tree_data<tree::leaf<typename X::value_type, X::rank>>{x.node()};
  else {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<X, double>)
      if (std::isfinite(x) && std::fabs(x) >= 0x1.ffffffp+127) (void)lift<T>(x);  // throws, naming the number
    return tree_data<tree::number<T>>{static_cast<T>(x)};
  }
}
// With compute_test_value on, a node is computed where it is made: the tree is built now.
template <class Tree>
typed<Tree> typed_result(tree_data<Tree> d) {
  typed<Tree> t(std::move(d));
  if (test_value_setting() != test_value_mode::off && !test_values_suspended()) (void)t.node();
  return t;
}

template <scalar_op S, class A, class B>
auto binary(const A& a, const B& b) {
  using c = combined<A, B>;
  using compute = std::conditional_t<info(S).float_only, float_result_t<typename c::type>, typename c::type>;
  constexpr bool comparison = info(S).comparison;
  constexpr bool bitwise = info(S).family == op_family::bitwise;
  static_assert(!bitwise || !std::is_floating_point_v<compute>, "xsym: & | ^ take integer or bool tensors");
  if constexpr (!comparison && !bitwise)
    static_assert(!std::is_same_v<compute, bool>,
                  "xsym: arithmetic is not defined on bool tensors; cast them first with xsym::cast<std::int64_t>(...)");
  using result = std::conditional_t<comparison, bool, compute>;
  if constexpr (typed_op_v<S, compute> && of_type_v<A, compute> && of_type_v<B, compute>)
    return typed_result<tree::apply<S, tree_of_t<A, compute>, tree_of_t<B, compute>>>(
        {{leaf_data<compute>(a), leaf_data<compute>(b)}, build_site(), nullptr});
  else
    return var<result, c::rank>(elemwise(S, {lift<compute>(a), lift<compute>(b)}));
}

template <scalar_op S, class A>
auto unary(const A& a) {
  using E = typename A::value_type;
  constexpr std::size_t N = A::rank;
  using result = std::conditional_t<info(S).float_only, float_result_t<E>, E>;
  static_assert(info(S).family != op_family::bitwise || !std::is_floating_point_v<E>,
                "xsym: ~ takes integer or bool tensors");
  static_assert(info(S).family == op_family::bitwise || !std::is_same_v<result, bool>,
                "xsym: this function is not defined on bool tensors; cast them first with xsym::cast<...>(...)");
  if constexpr ((S == scalar_op::floor || S == scalar_op::ceil || S == scalar_op::round) && std::is_integral_v<E> &&
                !std::is_same_v<E, bool>)
    return a;  // an integer is its own floor, ceil and round, in its own dtype (numpy's)
  else if constexpr (typed_op_v<S, result> && std::is_same_v<E, result>)
    return typed_result<tree::apply<S, tree_of_t<A, E>>>({{leaf_data<E>(a)}, build_site(), nullptr});
  else
    return var<result, N>(elemwise(S, {a.node()}));
}
}  // namespace detail

// ---- leaves -------------------------------------------------------------------------------

/// @brief A symbolic input of any rank.
template <class T, std::size_t N>
var<T, N> tensor(std::string name) { return var<T, N>(detail::make_input(dtype_of<T>(), static_cast<int>(N), std::move(name))); }
/// @brief A symbolic input whose dimensions marked true are always 1 and broadcast (Theano's pattern).
template <class T, std::size_t N>
var<T, N> tensor(std::string name, const std::array<bool, N>& broadcastable) {
  std::uint8_t b = 0;
  for (std::size_t d = 0; d < N; ++d) b |= static_cast<std::uint8_t>(broadcastable[d] << d);
  return var<T, N>(detail::make_input(dtype_of<T>(), static_cast<int>(N), std::move(name), b));
}
/// @brief A 1×n matrix that broadcasts along its rows.
template <class T = floatX> var<T, 2> row(std::string name) { return tensor<T, 2>(std::move(name), {true, false}); }
/// @brief An n×1 matrix that broadcasts along its columns.
template <class T = floatX> var<T, 2> col(std::string name) { return tensor<T, 2>(std::move(name), {false, true}); }
template <class T = floatX> var<T, 0> scalar(std::string name) { return tensor<T, 0>(std::move(name)); }
template <class T = floatX> var<T, 1> vector(std::string name) { return tensor<T, 1>(std::move(name)); }
template <class T = floatX> var<T, 2> matrix(std::string name) { return tensor<T, 2>(std::move(name)); }
template <class T = floatX> var<T, 3> tensor3(std::string name) { return tensor<T, 3>(std::move(name)); }
template <class T = floatX> var<T, 4> tensor4(std::string name) { return tensor<T, 4>(std::move(name)); }

/// @brief A shared variable initialised with a copy of an xtensor container.
template <class EC, std::size_t N, xt::layout_type L, class Tag, class T = typename EC::value_type>
shared_var<T, N> shared(const xt::xtensor_container<EC, N, L, Tag>& value, std::string name = "") {
  return shared_var<T, N>(detail::make_shared_variable(detail::copy_to_ndarray<T>(value), std::move(name)));
}
namespace detail {
template <class E>
inline constexpr bool is_xtensor_container_v = false;
template <class EC, std::size_t N, xt::layout_type L, class Tag>
inline constexpr bool is_xtensor_container_v<xt::xtensor_container<EC, N, L, Tag>> = true;
// Any other xtensor expression (xt::xarray, a view, an xfunction): its rank is not a type.
template <class E>
inline constexpr bool needs_fixed_rank_v =
    xt::is_xexpression<std::remove_cvref_t<E>>::value && !is_xtensor_container_v<std::remove_cvref_t<E>>;
}  // namespace detail

/// @brief Refused: shared's rank is part of its type, so it takes an xt::xtensor<T, N>.
template <class E>
  requires detail::needs_fixed_rank_v<E>
void shared(const E&, std::string = "") {
  static_assert(detail::always_false_v<E>,
                "xsym::shared takes an xt::xtensor<T, N> (the rank is part of the symbolic type): "
                "copy an xt::xarray or a view into xt::xtensor<T, N> first");
}
/// @brief A rank-0 shared variable.
template <class T>
  requires is_element_type_v<T>
shared_var<T, 0> shared(T value, std::string name = "") {
  return shared_var<T, 0>(detail::make_shared_variable(detail::scalar_array(value), std::move(name)));
}

/// @brief A constant tensor (printed as TensorConstant{...}).
template <class T>
  requires is_element_type_v<T>
var<T, 0> constant(T value) { return var<T, 0>(detail::make_constant(detail::scalar_array(value))); }
template <class EC, std::size_t N, xt::layout_type L, class Tag, class T = typename EC::value_type>
var<T, N> constant(const xt::xtensor_container<EC, N, L, Tag>& value) {
  return var<T, N>(detail::make_constant(detail::copy_to_ndarray<T>(value)));
}
/// @brief Refused: constant's rank is part of its type, so it takes an xt::xtensor<T, N>.
template <class E>
  requires detail::needs_fixed_rank_v<E>
void constant(const E&) {
  static_assert(detail::always_false_v<E>,
                "xsym::constant takes an xt::xtensor<T, N> (the rank is part of the symbolic type): "
                "copy an xt::xarray or a view into xt::xtensor<T, N> first");
}

// ---- test values (compute_test_value) --------------------------------------------------------

/// @brief Gives x a test value (Theano's x.tag.test_value): with compute_test_value on, every node
/// built from x afterwards is computed on it, so a shape error is raised where that node is made.
template <class Elem, std::size_t N, class E>
void set_test_value(const var<Elem, N>& x, const xt::xexpression<E>& value) {
  static_assert(std::is_same_v<typename E::value_type, Elem>,
                "xsym::set_test_value: the value's element type must be the variable's");
  ndarray a = detail::copy_to_ndarray<Elem>(value);
  if (a.rank() != static_cast<int>(N))
    throw graph_error("xsym::set_test_value: '" + x.name() + "' has rank " + std::to_string(N) +
                      ", the value has rank " + std::to_string(a.rank()));
  for (int d = 0; d < a.rank(); ++d)
    if (detail::is_broadcastable(x.node(), d) && a.shape(d) != 1)
      throw graph_error("xsym::set_test_value: '" + x.name() + "' is broadcastable in dimension " + std::to_string(d) +
                        " (always 1), the value has shape " + to_string(a.shape()));
  std::const_pointer_cast<variable>(x.node())->test_value = std::make_shared<const ndarray>(std::move(a));
}
template <class Elem>
  requires is_element_type_v<Elem>
void set_test_value(const var<Elem, 0>& x, Elem value) {
  std::const_pointer_cast<variable>(x.node())->test_value = std::make_shared<const ndarray>(detail::scalar_array(value));
}

/// @brief x's test value (a shared variable's is its current value); throws graph_error when it has none.
template <class Elem, std::size_t N>
xt::xtensor<Elem, N> get_test_value(const var<Elem, N>& x) {
  const auto v = detail::test_value_of(*x.node());
  if (!v)
    throw graph_error("xsym::get_test_value: '" + x.name() + "' has no test value (is compute_test_value off, or an "
                      "input without one?)");
  return detail::to_xtensor<Elem, N>(*v);
}

// ---- elementwise --------------------------------------------------------------------------


#define XSYM_BINARY_FUNCTION(fname, sop)                                     \
  template <operand A, operand B>                                            \
    requires(symbolic<A> || symbolic<B>)                                     \
  auto fname(const A& a, const B& b,                                         \
             detail::source_site where = detail::source_site::current()) { \
    const detail::at_site site(where);                                       \
    return detail::binary<scalar_op::sop>(a, b);                             \
  }
XSYM_BINARY_FUNCTION(pow, pow)
XSYM_BINARY_FUNCTION(maximum, maximum)
XSYM_BINARY_FUNCTION(minimum, minimum)
XSYM_BINARY_FUNCTION(floor_divide, floor_div)  // numpy's //
XSYM_BINARY_FUNCTION(mod, mod)                 // numpy's %, as the operator
XSYM_BINARY_FUNCTION(bitwise_and, bit_and)
XSYM_BINARY_FUNCTION(bitwise_or, bit_or)
XSYM_BINARY_FUNCTION(bitwise_xor, bit_xor)
#undef XSYM_BINARY_FUNCTION

#define XSYM_UNARY_FUNCTION(fname, sop)                                      \
  template <symbolic A>                                                      \
  auto fname(const A& a,                                                     \
             detail::source_site where = detail::source_site::current()) { \
    const detail::at_site site(where);                                       \
    return detail::unary<scalar_op::sop>(a);                                 \
  }
XSYM_UNARY_FUNCTION(sqr, sqr)
XSYM_UNARY_FUNCTION(sqrt, sqrt)
XSYM_UNARY_FUNCTION(exp, exp)
XSYM_UNARY_FUNCTION(log, log)
XSYM_UNARY_FUNCTION(log1p, log1p)
XSYM_UNARY_FUNCTION(expm1, expm1)
XSYM_UNARY_FUNCTION(abs, abs)
XSYM_UNARY_FUNCTION(tanh, tanh)
XSYM_UNARY_FUNCTION(sigmoid, sigmoid)
XSYM_UNARY_FUNCTION(softplus, softplus)
XSYM_UNARY_FUNCTION(invert, invert)  // numpy's ~ (logical not on bool)
XSYM_UNARY_FUNCTION(sin, sin)
XSYM_UNARY_FUNCTION(cos, cos)
XSYM_UNARY_FUNCTION(tan, tan)
XSYM_UNARY_FUNCTION(arcsin, arcsin)
XSYM_UNARY_FUNCTION(arccos, arccos)
XSYM_UNARY_FUNCTION(arctan, arctan)
XSYM_UNARY_FUNCTION(sinh, sinh)
XSYM_UNARY_FUNCTION(cosh, cosh)
XSYM_UNARY_FUNCTION(arcsinh, arcsinh)
XSYM_UNARY_FUNCTION(arccosh, arccosh)
XSYM_UNARY_FUNCTION(arctanh, arctanh)
XSYM_UNARY_FUNCTION(erf, erf)
XSYM_UNARY_FUNCTION(erfc, erfc)
XSYM_UNARY_FUNCTION(log2, log2)
XSYM_UNARY_FUNCTION(log10, log10)
XSYM_UNARY_FUNCTION(exp2, exp2)
XSYM_UNARY_FUNCTION(floor, floor)
XSYM_UNARY_FUNCTION(ceil, ceil)
XSYM_UNARY_FUNCTION(round, round)
// The C++ spellings of numpy's inverse functions.
XSYM_UNARY_FUNCTION(asin, arcsin)
XSYM_UNARY_FUNCTION(acos, arccos)
XSYM_UNARY_FUNCTION(atan, arctan)
XSYM_UNARY_FUNCTION(asinh, arcsinh)
XSYM_UNARY_FUNCTION(acosh, arccosh)
XSYM_UNARY_FUNCTION(atanh, arctanh)
#undef XSYM_UNARY_FUNCTION

/// @brief Elementwise conversion to another element type.
template <class To, class E, std::size_t N>
var<To, N> cast(const var<E, N>& a, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  static_assert(is_element_type_v<To>, "xsym::cast<T>: T must be bool, std::int32_t, std::int64_t, float or double");
  return var<To, N>(detail::cast(a.node(), dtype_of<To>()));
}

/// @brief cond ? a : b, elementwise (numpy's where); cond is cast to bool if it is not.
template <class C, std::size_t NC, operand A, operand B>
auto switch_(const var<C, NC>& cond, const A& a, const B& b,
             detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  using c = detail::combined<A, B>;
  using T = typename std::conditional_t<detail::operand_traits<A>::weak && detail::operand_traits<B>::weak,
                                        std::common_type<A, B>, std::type_identity<typename c::type>>::type;
  constexpr std::size_t rank = std::max(NC, c::rank);
  return var<T, rank>(detail::elemwise(scalar_op::switch_, {cond.node(), detail::lift<T>(a), detail::lift<T>(b)}));
}
template <class C, std::size_t NC, operand A, operand B>
auto where(const var<C, NC>& cond, const A& a, const B& b,
           detail::source_site at = detail::source_site::current()) {
  return switch_(cond, a, b, at);
}

// ---- shape ------------------------------------------------------------------------------------

namespace detail {
// dimshuffle's first pattern entry, with the user's line (see located_slice).
struct located_entry {
  long long value = -1;
  char letter = 0;  // 0: a dimension number
  source_site where;
  template <class P>
  located_entry(P p, source_site w = source_site::current()) : where(w) {  // NOLINT: implicit
    static_assert(std::is_same_v<P, char> || (std::is_integral_v<P> && !std::is_same_v<P, bool>),
                  "xsym::dimshuffle: the pattern holds dimension numbers and 'x' for a new broadcastable axis");
    if constexpr (std::is_same_v<P, char>) letter = p;
    else value = static_cast<long long>(p);
  }
};
}  // namespace detail

/// @brief Reorders dimensions and inserts broadcastable ones: dimshuffle(x, 'x', 0) makes a row.
template <class E, std::size_t N, class... P>
var<E, 1 + sizeof...(P)> dimshuffle(const var<E, N>& a, detail::located_entry first, P... pattern) {
  const detail::at_site site(first.where);
  std::vector<int> p;
  auto add = [&](detail::located_entry e) {
    if (e.letter == 'x') return p.push_back(-1);
    if (e.letter != 0)
      throw graph_error(std::string("xsym::dimshuffle: unknown pattern entry '") + e.letter + "' (use 'x')");
    if (e.value < 0 || e.value >= static_cast<long long>(N))
      throw graph_error("xsym::dimshuffle: dimension " + std::to_string(e.value) + " does not exist in a rank-" +
                        std::to_string(N) + " tensor (new axes are 'x')");
    if (std::find(p.begin(), p.end(), static_cast<int>(e.value)) != p.end())
      throw graph_error("xsym::dimshuffle: dimension " + std::to_string(e.value) + " appears twice in the pattern");
    p.push_back(static_cast<int>(e.value));
  };
  add(first);
  (add(detail::located_entry(pattern, first.where)), ...);
  for (int i = 0; i < static_cast<int>(N); ++i)
    if (std::find(p.begin(), p.end(), i) == p.end())
      throw graph_error("xsym::dimshuffle: dimension " + std::to_string(i) +
                        " is dropped; xsym patterns keep every dimension");
  return var<E, 1 + sizeof...(P)>(detail::dimshuffle(a.node(), std::move(p)));
}
template <class E, std::size_t N>
var<E, 0> dimshuffle(const var<E, N>& a) {
  static_assert(N == 0, "xsym::dimshuffle: the pattern names every dimension of the tensor");
  return a;
}

/// @brief Dimensions reversed.
template <class E, std::size_t N>
var<E, N> transpose(const var<E, N>& a) {
  if constexpr (N < 2) return a;
  else {
    std::vector<int> p;
    for (int i = static_cast<int>(N) - 1; i >= 0; --i) p.push_back(i);
    return var<E, N>(detail::dimshuffle(a.node(), std::move(p)));
  }
}
template <class Elem, std::size_t N>
var<Elem, N> var<Elem, N>::T() const { return transpose(*this); }

// ---- dot --------------------------------------------------------------------------------------

/// @brief vector·vector, matrix·vector, vector·matrix, matrix·matrix.
template <class A, std::size_t NA, class B, std::size_t NB>
auto dot(const var<A, NA>& a, const var<B, NB>& b, detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  static_assert(NA >= 1 && NA <= 2 && NB >= 1 && NB <= 2,
                "xsym::dot takes vectors and matrices (rank 1 or 2) on both sides");
  static_assert(!std::is_same_v<A, bool> && !std::is_same_v<B, bool>, "xsym::dot is not defined on bool tensors");
  return var<promote_t<A, B>, NA + NB - 2>(detail::dot(a.node(), b.node()));
}
/// @brief dot of a typed operand: the root of its elementwise tree, whose kernels it compiles in.
template <class A, class B>
  requires(is_var_v<A> && is_var_v<B> && (is_typed_v<A> || is_typed_v<B>))
auto dot(const A& a, const B& b, detail::source_site where = detail::source_site::current()) {
  detail::use_typed(a);
  detail::use_typed(b);
  if constexpr (A::rank == 2 && B::rank == 1) detail::use_blocked(b);
  return dot(static_cast<const var<typename A::value_type, A::rank>&>(a),
             static_cast<const var<typename B::value_type, B::rank>&>(b), where);
}

// ---- reductions -------------------------------------------------------------------------------

namespace detail {
inline int normalize_axis(int axis, int rank, const char* what) { return normalize_axes({axis}, rank, what)[0]; }

// v reduced along `axis`, with that axis put back as a broadcastable one (numpy's keepdims).
inline var_ptr reduce_keep(const var_ptr& v, reduce_op r, int axis, const char* what) {
  const int a = normalize_axis(axis, v->rank, what);
  const var_ptr reduced = reduce(v, r, {a}, v->rank == 1);
  std::vector<int> pattern;
  for (int d = 0, j = 0; d < v->rank; ++d) pattern.push_back(d == a ? -1 : j++);
  return dimshuffle(reduced, std::move(pattern));
}
}  // namespace detail

/// @brief The tag that keeps a reduced axis, as numpy's keepdims=True: max(x, 1, xsym::keepdims).
struct keepdims_t {};
inline constexpr keepdims_t keepdims{};

#define XSYM_REDUCTION(fname, rop, result)                                                                \
  template <class E, std::size_t N>                                                                       \
  var<result, 0> fname(const var<E, N>& a, detail::source_site where = detail::source_site::current()) {  \
    const detail::at_site site(where);                                                                    \
    return var<result, 0>(detail::reduce(a.node(), reduce_op::rop, {}, true));                            \
  }                                                                                                       \
  /* a template, so that a braced {0} picks the axes overload (EDG/nvcc finds int ambiguous) */          \
  template <class E, std::size_t N, std::integral I>                                                      \
  var<result, N - 1> fname(const var<E, N>& a, I axis, detail::source_site where = detail::source_site::current()) { \
    static_assert(N >= 1, "xsym::" #fname ": a rank-0 tensor has no axis to reduce");                     \
    const detail::at_site site(where);                                                                    \
    return var<result, N - 1>(detail::reduce(a.node(), reduce_op::rop, {static_cast<int>(axis)}, false)); \
  }                                                                                                       \
  template <class E, std::size_t N, std::size_t K>                                                        \
  var<result, N - K> fname(const var<E, N>& a, const int (&axes)[K],                                      \
                           detail::source_site where = detail::source_site::current()) {                  \
    static_assert(K <= N, "xsym::" #fname ": more axes than the tensor has");                             \
    const detail::at_site site(where);                                                                    \
    return var<result, N - K>(detail::reduce(a.node(), reduce_op::rop, std::vector<int>(axes, axes + K), false)); \
  }                                                                                                        \
  template <class E, std::size_t N, std::integral I>                                                      \
  var<result, N> fname(const var<E, N>& a, I axis, keepdims_t,                                            \
                       detail::source_site where = detail::source_site::current()) {                      \
    static_assert(N >= 1, "xsym::" #fname ": a rank-0 tensor has no axis to reduce");                     \
    const detail::at_site site(where);                                                                    \
    return var<result, N>(detail::reduce_keep(a.node(), reduce_op::rop, static_cast<int>(axis), #fname));  \
  }
XSYM_REDUCTION(sum, sum, sum_result_t<E>)
XSYM_REDUCTION(prod, prod, sum_result_t<E>)
XSYM_REDUCTION(max, max, E)
XSYM_REDUCTION(min, min, E)
XSYM_REDUCTION(mean, mean, float_result_t<E>)
#undef XSYM_REDUCTION

// A typed operand is the root of its elementwise tree: its kernels, then the var's overload.
// Sums and means also compile the tree's sums, which their fused node runs (careduce_fusion).
#define XSYM_TYPED_REDUCTION_FORM(fname, summed, tparams, params, args)                                 \
  template <class Tree tparams>                                                                          \
  auto fname(const typed<Tree>& a params, detail::source_site where = detail::source_site::current()) {  \
    detail::use_typed(a);                                                                                \
    if constexpr (summed) detail::use_summed(a);                                                         \
    return fname(static_cast<const var<typename Tree::value_type, Tree::rank>&>(a) args, where);         \
  }
#define XSYM_COMMA ,
#define XSYM_TYPED_REDUCTION(fname, summed)                                                                \
  XSYM_TYPED_REDUCTION_FORM(fname, summed, , , )                                                           \
  XSYM_TYPED_REDUCTION_FORM(fname, summed, XSYM_COMMA std::integral I, XSYM_COMMA I axis, XSYM_COMMA axis) \
  XSYM_TYPED_REDUCTION_FORM(fname, summed, XSYM_COMMA std::size_t K, XSYM_COMMA const int(&axes)[K],      \
                            XSYM_COMMA axes)                                                               \
  XSYM_TYPED_REDUCTION_FORM(fname, summed, XSYM_COMMA std::integral I, XSYM_COMMA I axis XSYM_COMMA keepdims_t k, \
                            XSYM_COMMA axis XSYM_COMMA k)
XSYM_TYPED_REDUCTION(sum, true)
XSYM_TYPED_REDUCTION(prod, false)
XSYM_TYPED_REDUCTION(max, false)
XSYM_TYPED_REDUCTION(min, false)
XSYM_TYPED_REDUCTION(mean, true)
#undef XSYM_TYPED_REDUCTION
#undef XSYM_TYPED_REDUCTION_FORM
#undef XSYM_COMMA

/// @brief The elementwise reduction of a over every process of comm (an `AllReduce{sum}` node):
/// same dtype and shape on every rank. `xsym::mpi::allreduce` (<xsym/mpi.hpp>) passes MPI's.
template <class E, std::size_t N>
var<E, N> allreduce(const var<E, N>& a, std::shared_ptr<const communicator> comm, reduce_op r = reduce_op::sum,
                    detail::source_site where = detail::source_site::current()) {
  const detail::at_site site(where);
  return var<E, N>(detail::allreduce(a.node(), r, std::move(comm)));
}

XSYM_COLD_END

}  // namespace xsym

#endif
