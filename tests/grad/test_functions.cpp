// expr/functions.hpp: each function against a loop written from numpy's definition (edge rows
// with infinities, NaN and values whose exp overflows, float32 and float64, both axes), and its
// gradient against finite differences.
#include "grad_check.hpp"

#include <cmath>
#include <limits>

#include <xtensor/xview.hpp>

#include "compile/compile_util.hpp"

using namespace grad_test;

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();
const double nan_v = std::numeric_limits<double>::quiet_NaN();

// |got - want| within rel of want, NaN where want is NaN, equal where want is infinite.
template <class A>
void require_near(const A& got, const xt::xtensor<double, A::rank>& want, double rel, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got.data()[i]), w = want.data()[i];
    INFO("element " << i << ": got " << g << ", want " << w);
    if (std::isnan(w)) CHECK(std::isnan(g));
    else if (std::isinf(w)) CHECK(g == w);
    else CHECK(std::abs(g - w) <= rel * std::max(1.0, std::abs(w)));
  }
}

// The rows of x along `axis` (0: columns, 1: rows) of a matrix, as index lists.
std::vector<std::vector<std::pair<std::size_t, std::size_t>>> lines(std::size_t r, std::size_t c, int axis) {
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> out(axis == 1 ? r : c);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) out[axis == 1 ? i : j].push_back({i, j});
  return out;
}

// numpy's softmax, log_softmax and logsumexp of one line, in long double.
struct line_math {
  long double lse;  // log(sum(exp(v)))
  std::vector<long double> soft, log_soft;
};
line_math of_line(const std::vector<double>& v) {
  long double m = -INFINITY;
  for (double x : v) m = std::max<long double>(m, x);
  bool has_nan = false;
  for (double x : v) has_nan |= std::isnan(x);
  line_math r;
  if (has_nan) {
    r.lse = NAN;
    r.soft.assign(v.size(), NAN);
    r.log_soft.assign(v.size(), NAN);
    return r;
  }
  const long double shift = std::isinf(m) ? 0.0L : m;
  long double s = 0;
  for (double x : v) s += std::exp(static_cast<long double>(x) - shift);
  r.lse = std::log(s) + shift;
  for (double x : v) {
    r.soft.push_back(std::exp(static_cast<long double>(x) - shift) / s);
    r.log_soft.push_back(static_cast<long double>(x) - shift - std::log(s));
  }
  return r;
}

const xt::xtensor<double, 2> edge_rows = {
    {1.0, 2.0, 3.0, -1.0},
    {1000.0, 999.0, -1000.0, 0.5},   // exp overflows without the shift
    {-inf, 0.0, -inf, 2.0},          // -inf entries: softmax 0 there, log_softmax -inf
    {-inf, -inf, -inf, -inf},        // every entry -inf: logsumexp -inf, softmax NaN
    {-50.0, -60.0, -55.0, -51.0},
};

template <class T>
void check_softmax_family(int axis_arg, double rel) {
  const int axis = axis_arg < 0 ? axis_arg + 2 : axis_arg;
  auto x = xsym::matrix<T>("x");
  auto f = xsym::function("f", xsym::inputs(x),
                          xsym::outputs(xsym::softmax(x, axis_arg), xsym::log_softmax(x, axis_arg), xsym::logsumexp(x, axis_arg)));
  const xt::xtensor<T, 2> X = xt::cast<T>(edge_rows);
  auto [soft, log_soft, lse] = f(X);
  xt::xtensor<double, 2> want_soft(edge_rows.shape()), want_log(edge_rows.shape());
  xt::xtensor<double, 1> want_lse = xt::empty<double>({axis == 1 ? edge_rows.shape(0) : edge_rows.shape(1)});
  const auto ls = lines(edge_rows.shape(0), edge_rows.shape(1), axis);
  for (std::size_t k = 0; k < ls.size(); ++k) {
    std::vector<double> v;
    for (auto [i, j] : ls[k]) v.push_back(static_cast<double>(X(i, j)));
    const line_math m = of_line(v);
    want_lse(k) = static_cast<double>(m.lse);
    for (std::size_t e = 0; e < ls[k].size(); ++e) {
      want_soft(ls[k][e].first, ls[k][e].second) = static_cast<double>(m.soft[e]);
      want_log(ls[k][e].first, ls[k][e].second) = static_cast<double>(m.log_soft[e]);
    }
  }
  const std::string what = std::string(xsym::dtype_name(xsym::dtype_of<T>())) + ", axis " + std::to_string(axis_arg);
  require_near(soft, want_soft, rel, "softmax " + what);
  require_near(log_soft, want_log, rel, "log_softmax " + what);
  require_near(lse, want_lse, rel, "logsumexp " + what);
}
}  // namespace

