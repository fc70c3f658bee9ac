// Expressions as types (expr/typed.hpp): the trees that operators and functions build, the
// Composite's text, name and absorbed ops as constant expressions, the compile-time rewrites
// (expr/typed_rewrite.hpp), and the kernels instantiated from the trees
// (backend/cpu/typed_kernel.hpp) against float64 loops and the reference kernels.
#include "expr_util.hpp"
#include "typed_util.hpp"

#include <sstream>

#include <xtensor/xview.hpp>

using namespace xsym_test;
using Catch::Matchers::Contains;
using xsym::scalar_op;
namespace tree = xsym::tree;

namespace {

template <class T, std::size_t N>
using v = xsym::var<T, N>;
template <class T, std::size_t N>
const v<T, N>& sym();  // operands for decltype only

// ---- trees, texts and names at compile time ---------------------------------------------------
using add3mul = decltype((sym<float, 1>() + sym<float, 1>() + sym<float, 1>()) * 2);
using leaf_f1 = tree::leaf<float, 1>;
static_assert(std::is_same_v<xsym::tree_t<add3mul>,
                             tree::apply<scalar_op::mul,
                                         tree::apply<scalar_op::add, tree::apply<scalar_op::add, leaf_f1, leaf_f1>, leaf_f1>,
                                         tree::number<float>>>,
              "(x + y + z) * 2: the tree of the expression, the 2 a number leaf of float");
static_assert(xsym::composite_text<add3mul>() == "((i0 + i1 + i2) * i3)");
static_assert(xsym::composite_name<add3mul>() == "Elemwise{Composite{((i0 + i1 + i2) * i3)}}");
static_assert(xsym::absorbed_ops<add3mul>() == std::array{scalar_op::add, scalar_op::add, scalar_op::mul});
static_assert(std::is_base_of_v<xsym::var<float, 1>, add3mul>, "a typed expression is the var of its node");
static_assert(xsym::tree_t<add3mul>::leaves == 4 && xsym::tree_t<add3mul>::ops == 3);
// A tail may be one batch ending at the last element only where every op's lanes give its
// scalar form's bits (typed_loop): + - * / neg sqr abs, not exp or log.
static_assert(xsym::cpu::detail::lanes_as_scalars<xsym::tree_t<add3mul>>::value);
static_assert(xsym::cpu::detail::lanes_as_scalars<
              xsym::tree_t<decltype(xsym::abs(-sym<double, 1>()) / xsym::sqr(sym<double, 1>()) - 1)>>::value);
static_assert(!xsym::cpu::detail::lanes_as_scalars<xsym::tree_t<decltype(xsym::exp(sym<float, 1>()) * 2)>>::value);
static_assert(!xsym::cpu::detail::lanes_as_scalars<xsym::tree_t<decltype(sym<float, 1>() + xsym::log(sym<float, 1>()))>>::value);

using xent = decltype(-sym<double, 1>() * xsym::log(sym<double, 1>()) -
                      (1 - sym<double, 1>()) * xsym::log(1 - sym<double, 1>()));
static_assert(xsym::composite_text<xent>() == "(((-i0) * log(i1)) - ((i2 - i3) * log((i4 - i5))))");
static_assert(xsym::absorbed_ops<xent>() == std::array{scalar_op::neg, scalar_op::log, scalar_op::mul, scalar_op::sub,
                                                       scalar_op::sub, scalar_op::log, scalar_op::mul, scalar_op::sub});

using sigm = decltype(1 / (1 + xsym::exp(-sym<float, 2>())));
static_assert(xsym::composite_text<sigm>() == "(i0 / (i1 + exp((-i2))))");
static_assert(decltype(xsym::sigmoid(sym<float, 1>()) * sym<float, 2>())::rank == 2, "the rank is the largest operand's");
static_assert(xsym::composite_text<decltype(xsym::sigmoid(sym<float, 1>()) + xsym::sin(sym<float, 1>()))>() ==
              "(scalar_sigmoid(i0) + sin(i1))");

// Plain vars where a tree would need a cast, or the op is not arithmetic.
static_assert(std::is_same_v<decltype(sym<float, 1>() + sym<double, 1>()), xsym::var<double, 1>>,
              "mixed element types: a plain var (the cast is the run-time graph's)");
static_assert(std::is_same_v<decltype(sym<std::int32_t, 1>() + sym<std::int32_t, 1>()), xsym::var<std::int32_t, 1>>,
              "integer arithmetic stays a plain var");
static_assert(std::is_same_v<decltype(sym<float, 1>() > sym<float, 1>()), xsym::var<bool, 1>>);
static_assert(std::is_same_v<decltype(xsym::exp(sym<std::int32_t, 1>())), xsym::var<double, 1>>);
static_assert(!xsym::is_typed_v<decltype(xsym::sum(sym<float, 1>() * 2))>, "a reduction ends the tree");

// ---- compile-time rewrites (expr/typed_rewrite.hpp) -------------------------------------------
template <scalar_op S, class... A>
using ap = tree::apply<S, A...>;
using lf = tree::leaf<float, 1>;
using num = tree::number<float>;
template <class E>
using rewritten = xsym::rewritten_t<xsym::tree_t<E>>;
// A C++ number is a number leaf: its place is in the type, its value is not.
static_assert(std::is_same_v<xsym::tree_t<decltype(1 / (1 + xsym::exp(-sym<float, 1>())))>,
                             ap<scalar_op::true_div, num, ap<scalar_op::add, num, ap<scalar_op::exp, ap<scalar_op::neg, lf>>>>>);
// stabilize: 1 / (1 + exp(-z)), also with z = a + b written -a - b; log(sigmoid(z)); log(1 - sigmoid(z)); log(1 + x)
static_assert(std::is_same_v<rewritten<decltype(1 / (1 + xsym::exp(-sym<float, 1>())))>, ap<scalar_op::sigmoid, lf>>);
static_assert(std::is_same_v<rewritten<decltype(1 / (xsym::exp(-sym<float, 1>() - sym<float, 1>()) + 1))>,
                             ap<scalar_op::sigmoid, ap<scalar_op::add, lf, lf>>>);
static_assert(std::is_same_v<rewritten<decltype(xsym::log(xsym::sigmoid(sym<float, 1>())))>,
                             ap<scalar_op::neg, ap<scalar_op::softplus, ap<scalar_op::neg, lf>>>>);
static_assert(std::is_same_v<rewritten<decltype(xsym::log(1 - xsym::sigmoid(sym<float, 1>())))>,
                             ap<scalar_op::neg, ap<scalar_op::softplus, lf>>>);
static_assert(std::is_same_v<rewritten<decltype(xsym::log(1 + sym<float, 1>() * sym<float, 1>()))>,
                             ap<scalar_op::log1p, ap<scalar_op::mul, lf, lf>>>);
// Bottom-up, as the run-time pass: the sigmoid made below is the log's operand above.
static_assert(std::is_same_v<rewritten<decltype(xsym::log(1 / (1 + xsym::exp(-sym<float, 1>()))))>,
                             ap<scalar_op::neg, ap<scalar_op::softplus, ap<scalar_op::neg, lf>>>>);
// canonicalize: --x, (-a) * (-b), a - (-b), -((-a) * b), repeated while a rule applies
static_assert(std::is_same_v<rewritten<decltype(-(-sym<float, 1>()) * sym<float, 1>())>, ap<scalar_op::mul, lf, lf>>);
static_assert(std::is_same_v<rewritten<decltype((-sym<float, 1>()) * (-sym<float, 1>()) + sym<float, 1>())>,
                             ap<scalar_op::add, ap<scalar_op::mul, lf, lf>, lf>>);
static_assert(std::is_same_v<rewritten<decltype(sym<float, 1>() - (-sym<float, 1>()))>, ap<scalar_op::add, lf, lf>>);
static_assert(std::is_same_v<rewritten<decltype(-((-sym<float, 1>()) * sym<float, 1>()))>, ap<scalar_op::mul, lf, lf>>);
static_assert(std::is_same_v<rewritten<decltype(-(-(-sym<float, 1>())))>, ap<scalar_op::neg, lf>>);
// Each pass alone: the variants function() also instantiates, for the flags that exclude one.
static_assert(std::is_same_v<xsym::canonical_t<xsym::tree_t<decltype(xsym::log(xsym::sigmoid(-(-sym<float, 1>()))))>>,
                             ap<scalar_op::log, ap<scalar_op::sigmoid, lf>>>);
static_assert(std::is_same_v<xsym::stabilized_t<xsym::tree_t<decltype(xsym::log(xsym::sigmoid(-(-sym<float, 1>()))))>>,
                             ap<scalar_op::neg, ap<scalar_op::softplus, ap<scalar_op::neg, ap<scalar_op::neg, ap<scalar_op::neg, lf>>>>>>);
// What no rule matches keeps its type; identities that need a value other than 1 are run-time only.
static_assert(std::is_same_v<rewritten<add3mul>, xsym::tree_t<add3mul>>);
static_assert(std::is_same_v<rewritten<decltype(sym<float, 1>() * 1 + sym<float, 1>())>,
                             xsym::tree_t<decltype(sym<float, 1>() * 1 + sym<float, 1>())>>);
static_assert(xsym::typed_rewrites::stabilize::name == "stabilize" && xsym::typed_rewrites::canonicalize::name == "canonicalize");

// ---- running them -----------------------------------------------------------------------------


template <class T>
xt::xtensor<T, 1> random_vector(std::mt19937& rng, std::size_t n, double lo, double hi) {
  xt::xtensor<T, 1> a = xt::empty<T>({n});
  for (auto& e : a) e = random_value<T>(rng, lo, hi);
  return a;
}

template <class T>
double typed_tol() {
  return std::is_same_v<T, float> ? 2e-6 : 1e-14;
}

}  // namespace

