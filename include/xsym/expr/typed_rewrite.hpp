#ifndef XSYM_EXPR_TYPED_REWRITE_HPP
#define XSYM_EXPR_TYPED_REWRITE_HPP

// Compile-time rewriting: stabilize and canonicalize as transformations of a typed tree, the
// type-level twins of the run-time rewrites of the same names (rewrite/stabilize.hpp,
// rewrite/canonicalize.hpp): the same rules, bottom-up, in the pipeline's order. function()
// instantiates a kernel for the tree and for each rewritten variant; the linker binds the one
// whose text is what the run-time rewrites, chosen by the flags, produced.
//
// A tree knows its numbers' places, not their values. Stabilize's rules need a 1 (1 / (1 +
// exp(-z)), log(1 - sigmoid(z)), log(1 + x)) and assume it: the variant is a candidate whose
// kernel binds only where the run-time rewrite, which reads the value, wrote the same text. The
// identities that need other values (x * 1, x + 0, x / 1, pow(x, 2)) stay run-time only: in
// source code they are rare, and assuming them would instantiate a kernel for every `x * 2`
// that never binds.

#include <string_view>
#include <tuple>
#include <type_traits>

#include "typed.hpp"

namespace xsym {

namespace detail::tree_rewrite {
// Safe views of a tree: any type (a leaf, void) has an op and operands, so a rule can test a
// pattern in one expression without instantiating a missing operand.
template <class X>
struct tree_parts {
  static constexpr bool is_apply = false;
  static constexpr scalar_op op = scalar_op::identity;
  using operands = std::tuple<void, void, void>;
};
template <scalar_op S, class... A>
struct tree_parts<tree::apply<S, A...>> {
  static constexpr bool is_apply = true;
  static constexpr scalar_op op = S;
  using operands = std::tuple<A..., void, void>;
};
template <class X, scalar_op S>
inline constexpr bool is_op_v = tree_parts<X>::is_apply && tree_parts<X>::op == S;
template <class X, std::size_t I>
using arg_t = std::tuple_element_t<I, typename tree_parts<X>::operands>;
template <class X> struct is_number : std::false_type {};
template <class T> struct is_number<tree::number<T>> : std::true_type {};
template <class X>
inline constexpr bool is_number_v = is_number<X>::value;
template <class X>
constexpr std::size_t rank_of() {
  if constexpr (std::is_void_v<X>) return 0;
  else return X::rank;
}

template <scalar_op S, class... A>
using ap = tree::apply<S, A...>;

// ---- stabilize (rewrite/stabilize.hpp's stabilize_node) --------------------------------------
// The z of -z: neg(z), or -a - b == -(a + b); void otherwise.
template <class W>
struct negated {
  using type = void;
};
template <class Z>
struct negated<ap<scalar_op::neg, Z>> {
  using type = Z;
};
template <class A, class B>
struct negated<ap<scalar_op::sub, A, B>> {
  using a = typename negated<A>::type;
  using type = std::conditional_t<std::is_void_v<a>, void, ap<scalar_op::add, a, B>>;
};
// The x of 1 + x or x + 1 (a number assumed 1); void otherwise.
template <class V>
using one_plus_t = std::conditional_t<!is_op_v<V, scalar_op::add>, void,
                                      std::conditional_t<is_number_v<arg_t<V, 0>>, arg_t<V, 1>,
                                                         std::conditional_t<is_number_v<arg_t<V, 1>>, arg_t<V, 0>, void>>>;

// 1 / (1 + exp(-z)) -> sigmoid(z)
template <class V, class E = one_plus_t<arg_t<V, 1>>, class Z = typename negated<arg_t<E, 0>>::type>
using sigmoid_form = std::conditional_t<is_op_v<V, scalar_op::true_div> && is_number_v<arg_t<V, 0>> &&
                                            is_op_v<E, scalar_op::exp> && !std::is_void_v<Z> && rank_of<Z>() == rank_of<V>(),
                                        ap<scalar_op::sigmoid, Z>, void>;
template <class V, class X = arg_t<V, 0>>
using log_forms = std::conditional_t<
    // log(sigmoid(z)) -> -softplus(-z)
    is_op_v<X, scalar_op::sigmoid>, ap<scalar_op::neg, ap<scalar_op::softplus, ap<scalar_op::neg, arg_t<X, 0>>>>,
    std::conditional_t<
        // log(1 - sigmoid(z)) -> -softplus(z)
        is_op_v<X, scalar_op::sub> && is_number_v<arg_t<X, 0>> && is_op_v<arg_t<X, 1>, scalar_op::sigmoid>,
        ap<scalar_op::neg, ap<scalar_op::softplus, arg_t<arg_t<X, 1>, 0>>>,
        // log(1 + x) -> log1p(x)
        std::conditional_t<!std::is_void_v<one_plus_t<X>> && rank_of<one_plus_t<X>>() == rank_of<V>(),
                           ap<scalar_op::log1p, one_plus_t<X>>, void>>>;
template <class V>
struct stabilize_node {
  using r = std::conditional_t<is_op_v<V, scalar_op::true_div>, sigmoid_form<V>,
                               std::conditional_t<is_op_v<V, scalar_op::log>, log_forms<V>, void>>;
  using type = std::conditional_t<std::is_void_v<r>, V, r>;
};

// ---- canonicalize (rewrite/canonicalize.hpp's canonical_node, the rules that need no value) ---
template <class V, class X = arg_t<V, 0>, class Y = arg_t<V, 1>>
using canonical_form = std::conditional_t<
    is_op_v<V, scalar_op::neg>,
    // --x -> x; -((-a) * b) -> a * b; -(a * (-b)) -> a * b
    std::conditional_t<is_op_v<X, scalar_op::neg>, arg_t<X, 0>,
                       std::conditional_t<is_op_v<X, scalar_op::mul> && is_op_v<arg_t<X, 0>, scalar_op::neg>,
                                          ap<scalar_op::mul, arg_t<arg_t<X, 0>, 0>, arg_t<X, 1>>,
                                          std::conditional_t<is_op_v<X, scalar_op::mul> && is_op_v<arg_t<X, 1>, scalar_op::neg>,
                                                             ap<scalar_op::mul, arg_t<X, 0>, arg_t<arg_t<X, 1>, 0>>, void>>>,
    std::conditional_t<
        // (-a) * (-b) -> a * b
        is_op_v<V, scalar_op::mul> && is_op_v<X, scalar_op::neg> && is_op_v<Y, scalar_op::neg>,
        ap<scalar_op::mul, arg_t<X, 0>, arg_t<Y, 0>>,
        // a - (-b) -> a + b
        std::conditional_t<is_op_v<V, scalar_op::sub> && is_op_v<Y, scalar_op::neg>, ap<scalar_op::add, X, arg_t<Y, 0>>, void>>>;
// As the run-time pass, each node is rewritten again while a rule applies (--(-x)), at most 8 times.
template <class V, int K = 8>
struct canonicalize_node {
  using r = canonical_form<V>;
  using type = typename std::conditional_t<std::is_void_v<r> || K == 0, std::type_identity<V>, canonicalize_node<r, K - 1>>::type;
};

// A pass: each node's rule after its operands' (the run-time rebuild's order).
template <template <class> class Node, class T>
struct bottom_up {
  using type = T;
};
template <template <class> class Node, scalar_op S, class... A>
struct bottom_up<Node, tree::apply<S, A...>> {
  using type = typename Node<tree::apply<S, typename bottom_up<Node, A>::type...>>::type;
};
template <class V>
using canonicalize_once = canonicalize_node<V>;
}  // namespace detail::tree_rewrite

/// @brief The compile-time rewrites, each with the name and tags of its run-time row.
namespace typed_rewrites {
struct stabilize {
  static constexpr std::string_view name = "stabilize";
  static constexpr std::string_view tags = "stabilize:fast_run:fast_compile";
  template <class V>
  using node = detail::tree_rewrite::stabilize_node<V>;
};
struct canonicalize {
  static constexpr std::string_view name = "canonicalize";
  static constexpr std::string_view tags = "canonicalize:fast_run:fast_compile";
  template <class V>
  using node = detail::tree_rewrite::canonicalize_once<V>;
};
}  // namespace typed_rewrites

/// @brief Tree after rewrite R (typed_rewrites::stabilize or ::canonicalize).
template <class R, class Tree>
using rewrite_t = typename detail::tree_rewrite::bottom_up<R::template node, Tree>::type;
template <class Tree>
using stabilized_t = rewrite_t<typed_rewrites::stabilize, Tree>;
template <class Tree>
using canonical_t = rewrite_t<typed_rewrites::canonicalize, Tree>;
/// @brief Tree as the default flags rewrite it: stabilize, then canonicalize (the pipeline's order).
template <class Tree>
using rewritten_t = canonical_t<stabilized_t<Tree>>;

}  // namespace xsym

#endif