TEST_CASE("softmax, log_softmax and logsumexp equal numpy's on rows that overflow, -inf and NaN", "[functions]") {
  for (int axis : {1, 0, -1}) {
    check_softmax_family<double>(axis, 1e-14);
    check_softmax_family<float>(axis, 2e-6);
  }
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("f", xsym::inputs(v), xsym::outputs(xsym::softmax(v), xsym::logsumexp(v)));
  auto [s, l] = f(xt::xtensor<double, 1>{1, nan_v, 2});
  CHECK(std::isnan(s(0)));
  CHECK(std::isnan(l));
  auto [s2, l2] = f(xt::xtensor<double, 1>{0, inf});
  CHECK(l2 == inf);
  CHECK(std::isnan(s2(1)));  // inf / inf, as numpy's exp(x - max) gives
}

TEST_CASE("softmax, log_softmax, logsumexp and categorical_crossentropy have their gradients", "[functions][grad]") {
  std::mt19937 rng(11);
  auto x = xsym::matrix<double>("x");
  const auto X = uniform<2>(rng, {3, 5}, -3, 3);
  for (int axis : {0, 1}) {
    const std::string a = " along axis " + std::to_string(axis);
    check_grad("softmax" + a, weighted<2>(rng, xsym::softmax(x, axis), {3, 5}), at(x, X));
    check_grad("log_softmax" + a, weighted<2>(rng, xsym::log_softmax(x, axis), {3, 5}), at(x, X));
    check_grad("logsumexp" + a, weighted<1>(rng, xsym::logsumexp(x, axis), {axis == 1 ? 3u : 5u}), at(x, X));
  }
  auto t = xsym::matrix<double>("t");
  xt::xtensor<double, 2> onehot = xt::zeros<double>({3, 5});
  onehot(0, 1) = onehot(1, 4) = onehot(2, 0) = 1;
  check_grad("categorical_crossentropy(softmax(x), onehot)",
             sum(xsym::categorical_crossentropy(xsym::softmax(x), xsym::constant(onehot))), at(x, X));
  auto xent = xsym::categorical_crossentropy(xsym::softmax(x), t);
  auto f = xsym::function("f", xsym::inputs(x, t), xent);
  const xt::xtensor<double, 1> got = f(X, onehot);
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<double> row;
    for (std::size_t j = 0; j < 5; ++j) row.push_back(X(i, j));
    const line_math m = of_line(row);
    std::size_t label = 0;
    while (onehot(i, label) == 0) ++label;
    CHECK(got(i) == Approx(-static_cast<double>(m.log_soft[label])).epsilon(1e-12));
  }
}

TEST_CASE("relu, clip and sign equal numpy's, NaN and signed zeros included", "[functions]") {
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), xsym::outputs(xsym::relu(x), xsym::clip(x, -1.0, 2.0), xsym::sign(x)));
  const xt::xtensor<double, 1> X = {-3, -1, -0.0, 0.0, 0.5, 2, 7, nan_v, inf, -inf};
  auto [r, c, s] = f(X);
  for (std::size_t i = 0; i < X.size(); ++i) {
    const double v = X(i);
    INFO("x = " << v);
    if (std::isnan(v)) {
      CHECK(std::isnan(r(i)));
      CHECK(std::isnan(c(i)));
      CHECK(std::isnan(s(i)));
      continue;
    }
    CHECK(r(i) == (v < 0 ? 0.0 : v));
    CHECK(c(i) == std::min(std::max(v, -1.0), 2.0));
    CHECK(s(i) == (v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0));
  }
  auto n = xsym::vector<std::int32_t>("n");
  auto g = xsym::function("g", xsym::inputs(n), xsym::outputs(xsym::sign(n), xsym::relu(n), xsym::clip(n, -2, 3)));
  auto [si, ri, ci] = g(xt::xtensor<std::int32_t, 1>{-7, 0, 5});
  CHECK((si == xt::xtensor<std::int32_t, 1>{-1, 0, 1}));
  CHECK((ri == xt::xtensor<std::int32_t, 1>{0, 0, 5}));
  CHECK((ci == xt::xtensor<std::int32_t, 1>{-2, 0, 3}));
  std::mt19937 rng(5);
  auto m = xsym::matrix<double>("m");
  const auto M = signed_uniform<2>(rng, {3, 4}, 0.1, 3);  // away from relu's and clip's kinks
  check_grad("relu", weighted<2>(rng, xsym::relu(m), {3, 4}), at(m, M));
  check_grad("clip", weighted<2>(rng, xsym::clip(m, -1.05, 1.95), {3, 4}), at(m, M));
}

