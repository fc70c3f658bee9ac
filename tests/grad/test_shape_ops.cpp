// Arrays made in the graph (zeros, ones, full, alloc, the *_like forms, arange, eye), shapes as
// values, cumsum, batched_dot, tensordot, Assert and the cross-entropy against int labels:
// values against loops written from numpy's definitions, errors, and gradients by finite
// differences.
#include "grad_check.hpp"

#include "compile/compile_util.hpp"

using namespace grad_test;

TEST_CASE("zeros, ones, full and alloc take C++ or symbolic extents; the *_like forms take x's shape",
          "[shape_ops]") {
  auto x = xsym::matrix<float>("x");
  auto n = xsym::scalar<std::int64_t>("n");
  auto v = xsym::vector<float>("v");
  auto f = xsym::function("f", xsym::inputs(x, n, v),
                          xsym::outputs(xsym::zeros<double>({2, n}), xsym::ones<std::int32_t>({n}), xsym::full<float>({n, 3}, 2.5),
                                        xsym::alloc(v, {n, xsym::shape(v, 0)}), xsym::zeros_like(x), xsym::ones_like(x),
                                        xsym::full_like(x, -1)));
  const auto names = xsym_test::op_names(f);
  CHECK(std::count(names.begin(), names.end(), "Alloc") == 7);
  const xt::xtensor<float, 2> X = {{1, 2, 3}, {4, 5, 6}};
  const xt::xtensor<float, 1> V = {7, 8};
  auto [z, o, full, al, zl, ol, fl] = f(X, std::int64_t{3}, V);
  CHECK((z == xt::xtensor<double, 2>(xt::zeros<double>({2, 3}))));
  CHECK((o == xt::xtensor<std::int32_t, 1>{1, 1, 1}));
  CHECK((full == xt::xtensor<float, 2>{{2.5f, 2.5f, 2.5f}, {2.5f, 2.5f, 2.5f}, {2.5f, 2.5f, 2.5f}}));
  CHECK((al == xt::xtensor<float, 2>{{7, 8}, {7, 8}, {7, 8}}));
  CHECK((zl == xt::xtensor<float, 2>(xt::zeros<float>({2, 3}))));
  CHECK((ol == xt::xtensor<float, 2>(xt::ones<float>({2, 3}))));
  CHECK((fl == xt::xtensor<float, 2>{{-1, -1, -1}, {-1, -1, -1}}));
  // A negative extent names the axis; so does one given as a C++ number, when the graph is built.
  CHECK_THROWS_WITH(f(X, std::int64_t{-2}, V), Catch::Contains("extent -2 for axis 1 is negative"));
  CHECK_THROWS_WITH(xsym::zeros<float>({3, -1}), Catch::Contains("extent -1 is negative"));
  // The shape as values.
  auto g = xsym::function("g", xsym::inputs(x), xsym::outputs(xsym::shape(x), xsym::shape(x, -1), x.shape(0)));
  auto [s, last, first] = g(X);
  CHECK((s == xt::xtensor<std::int64_t, 1>{2, 3}));
  CHECK(last == 3);
  CHECK(first == 2);
  CHECK_THROWS_WITH(x.shape(2), Catch::Contains("axis 2 is out of range for a rank-2 tensor"));
}

