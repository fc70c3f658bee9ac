#ifndef XSYM_EXPR_TYPED_HPP
#define XSYM_EXPR_TYPED_HPP

// Expressions as types. An elementwise operator or function on tensors of one floating element
// type returns a typed<Tree>: the var<T, N> of the node it built (so whatever takes a var takes
// it) whose type also spells the tree of ops that made it. From the tree a program knows at
// compile time the Composite's text and the ops it absorbs, and the CPU backend instantiates one
// kernel that computes the whole tree in registers (backend/cpu/typed_kernel.hpp); the linker
// binds it to a Composite whose program text is the tree's (docs/design.md, "Two levels").

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

#include "op.hpp"

namespace xsym {

namespace tree {
/// @brief A leaf: an input, a constant, a shared variable or any node the tree does not see into.
template <class T, std::size_t N>
struct leaf {
  using value_type = T;
  static constexpr std::size_t rank = N;
  static constexpr int leaves = 1;
  static constexpr int ops = 0;
};
/// @brief An elementwise op of the op table applied to subtrees of its element type.
template <scalar_op S, class A, class... B>
struct apply {
  static_assert(info(S).arity == 1 + static_cast<int>(sizeof...(B)), "xsym: an op applied to the wrong number of operands");
  static_assert((std::is_same_v<typename A::value_type, typename B::value_type> && ...),
                "xsym: a typed tree's operands share one element type");
  using value_type = typename A::value_type;
  static constexpr scalar_op op = S;
  static constexpr std::size_t rank = std::max({A::rank, B::rank...});
  static constexpr int leaves = A::leaves + (0 + ... + B::leaves);
  static constexpr int ops = 1 + A::ops + (0 + ... + B::ops);
};
/// @brief A C++ number in an expression: a rank-0 leaf whose place the type knows but whose
/// value it does not (compile-time rewrites that need a value assume it; typed_rewrite.hpp).
template <class T>
struct number {
  using value_type = T;
  static constexpr std::size_t rank = 0;
  static constexpr int leaves = 1;
  static constexpr int ops = 0;
};
template <class X> struct is_apply : std::false_type {};
template <scalar_op S, class... A> struct is_apply<apply<S, A...>> : std::true_type {};
}  // namespace tree

/// @brief A var whose type records the elementwise tree that computed it (defined in var.hpp).
template <class Tree>
class typed;
template <class X> struct is_typed : std::false_type {};
template <class Tree> struct is_typed<typed<Tree>> : std::true_type {};
template <class X> inline constexpr bool is_typed_v = is_typed<std::remove_cvref_t<X>>::value;

namespace detail {
/// The argument by which function() asks the backends a program includes for Tree's kernels
/// (use_device_kernel, compile/function.hpp).
template <class Tree>
struct kernel_request {};

/// Whether an op on operands of element type T gets a typed tree: arithmetic of the op table in
/// float or double (comparisons, bitwise ops, switch and casts stay plain vars).
template <scalar_op S, class T>
inline constexpr bool typed_op_v = (std::is_same_v<T, float> || std::is_same_v<T, double>) &&
                                   (info(S).family == op_family::wrapping || info(S).family == op_family::any ||
                                    info(S).family == op_family::floating);

/// The tree of an operand that already has element type T: its own, a leaf, or for a C++
/// number a number leaf of T.
template <class X, class T>
constexpr auto tree_of_fn() {
  if constexpr (is_typed_v<X>) return std::type_identity<typename X::tree_type>{};
  else if constexpr (std::is_arithmetic_v<X>) return std::type_identity<tree::number<T>>{};
  else return std::type_identity<tree::leaf<typename X::value_type, X::rank>>{};
}
template <class X, class T>
using tree_of_t = typename decltype(tree_of_fn<std::remove_cvref_t<X>, T>())::type;

// ---- the Composite's text, as the run-time fusion writes it (composite_term) ----------------
constexpr std::string decimal(int v) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + v % 10));
    v /= 10;
  } while (v > 0);
  return s;
}

