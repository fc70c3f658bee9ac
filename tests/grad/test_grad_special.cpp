// Gradients at the points where the smooth formulas break: prod with zeros, max/min ties,
// abs and sqrt at 0, maximum/minimum ties. Each expected value is stated (PyTensor's
// conventions), checked in every mode, on lengths that put the special points both in SIMD
// batches and in the scalar tail; prod with zeros is also checked by finite differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <xsym/xsym.hpp>
#include <xtensor/xadapt.hpp>

#include "compile/compile_util.hpp"
#include "grad_check.hpp"

namespace {

// Calls f(name, options...) once per way a gradient can be compiled and run.
template <class F>
void each_mode(F&& f) {
  f("FAST_RUN", xsym::mode("FAST_RUN"));
  f("FAST_COMPILE", xsym::mode("FAST_COMPILE"));
  f("fusion:inplace excluded", xsym::optimizer_excluding("fusion:inplace"));
  f("DebugMode", xsym::mode("DebugMode"));
  f("linker py", xsym::linker("py"));
}

// Element by element, NaN equal to NaN, infinities by sign, finite values to a relative 1e-12.
template <std::size_t N>
void require_equal(const xt::xtensor<double, N>& got, const xt::xtensor<double, N>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got.flat(i), w = want.flat(i);
    INFO("element " << i << ": got " << g << ", want " << w);
    if (std::isnan(w)) CHECK(std::isnan(g));
    else if (std::isinf(w)) CHECK(g == w);
    else CHECK(std::abs(g - w) <= 1e-12 * std::max(1.0, std::abs(w)));
  }
}

// The product of v without element `skip` (or of all with skip = -1), in a plain loop.
double product_without(const std::vector<double>& v, long skip) {
  double p = 1;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (static_cast<long>(i) != skip) p *= v[i];
  return p;
}

// d prod(v) / d v_i by the rule: no zero, prod / v_i; one zero, the others' product at it and 0
// elsewhere; more, 0. Written as the product of the others, which is all three at once.
std::vector<double> prod_grad(const std::vector<double>& v) {
  std::vector<double> g(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) g[i] = product_without(v, static_cast<long>(i));
  return g;
}

// A vector of n values near 1 (a moderate product), with zeros at the given positions.
std::vector<double> with_zeros(std::size_t n, const std::vector<std::size_t>& zeros, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.9, 1.1);
  std::vector<double> v(n);
  for (auto& e : v) e = (rng() % 2 ? 1 : -1) * u(rng);
  for (std::size_t z : zeros) v[z] = 0;
  return v;
}

}  // namespace

TEST_CASE("grad of prod at zeros: one zero gives the others' product there, two give 0", "[grad][special][prod]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  // 37 elements: two AVX-512 float64 batches... and a tail, so zeros fall in batches and tail.
  const std::size_t n = 37;
  const std::vector<std::vector<std::size_t>> zero_sets = {{}, {3}, {36}, {0, 20}, {5, 9, 33}};
  each_mode([&](const char* mode, auto... opts) {
    auto [g] = xsym::grad(xsym::prod(x), x);
    auto f = xsym::function("prod_grad", xsym::inputs(x), g, opts...);
    for (const auto& zs : zero_sets) {
      const auto v = with_zeros(n, zs, 7 + static_cast<unsigned>(zs.size()));
      const auto want_v = prod_grad(v);
      xt::xtensor<double, 1> X = xt::adapt(v, {n});
      xt::xtensor<double, 1> want = xt::adapt(want_v, {n});
      require_equal<1>(f(X), want, std::string(mode) + ", " + std::to_string(zs.size()) + " zeros");
    }
  });
  // [2, 0, 3] gives [0, 6, 0]; [0, 0, 3] gives zeros.
  auto f = xsym::function("prod_grad", xsym::inputs(x), std::get<0>(xsym::grad(xsym::prod(x), x)));
  require_equal<1>(f(xt::xtensor<double, 1>{2, 0, 3}), xt::xtensor<double, 1>{0, 6, 0}, "[2, 0, 3]");
  require_equal<1>(f(xt::xtensor<double, 1>{0, 0, 3}), xt::xtensor<double, 1>{0, 0, 0}, "[0, 0, 3]");
}