TEST_CASE("reductions with keepdims, variance and stddev equal numpy's", "[functions]") {
  std::mt19937 rng(3);
  auto x = xsym::matrix<double>("x");
  const auto X = uniform<2>(rng, {4, 3}, -2, 2);
  for (int axis : {0, 1, -1}) {
    const int a = axis < 0 ? axis + 2 : axis;
    auto f = xsym::function("f", xsym::inputs(x),
                            xsym::outputs(xsym::max(x, axis, xsym::keepdims), xsym::sum(x, axis, xsym::keepdims),
                                          xsym::mean(x, axis, xsym::keepdims), xsym::variance(x, axis), xsym::stddev(x, axis)));
    auto [mx, sm, mn, va, sd] = f(X);
    const std::size_t lines_n = a == 1 ? 4 : 3, len = a == 1 ? 3 : 4;
    CHECK(mx.shape(a) == 1);
    CHECK(mx.shape(1 - a) == lines_n);
    for (std::size_t k = 0; k < lines_n; ++k) {
      double top = -inf, total = 0;
      for (std::size_t e = 0; e < len; ++e) {
        const double v = a == 1 ? X(k, e) : X(e, k);
        top = std::max(top, v);
        total += v;
      }
      const double mean = total / static_cast<double>(len);
      double ss = 0;
      for (std::size_t e = 0; e < len; ++e) {
        const double d = (a == 1 ? X(k, e) : X(e, k)) - mean;
        ss += d * d;
      }
      auto kept = [&](const xt::xtensor<double, 2>& r) { return a == 1 ? r(k, 0) : r(0, k); };
      CHECK(kept(mx) == top);
      CHECK(kept(sm) == Approx(total).epsilon(1e-14));
      CHECK(kept(mn) == Approx(mean).epsilon(1e-14));
      CHECK(va(k) == Approx(ss / static_cast<double>(len)).epsilon(1e-13));
      CHECK(sd(k) == Approx(std::sqrt(ss / static_cast<double>(len))).epsilon(1e-13));
    }
    check_grad("variance along " + std::to_string(axis), weighted<1>(rng, xsym::variance(x, axis), {lines_n}), at(x, X));
    check_grad("stddev along " + std::to_string(axis), weighted<1>(rng, xsym::stddev(x, axis), {lines_n}), at(x, X));
  }
  auto whole = xsym::function("whole", xsym::inputs(x), xsym::outputs(xsym::variance(x), xsym::stddev(x)));
  auto [v, s] = whole(X);
  double total = 0, ss = 0;
  for (double e : X) total += e;
  for (double e : X) ss += (e - total / 12) * (e - total / 12);
  CHECK(v == Approx(ss / 12).epsilon(1e-13));
  CHECK(s == Approx(std::sqrt(ss / 12)).epsilon(1e-13));
  CHECK_THROWS_WITH(xsym::max(x, 2, xsym::keepdims), Catch::Contains("axis 2 is out of range for a rank-2 tensor"));
  CHECK_THROWS_WITH(xsym::softmax(x, -3), Catch::Contains("xsym::softmax: axis -3 is out of range for a rank-2 tensor"));
}

TEST_CASE("outer, all, any, isnan and isinf equal numpy's", "[functions]") {
  auto a = xsym::vector<double>("a");
  auto b = xsym::vector<float>("b");
  auto o = xsym::outer(a, b);
  static_assert(std::is_same_v<decltype(o), xsym::var<double, 2>>);
  auto f = xsym::function("f", xsym::inputs(a, b), o);
  const xt::xtensor<double, 1> A = {1, -2, 3};
  const xt::xtensor<float, 1> B = {0.5f, 4.0f};
  const xt::xtensor<double, 2> got = f(A, B);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) CHECK(got(i, j) == A(i) * static_cast<double>(B(j)));
  std::mt19937 rng(9);
  auto c = xsym::vector<double>("c");
  check_grad("outer", weighted<2>(rng, xsym::outer(a, c), {3, 2}), at(a, xt::xtensor<double, 1>{1, -2, 3}),
             at(c, xt::xtensor<double, 1>{0.5, 4}));

  auto m = xsym::matrix<std::int32_t>("m");
  auto g = xsym::function("g", xsym::inputs(m),
                          xsym::outputs(xsym::all(m), xsym::any(m), xsym::all(m, 1), xsym::any(m, 0)));
  auto [al, an, al1, an0] = g(xt::xtensor<std::int32_t, 2>{{1, 0, 2}, {3, 4, 5}});
  CHECK(al == false);
  CHECK(an == true);
  CHECK((al1 == xt::xtensor<bool, 1>{false, true}));
  CHECK((an0 == xt::xtensor<bool, 1>{true, true, true}));
  auto x = xsym::vector<float>("x");
  auto h = xsym::function("h", xsym::inputs(x), xsym::outputs(xsym::isnan(x), xsym::isinf(x)));
  const float finf = std::numeric_limits<float>::infinity();
  auto [isn, isi] = h(xt::xtensor<float, 1>{1.0f, std::nanf(""), finf, -finf, -0.0f});
  CHECK((isn == xt::xtensor<bool, 1>{false, true, false, false, false}));
  CHECK((isi == xt::xtensor<bool, 1>{false, false, true, true, false}));
}