TEST_CASE("typed expressions run their tree's kernel: <type> typed, float64 loops, every length, float32 and float64",
          "[expr][typed]") {
  for_each_type(type_list<float, double>{}, [&]<class T>() {
    std::mt19937 rng(7);
    const auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
    const auto stats = std::make_shared<xsym::profile_stats>("typed", false);
    const auto e = (x + y + z) * 2;
    auto f = xsym::function("add3mul", xsym::inputs(x, y, z), e, xsym::profile(stats));
    const auto p = x * xsym::log(y) + (1 - x) * xsym::log1p(-y) - xsym::tanh(z) / (z * z + 1);
    auto g = xsym::function("mixed", xsym::inputs(x, y, z), p, xsym::profile(stats));
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{33}, std::size_t{1000}, std::size_t{1003}}) {
      CAPTURE(type_name<T>(), n);
      const auto a = random_vector<T>(rng, n, -2, 2), b = random_vector<T>(rng, n, 0.01, 0.99),
                 c = random_vector<T>(rng, n, -3, 3);
      const xt::xtensor<T, 1> r = f(a, b, c);
      const xt::xtensor<T, 1> q = g(a, b, c);
      for (std::size_t i = 0; i < n; ++i) {
        const double ai = a(i), bi = b(i), ci = c(i);
        const double want_r = (ai + bi + ci) * 2;
        const double want_q = ai * std::log(bi) + (1 - ai) * std::log1p(-bi) - std::tanh(ci) / (ci * ci + 1);
        REQUIRE(std::abs(r(i) - want_r) <= typed_tol<T>() * (1 + std::abs(want_r)));
        REQUIRE(std::abs(q(i) - want_q) <= 4 * typed_tol<T>() * (1 + std::abs(want_q)));
      }
    }
    CHECK(xsym::toposort_text(f) == "[" + xsym::composite_name<decltype(e)>() + "(x, y, z, TensorConstant{(1,) of 2.0})]");
    CHECK(node_types(f, "add3mul") == std::vector<std::string>{"typed"});
    CHECK(node_types(g, "mixed") == std::vector<std::string>{"typed"});
  });
}

