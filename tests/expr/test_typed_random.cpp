// Random trees through expression types: trees drawn at compile time from fixed seeds (a
// splitmix64 sequence), written with the public operators and functions, and run three ways:
// with the default flags (the tree's kernel, or its rewritten variant's), with fusion excluded
// (each op's own kernel: the same bits are required, NaN where NaN), and in DebugMode (each
// node against the reference kernels, which throws on a difference). Lengths cover a lone
// element, batches and tails; float32 and float64.
#include "expr_util.hpp"
#include "typed_util.hpp"

#include <xtensor/xview.hpp>

#include <bit>
#include <limits>
#include <tuple>
#include <utility>

using namespace xsym_test;

namespace {

constexpr std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A recipe: input K; unary op U of a child; binary op B of two children; B of a child and 0.75.
template <int K> struct input {};
template <int U, class A> struct unary {};
template <int B, class A, class C> struct binary {};
template <int B, class A> struct with_number {};
constexpr int unary_ops = 10, binary_ops = 6;

// At depth 0 an input; above it a leaf one time in eight, else an op.
constexpr int kind_of(std::uint64_t s, int depth) {
  if (depth == 0) return 0;
  const int r = static_cast<int>(mix(s) % 8);
  return r == 0 ? 0 : r <= 3 ? 1 : r <= 6 ? 2 : 3;
}
template <std::uint64_t S, int D, int Kind = kind_of(S, D)>
struct draw;
template <std::uint64_t S, int D>
struct draw<S, D, 0> {
  using type = input<static_cast<int>(mix(S ^ 1) % 3)>;
};
template <std::uint64_t S, int D>
struct draw<S, D, 1> {
  using type = unary<static_cast<int>(mix(S ^ 2) % unary_ops), typename draw<mix(S ^ 3), D - 1>::type>;
};
template <std::uint64_t S, int D>
struct draw<S, D, 2> {
  using type = binary<static_cast<int>(mix(S ^ 4) % binary_ops), typename draw<mix(S ^ 5), D - 1>::type,
                      typename draw<mix(S ^ 6), D - 1>::type>;
};
template <std::uint64_t S, int D>
struct draw<S, D, 3> {
  using type = with_number<static_cast<int>(mix(S ^ 7) % binary_ops), typename draw<mix(S ^ 8), D - 1>::type>;
};

template <int B, class A, class C>
auto apply_binary(const A& a, const C& c) {
  if constexpr (B == 0) return a + c;
  else if constexpr (B == 1) return a - c;
  else if constexpr (B == 2) return a * c;
  else if constexpr (B == 3) return a / c;
  else if constexpr (B == 4) return xsym::maximum(a, c);
  else return xsym::minimum(a, c);
}

// The C++ expression of a recipe over the inputs (x, y, z).
template <class R>
struct build;
template <int K>
struct build<input<K>> {
  template <class In>
  static auto of(const In& in) {
    return std::get<K>(in);
  }
};
template <int U, class A>
struct build<unary<U, A>> {
  template <class In>
  static auto of(const In& in) {
    const auto a = build<A>::of(in);
    if constexpr (U == 0) return -a;
    else if constexpr (U == 1) return xsym::exp(a);
    else if constexpr (U == 2) return xsym::log(a);
    else if constexpr (U == 3) return xsym::tanh(a);
    else if constexpr (U == 4) return xsym::sigmoid(a);
    else if constexpr (U == 5) return xsym::softplus(a);
    else if constexpr (U == 6) return xsym::abs(a);
    else if constexpr (U == 7) return xsym::sqrt(a);
    else if constexpr (U == 8) return xsym::sqr(a);
    else return xsym::log1p(a);
  }
};
template <int B, class A, class C>
struct build<binary<B, A, C>> {
  template <class In>
  static auto of(const In& in) {
    return apply_binary<B>(build<A>::of(in), build<C>::of(in));
  }
};
template <int B, class A>
struct build<with_number<B, A>> {
  template <class In>
  static auto of(const In& in) {
    return apply_binary<B>(build<A>::of(in), 0.75);
  }
};


struct tally {
  int trees = 0;     // with two ops or more
  int typed = 0;     // of those, run by a typed kernel
  std::string not_typed;
};

template <class T, std::uint64_t Seed>
void check_tree(std::mt19937& rng, tally& t) {
  using recipe = typename draw<mix(Seed), 4>::type;
  const auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
  const auto e = build<recipe>::of(std::tuple{x, y, z});
  using E = std::remove_cvref_t<decltype(e)>;
  if constexpr (xsym::is_typed_v<E>) {
    static_assert(std::is_same_v<typename E::value_type, T>, "a tree of one floating type stays that type");
    const std::string text = xsym::composite_text<E>();
    CAPTURE(type_name<T>(), Seed, text);
    const auto stats = std::make_shared<xsym::profile_stats>("random", false);
    auto f = xsym::function("tree", xsym::inputs(x, y, z), e, xsym::profile(stats), xsym::ignore_unused_inputs{});
    auto g = xsym::function("split", xsym::inputs(x, y, z), e, xsym::optimizer_excluding("fusion"), xsym::ignore_unused_inputs{});
    auto d = xsym::function("debug", xsym::inputs(x, y, z), e, xsym::debug_mode{false}, xsym::ignore_unused_inputs{});  // NaN is a value here, not a fault
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{16}, std::size_t{33}, std::size_t{1003}}) {
      CAPTURE(n);
      std::array<xt::xtensor<T, 1>, 3> v;
      for (auto& a : v) {
        a = xt::empty<T>({n});
        for (auto& q : a) q = random_value<T>(rng, -3, 3);
      }
      const xt::xtensor<T, 1> r = f(v[0], v[1], v[2]);
      const xt::xtensor<T, 1> s = g(v[0], v[1], v[2]);
      REQUIRE_NOTHROW(d(v[0], v[1], v[2]));
      for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(i, v[0](i), v[1](i), v[2](i), r(i), s(i));
        REQUIRE(((std::isnan(r(i)) && std::isnan(s(i))) || std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(r(i)) ==
                                                                 std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(s(i))));
      }
    }
    if constexpr (xsym::tree_t<E>::ops >= 2) {
      ++t.trees;
      if (node_types(f, "tree") == std::vector<std::string>{"typed"}) ++t.typed;
      else t.not_typed += "\n  " + xsym::toposort_text(f) + "  (the tree: " + text + ")";
    }
  }
}