struct term {
  std::string text;
  scalar_op op = scalar_op::identity;  // the op at its top (identity for a leaf)
};
// Leaves are numbered in the order the run-time fusion meets them (depth first, operands in
// order), i0, i1, ...; with `pattern`, every leaf is written i# (tree_pattern).
template <class Tree>
struct tree_text {
  static constexpr term of(int& next, bool pattern) {
    term t;  // built in place: GCC 12 rejects some string temporaries in constant evaluation
    t.text = "i";
    if (pattern) t.text += '#';
    else t.text += decimal(next++);
    return t;
  }
};
template <scalar_op S, class... A>
struct tree_text<tree::apply<S, A...>> {
  static constexpr term of(int& next, bool pattern) {
    std::array<std::string, sizeof...(A)> texts;
    scalar_op first = scalar_op::identity;
    std::size_t j = 0;
    auto take = [&](const term& c) {
      if (j == 0) first = c.op;
      texts[j++] = c.text;
    };
    (take(tree_text<A>::of(next, pattern)), ...);  // operands in order: leaves numbered as fusion meets them
    term t;
    t.text = composite_term(S, dtype_of<typename tree::apply<S, A...>::value_type>(), texts.data(), texts.size(), first);
    t.op = S;
    return t;
  }
};
}  // namespace detail

template <class X>
using tree_t = typename std::remove_cvref_t<X>::tree_type;

namespace detail {
/// Compiles Tree's kernels, and its rewritten variants', into the program (defined by
/// compile/function.hpp, which every program that builds a function includes).
template <class Tree>
void use_tree_kernels();
/// Where a typed expression is the root of an elementwise tree (an output, an update, or the
/// operand of an op that is not elementwise), its kernels; nothing for any other operand.
template <class V>
void use_typed(const V&) {
  if constexpr (is_typed_v<V>) use_tree_kernels<tree_t<V>>();
}
/// Compiles a OnePassGemv's blocks with Tree as g, and with its rewritten variants, into the
/// program (defined beside use_tree_kernels).
template <class Tree>
void use_blocks_kernels();
/// The vector operand of dot(A, v) with a matrix A: v may be the g of A's one pass.
template <class V>
void use_blocked(const V&) {
  if constexpr (is_typed_v<V>) use_blocks_kernels<tree_t<V>>();
}
/// Compiles the sums of Tree's values, as the default flags rewrite it, into the program: the
/// operand of sum or mean, reduced as it is computed (careduce_fusion; defined beside
/// use_tree_kernels).
template <class Tree>
void use_sum_kernels();
template <class V>
void use_summed(const V&) {
  if constexpr (is_typed_v<V>) use_sum_kernels<tree_t<V>>();
}
}  // namespace detail

/// @brief The text of the Composite that fuses expression X's tree: "((i0 + i1 + i2) * i3)".
template <class X>
constexpr std::string composite_text() {
  int next = 0;
  return detail::tree_text<tree_t<X>>::of(next, false).text;
}
/// @brief The Apply node's name in a profile: "Elemwise{Composite{((i0 + i1 + i2) * i3)}}".
template <class X>
constexpr std::string composite_name() {
  const std::string t = composite_text<X>();
  std::string n = "Elemwise{Composite{";
  if (t.size() > 80) n += "...";
  else n += t;
  n += "}}";
  return n;
}
/// @brief The text with every leaf written i#: what the linker matches a program's text against.
template <class Tree>
constexpr std::string tree_pattern() {
  int next = 0;
  return detail::tree_text<Tree>::of(next, true).text;
}

namespace detail {
template <class Tree>
struct tree_ops {
  static constexpr void into(scalar_op*&) {}
};
template <scalar_op S, class... A>
struct tree_ops<tree::apply<S, A...>> {
  static constexpr void into(scalar_op*& out) {
    (tree_ops<A>::into(out), ...);
    *out++ = S;
  }
};
}  // namespace detail

/// @brief The ops a Composite of X's tree absorbs, in the order fusion emits them (operands
/// first): for (x + y + z) * 2, {add, add, mul}.
template <class X>
constexpr std::array<scalar_op, tree_t<X>::ops> absorbed_ops() {
  std::array<scalar_op, tree_t<X>::ops> a{};
  scalar_op* p = a.data();
  detail::tree_ops<tree_t<X>>::into(p);
  return a;
}

}  // namespace xsym

#endif