TEST_CASE("a program fused at run time binds any tree compiled into the program, built before or after it",
          "[expr][typed]") {
  std::mt19937 rng(5);
  const auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  const auto stats = std::make_shared<xsym::profile_stats>("order", false);
  // Stored in a var, the expression loses its type: run-time fusion merges its nodes with exp(a)
  // - z into one program, whose text is the tree of `later` below (built after this one).
  const xsym::var<double, 1> a = (x - y) * 3;
  auto merged = xsym::function("merged", xsym::inputs(x, y, z), xsym::exp(a) - z, xsym::profile(stats));
  for (std::size_t n : {std::size_t{1}, std::size_t{9}, std::size_t{1003}}) {
    CAPTURE(n);
    const auto p = random_vector<double>(rng, n, -1, 1), q = random_vector<double>(rng, n, -1, 1),
               r = random_vector<double>(rng, n, -3, 3);
    const xt::xtensor<double, 1> got = merged(p, q, r);
    for (std::size_t i = 0; i < n; ++i) {
      const double want = std::exp((p(i) - q(i)) * 3) - r(i);
      REQUIRE(std::abs(got(i) - want) <= 4 * typed_tol<double>() * (1 + std::abs(want)));
    }
  }
  CHECK(xsym::toposort_text(merged) == "[Elemwise{Composite{(exp(((i0 - i1) * i2)) - i3)}}(x, y, TensorConstant{(1,) of 3.0}, z)]");
  CHECK(node_types(merged, "merged") == std::vector<std::string>{"typed"});
  auto later = xsym::function("later", xsym::inputs(x, y, z), xsym::exp((x - y) * 3) - z);
  const auto p = random_vector<double>(rng, 33, -1, 1);
  const xt::xtensor<double, 1> one = merged(p, p, p), other = later(p, p, p);
  CHECK(xt::all(xt::equal(one, other)));
}