TEST_CASE("take gathers rows (or entries along any axis) as numpy's take, negative indices included", "[functions][take]") {
  auto x = xsym::matrix<double>("x");
  auto i32 = xsym::vector<std::int32_t>("i");
  auto i64 = xsym::vector<std::int64_t>("j");
  auto f = xsym::function("f", xsym::inputs(x, i32, i64),
                          xsym::outputs(xsym::take(x, i32), xsym::take(x, i64, 1), xsym::take(x, i64, -1)));
  const auto names = xsym_test::op_names(f);
  CHECK(std::count(names.begin(), names.end(), "AdvancedSubtensor1") == 2);  // the two axis-1 takes merge
  const xt::xtensor<double, 2> X = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
  const xt::xtensor<std::int32_t, 1> rows = {2, -1, 0, 2};
  const xt::xtensor<std::int64_t, 1> cols = {-3, 2};
  auto [r, c, c2] = f(X, rows, cols);
  REQUIRE(r.shape() == (std::array<std::size_t, 2>{4, 3}));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(r(i, j) == X(static_cast<std::size_t>((rows(i) + 4) % 4), j));
  REQUIRE(c.shape() == (std::array<std::size_t, 2>{4, 2}));
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(c(i, 0) == X(i, 0));
    CHECK(c(i, 1) == X(i, 2));
  }
  CHECK((c2 == c));
  // No index: no rows. A rank-3 integer tensor, and a strided index vector.
  auto [e, unused1, unused2] = f(X, xt::xtensor<std::int32_t, 1>::from_shape({0}), cols);
  CHECK(e.shape() == (std::array<std::size_t, 2>{0, 3}));
  auto t = xsym::tensor3<std::int32_t>("t");
  auto g = xsym::function("g", xsym::inputs(t, i32), xsym::take(t, i32));
  xt::xtensor<std::int32_t, 3> T = xt::empty<std::int32_t>({3, 2, 2});
  for (std::size_t k = 0; k < T.size(); ++k) T.data()[k] = static_cast<std::int32_t>(k);
  const xt::xtensor<std::int32_t, 2> wide = {{1, 7}, {0, 7}};
  auto strided = xt::view(wide, xt::all(), 0);  // {1, 0} with stride 2
  const xt::xtensor<std::int32_t, 3> got = g(T, strided);
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(got.data()[k] == T.data()[4 + k]);
    CHECK(got.data()[4 + k] == T.data()[k]);
  }
}

TEST_CASE("an index out of range is an index_error naming the node, the index and its position", "[functions][take]") {
  auto x = xsym::matrix<float>("x");
  auto i = xsym::vector<std::int64_t>("i");
  auto f = xsym::function("f", xsym::inputs(x, i), xsym::take(x, i));
  const xt::xtensor<float, 2> X = xt::zeros<float>({4, 2});
  try {
    (void)f(X, xt::xtensor<std::int64_t, 1>{1, 4});
    FAIL("no error");
  } catch (const xsym::index_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("AdvancedSubtensor1(x, i)") != std::string::npos);
    CHECK(what.find("index 4 (position 1 of the indices) is out of range for 4 rows") != std::string::npos);
  }
  CHECK_THROWS_AS(f(X, xt::xtensor<std::int64_t, 1>{-5}), xsym::index_error);
  CHECK_THROWS_WITH(xsym::take(x, i, 2), Catch::Contains("xsym::take: axis 2 is out of range for a rank-2 tensor"));
}