TEST_CASE("grad of prod over one axis, with rows of zero, one and two zeros", "[grad][special][prod]") {
  xsym_test::clean_config guard;
  auto m = xsym::matrix<double>("m");
  auto w = xsym::vector<double>("w");
  const std::size_t rows = 4, cols = 37;
  std::vector<std::vector<double>> data = {with_zeros(cols, {}, 1), with_zeros(cols, {17}, 2),
                                           with_zeros(cols, {2, 35}, 3), with_zeros(cols, {36}, 4)};
  xt::xtensor<double, 2> M = xt::empty<double>({rows, cols});
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) M(i, j) = data[i][j];
  const xt::xtensor<double, 1> W = {0.5, -2.0, 1.5, 3.0};
  xt::xtensor<double, 2> want = xt::empty<double>({rows, cols});
  for (std::size_t i = 0; i < rows; ++i) {
    const auto gi = prod_grad(data[i]);
    for (std::size_t j = 0; j < cols; ++j) want(i, j) = W(i) * gi[j];
  }
  // Over axis 0 of the transpose: the same groups, reduced along the other axis.
  const xt::xtensor<double, 2> MT = xt::transpose(M);
  const xt::xtensor<double, 2> want_t = xt::transpose(want);
  each_mode([&](const char* mode, auto... opts) {
    auto [g1] = xsym::grad(xsym::sum(xsym::prod(m, 1) * w), m);
    auto [g0] = xsym::grad(xsym::sum(xsym::prod(m, 0) * w), m);
    auto f1 = xsym::function("prod_axis1", xsym::inputs(m, w), g1, opts...);
    auto f0 = xsym::function("prod_axis0", xsym::inputs(m, w), g0, opts...);
    require_equal<2>(f1(M, W), want, std::string(mode) + ", axis 1");
    require_equal<2>(f0(MT, W), want_t, std::string(mode) + ", axis 0");
  });
}

TEST_CASE("grad of prod at zeros agrees with finite differences", "[grad][special][prod]") {
  auto x = xsym::vector<double>("x");
  auto m = xsym::matrix<double>("m");
  // prod is multilinear: central differences are exact up to rounding, at zeros too.
  grad_test::check_grad("prod(x), one zero", xsym::prod(x), grad_test::at(x, xt::xtensor<double, 1>{1.5, 0, -2, 0.5}));
  grad_test::check_grad("prod(x), two zeros", xsym::prod(x), grad_test::at(x, xt::xtensor<double, 1>{0, 1.5, 0, 2}));
  grad_test::check_grad("sum(prod(m, 1) * ...)", xsym::sum(xsym::prod(m, 1) * xsym::exp(xsym::prod(m, 1))),
                        grad_test::at(m, xt::xtensor<double, 2>{{0, 1.2, -0.7}, {0.9, 1.1, 0.8}, {0, 0, 1.3}}));
}

TEST_CASE("grad of max and min at ties: every tied element gets the gradient", "[grad][special][max]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  const std::size_t n = 37;
  xt::xtensor<double, 1> X = xt::linspace<double>(-1, 1, n);
  X(4) = X(20) = X(36) = 5;      // three tied maxima: in a batch and in the tail
  X(1) = X(35) = -7;             // two tied minima
  xt::xtensor<double, 1> want_max = xt::zeros<double>({n}), want_min = xt::zeros<double>({n});
  want_max(4) = want_max(20) = want_max(36) = 1;
  want_min(1) = want_min(35) = 1;
  each_mode([&](const char* mode, auto... opts) {
    auto [gmax] = xsym::grad(xsym::max(x), x);
    auto [gmin] = xsym::grad(xsym::min(x), x);
    auto f = xsym::function("ties", xsym::inputs(x), xsym::outputs(gmax, gmin), opts...);
    auto [a, b] = f(X);
    require_equal<1>(a, want_max, std::string(mode) + ", max");
    require_equal<1>(b, want_min, std::string(mode) + ", min");
  });
}