TEST_CASE("trees of one text whose rank-0 leaves differ each bind their own kernel", "[expr][typed]") {
  // `a * x + 1` with a scalar `a` and with a vector `c` are both ((i0 * i1) + i2): the linker
  // takes the tree whose rank-0 leaves are the node's one-value inputs, whichever was
  // registered first (the other's kernel would never run there, the node staying interpreted).
  std::mt19937 rng(8);
  const auto a = xsym::scalar<float>("a");
  const auto x = xsym::vector<float>("x"), c = xsym::vector<float>("c");
  const auto stats = std::make_shared<xsym::profile_stats>("ranks", false);
  auto scaled = xsym::function("scaled", xsym::inputs(a, x), a * x + 1, xsym::profile(stats));
  auto product = xsym::function("product", xsym::inputs(c, x), c * x + 1, xsym::profile(stats));
  for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{1003}}) {
    CAPTURE(n);
    const auto p = random_vector<float>(rng, n, -2, 2), q = random_vector<float>(rng, n, -2, 2);
    const xt::xtensor<float, 0> s = 0.75f;
    const xt::xtensor<float, 1> got_scaled = scaled(s, q), got_product = product(p, q);
    for (std::size_t i = 0; i < n; ++i) {
      const double want_scaled = 0.75 * q(i) + 1, want_product = double(p(i)) * q(i) + 1;
      REQUIRE(std::abs(got_scaled(i) - want_scaled) <= typed_tol<float>() * (1 + std::abs(want_scaled)));
      REQUIRE(std::abs(got_product(i) - want_product) <= typed_tol<float>() * (1 + std::abs(want_product)));
    }
  }
  CHECK(node_types(scaled, "scaled").back() == "typed");  // after InplaceDimShuffle{x}(a)
  CHECK(node_types(product, "product") == std::vector<std::string>{"typed"});
  CHECK(product.runtime()->has_direct());  // into(...)'s short path takes the typed kernel
}