template <class T, std::uint64_t... S>
void check_trees(std::integer_sequence<std::uint64_t, S...>, tally& t) {
  std::mt19937 rng(17);
  (check_tree<T, S>(rng, t), ...);
}

}  // namespace

TEST_CASE("random trees through expression types: the tree's kernel gives each op's own kernels' bits, and DebugMode "
          "agrees", "[expr][typed][random]") {
  for_each_type(type_list<float, double>{}, [&]<class T>() {
    tally t;
    check_trees<T>(std::make_integer_sequence<std::uint64_t, 24>{}, t);
    INFO(type_name<T>() << ": " << t.typed << " of " << t.trees << " trees ran a typed kernel; the others:" << t.not_typed);
    // These seeds draw 20 trees of two ops or more (leaves repeated, rewritten forms among
    // them), and each runs its typed kernel. (Programs where sigmoids and softpluses share one
    // exp would stay interpreted; none is drawn.)
    CHECK(t.trees == 20);
    CHECK(t.typed == t.trees);
  });
}

namespace {
// Every op of the recipes in a two-op tree (U(-x), B(x, -y)), each special value at each place
// of a batch and of the tail: the tree's kernel must give each op's own kernels' bits.
template <class T, class Recipe>
void check_specials(tally& t) {
  const auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
  const auto e = build<Recipe>::of(std::tuple{x, y, z});
  using E = std::remove_cvref_t<decltype(e)>;
  static_assert(xsym::tree_t<E>::ops == 2);
  const std::string text = xsym::composite_text<E>();
  CAPTURE(type_name<T>(), text);
  const auto stats = std::make_shared<xsym::profile_stats>("specials", false);
  auto f = xsym::function("tree", xsym::inputs(x, y), e, xsym::profile(stats), xsym::ignore_unused_inputs{});
  auto g = xsym::function("split", xsym::inputs(x, y), e, xsym::optimizer_excluding("fusion"), xsym::ignore_unused_inputs{});
  using L = std::numeric_limits<T>;
  const std::vector<T> special{T(0), -T(0), L::infinity(), -L::infinity(), L::quiet_NaN(), L::denorm_min(), -L::denorm_min(),
                               L::min(), L::max(), -L::max(), T(1), T(-1), T(0.5), T(88.5), T(-104), T(710), T(-745), T(1e-30)};
  // Each pair of values, laid out so that every value meets every other both in a batch and in the tail.
  const std::size_t k = special.size(), n = k * k + 5;
  xt::xtensor<T, 1> a = xt::empty<T>({n}), b = xt::empty<T>({n});
  for (std::size_t i = 0; i < n; ++i) {
    a(i) = special[i % k];
    b(i) = special[(i / k) % k];
  }
  for (std::size_t len : {n, n - 3, std::size_t{5}, std::size_t{1}}) {
    CAPTURE(len);
    const xt::xtensor<T, 1> av = xt::view(a, xt::range(0, len)), bv = xt::view(b, xt::range(0, len));
    const xt::xtensor<T, 1> r = f(av, bv), s = g(av, bv);
    using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    for (std::size_t i = 0; i < len; ++i) {
      CAPTURE(i, av(i), bv(i), r(i), s(i));
      REQUIRE(((std::isnan(r(i)) && std::isnan(s(i))) || std::bit_cast<U>(r(i)) == std::bit_cast<U>(s(i))));
    }
  }
  ++t.trees;
  t.typed += node_types(f, "tree") == std::vector<std::string>{"typed"};
}
template <class T, int... U>
void check_unary_specials(std::integer_sequence<int, U...>, tally& t) {
  (check_specials<T, unary<U, unary<0, input<0>>>>(t), ...);
}
template <class T, int... B>
void check_binary_specials(std::integer_sequence<int, B...>, tally& t) {
  (check_specials<T, binary<B, input<0>, unary<0, input<1>>>>(t), ...);
}
}  // namespace

TEST_CASE("special values through typed kernels: zeros, infinities, NaN, subnormals, the ends of the range and exp's "
          "edges give each op's own kernels' bits", "[expr][typed][edges]") {
  for_each_type(type_list<float, double>{}, [&]<class T>() {
    tally t;
    check_unary_specials<T>(std::make_integer_sequence<int, unary_ops>{}, t);
    check_binary_specials<T>(std::make_integer_sequence<int, binary_ops>{}, t);
    // Every such tree is typed, except --x and x - (-y), which canonicalize makes x and x + y
    // (no Composite: one op or none).
    CHECK(t.typed == t.trees - 2);
  });
}