TEST_CASE("add_at adds rows at indices, repeated ones summed, as numpy's np.add.at", "[functions][take]") {
  auto x = xsym::matrix<double>("x");
  auto y = xsym::matrix<double>("y");
  auto i = xsym::vector<std::int32_t>("i");
  auto f = xsym::function("f", xsym::inputs(x, i, y), xsym::add_at(x, i, y));
  CHECK(xsym_test::op_names(f) == std::vector<std::string>{"AdvancedIncSubtensor1{no_inplace,inc}"});
  const xt::xtensor<double, 2> X = {{1, 2}, {3, 4}, {5, 6}};
  const xt::xtensor<double, 2> Y = {{10, 20}, {30, 40}, {50, 60}};
  const xt::xtensor<std::int32_t, 1> I = {2, -1, 0};
  const xt::xtensor<double, 2> got = f(X, I, Y);
  CHECK((got == xt::xtensor<double, 2>{{51, 62}, {3, 4}, {45, 66}}));
  CHECK((X == xt::xtensor<double, 2>{{1, 2}, {3, 4}, {5, 6}}));  // a copy: the argument is untouched
  CHECK_THROWS_WITH(f(X, I, xt::xtensor<double, 2>{{1, 2}}),
                    Catch::Contains("the rows added have shape (1, 2), where 3 indices into (3, 2) need (3, 2)"));
  // y broadcasts as numpy's: a row added at every index, a column across each row, a vector as
  // a row, one value everywhere. The reference adds element by element.
  auto naive = [](xt::xtensor<double, 2> out, const xt::xtensor<std::int32_t, 1>& idx, auto value) {
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const auto r = static_cast<std::size_t>(idx(k) < 0 ? idx(k) + static_cast<std::int32_t>(out.shape(0)) : idx(k));
      for (std::size_t j = 0; j < out.shape(1); ++j) out(r, j) += value(k, j);
    }
    return out;
  };
  auto yr = xsym::row<double>("yr");
  auto yc = xsym::col<double>("yc");
  auto yv = xsym::vector<double>("yv");
  auto ys = xsym::scalar<double>("ys");
  auto g = xsym::function("g", xsym::inputs(x, i, yr, yc, yv, ys),
                          xsym::outputs(xsym::add_at(x, i, yr), xsym::add_at(x, i, yc), xsym::add_at(x, i, yv),
                                        xsym::add_at(x, i, ys)));
  const xt::xtensor<double, 2> R = {{7, -8}}, C = {{1}, {2}, {4}};
  const xt::xtensor<double, 1> V = {0.5, 0.25};
  const xt::xtensor<double, 0> S = 3;
  auto [gr, gc, gv, gs] = g(X, I, R, C, V, S);
  CHECK((gr == naive(X, I, [&](std::size_t, std::size_t j) { return R(0, j); })));
  CHECK((gc == naive(X, I, [&](std::size_t k, std::size_t) { return C(k, 0); })));
  CHECK((gv == naive(X, I, [&](std::size_t, std::size_t j) { return V(j); })));
  CHECK((gs == naive(X, I, [&](std::size_t, std::size_t) { return S(); })));
  // Broadcast only where the type says so: a column of 2 rows for 3 indices is refused.
  CHECK_THROWS_WITH(g(X, I, R, xt::xtensor<double, 2>{{1}, {2}}, V, S),
                    Catch::Contains("the rows added have shape (2, 1), where 3 indices into (3, 2) need (3, 2)"));
  // Integers wrap around, as numpy's.
  auto n = xsym::vector<std::int32_t>("n");
  auto m = xsym::vector<std::int32_t>("m");
  auto h = xsym::function("h", xsym::inputs(n, i, m), xsym::add_at(n, i, m));
  const xt::xtensor<std::int32_t, 1> wrapped = h(xt::xtensor<std::int32_t, 1>{2147483647, 0},
                                                 xt::xtensor<std::int32_t, 1>{0, 0}, xt::xtensor<std::int32_t, 1>{1, 1});
  CHECK(wrapped(0) == -2147483647);
}

TEST_CASE("take and add_at have their gradients, repeated indices included", "[functions][take][grad]") {
  std::mt19937 rng(21);
  auto x = xsym::matrix<double>("x");
  const auto X = uniform<2>(rng, {4, 3}, -2, 2);
  const auto rows = xsym::constant(xt::xtensor<std::int64_t, 1>{3, 1, 3, -4, 3});
  const auto cols = xsym::constant(xt::xtensor<std::int32_t, 1>{2, 2, 0});
  check_grad("take rows", weighted<2>(rng, xsym::take(x, rows), {5, 3}), at(x, X));
  check_grad("take along axis 1", weighted<2>(rng, xsym::take(x, cols, 1), {4, 3}), at(x, X));
  check_grad("exp of take, squared", weighted<2>(rng, xsym::sqr(xsym::exp(xsym::take(x, rows))), {5, 3}), at(x, X));
  auto y = xsym::matrix<double>("y");
  const auto Y = uniform<2>(rng, {5, 3}, -2, 2);
  check_grad("add_at", weighted<2>(rng, xsym::add_at(x, rows, y * y), {4, 3}), at(x, X), at(y, Y));
  // A broadcast y's adjoint sums over the indices (and the columns) it was added at.
  auto yr = xsym::row<double>("yr");
  auto ys = xsym::scalar<double>("ys");
  const auto YR = uniform<2>(rng, {1, 3}, -2, 2);
  const xt::xtensor<double, 0> YS = 0.75;
  check_grad("add_at of a row", weighted<2>(rng, xsym::add_at(x, rows, yr * yr), {4, 3}), at(x, X), at(yr, YR));
  check_grad("add_at of one value", weighted<2>(rng, xsym::add_at(x, rows, xsym::exp(ys)), {4, 3}), at(x, X),
             at(ys, YS));
  // A minibatch gathered inside the function: the gradient step on rows `batch` of shared data.
  auto data = xsym::shared(X, "data");
  auto w = xsym::vector<double>("w");
  auto batch = xsym::vector<std::int32_t>("batch");
  auto cost = sum(sqr(dot(xsym::take(data, batch), w)));
  auto [gw] = xsym::grad(cost, w);
  auto step = xsym::function("step", xsym::inputs(w, batch), gw);
  const xt::xtensor<double, 1> W = {0.5, -1, 2};
  const xt::xtensor<std::int32_t, 1> B = {1, 3, 1};
  const xt::xtensor<double, 1> got = step(W, B);
  for (std::size_t j = 0; j < 3; ++j) {
    double want = 0;
    for (std::int32_t r : B) {
      double u = 0;
      for (std::size_t k = 0; k < 3; ++k) u += X(static_cast<std::size_t>(r), k) * W(k);
      want += 2 * u * X(static_cast<std::size_t>(r), j);
    }
    CHECK(got(j) == Approx(want).epsilon(1e-13));
  }
}