TEST_CASE("grad of maximum and minimum at ties goes to the first operand", "[grad][special][maximum]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  const std::size_t n = 37;
  xt::xtensor<double, 1> X = xt::linspace<double>(-1, 1, n), Y = xt::linspace<double>(1, -1, n);
  X(3) = Y(3) = 0.25;
  X(36) = Y(36) = -0.5;
  xt::xtensor<double, 1> gx_max = xt::zeros<double>({n}), gy_max = xt::zeros<double>({n});
  for (std::size_t i = 0; i < n; ++i) (X(i) >= Y(i) ? gx_max : gy_max)(i) = 1;
  xt::xtensor<double, 1> gx_min = xt::zeros<double>({n}), gy_min = xt::zeros<double>({n});
  for (std::size_t i = 0; i < n; ++i) (X(i) <= Y(i) ? gx_min : gy_min)(i) = 1;
  REQUIRE(gx_max(3) == 1);  // the tie is the first operand's
  REQUIRE(gx_min(36) == 1);
  each_mode([&](const char* mode, auto... opts) {
    auto [a, b] = xsym::grad(xsym::sum(xsym::maximum(x, y)), x, y);
    auto [c, d] = xsym::grad(xsym::sum(xsym::minimum(x, y)), x, y);
    auto f = xsym::function("maximum_ties", xsym::inputs(x, y), xsym::outputs(a, b, c, d), opts...);
    auto [ga, gb, gc, gd] = f(X, Y);
    require_equal<1>(ga, gx_max, std::string(mode) + ", maximum, x");
    require_equal<1>(gb, gy_max, std::string(mode) + ", maximum, y");
    require_equal<1>(gc, gx_min, std::string(mode) + ", minimum, x");
    require_equal<1>(gd, gy_min, std::string(mode) + ", minimum, y");
  });
}

TEST_CASE("grad of abs at 0 is 0 and of sqrt at 0 is inf", "[grad][special][abs]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  const std::size_t n = 37;
  xt::xtensor<double, 1> X = xt::linspace<double>(-2, 2, n);  // X(18) is 0
  X(5) = 0;
  X(36) = -0.0;
  REQUIRE(X(18) == 0);
  xt::xtensor<double, 1> want_abs = xt::empty<double>({n});
  for (std::size_t i = 0; i < n; ++i) want_abs(i) = X(i) > 0 ? 1 : X(i) < 0 ? -1 : 0;  // d|x| at 0: sign(0) = 0
  each_mode([&](const char* mode, auto... opts) {
    auto [ga] = xsym::grad(xsym::sum(xsym::abs(x)), x);
    auto f = xsym::function("abs_grad", xsym::inputs(x), ga, opts...);
    require_equal<1>(f(X), want_abs, std::string(mode) + ", abs");
  });
  // sqrt's gradient at 0 is +inf (0.5 / sqrt(0)).
  auto y = xsym::vector<double>("y");
  auto [gs] = xsym::grad(xsym::sum(xsym::sqrt(y)), y);
  each_mode([&](const char* mode, auto... opts) {
    if (std::string(mode) == "DebugMode") return;  // its check_isfinite rejects the inf, as Theano's
    auto f = xsym::function("sqrt_grad", xsym::inputs(y), gs, opts...);
    const xt::xtensor<double, 1> Y = xt::abs(X);
    xt::xtensor<double, 1> want = xt::empty<double>({n});
    for (std::size_t i = 0; i < n; ++i) want(i) = Y(i) == 0 ? std::numeric_limits<double>::infinity() : 0.5 / std::sqrt(Y(i));
    require_equal<1>(f(Y), want, std::string(mode) + ", sqrt");
  });
}

// pow(x, y)'s gradient in y is z log(x): at x = 0 it is 0 (PyTensor's switch), not 0 * -inf.
TEST_CASE("grad of pow in its exponent is 0 where the base is 0", "[grad][special][pow]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto [gy] = xsym::grad(xsym::sum(xsym::pow(x, y)), y);
  const xt::xtensor<double, 1> X{0, 2, 0, 0.5}, Y{2, 2, 0.5, 3};
  xt::xtensor<double, 1> want = xt::empty<double>({4});
  for (std::size_t i = 0; i < 4; ++i) want(i) = X(i) == 0 ? 0 : std::pow(X(i), Y(i)) * std::log(X(i));
  each_mode([&](const char* mode, auto... opts) {
    auto f = xsym::function("pow_grad", xsym::inputs(x, y), gy, opts...);
    require_equal<1>(f(X, Y), want, std::string(mode) + ", d pow / d y");
  });
}