TEST_CASE("arange is numpy's, in integers and floats, steps of either sign", "[shape_ops]") {
  auto a = xsym::scalar<std::int64_t>("a");
  auto b = xsym::scalar<std::int64_t>("b");
  auto s = xsym::scalar<std::int64_t>("s");
  auto f = xsym::function("f", xsym::inputs(a, b, s), xsym::arange(a, b, s));
  CHECK(xsym_test::op_names(f) == std::vector<std::string>{"ARange{int64}"});
  for (std::int64_t start : {-7, 0, 3})
    for (std::int64_t stop : {-4, 0, 5, 11})
      for (std::int64_t step : {-3, -1, 1, 2, 5}) {
        std::vector<std::int64_t> want;
        for (std::int64_t v = start; step > 0 ? v < stop : v > stop; v += step) want.push_back(v);
        const xt::xtensor<std::int64_t, 1> got = f(start, stop, step);
        INFO(start << ":" << stop << ":" << step);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(got(i) == want[i]);
      }
  CHECK_THROWS_WITH(f(std::int64_t{0}, std::int64_t{3}, std::int64_t{0}), Catch::Contains("arange: the step is zero"));
  auto h = xsym::function("h", xsym::inputs(), xsym::outputs(xsym::arange(0.5, 2.0, 0.5), xsym::arange<float>(4), xsym::arange(3)));
  auto [fl, f4, i3] = h();
  CHECK((fl == xt::xtensor<double, 1>{0.5, 1.0, 1.5}));
  CHECK((f4 == xt::xtensor<float, 1>{0, 1, 2, 3}));
  CHECK((i3 == xt::xtensor<std::int64_t, 1>{0, 1, 2}));
}

TEST_CASE("arange counts and steps int ranges near the limits without overflow; a range too long for an array is a "
          "shape_error naming the node and the count",
          "[shape_ops]") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max(), min = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t q = std::int64_t{1} << 62;
  auto a = xsym::scalar<std::int64_t>("a");
  auto b = xsym::scalar<std::int64_t>("b");
  auto s = xsym::scalar<std::int64_t>("s");
  auto f = xsym::function("f", xsym::inputs(a, b, s), xsym::arange(a, b, s));
  using v64 = xt::xtensor<std::int64_t, 1>;
  // numpy's np.arange with these int64 arguments.
  CHECK((f(-max, max, q) == v64{-9223372036854775807, -4611686018427387903, 1, 4611686018427387905}));
  CHECK((f(std::int64_t{5}, std::int64_t{10}, max) == v64{5}));
  CHECK((f(std::int64_t{0}, max, q) == v64{0, 4611686018427387904}));
  CHECK((f(max, min, -q) == v64{9223372036854775807, 4611686018427387903, -1, -4611686018427387905}));
  CHECK((f(std::int64_t{5}, std::int64_t{0}, min) == v64{5}));
  CHECK((f(min, max, max) == v64{min, -1, 9223372036854775806}));
  CHECK(f(std::int64_t{0}, std::int64_t{10}, min).size() == 0);
  CHECK(f(max, min, max).size() == 0);
  // int32: i * step leaves int32 (3 * 2^30) before start brings it back.
  auto a32 = xsym::scalar<std::int32_t>("a32");
  auto f32 = xsym::function("f32", xsym::inputs(a32), xsym::arange<std::int32_t>(a32, std::numeric_limits<std::int32_t>::max(), 1 << 30));
  CHECK((f32(std::numeric_limits<std::int32_t>::min()) ==
         xt::xtensor<std::int32_t, 1>{-2147483647 - 1, -1073741824, 0, 1073741824}));
  // numpy: "Maximum allowed size exceeded".
  CHECK_THROWS_WITH(f(std::int64_t{0}, max, std::int64_t{1}),
                    Catch::Contains("ARange{int64}") && Catch::Contains("the range has 9223372036854775807 elements"));
  auto run = [](auto range) { return xsym::function("g", xsym::inputs(), xsym::outputs(range))(); };
  CHECK_THROWS_WITH(run(xsym::arange(0.0, 1e30, 1.0)),
                    Catch::Contains("ARange{float64}") && Catch::Contains("the range has 1e+30 elements"));
  CHECK_THROWS_WITH(run(xsym::arange<float>(-0x1p69f, 0x1p69f, 1.0f)),
                    Catch::Contains("ARange{float32}") && Catch::Contains("the range has 1.1805916207174113e+21 elements"));
}