TEST_CASE("argmax and argmin along rows of any length: ties, zeros of both signs and NaN in a batch or the tail",
          "[functions][argmax]") {
  auto first = [](const auto& line, bool max) {  // numpy's definition, as below
    std::size_t best = 0;
    for (std::size_t j = 0; j < line.size(); ++j) {
      if (std::isnan(line[j])) return j;
      if (max ? line[j] > line[best] : line[j] < line[best]) best = j;
    }
    return best;
  };
  auto run = [&]<class T>() {
    auto m = xsym::matrix<T>("m");
    auto f = xsym::function("rows", xsym::inputs(m), xsym::outputs(xsym::argmax(m, 1), xsym::argmin(m, 1)));
    std::mt19937 rng(12);
    std::uniform_int_distribution<int> small(-3, 3);
    for (std::size_t len : {1, 2, 7, 8, 15, 16, 17, 31, 33, 64, 70, 200}) {
      xt::xtensor<T, 2> X = xt::empty<T>({std::size_t{6}, len});
      for (auto& v : X) v = static_cast<T>(small(rng));
      for (std::size_t j = 0; j < len; ++j) {
        X(1, j) = std::min<T>(X(1, j), T(-1));  // row 1: zeros of both signs are its maximum
        X(2, j) = std::max<T>(X(2, j), T(1));   // row 2: zeros of both signs are its minimum
      }
      X(1, len / 2) = T(-0.0);
      X(1, len - 1) = T(0);
      X(2, len / 3) = T(0);
      X(2, len - 1) = T(-0.0);
      X(3, len - 1) = std::numeric_limits<T>::quiet_NaN();  // the tail (or a batch's last lane)
      X(4, len / 2) = std::numeric_limits<T>::quiet_NaN();
      X(4, len - 1) = std::numeric_limits<T>::quiet_NaN();
      auto [amax, amin] = f(X);
      for (std::size_t i = 0; i < 6; ++i) {
        std::vector<T> line(X.begin() + static_cast<std::ptrdiff_t>(i * len), X.begin() + static_cast<std::ptrdiff_t>((i + 1) * len));
        INFO(sizeof(T) * 8 << "-bit, length " << len << ", row " << i);
        CHECK(amax(i) == static_cast<std::int64_t>(first(line, true)));
        CHECK(amin(i) == static_cast<std::int64_t>(first(line, false)));
      }
    }
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

TEST_CASE("argmax and argmin equal numpy's: first on ties, NaN first, any axis, flat index", "[functions][argmax]") {
  auto x = xsym::tensor3<double>("x");
  auto f = xsym::function("f", xsym::inputs(x),
                          xsym::outputs(xsym::argmax(x, 1), xsym::argmin(x, -1), xsym::argmax(x), xsym::argmin(x, 0)));
  const auto names = xsym_test::op_names(f);
  CHECK(std::count(names.begin(), names.end(), "Argmax{axis=(1,)}") == 1);
  CHECK(std::count(names.begin(), names.end(), "Argmax{axis=None}") == 1);
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> small(-2, 2);  // many ties
  xt::xtensor<double, 3> X = xt::empty<double>({3, 4, 5});
  for (auto& v : X) v = small(rng);
  X(1, 2, 3) = nan_v;
  X(2, 0, 1) = nan_v;
  X(2, 3, 1) = nan_v;
  auto [am1, amin2, flat, amin0] = f(X);
  // A loop from numpy's definition: the first index whose value is the extreme, NaN first.
  auto first = [](const std::vector<double>& line, bool max) {
    std::size_t best = 0;
    for (std::size_t j = 0; j < line.size(); ++j) {
      if (std::isnan(line[j])) return j;
      if (max ? line[j] > line[best] : line[j] < line[best]) best = j;
    }
    return best;
  };
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 5; ++k) {
      std::vector<double> line;
      for (std::size_t j = 0; j < 4; ++j) line.push_back(X(i, j, k));
      CHECK(am1(i, k) == static_cast<std::int64_t>(first(line, true)));
    }
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      std::vector<double> line;
      for (std::size_t k = 0; k < 5; ++k) line.push_back(X(i, j, k));
      CHECK(amin2(i, j) == static_cast<std::int64_t>(first(line, false)));
    }
  for (std::size_t j = 0; j < 4; ++j)
    for (std::size_t k = 0; k < 5; ++k) {
      std::vector<double> line;
      for (std::size_t i = 0; i < 3; ++i) line.push_back(X(i, j, k));
      CHECK(amin0(j, k) == static_cast<std::int64_t>(first(line, false)));
    }
  CHECK(flat == static_cast<std::int64_t>(first(std::vector<double>(X.begin(), X.end()), true)));
  // Integers and bools; a transposed (strided) argument.
  auto m = xsym::matrix<std::int32_t>("m");
  auto b = xsym::vector<bool>("b");
  auto g = xsym::function("g", xsym::inputs(m, b), xsym::outputs(xsym::argmax(m, 0), xsym::argmax(b)));
  const xt::xtensor<std::int32_t, 2> M = {{1, 9, 3}, {7, 2, 7}};
  auto [a0, ab] = g(xt::transpose(M), xt::xtensor<bool, 1>{false, true, true});
  CHECK((a0 == xt::xtensor<std::int64_t, 1>{1, 0}));
  CHECK(ab == 1);
  auto v = xsym::vector<float>("v");
  auto h = xsym::function("h", xsym::inputs(v), xsym::argmax(v));
  CHECK_THROWS_WITH(h(xt::xtensor<float, 1>::from_shape({0})), Catch::Contains("argmax of an empty sequence"));
  CHECK_THROWS_WITH(xsym::argmin(x, 3), Catch::Contains("xsym::argmin: axis 3 is out of range"));
  // Nothing flows through a position: the gradient of a cost that only reads it is zero.
  auto w = xsym::vector<double>("w");
  auto [gw] = xsym::grad(sum(w) * 0 + xsym::cast<double>(xsym::argmax(w)), w);
  auto gf = xsym::function("gf", xsym::inputs(w), gw);
  CHECK((gf(xt::xtensor<double, 1>{1, 3, 2}) == xt::xtensor<double, 1>{0, 0, 0}));
}