TEST_CASE("a tree binds only where each leaf is one value exactly where its input is", "[expr][typed]") {
  // `c * 2 + d` (d an array) registers ((i# * i#) + i#). A program whose constant 2 is read
  // twice, ((i0 * i1) + i1), matches that text with d's leaf on the constant: the number leaf
  // fits the one-value input, the array leaf does not, so the tree must not bind there.
  std::mt19937 rng(12);
  const auto c = xsym::matrix<float>("c"), d = xsym::matrix<float>("d"), x = xsym::matrix<float>("x");
  auto registered = xsym::function("registered", xsym::inputs(c, d), c * 2.0f + d);
  const xsym::var<float, 2> twice = x * 2.0f;  // a var: its node is built here, the sum's below
  const auto stats = std::make_shared<xsym::profile_stats>("leaves", false);
  auto f = xsym::function("f", xsym::inputs(x), twice + 2.0f, xsym::profile(stats));
  REQUIRE(f.toposort().size() == 1);
  REQUIRE(f.toposort()[0].op_name() == "Elemwise{Composite{((i0 * i1) + i1)}}");
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{7, 3}, {2, 300}}) {
    xt::xtensor<float, 2> X = xt::empty<float>({rows, cols});
    for (auto& v : X) v = std::uniform_real_distribution<float>(-4, 4)(rng);
    const xt::xtensor<float, 2> got = f(X), also = registered(X, X);
    for (std::size_t k = 0; k < X.size(); ++k) {
      REQUIRE(got.data()[k] == X.data()[k] * 2.0f + 2.0f);
      REQUIRE(also.data()[k] == X.data()[k] * 2.0f + X.data()[k]);
    }
  }
}

TEST_CASE("typed kernels agree with the reference kernels (DebugMode) with repeated leaves, broadcasting and views",
          "[expr][typed]") {
  std::mt19937 rng(11);
  const auto m = xsym::matrix<double>("m");
  const auto r = xsym::row<double>("r");
  const auto s = xsym::scalar<double>("s");
  // m appears three times: leaves that are one input read it three times.
  const auto e = (m * m + r) * s - xsym::exp(-m) / (r * r + 1);
  auto f = xsym::function("bcast", xsym::inputs(m, r, s), e, xsym::mode("DebugMode"));
  const auto stats = std::make_shared<xsym::profile_stats>("typed", false);
  auto fast = xsym::function("bcast", xsym::inputs(m, r, s), e, xsym::profile(stats));
  for (auto [rows, cols] : {std::pair{1, 1}, {3, 17}, {5, 64}, {2, 1001}}) {
    CAPTURE(rows, cols);
    xt::xtensor<double, 2> a = xt::empty<double>({std::size_t(rows), std::size_t(2 * cols)});
    for (auto& x : a) x = random_value<double>(rng, -2, 2);
    // Every other column: a strided view of the caller's array.
    auto av = xt::view(a, xt::all(), xt::range(0, 2 * cols, 2));
    xt::xtensor<double, 2> rr = xt::empty<double>({std::size_t(1), std::size_t(cols)});
    for (auto& x : rr) x = random_value<double>(rng, -2, 2);
    const double sv = 0.75;
    const xt::xtensor<double, 2> want_debug = f(xt::xtensor<double, 2>(av), rr, sv);  // checked node by node
    const xt::xtensor<double, 2> got = fast(av, rr, sv);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        const double mi = av(i, j), ri = rr(0, j);
        const double want = (mi * mi + ri) * sv - std::exp(-mi) / (ri * ri + 1);
        REQUIRE(got(i, j) == Approx(want).epsilon(1e-13).margin(1e-13));
        REQUIRE(want_debug(i, j) == Approx(want).epsilon(1e-13).margin(1e-13));
      }
  }
  const auto types = node_types(fast, "bcast");  // the scalar's DimShuffle, then the Composite
  CHECK(std::count(types.begin(), types.end(), "typed") == 1);
  CHECK(types.back() == "typed");
}

TEST_CASE("flags still choose: without fusion the seeds' three nodes, in FAST_COMPILE the interpreter; a one-value "
          "input runs the interpreter",
          "[expr][typed]") {
  const auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y"), z = xsym::vector<float>("z");
  const auto stats = std::make_shared<xsym::profile_stats>("flags", false);
  auto split = xsym::function("split", xsym::inputs(x, y, z), (x + y + z) * 2,
                              xsym::optimizer_excluding("fusion:inplace"), xsym::profile(stats));
  CHECK(split.graph().nodes.size() == 3);
  auto fc = xsym::function("fc", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::mode("FAST_COMPILE"), xsym::profile(stats));
  const xt::xtensor<float, 1> a{1, 2, 3}, b{4, 5, 6}, c{7, 8, 9};
  CHECK((split(a, b, c) == xt::xtensor<float, 1>{24, 30, 36}));
  CHECK((fc(a, b, c) == xt::xtensor<float, 1>{24, 30, 36}));
  for (const auto& t : node_types(split, "split")) CHECK(t == "cpu");
  for (const auto& t : node_types(fc, "fc")) CHECK(t == "ref");  // FAST_COMPILE runs the reference kernels

  // A row that broadcasts: one value per span, not the array the kernel was made for.
  const auto m = xsym::matrix<float>("m");
  const auto col = xsym::col<float>("col");
  auto g = xsym::function("col", xsym::inputs(m, col), m * 2 + col * col, xsym::profile(stats));
  const xt::xtensor<float, 2> mv{{1, 2}, {3, 4}}, cv{{10}, {20}};
  CHECK((g(mv, cv) == xt::xtensor<float, 2>{{102, 104}, {406, 408}}));
}