// x^0 is 1 everywhere, so its gradient in x is 0, at x = 0 too (b x^(b-1) there is 0 * inf).
TEST_CASE("grad of pow in its base is 0 where the exponent is 0", "[grad][special][pow]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto [gx] = xsym::grad(xsym::sum(xsym::pow(x, y)), x);
  const xt::xtensor<double, 1> X{0, -0.0, 2, 0, 1.5, 0}, Y{0, 0, 0, 2, 3, 1};
  xt::xtensor<double, 1> want = xt::empty<double>({6});
  for (std::size_t i = 0; i < 6; ++i) want(i) = Y(i) == 0 ? 0 : Y(i) * std::pow(X(i), Y(i) - 1);
  each_mode([&](const char* mode, auto... opts) {
    auto f = xsym::function("pow_grad_base", xsym::inputs(x, y), gx, opts...);
    require_equal<1>(f(X, Y), want, std::string(mode) + ", d pow / d x");
  });
}

// A wrt that a stable form would absorb (the sigmoid of log(sigmoid(v)), the exp of
// 1 / (1 + exp(-v)), the 1 + y of log(1 + y)) stays in the graph grad differentiates: its
// gradient is the literal formula's, not "does not depend" or, with zeros, 0.
TEST_CASE("grad with respect to an intermediate a stable form would absorb", "[grad][special][wrt][stabilize]") {
  xsym_test::clean_config guard;
  auto v = xsym::vector<double>("v");
  const xt::xtensor<double, 1> V{0.3, -1.2, 2.0, 0};
  const xsym::var<double, 1> s = xsym::sigmoid(v), e = exp(-v), p = 1.0 + v * v;
  auto [gs] = xsym::grad(xsym::sum(log(s)), s);
  auto [ge] = xsym::grad(xsym::disconnected::zeros, xsym::sum(1.0 / (1.0 + e)), e);
  auto [gp] = xsym::grad(xsym::disconnected::zeros, xsym::sum(log(p)), p);
  auto [gl] = xsym::grad(xsym::sum(log(1.0 - s)), s);
  each_mode([&](const char* mode, auto... opts) {
    auto f = xsym::function("absorbed_wrt", xsym::inputs(v), xsym::outputs(gs, ge, gp, gl), opts...);
    const auto [a, b, c, d] = f(V);
    INFO(mode);
    REQUIRE(a.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
      const double sv = 1 / (1 + std::exp(-V(i))), ev = std::exp(-V(i));
      CHECK(a(i) == Approx(1 / sv).epsilon(1e-12));
      CHECK(b(i) == Approx(-1 / ((1 + ev) * (1 + ev))).epsilon(1e-12));
      CHECK(c(i) == Approx(1 / (1 + V(i) * V(i))).epsilon(1e-12));
      CHECK(d(i) == Approx(-1 / (1 - sv)).epsilon(1e-12));
    }
  });
}

// The stable forms drop a constant 1 only where it is one element: an array of ones larger than
// the other operand repeats its values, which log1p(x) alone would not.
TEST_CASE("stabilize keeps a larger array of ones: the cost and its gradient count every repetition", "[grad][special][stabilize]") {
  xsym_test::clean_config guard;
  auto r = xsym::row<double>("r");
  const auto ones = xsym::constant(xt::xtensor<double, 2>(xt::ones<double>({3, 4})));
  const xt::xtensor<double, 2> R{{0.5, 1.0, 2.0, 0.25}};
  const xsym::var<double, 0> costs[] = {xsym::sum(log(ones + r)), xsym::sum(log(ones - xsym::sigmoid(r))),
                                         xsym::sum(ones / (ones + exp(-r)))};
  const auto value = [&](int k, double v) {
    return k == 0 ? std::log(1 + v) : k == 1 ? std::log(1 - 1 / (1 + std::exp(-v))) : 1 / (1 + std::exp(-v));
  };
  for (int k = 0; k < 3; ++k) {
    auto [g] = xsym::grad(costs[k], r);
    each_mode([&](const char* mode, auto... opts) {
      auto f = xsym::function("ones", xsym::inputs(r), xsym::outputs(costs[k], g), opts...);
      const auto [c, gr] = f(R);
      INFO(mode << ", cost " << k);
      double want = 0;
      for (std::size_t j = 0; j < 4; ++j) {
        want += 3 * value(k, R(0, j));
        const double h = 1e-6, fd = 3 * (value(k, R(0, j) + h) - value(k, R(0, j) - h)) / (2 * h);
        CHECK(gr(0, j) == Approx(fd).epsilon(1e-6));
      }
      CHECK(c == Approx(want).epsilon(1e-12));
    });
  }
}