TEST_CASE("sin .. arctanh, erf, erfc, log2, log10, exp2, floor, ceil and round: the C library's values, numpy's "
          "names and their gradients",
          "[functions][libm][grad]") {
  std::mt19937 rng(19);
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x),
                          xsym::outputs(xsym::sin(x), xsym::arccos(x), xsym::erfc(x), xsym::exp2(x), xsym::round(x * 2.0),
                                        xsym::floor(x), xsym::ceil(x), xsym::atanh(x)));
  const auto names = xsym_test::op_names(f);
  CHECK(std::count(names.begin(), names.end(), "Elemwise{sin,no_inplace}") == 1);
  CHECK(std::count(names.begin(), names.end(), "Elemwise{arctanh,no_inplace}") == 1);
  const xt::xtensor<double, 1> X = {-0.75, -0.25, 0.0, 0.25, 0.5, 0.75};
  auto [s, ac, ec, e2, r, fl, ce, ath] = f(X);
  for (std::size_t i = 0; i < X.size(); ++i) {
    CHECK(s(i) == std::sin(X(i)));
    CHECK(ac(i) == std::acos(X(i)));
    CHECK(ec(i) == std::erfc(X(i)));
    CHECK(e2(i) == std::exp2(X(i)));
    CHECK(fl(i) == std::floor(X(i)));
    CHECK(ce(i) == std::ceil(X(i)));
    CHECK(ath(i) == std::atanh(X(i)));
  }
  // Halves go to the even neighbour: -1.5 -> -2, -0.5 -> -0, 0.5 -> 0, 1.5 -> 2.
  CHECK((r == xt::xtensor<double, 1>{-2, -0.0, 0, 0, 1, 2}));
  CHECK(std::signbit(r(1)));
  // An integer input is computed in float64, as numpy does.
  auto k = xsym::vector<std::int32_t>("k");
  auto g = xsym::function("g", xsym::inputs(k), xsym::log10(k));
  const xt::xtensor<double, 1> l = g(xt::xtensor<std::int32_t, 1>{1, 10, 1000});
  CHECK((l == xt::xtensor<double, 1>{0, 1, 3}));

  auto v = xsym::vector<double>("v");
  const auto V = uniform<1>(rng, {7}, -0.9, 0.9);
  const auto P = uniform<1>(rng, {7}, 1.1, 3.0);
  check_grad("sin, cos, tan", weighted<1>(rng, xsym::sin(v) + xsym::cos(v) * xsym::tan(v), {7}), at(v, V));
  check_grad("arcsin, arccos, arctan", weighted<1>(rng, xsym::arcsin(v) + xsym::arccos(v) * xsym::arctan(v), {7}), at(v, V));
  check_grad("sinh, cosh, arcsinh, arctanh",
             weighted<1>(rng, xsym::sinh(v) + xsym::cosh(v) * xsym::arcsinh(v) + xsym::arctanh(v), {7}), at(v, V));
  check_grad("arccosh", weighted<1>(rng, xsym::arccosh(v), {7}), at(v, P));
  check_grad("erf, erfc", weighted<1>(rng, xsym::erf(v) * xsym::erfc(v), {7}), at(v, V));
  check_grad("log2, log10, exp2", weighted<1>(rng, xsym::log2(v) + xsym::log10(v) * xsym::exp2(v), {7}), at(v, P));
  check_grad("floor, ceil, round carry no gradient",
             weighted<1>(rng, v * 2.0 + xsym::floor(v) + xsym::ceil(v) + xsym::round(v), {7}), at(v, V));
}