TEST_CASE("eye puts ones on diagonal k of an n x m matrix", "[shape_ops]") {
  auto n = xsym::scalar<std::int64_t>("n");
  auto f = xsym::function("f", xsym::inputs(n), xsym::outputs(xsym::eye<float>(n), xsym::eye<std::int32_t>(n, 4, -1)));
  auto [e, d] = f(std::int64_t{3});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(e(i, j) == (i == j ? 1.0f : 0.0f));
  REQUIRE(d.shape() == (std::array<std::size_t, 2>{3, 4}));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(d(i, j) == (j + 1 == i ? 1 : 0));
}

TEST_CASE("cumsum and cumprod run along any axis; integers wrap; cumsum has its gradient", "[shape_ops]") {
  auto x = xsym::tensor3<double>("x");
  auto i = xsym::vector<std::int32_t>("i");
  auto f = xsym::function("f", xsym::inputs(x, i),
                          xsym::outputs(xsym::cumsum(x, 1), xsym::cumprod(x, -1), xsym::cumsum(x), xsym::cumsum(i, 0)));
  CHECK(xsym_test::op_names(f)[0].rfind("CumOp{", 0) == 0);
  xt::xtensor<double, 3> X = xt::empty<double>({2, 3, 4});
  for (std::size_t k = 0; k < X.size(); ++k) X.data()[k] = 0.25 * static_cast<double>(k % 7) - 0.5;
  const xt::xtensor<std::int32_t, 1> I = {std::numeric_limits<std::int32_t>::max(), 1, -3};
  auto [c1, c2, flat, ci] = f(X, I);
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t c = 0; c < 4; ++c) {
      double run = 0;
      for (std::size_t b = 0; b < 3; ++b) CHECK(c1(a, b, c) == (run += X(a, b, c)));
    }
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t b = 0; b < 3; ++b) {
      double run = 1;
      for (std::size_t c = 0; c < 4; ++c) CHECK(c2(a, b, c) == (run *= X(a, b, c)));
    }
  double run = 0;
  for (std::size_t k = 0; k < X.size(); ++k) CHECK(flat(k) == (run += X.data()[k]));
  constexpr std::int32_t top = std::numeric_limits<std::int32_t>::max(), bottom = std::numeric_limits<std::int32_t>::min();
  CHECK((ci == xt::xtensor<std::int32_t, 1>{top, bottom, top - 2}));  // top + 1 wraps to bottom; bottom - 3 to top - 2
  std::mt19937 rng(5);
  auto m = xsym::matrix<double>("m");
  const auto M = uniform<2>(rng, {3, 4}, -2, 2);
  check_grad("cumsum axis 0", weighted<2>(rng, sqr(xsym::cumsum(m, 0)), {3, 4}), at(m, M));
  check_grad("cumsum axis 1", weighted<2>(rng, exp(xsym::cumsum(m, 1)), {3, 4}), at(m, M));
  CHECK_THROWS_WITH(xsym::grad(sum(xsym::cumprod(m, 0)), m), Catch::Contains("no gradient through CumOp{0, mul}"));
}