TEST_CASE("a typed update runs in place and a failed call changes no shared variable", "[expr][typed]") {
  xt::xtensor<double, 1> w0 = xt::linspace<double>(-1, 1, 37);
  auto w = xsym::shared(w0, "w");
  const auto g = xsym::vector<double>("g");
  auto step = xsym::function("step", xsym::inputs(g), xsym::outputs(), xsym::updates(xsym::update(w, w * 0.5 - g * 0.1 + 1)));
  const xt::xtensor<double, 1> gv = xt::linspace<double>(2, 3, 37);
  step(gv);
  const auto after = w.get_value();
  for (std::size_t i = 0; i < 37; ++i) CHECK(after(i) == Approx(w0(i) * 0.5 - gv(i) * 0.1 + 1).epsilon(1e-15));
  CHECK_THROWS_AS(step(xt::xtensor<double, 1>{1, 2}), xsym::shape_error);
  CHECK((w.get_value() == after));
}

TEST_CASE("compile-time rewrites carry their run-time rows' names and tags", "[expr][typed]") {
  auto tags_of = [](std::string_view name) {
    for (const auto& r : xsym::rewrite_rows())
      if (r->name == name) {
        std::string t;
        for (const auto& s : r->tags) t += (t.empty() ? "" : ":") + s;
        return t;
      }
    return std::string("(no row)");
  };
  CHECK(tags_of(xsym::typed_rewrites::stabilize::name) == xsym::typed_rewrites::stabilize::tags);
  CHECK(tags_of(xsym::typed_rewrites::canonicalize::name) == xsym::typed_rewrites::canonicalize::tags);
}