// An intermediate as wrt: its adjoint has its shape (mean's is one value repeated), and it stays
// in the graph grad differentiates (the stable form of log(1 + exp(x)) is not a new node).
TEST_CASE("grad with respect to an intermediate has its shape and survives stabilize", "[grad][special][wrt]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  const xt::xtensor<double, 1> X{1, -2, 3, 0.5};
  const xsym::var<double, 1> h = x * 3.0;
  auto [gh] = xsym::grad(xsym::mean(h), h);
  const xsym::var<double, 1> s = log(1.0 + exp(x));
  auto [gs] = xsym::grad(xsym::sum(s * s), s);
  each_mode([&](const char* mode, auto... opts) {
    auto f = xsym::function("wrt", xsym::inputs(x), xsym::outputs(gh, gs), opts...);
    const auto [a, b] = f(X);
    xt::xtensor<double, 1> want_a = xt::empty<double>({4}), want_b = want_a;
    for (std::size_t i = 0; i < 4; ++i) {
      want_a(i) = 0.25;
      want_b(i) = 2 * std::log1p(std::exp(X(i)));
    }
    require_equal<1>(a, want_a, std::string(mode) + ", d mean(h) / d h");
    INFO(mode);
    REQUIRE(b.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(b(i) == Approx(want_b(i)).epsilon(1e-12));
  });
}

// A typed expression lowers once per use: the cost holds its own copies of h, which grad
// identifies with h (merged), as it does when h is a plain var.
TEST_CASE("grad with respect to a typed intermediate used several times", "[grad][special][wrt]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  const xt::xtensor<double, 1> X{1, -2, 3, 0.5};
  auto h = x * 2.0;
  auto [gh] = xsym::grad(xsym::sum(h * h + h), h);  // 2h + 1
  auto [gx] = xsym::grad(xsym::sum(h * h + h), x);  // 2 (2h + 1)
  each_mode([&](const char* mode, auto... opts) {
    auto f = xsym::function("typed_wrt", xsym::inputs(x), xsym::outputs(gh, gx), opts...);
    const auto [a, b] = f(X);
    xt::xtensor<double, 1> want_a = xt::empty<double>({4}), want_b = want_a;
    for (std::size_t i = 0; i < 4; ++i) {
      want_a(i) = 4 * X(i) + 1;
      want_b(i) = 2 * (4 * X(i) + 1);
    }
    require_equal<1>(a, want_a, std::string(mode) + ", d cost / d h");
    require_equal<1>(b, want_b, std::string(mode) + ", d cost / d x");
  });
  // A wrt the cost does not reach, unnamed: the error says which.
  auto y = xsym::vector<double>("y");
  const xsym::var<double, 1> unnamed = exp(y);
  try {
    (void)xsym::grad(xsym::sum(h), unnamed);
    FAIL("no error");
  } catch (const xsym::graph_error& e) {
    CHECK(std::string(e.what()).find("the unnamed Elemwise{exp") != std::string::npos);
    CHECK(std::string(e.what()).find("wrt 0") != std::string::npos);
  }
}

// A float arange's elements are start + i step: d/dstart sums g, d/dstep sums g_i i (Theano's
// ARange); stop moves no element.
TEST_CASE("grad of a float arange in its start and step agrees with finite differences", "[grad][special][arange]") {
  xsym_test::clean_config guard;
  auto s = xsym::scalar<double>("s"), t = xsym::scalar<double>("t"), e = xsym::scalar<double>("e");
  const auto r = xsym::arange<double>(s, e, t);
  const xsym::var<double, 0> cost = xsym::sum(r * r * 0.5 + r);
  auto [gs, gt, ge] = xsym::grad(cost, s, t, e);
  const double S = 0.3, T = 0.7, E = 6.0;
  const auto value = [](double a, double step, double stop) {
    double c = 0;
    for (double v = a; v < stop; v += step) c += v * v * 0.5 + v;
    return c;
  };
  each_mode([&](const char* mode, auto... opts) {
    auto f = xsym::function("arange_grad", xsym::inputs(s, t, e), xsym::outputs(gs, gt, ge), opts...);
    const auto [a, b, c] = f(S, T, E);
    INFO(mode);
    const double h = 1e-6;
    CHECK(static_cast<double>(a) == Approx((value(S + h, T, E) - value(S - h, T, E)) / (2 * h)).epsilon(1e-6));
    CHECK(static_cast<double>(b) == Approx((value(S, T + h, E) - value(S, T - h, E)) / (2 * h)).epsilon(1e-6));
    CHECK(static_cast<double>(c) == 0.0);
  });
}