TEST_CASE("batched_dot is a matrix product per batch; tensordot is numpy's", "[shape_ops]") {
  std::mt19937 rng(8);
  auto a = xsym::tensor3<double>("a");
  auto b = xsym::tensor3<double>("b");
  auto w = xsym::matrix<double>("w");
  auto f = xsym::function("f", xsym::inputs(a, b, w), xsym::outputs(xsym::batched_dot(a, b), xsym::batched_dot(a, w)));
  const auto A = uniform<3>(rng, {2, 3, 4}, -1, 1);
  const auto B = uniform<3>(rng, {2, 4, 5}, -1, 1);
  const auto W = uniform<2>(rng, {2, 4}, -1, 1);
  auto [p, q] = f(A, B, W);
  REQUIRE(p.shape() == (std::array<std::size_t, 3>{2, 3, 5}));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t r = 0; r < 3; ++r) {
      double sq = 0;
      for (std::size_t k = 0; k < 4; ++k) sq += A(i, r, k) * W(i, k);
      CHECK(q(i, r) == Approx(sq).epsilon(1e-14));
      for (std::size_t c = 0; c < 5; ++c) {
        double s = 0;
        for (std::size_t k = 0; k < 4; ++k) s += A(i, r, k) * B(i, k, c);
        CHECK(p(i, r, c) == Approx(s).epsilon(1e-14));
      }
    }
  CHECK_THROWS_WITH(f(A, uniform<3>(rng, {2, 3, 5}, -1, 1), W), Catch::Contains("are not aligned"));
  check_grad("batched_dot", weighted<3>(rng, xsym::batched_dot(a, b), {2, 3, 5}), at(a, A), at(b, B));
  // The vector form drops the product's axis of 1: its gradient puts it back.
  check_grad("batched_dot with vectors", weighted<2>(rng, xsym::batched_dot(a, w), {2, 3}), at(a, A), at(w, W));
  // tensordot over a's axes (2, 0) with b's (0, 2): out(j, q) = sum_{k, i} a(i, j, k) c(k, q, i).
  auto c = xsym::tensor3<double>("c");
  const auto C = uniform<3>(rng, {4, 6, 2}, -1, 1);
  auto g = xsym::function("g", xsym::inputs(a, c), xsym::outputs(xsym::tensordot(a, c, {2, 0}, {0, 2}), xsym::tensordot<1>(a, c)));
  auto [t, t1] = g(A, C);
  REQUIRE(t.shape() == (std::array<std::size_t, 2>{3, 6}));
  for (std::size_t j = 0; j < 3; ++j)
    for (std::size_t qq = 0; qq < 6; ++qq) {
      double s = 0;
      for (std::size_t k = 0; k < 4; ++k)
        for (std::size_t i = 0; i < 2; ++i) s += A(i, j, k) * C(k, qq, i);
      CHECK(t(j, qq) == Approx(s).epsilon(1e-13));
    }
  REQUIRE(t1.shape() == (std::array<std::size_t, 4>{2, 3, 6, 2}));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t qq = 0; qq < 6; ++qq)
        for (std::size_t r = 0; r < 2; ++r) {
          double s = 0;
          for (std::size_t k = 0; k < 4; ++k) s += A(i, j, k) * C(k, qq, r);
          CHECK(t1(i, j, qq, r) == Approx(s).epsilon(1e-13));
        }
  check_grad("tensordot", weighted<2>(rng, xsym::tensordot(a, c, {2, 0}, {0, 2}), {3, 6}), at(a, A), at(c, C));
  // Paired axes of other extents: the error names them, not a reshape inside.
  CHECK_THROWS_WITH(g(A, uniform<3>(rng, {4, 6, 3}, -1, 1)),
                    Catch::Contains("tensordot: a's axes (2, 0) and b's axes (0, 2) differ in extent"));
}