TEST_CASE("rewritten trees run their own kernels: stabilized forms are typed, and the flags still choose the variant",
          "[expr][typed]") {
  for_each_type(type_list<float, double>{}, [&]<class T>() {
    std::mt19937 rng(5);
    const auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y");
    const auto stats = std::make_shared<xsym::profile_stats>("rewritten", false);
    const auto ls = xsym::log(xsym::sigmoid(x));
    auto stable = xsym::function("stable", xsym::inputs(x), ls, xsym::profile(stats));
    auto literal = xsym::function("literal", xsym::inputs(x), ls, xsym::optimizer_excluding("stabilize"), xsym::profile(stats));
    // A 2 where the rule wants a 1: the run-time rewrite leaves it, and so the candidate
    // kernel for -softplus(x) must not bind (it would give other values).
    auto two = xsym::function("two", xsym::inputs(x), xsym::log(2 - xsym::sigmoid(x)), xsym::profile(stats));
    auto one = xsym::function("one", xsym::inputs(x), xsym::log(1 - xsym::sigmoid(x)), xsym::profile(stats));
    auto sig = xsym::function("sig", xsym::inputs(x, y), 1 / (1 + xsym::exp(-x - y)) * y, xsym::profile(stats));
    auto neg2 = xsym::function("neg2", xsym::inputs(x, y), (-x) * (-y) + x, xsym::profile(stats));
    for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{67}, std::size_t{1001}}) {
      CAPTURE(type_name<T>(), n);
      auto a = random_vector<T>(rng, n, -30, 30);
      if (n > 3) a(0) = T(-200), a(1) = T(200), a(2) = T(0);  // where log(sigmoid) alone gives -inf
      const auto b = random_vector<T>(rng, n, -2, 2);
      const xt::xtensor<T, 1> rs = stable(a), r1 = one(a), r2 = two(a), rg = sig(a, b), rn = neg2(a, b);
      const auto m = xt::clip(a, T(-15), T(15));  // the literal formula's range
      const xt::xtensor<T, 1> rl = literal(xt::xtensor<T, 1>(m));
      for (std::size_t i = 0; i < n; ++i) {
        const long double ai = a(i), bi = b(i), mi = m(i);
        auto softplus = [](long double u) { return std::max(u, 0.0L) + std::log1p(std::exp(-std::abs(u))); };
        const long double sg = 1 / (1 + std::exp(-ai));
        const double tol = 4 * typed_tol<T>();
        REQUIRE(std::abs(rs(i) - -softplus(-ai)) <= tol * (1 + std::abs(softplus(-ai))));
        REQUIRE(std::abs(r1(i) - -softplus(ai)) <= tol * (1 + std::abs(softplus(ai))));
        REQUIRE(std::abs(r2(i) - std::log(2 - sg)) <= tol);
        REQUIRE(std::abs(rl(i) - std::log(1 / (1 + std::exp(-mi)))) <= tol * (1 + std::abs(mi)));
        const long double want_g = bi / (1 + std::exp(-ai - bi));
        REQUIRE(std::abs(rg(i) - want_g) <= tol * (1 + std::abs(want_g)));
        const long double want_n = ai * bi + ai;
        REQUIRE(std::abs(rn(i) - want_n) <= tol * (1 + std::abs(want_n)));
      }
    }
    CHECK(node_types(stable, "stable") == std::vector<std::string>{"typed"});
    CHECK(node_types(literal, "literal") == std::vector<std::string>{"typed"});
    CHECK(node_types(one, "one") == std::vector<std::string>{"typed"});
    CHECK(node_types(two, "two") == std::vector<std::string>{"typed"});
    CHECK(node_types(sig, "sig") == std::vector<std::string>{"typed"});
    CHECK(node_types(neg2, "neg2") == std::vector<std::string>{"typed"});
    CHECK_THAT(xsym::toposort_text(stable), Contains("softplus"));
    CHECK_THAT(xsym::toposort_text(literal), Contains("log(scalar_sigmoid(i0))"));
  });
}

TEST_CASE("a typed tree handed to a reduction, a product or a subtensor write runs its kernel there too",
          "[expr][typed]") {
  std::mt19937 rng(23);
  const auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  const auto m = xsym::matrix<double>("m");
  const auto stats = std::make_shared<xsym::profile_stats>("roots", false);
  using xsym::range;
  // The trees are not outputs: a reduction, an axis reduction and set_subtensor's value.
  auto total = xsym::function("total", xsym::inputs(x, y), xsym::sum(x * y + xsym::exp(-x)), xsym::profile(stats));
  auto rows = xsym::function("rows", xsym::inputs(m), xsym::mean(m * m - 1, 1), xsym::profile(stats));
  auto inner = xsym::function("inner", xsym::inputs(m),
                              xsym::set_subtensor(m(range(1, -1), range(1, -1)),
                                                  m(range(0, -2), range(1, -1)) * 2 + m(range(2, xsym::placeholders::_), range(1, -1))),
                              xsym::profile(stats));
  auto product = xsym::function("product", xsym::inputs(m, x, y), xsym::dot(m, x * y - 1), xsym::profile(stats));
  for (std::size_t n : {std::size_t{1}, std::size_t{9}, std::size_t{40}}) {
    CAPTURE(n);
    const auto a = random_vector<double>(rng, n, -2, 2), b = random_vector<double>(rng, n, -2, 2);
    double want = 0;
    for (std::size_t i = 0; i < n; ++i) want += a(i) * b(i) + std::exp(-a(i));
    REQUIRE(static_cast<double>(total(a, b)) == Approx(want).epsilon(1e-13));
    xt::xtensor<double, 2> g = xt::empty<double>({n + 2, n + 3});
    for (auto& e : g) e = random_value<double>(rng, -2, 2);
    const xt::xtensor<double, 1> r = rows(g);
    for (std::size_t i = 0; i < g.shape(0); ++i) {
      double s = 0;
      for (std::size_t j = 0; j < g.shape(1); ++j) s += g(i, j) * g(i, j) - 1;
      REQUIRE(r(i) == Approx(s / static_cast<double>(g.shape(1))).epsilon(1e-13));
    }
    xt::xtensor<double, 2> p = xt::empty<double>({std::size_t{3}, n});
    for (auto& e : p) e = random_value<double>(rng, -2, 2);
    const xt::xtensor<double, 1> q = product(p, a, b);
    for (std::size_t i = 0; i < 3; ++i) {
      double s = 0;
      for (std::size_t j = 0; j < n; ++j) s += p(i, j) * (a(j) * b(j) - 1);
      REQUIRE(q(i) == Approx(s).epsilon(1e-12).margin(1e-12));
    }
    const xt::xtensor<double, 2> h = inner(g);
    for (std::size_t i = 0; i < g.shape(0); ++i)
      for (std::size_t j = 0; j < g.shape(1); ++j) {
        const bool in = i >= 1 && i + 1 < g.shape(0) && j >= 1 && j + 1 < g.shape(1);
        REQUIRE(h(i, j) == Approx(in ? g(i - 1, j) * 2 + g(i + 1, j) : g(i, j)).epsilon(1e-15));
      }
  }
  const auto typed_nodes = [](const std::vector<std::string>& types) { return std::count(types.begin(), types.end(), "typed"); };
  CHECK(typed_nodes(node_types(total, "total")) == 1);
  CHECK(typed_nodes(node_types(rows, "rows")) == 1);
  CHECK(typed_nodes(node_types(inner, "inner")) == 1);
  CHECK(typed_nodes(node_types(product, "product")) == 1);
}