TEST_CASE("% and floor_divide are numpy's (the divisor's sign, x // 0 and x % 0 are 0 on integers, INT_MIN // -1 "
          "wraps); & | ^ ~ take integers and bool",
          "[functions][integer]") {
  auto a = xsym::vector<std::int32_t>("a");
  auto b = xsym::vector<std::int32_t>("b");
  auto f = xsym::function("f", xsym::inputs(a, b), xsym::outputs(a % b, xsym::floor_divide(a, b), a & b, a | b, a ^ b, ~a));
  const auto names = xsym_test::op_names(f);
  CHECK(std::count(names.begin(), names.end(), "Elemwise{mod,no_inplace}") == 1);
  CHECK(std::count(names.begin(), names.end(), "Elemwise{int_div,no_inplace}") == 1);
  constexpr std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  const xt::xtensor<std::int32_t, 1> A = {7, -7, 7, -7, 5, lo, lo, 6, 0};
  const xt::xtensor<std::int32_t, 1> B = {3, 3, -3, -3, 0, -1, 7, 6, -4};
  auto [m, q, n, o, x, inv] = f(A, B);
  // Python's divmod, written out: (7, 3) -> (2, 1); (-7, 3) -> (-3, 2); (7, -3) -> (-3, -2); (-7, -3) -> (2, -1).
  CHECK((q == xt::xtensor<std::int32_t, 1>{2, -3, -3, 2, 0, lo, -306783379, 1, 0}));
  CHECK((m == xt::xtensor<std::int32_t, 1>{1, 2, -2, -1, 0, 0, 5, 0, 0}));
  for (std::size_t i = 0; i < A.size(); ++i) {
    CHECK(n(i) == (A(i) & B(i)));
    CHECK(o(i) == (A(i) | B(i)));
    CHECK(x(i) == (A(i) ^ B(i)));
    CHECK(inv(i) == ~A(i));
  }
  // Floats: the remainder has the divisor's sign; a zero divisor gives numpy's inf and NaN.
  auto u = xsym::vector<double>("u");
  auto v = xsym::vector<double>("v");
  auto g = xsym::function("g", xsym::inputs(u, v), xsym::outputs(u % v, xsym::floor_divide(u, v)));
  const xt::xtensor<double, 1> U = {7.5, -7.5, 7.5, 1.0, 0.0, -1.0};
  const xt::xtensor<double, 1> V = {2.0, 2.0, -2.0, 0.0, -3.0, 3.0};
  auto [fm, fq] = g(U, V);
  CHECK(fm(0) == 1.5);
  CHECK(fm(1) == 0.5);
  CHECK(fm(2) == -0.5);
  CHECK(std::isnan(fm(3)));
  CHECK((fm(4) == 0 && std::signbit(fm(4))));  // 0 % -3 is -0
  CHECK(fm(5) == 2.0);
  CHECK(fq(0) == 3.0);
  CHECK(fq(1) == -4.0);
  CHECK(fq(2) == -4.0);
  CHECK(fq(3) == std::numeric_limits<double>::infinity());
  CHECK((fq(4) == 0 && std::signbit(fq(4))));  // 0 // -3 is -0
  CHECK(fq(5) == -1.0);
  // Bool: & | ^ are logical, ~ is not.
  auto p = xsym::vector<bool>("p");
  auto r = xsym::vector<bool>("r");
  auto h = xsym::function("h", xsym::inputs(p, r), xsym::outputs(p & r, p | r, p ^ r, ~p));
  auto [band, bor, bxor, bnot] = h(xt::xtensor<bool, 1>{true, true, false, false}, xt::xtensor<bool, 1>{true, false, true, false});
  CHECK((band == xt::xtensor<bool, 1>{true, false, false, false}));
  CHECK((bor == xt::xtensor<bool, 1>{true, true, true, false}));
  CHECK((bxor == xt::xtensor<bool, 1>{false, true, true, false}));
  CHECK((bnot == xt::xtensor<bool, 1>{false, false, true, true}));
  // Mixed with a C++ number, and the gradient of % (1 for the dividend, -floor(u / v) for the divisor).
  std::mt19937 rng(4);
  auto w = xsym::function("w", xsym::inputs(a), xsym::outputs(a % 4, a & 1));
  auto [w4, w1] = w(xt::xtensor<std::int32_t, 1>{-5, 6});
  CHECK((w4 == xt::xtensor<std::int32_t, 1>{3, 2}));
  CHECK((w1 == xt::xtensor<std::int32_t, 1>{1, 0}));
  check_grad("mod", weighted<1>(rng, u % v, {4}), at(u, xt::xtensor<double, 1>{7.3, -2.2, 5.4, 0.4}),
             at(v, xt::xtensor<double, 1>{2.1, 1.3, -1.7, 3.3}));
}