TEST_CASE("categorical_crossentropy against int labels is -log p[i, label]; a bad label is an assertion_error",
          "[shape_ops]") {
  std::mt19937 rng(3);
  auto p = xsym::matrix<double>("p");
  auto y = xsym::vector<std::int32_t>("y");
  auto f = xsym::function("f", xsym::inputs(p, y), xsym::categorical_crossentropy(p, y));
  const auto P = uniform<2>(rng, {4, 3}, 0.05, 1);
  const xt::xtensor<std::int32_t, 1> Y = {2, 0, 0, 1};
  const xt::xtensor<double, 1> got = f(P, Y);
  for (std::size_t i = 0; i < 4; ++i) CHECK(got(i) == Approx(-std::log(P(i, static_cast<std::size_t>(Y(i))))).epsilon(1e-15));
  // Only the label's entry is read: a NaN or an infinity elsewhere in the row changes nothing.
  auto Q = P;
  Q(0, 0) = std::numeric_limits<double>::quiet_NaN();
  Q(1, 2) = std::numeric_limits<double>::infinity();
  Q(2, 1) = -std::numeric_limits<double>::infinity();
  const xt::xtensor<double, 1> other = f(Q, Y);
  for (std::size_t i = 0; i < 4; ++i) CHECK(other(i) == Approx(-std::log(Q(i, static_cast<std::size_t>(Y(i))))).epsilon(1e-15));
  for (std::int32_t bad : {3, -1}) {
    try {
      (void)f(P, xt::xtensor<std::int32_t, 1>{0, bad, 1, 1});
      FAIL("no error");
    } catch (const xsym::assertion_error& e) {
      CHECK(std::string(e.what()).find("a label is outside [0, number of classes)") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(f(P, xt::xtensor<std::int32_t, 1>{0, 1}), xsym::assertion_error);
  CHECK_THROWS_WITH(f(P, xt::xtensor<std::int32_t, 1>{0, 1}), Catch::Contains("the labels are not one per row of p"));
  // An empty batch has an empty loss (numpy's -log(p[arange(0), labels]) is []).
  const xt::xtensor<double, 1> none = f(xt::xtensor<double, 2>(xt::empty<double>({0, 3})),
                                        xt::xtensor<std::int32_t, 1>(xt::empty<std::int32_t>({0})));
  CHECK(none.size() == 0);
  auto x = xsym::matrix<double>("x");
  const auto labels = xsym::constant(xt::xtensor<std::int64_t, 1>{1, 2, 0, 2});
  check_grad("crossentropy(softmax(x), labels)",
             weighted<1>(rng, xsym::categorical_crossentropy(xsym::softmax(x), labels), {4}), at(x, uniform<2>(rng, {4, 3}, -2, 2)));
}

// The user's file and line, as the calls below write them: each error names the line that threw.
static std::string here(int line) { return std::string(__FILE__) + ":" + std::to_string(line) + ":"; }

TEST_CASE("an expression that cannot be built names the user's file and line, for every kind of call", "[shape_ops]") {
  auto x = xsym::matrix<double>("x");
  using xsym::range;
  CHECK_THROWS_WITH(xsym::reshape(x, {-1, -1}), Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(x(range(1, 2, 0)), Catch::Contains("step cannot be zero") && Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(x(0, range(1, 2, 0)), Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(x[range(1, 2, 0)], Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(xsym::sum(x, 3), Catch::Contains("axis 3 is out of range") && Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(xsym::max(x, -3, xsym::keepdims), Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(xsym::mean(x + 1, 3), Catch::Contains(here(__LINE__)));  // a typed expression's overload
  CHECK_THROWS_WITH(x.shape(2), Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(xsym::softmax(x, -3), Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(xsym::dimshuffle(x, 1, 1), Catch::Contains("dimension 1 appears twice") && Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(xsym::dimshuffle(x, 1, 'y', 0), Catch::Contains("unknown pattern entry 'y'") && Catch::Contains(here(__LINE__)));
  // A negative dimension does not count from the end, nor is it a new axis: it is refused.
  CHECK_THROWS_WITH(xsym::dimshuffle(x, 1, -1, 0), Catch::Contains("dimension -1 does not exist") && Catch::Contains(here(__LINE__)));
  CHECK_THROWS_WITH(xsym::dimshuffle(x, 0, 1, 2), Catch::Contains("dimension 2 does not exist") && Catch::Contains(here(__LINE__)));
  // The nodes that such calls make keep that line for the errors they raise when they run.
  const int line = __LINE__ + 1;
  auto v = x(1, range(0, 2));
  CHECK(v.node()->where.line() == static_cast<unsigned>(line));
  const int line2 = __LINE__ + 1;
  auto s = xsym::sum(xsym::exp(x) * 2, 1);
  CHECK(s.node()->where.line() == static_cast<unsigned>(line2));
}