// A column or a row is one value at run time where the matrix has one row or one column: the
// typed sums, bound for an array there, are not taken; the program's loops are.
TEST_CASE("typed sums of a column or row that is one value at run time", "[expr][typed]") {
  std::mt19937 rng(29);
  const auto m = xsym::matrix<double>("m");
  const auto c = xsym::col<double>("c");
  const auto r = xsym::row<double>("r");
  auto by_rows = xsym::function("by_rows", xsym::inputs(m, c), xsym::sum(m * c + 1, 1));
  auto whole = xsym::function("whole", xsym::inputs(m, r), xsym::sum(m * r - 2));
  for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{17}, std::size_t{1001}}) {
    CAPTURE(n);
    xt::xtensor<double, 2> row_m = xt::empty<double>({std::size_t{1}, n}), col_m = xt::empty<double>({n, std::size_t{1}});
    for (auto& e : row_m) e = random_value<double>(rng, -2, 2);
    for (auto& e : col_m) e = random_value<double>(rng, -2, 2);
    const xt::xtensor<double, 2> one{{random_value<double>(rng, -2, 2)}};
    double want = 0;
    for (std::size_t j = 0; j < n; ++j) want += row_m(0, j) * one(0, 0) + 1;
    const xt::xtensor<double, 1> got = by_rows(row_m, one);
    REQUIRE(got.size() == 1);
    CHECK(got(0) == Approx(want).epsilon(1e-13));
    want = 0;
    for (std::size_t i = 0; i < n; ++i) want += col_m(i, 0) * one(0, 0) - 2;
    CHECK(static_cast<double>(whole(col_m, one)) == Approx(want).epsilon(1e-13));
  }
}

// Each C++ number is a leaf: a tree of more than 64 leaves compiles, without a kernel of its own
// (a program's one-value inputs are 64 bits), and runs interpreted.
TEST_CASE("a typed tree of more than 64 leaves runs interpreted", "[expr][typed]") {
  const auto x = xsym::vector<double>("x");
  auto t8 = x * 1.0 + x * 2.0 + x * 3.0 + x * 4.0;  // 8 leaves
  auto t64 = (t8 + t8) + (t8 + t8) + (t8 + t8) + (t8 + t8);
  auto f = xsym::function("wide", xsym::inputs(x), t64 + x);  // 65 leaves
  const xt::xtensor<double, 1> v{1, -2, 0.5};
  const xt::xtensor<double, 1> got = f(v);
  for (std::size_t i = 0; i < 3; ++i) CHECK(got(i) == Approx(81 * v(i)).epsilon(1e-14));
}
