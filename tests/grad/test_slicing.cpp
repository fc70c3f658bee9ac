// Slicing, set_subtensor / inc_subtensor, reshape, concatenate, stack and split against loops
// written from numpy's definitions (negative, stepped, empty and out-of-range slices; int and
// float dtypes; broadcasting), their errors, and their gradients by finite differences.
#include "grad_check.hpp"

#include <optional>

#include <xtensor/xview.hpp>

#include "compile/compile_util.hpp"

using namespace grad_test;
using xsym::all;
using xsym::range;
using xsym::placeholders::_;

namespace {

// The positions numpy's a[start:stop:step] picks from n elements, by filtering 0..n-1 (not by
// the kernel's arithmetic): Python's rules for absent, negative and out-of-range ends.
std::vector<std::int64_t> picked(std::int64_t n, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                                 std::int64_t step) {
  std::vector<std::int64_t> r;
  auto norm = [&](std::int64_t v) { return v < 0 ? v + n : v; };
  if (step > 0) {
    const std::int64_t lo = start ? std::max<std::int64_t>(norm(*start), 0) : 0;
    const std::int64_t hi = stop ? norm(*stop) : n;
    for (std::int64_t i = 0; i < n; ++i)
      if (i >= lo && i < hi && (i - lo) % step == 0) r.push_back(i);
  } else {
    const std::int64_t hi = start ? std::min<std::int64_t>(norm(*start), n - 1) : n - 1;
    const std::int64_t lo = stop ? std::max<std::int64_t>(norm(*stop), -1) : -1;
    for (std::int64_t i = n - 1; i >= 0; --i)
      if (i <= hi && i > lo && (hi - i) % -step == 0) r.push_back(i);
  }
  return r;
}

struct axis_case {
  std::optional<std::int64_t> start, stop;
  std::int64_t step;
  xsym::range_t r() const {
    const xsym::slice_bound a = start ? xsym::slice_bound(*start) : xsym::slice_bound(_);
    const xsym::slice_bound b = stop ? xsym::slice_bound(*stop) : xsym::slice_bound(_);
    return range(a, b, step);
  }
};

template <class T>
xt::xtensor<T, 2> counting(std::size_t r, std::size_t c) {
  xt::xtensor<T, 2> a = xt::empty<T>({r, c});
  for (std::size_t k = 0; k < a.size(); ++k) a.data()[k] = static_cast<T>(3 * k + 1);
  return a;
}

template <class T>
void check_two_axis_slices() {
  auto x = xsym::matrix<T>("x");
  const auto X = counting<T>(5, 4);
  const std::vector<axis_case> rows = {{1, -1, 1}, {std::nullopt, std::nullopt, -1}, {-100, 100, 2}, {3, 1, -1},
                                       {10, 20, 1}, {-2, std::nullopt, 1}, {std::nullopt, 0, -2}, {4, -6, -3}};
  const std::vector<axis_case> cols = {{std::nullopt, std::nullopt, 1}, {3, 0, -2}, {1, std::nullopt, 2}, {-1, -5, -1}};
  for (const auto& a : rows)
    for (const auto& b : cols) {
      auto f = xsym::function("f", xsym::inputs(x), x(a.r(), b.r()));
      const xt::xtensor<T, 2> got = f(X);
      const auto ri = picked(5, a.start, a.stop, a.step), ci = picked(4, b.start, b.stop, b.step);
      INFO(xsym_test::op_names(f)[0]);
      REQUIRE(got.shape() == (std::array<std::size_t, 2>{ri.size(), ci.size()}));
      for (std::size_t i = 0; i < ri.size(); ++i)
        for (std::size_t j = 0; j < ci.size(); ++j)
          CHECK(got(i, j) == X(static_cast<std::size_t>(ri[i]), static_cast<std::size_t>(ci[j])));
    }
}

}  // namespace

TEST_CASE("basic slicing picks numpy's elements on every axis, steps and ends of any sign", "[slicing]") {
  check_two_axis_slices<double>();
  check_two_axis_slices<float>();
  check_two_axis_slices<std::int32_t>();
  check_two_axis_slices<std::int64_t>();
}

TEST_CASE("an integer index drops its axis, counting from the end when negative", "[slicing]") {
  auto x = xsym::tensor3<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), xsym::outputs(x(1), x(-1, all(), 2), x(0, range(_, _, -1)), x[range(1, _)]));
  CHECK(xsym_test::op_names(f) == std::vector<std::string>{"Subtensor{1}", "Subtensor{-1, ::, 2}", "Subtensor{0, ::-1}",
                                                           "Subtensor{1::}"});
  xt::xtensor<float, 3> X = xt::empty<float>({3, 2, 4});
  for (std::size_t k = 0; k < X.size(); ++k) X.data()[k] = static_cast<float>(k);
  auto [a, b, c, d] = f(X);
  static_assert(decltype(a)::rank == 2 && decltype(b)::rank == 1 && decltype(c)::rank == 2 && decltype(d)::rank == 3);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      CHECK(a(i, j) == X(1, i, j));
      CHECK(c(i, j) == X(0, 1 - i, j));
    }
  for (std::size_t i = 0; i < 2; ++i) CHECK(b(i) == X(2, i, 2));
  CHECK((d == xt::xtensor<float, 3>(xt::view(X, xt::range(1, 3)))));
}

TEST_CASE("strided and reversed views feed elementwise ops, reductions, products and take", "[slicing]") {
  auto x = xsym::matrix<double>("x");
  auto v = xsym::vector<double>("v");
  const auto rev = x(range(_, _, -1), range(_, _, -2));  // both strides negative
  auto f = xsym::function("f", xsym::inputs(x, v),
                          xsym::outputs(rev * 2.0 + 1.0, sum(rev, 0), dot(rev, v(range(_, _, -2))),
                                        xsym::take(rev, xsym::constant(xt::xtensor<std::int64_t, 1>{2, 0})), rev.T()));
  const auto X = counting<double>(3, 4);
  const xt::xtensor<double, 1> V = {1, -2, 3};
  auto [e, s, p, t, tr] = f(X, V);
  // rev(i, j) = X(2 - i, 3 - 2 j): 3 x 2
  auto R = [&](std::size_t i, std::size_t j) { return X(2 - i, 3 - 2 * j); };
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      CHECK(e(i, j) == R(i, j) * 2 + 1);
      CHECK(tr(j, i) == R(i, j));
    }
  for (std::size_t j = 0; j < 2; ++j) CHECK(s(j) == R(0, j) + R(1, j) + R(2, j));
  for (std::size_t i = 0; i < 3; ++i) CHECK(p(i) == R(i, 0) * V(2) + R(i, 1) * V(0));
  for (std::size_t j = 0; j < 2; ++j) {
    CHECK(t(0, j) == R(2, j));
    CHECK(t(1, j) == R(0, j));
  }
}

TEST_CASE("a slice's index out of range is an index_error naming the node and the axis", "[slicing]") {
  auto x = xsym::matrix<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), x(all(), 3));
  try {
    (void)f(xt::xtensor<float, 2>(xt::zeros<float>({2, 3})));
    FAIL("no error");
  } catch (const xsym::index_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("Subtensor{::, 3}") != std::string::npos);
    CHECK(what.find("index 3 is out of range for axis 1 with 3 elements") != std::string::npos);
  }
  CHECK_NOTHROW(f(xt::xtensor<float, 2>(xt::zeros<float>({2, 4}))));
  CHECK_THROWS_WITH(x(range(1, 2, 0)), Catch::Contains("step cannot be zero"));
}

TEST_CASE("set_subtensor and inc_subtensor write numpy's region, the value broadcast", "[slicing][inc_subtensor]") {
  auto x = xsym::matrix<double>("x");
  auto y = xsym::matrix<double>("y");
  auto r = xsym::vector<double>("r");
  const auto region = x(range(3, 0, -1), range(1, _, 2));  // rows 3, 2, 1; columns 1, 3
  auto f = xsym::function("f", xsym::inputs(x, y, r),
                          xsym::outputs(xsym::set_subtensor(region, y), xsym::inc_subtensor(region, y),
                                        xsym::set_subtensor(region, r), xsym::inc_subtensor(x(1), 10.0)));
  CHECK(xsym_test::op_names(f) == std::vector<std::string>{"IncSubtensor{Set;3:0:-1, 1::2}", "IncSubtensor{Inc;3:0:-1, 1::2}",
                                                           "InplaceDimShuffle{x,0}", "IncSubtensor{Set;3:0:-1, 1::2}",
                                                           "IncSubtensor{Inc;1}"});
  const auto X = counting<double>(5, 4);
  const xt::xtensor<double, 2> Y = {{10, 20}, {30, 40}, {50, 60}};
  const xt::xtensor<double, 1> Rw = {-1, -2};
  auto [s, i, b, row] = f(X, Y, Rw);
  const std::vector<std::size_t> ri = {3, 2, 1}, ci = {1, 3};
  xt::xtensor<double, 2> ws = X, wi = X, wb = X, wr = X;
  for (std::size_t a = 0; a < 3; ++a)
    for (std::size_t c = 0; c < 2; ++c) {
      ws(ri[a], ci[c]) = Y(a, c);
      wi(ri[a], ci[c]) += Y(a, c);
      wb(ri[a], ci[c]) = Rw(c);
    }
  for (std::size_t c = 0; c < 4; ++c) wr(1, c) += 10;
  CHECK((s == ws));
  CHECK((i == wi));
  CHECK((b == wb));
  CHECK((row == wr));
  // A value of the wrong shape is a shape_error naming both shapes; x is left as it was.
  try {
    (void)f(X, xt::xtensor<double, 2>(xt::zeros<double>({2, 2})), Rw);
    FAIL("no error");
  } catch (const xsym::shape_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("IncSubtensor{Set;3:0:-1, 1::2}") != std::string::npos);
    CHECK(what.find("the value of shape (2, 2) does not fit the region of shape (3, 2)") != std::string::npos);
  }
}

TEST_CASE("inc_subtensor wraps integers as numpy does; set_subtensor takes bool", "[slicing][inc_subtensor]") {
  auto x = xsym::vector<std::int32_t>("x");
  auto m = xsym::vector<bool>("m");
  auto f = xsym::function("f", xsym::inputs(x, m),
                          xsym::outputs(xsym::inc_subtensor(x(range(_, 2)), 1), xsym::set_subtensor(m(range(1, _)), false)));
  const xt::xtensor<std::int32_t, 1> X = {std::numeric_limits<std::int32_t>::max(), -5, 7};
  const xt::xtensor<bool, 1> M = {true, true, true};
  auto [a, b] = f(X, M);
  CHECK(a(0) == std::numeric_limits<std::int32_t>::min());
  CHECK(a(1) == -4);
  CHECK(a(2) == 7);
  CHECK((b == xt::xtensor<bool, 1>{true, false, false}));
}

TEST_CASE("inc_subtensor refuses a value numpy's same_kind casting refuses (a float into an int tensor); set_subtensor "
          "casts it",
          "[slicing][inc_subtensor]") {
  auto x = xsym::vector<std::int32_t>("x");
  auto yd = xsym::vector<double>("yd");
  auto yf = xsym::vector<float>("yf");
  auto y64 = xsym::vector<std::int64_t>("y64");
  auto yb = xsym::vector<bool>("yb");
  auto check_refused = [](auto make, const std::string& value, const std::string& from) {
    try {
      (void)make();
      FAIL("no error");
    } catch (const xsym::graph_error& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find("xsym::inc_subtensor: cannot add " + value + " of dtype " + from + " into a tensor of dtype int32") !=
            std::string::npos);
      CHECK(what.find("xsym::cast<std::int32_t>") != std::string::npos);
    }
  };
  // numpy: x[1:] += 2.7 on an int32 x is a UFuncTypeError (same_kind), not a truncated 2. Typed
  // operands are refused at compile time (tests/compile_fail/inc_float_into_int.cpp); graphs
  // built at run time at graph build.
  using xsym::slice_spec;
  slice_spec from_1;
  from_1.start = 1;
  from_1.has_start = true;
  const std::vector<slice_spec> tail = {from_1};
  check_refused([&] { return xsym::detail::inc_subtensor(x.node(), yd.node(), tail, false); }, "a value", "float64");
  check_refused([&] { return xsym::detail::inc_subtensor(x.node(), yf.node(), tail, false); }, "a value", "float32");
  // same_kind allows int64 into int32 (wrapping), bool into int, float64 into float32, an int into a float.
  auto v = xsym::vector<float>("v");
  auto f = xsym::function("f", xsym::inputs(x, y64, yb, v, yd),
                          xsym::outputs(xsym::inc_subtensor(x(range(1, _)), y64), xsym::inc_subtensor(x(range(_, 2)), yb),
                                        xsym::inc_subtensor(v(range(1, _)), yd), xsym::inc_subtensor(v(0), 3),
                                        xsym::set_subtensor(x(range(1, _)), 2.7)));
  const xt::xtensor<std::int32_t, 1> X = {1, 2, 3, 4};
  const xt::xtensor<std::int64_t, 1> Y64 = {10, std::int64_t{1} << 32, -(std::int64_t{1} << 33) - 1};
  const xt::xtensor<bool, 1> YB = {true, false};
  const xt::xtensor<float, 1> V = {0.5f, 1.5f, 2.5f};
  auto [a, b, c, d, e] = f(X, Y64, YB, V, xt::xtensor<double, 1>{0.25, -2.75});
  CHECK((a == xt::xtensor<std::int32_t, 1>{1, 12, 3, 3}));  // 3 + 2^32 wraps to 3; 4 - 2^33 - 1 to 3
  CHECK((b == xt::xtensor<std::int32_t, 1>{2, 2, 3, 4}));
  CHECK((c == xt::xtensor<float, 1>{0.5f, 1.75f, -0.25f}));
  CHECK((d == xt::xtensor<float, 1>{3.5f, 1.5f, 2.5f}));
  CHECK((e == xt::xtensor<std::int32_t, 1>{1, 2, 2, 2}));  // numpy's x[1:] = 2.7 truncates
  auto h = xsym::function("h", xsym::inputs(x, yd), xsym::set_subtensor(x(range(1, _)), yd));
  const xt::xtensor<std::int32_t, 1> got = h(X, xt::xtensor<double, 1>{0.5, -0.5, 2.7});
  CHECK((got == xt::xtensor<std::int32_t, 1>{1, 0, 0, 2}));  // numpy's x[1:] = [0.5, -0.5, 2.7]
}

TEST_CASE("slice steps near the int64 limits take numpy's elements; set/inc_subtensor write through them",
          "[slicing][inc_subtensor]") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max(), min = std::numeric_limits<std::int64_t>::min();
  auto v = xsym::vector<float>("v");
  auto m = xsym::matrix<float>("m");
  // numpy: v[::2**63-1] [10], v[::-(2**63-1)] [14], v[::-2**63] [14], v[1::2**63-2] [11], v[3:0:-2**63] [13],
  // v[5::2**63-1] [], v[:4:-2**63] [], v[:-6:-2**63] [14]; m[::2**63-1, ::-2**63] [[m[0, 3]]].
  auto f = xsym::function("f", xsym::inputs(v, m),
                          xsym::outputs(v(range(_, _, max)), v(range(_, _, -max)), v(range(_, _, min)), v(range(1, _, max - 1)),
                                        v(range(3, 0, min)), v(range(5, _, max)), v(range(_, 4, min)), v(range(_, -6, min)),
                                        m(range(_, _, max), range(_, _, min))));
  const xt::xtensor<float, 1> V = {10, 11, 12, 13, 14};
  const auto M = counting<float>(3, 4);
  auto [a, b, c, d, e, g, h, l, k] = f(V, M);
  CHECK((a == xt::xtensor<float, 1>{10}));
  CHECK((b == xt::xtensor<float, 1>{14}));
  CHECK((c == xt::xtensor<float, 1>{14}));
  CHECK((d == xt::xtensor<float, 1>{11}));
  CHECK((e == xt::xtensor<float, 1>{13}));
  CHECK(g.size() == 0);
  CHECK(h.size() == 0);
  CHECK((l == xt::xtensor<float, 1>{14}));
  CHECK((k == xt::xtensor<float, 2>{{M(0, 3)}}));
  auto w = xsym::function("w", xsym::inputs(v),
                          xsym::outputs(xsym::set_subtensor(v(range(_, _, max)), 0.0f), xsym::inc_subtensor(v(range(_, _, min)), 1.0f),
                                        xsym::set_subtensor(v(range(1, _, max - 1)), -1.0f)));
  auto [s, i, t] = w(V);
  CHECK((s == xt::xtensor<float, 1>{0, 11, 12, 13, 14}));
  CHECK((i == xt::xtensor<float, 1>{10, 11, 12, 13, 15}));
  CHECK((t == xt::xtensor<float, 1>{10, -1, 12, 13, 14}));
}

TEST_CASE("IncSubtensor writes in place into an intermediate, never into an input or a shared value",
          "[slicing][inc_subtensor]") {
  auto x = xsym::vector<double>("x");
  auto u = xsym::shared(xt::xtensor<double, 1>{1, 2, 3, 4, 5}, "u");
  const auto inner = u(range(1, -1));
  const auto next = xsym::set_subtensor(inner, inner + 0.25 * (u(range(2, _)) - 2.0 * inner + u(range(_, -2))));
  auto f = xsym::function("f", xsym::inputs(x), xsym::outputs(xsym::set_subtensor((x * 2.0)(range(_, 2)), 0.0), x),
                          xsym::updates(xsym::update(u, next)));
  const auto names = xsym_test::op_names(f);
  CHECK(std::count(names.begin(), names.end(), "IncSubtensor{InplaceSet;:2:}") == 1);  // into x * 2's buffer
  CHECK(std::count_if(names.begin(), names.end(), [](const std::string& n) {  // u's value is kept
          return n.rfind("IncSubtensor{Set;1:-1:;Composite{", 0) == 0;  // the stencil runs into the region
        }) == 1);
  const xt::xtensor<double, 1> X = {1, 2, 3};
  auto [a, same] = f(X);
  CHECK((a == xt::xtensor<double, 1>{0, 0, 6}));
  CHECK((same == X));
  CHECK((u.get_value() == xt::xtensor<double, 1>{1, 2, 3, 4, 5}));  // every inner point is linear: no change
  u.set_value(xt::xtensor<double, 1>{0, 0, 4, 0, 0});
  (void)f(X);
  CHECK((u.get_value() == xt::xtensor<double, 1>{0, 1, 2, 1, 0}));
  // Two points have no inner point: the slices are empty and u stays.
  u.set_value(xt::xtensor<double, 1>{7, 9});
  (void)f(X);
  CHECK((u.get_value() == xt::xtensor<double, 1>{7, 9}));
  // A function of updates only: its call returns nothing.
  auto g = xsym::function("g", xsym::inputs(), xsym::outputs(), xsym::updates(xsym::update(u, next)));
  u.set_value(xt::xtensor<double, 1>{0, 4, 0});
  static_assert(std::is_same_v<decltype(g()), std::tuple<>>);
  g();
  CHECK((u.get_value() == xt::xtensor<double, 1>{0, 2, 0}));
}

TEST_CASE("reshape and flatten keep C order, with one -1, from any layout", "[slicing][reshape]") {
  auto x = xsym::matrix<float>("x");
  auto f = xsym::function("f", xsym::inputs(x),
                          xsym::outputs(xsym::reshape(x, {-1, 2, 3}), xsym::flatten(x.T()), xsym::reshape(x(range(_, _, -1)), {6, -1})));
  CHECK(xsym_test::op_names(f)[0].rfind("Reshape{", 0) == 0);
  const auto X = counting<float>(4, 3);
  auto [a, b, c] = f(X);
  REQUIRE(a.shape() == (std::array<std::size_t, 3>{2, 2, 3}));
  for (std::size_t k = 0; k < 12; ++k) CHECK(a.data()[k] == X.data()[k]);
  REQUIRE(b.shape() == (std::array<std::size_t, 1>{12}));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(b(i * 4 + j) == X(j, i));
  REQUIRE(c.shape() == (std::array<std::size_t, 2>{6, 2}));
  for (std::size_t k = 0; k < 12; ++k) CHECK(c.data()[k] == X(3 - k / 3, k % 3));
  try {
    (void)f(counting<float>(5, 3));
    FAIL("no error");
  } catch (const xsym::shape_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("cannot reshape an array of shape (5, 3) (15 elements) into shape (-1, 2, 3)") != std::string::npos);
  }
  CHECK_THROWS_WITH(xsym::reshape(x, {-1, -1}), Catch::Contains("at most one extent can be -1"));
}

// Extents whose product passes 2^63 wrapped around: a reshape of 4 elements into (2^62 + 1, 4)
// passed its size check, and zeros of (2^32, 2^32) came out empty.
TEST_CASE("reshape and alloc extents whose product overflows are errors naming the node", "[slicing]") {
  auto x = xsym::vector<double>("x");
  auto r = xsym::function("r", xsym::inputs(x), xsym::reshape(x, {(std::int64_t{1} << 62) + 1, 4}));
  CHECK_THROWS_WITH(r(xt::xtensor<double, 1>{1, 2, 3, 4}),
                    Catch::Contains("Reshape{2}(x)") && Catch::Contains("cannot reshape an array of shape (4,)"));
  auto z = xsym::function("z", xsym::inputs(), xsym::zeros<double>({std::int64_t{1} << 32, std::int64_t{1} << 32}));
  CHECK_THROWS_WITH(z(), Catch::Contains("Alloc(") && Catch::Contains("an array of shape (4294967296, 4294967296) of "
                                                                      "float64 takes more bytes than an array can address"));
  auto ok = xsym::function("ok", xsym::inputs(x), xsym::reshape(x, {2, 2}));
  CHECK(ok(xt::xtensor<double, 1>{1, 2, 3, 4})(1, 0) == 3);
}

TEST_CASE("concatenate, stack and split are numpy's, dtypes promoted", "[slicing][join]") {
  auto a = xsym::matrix<std::int32_t>("a");
  auto b = xsym::matrix<std::int32_t>("b");
  auto c = xsym::matrix<double>("c");
  auto f = xsym::function("f", xsym::inputs(a, b, c),
                          xsym::outputs(xsym::concatenate({a, b}, 1), xsym::stack({a, a}, 2),
                                        xsym::concatenate({xsym::cast<double>(a), c}, 0)));
  const xt::xtensor<std::int32_t, 2> A = {{1, 2}, {3, 4}};
  const xt::xtensor<std::int32_t, 2> B = {{5}, {6}};
  const xt::xtensor<double, 2> C = {{0.5, 1.5}};
  auto [ab, st, ac] = f(A, B, C);
  CHECK((ab == xt::xtensor<std::int32_t, 2>{{1, 2, 5}, {3, 4, 6}}));
  REQUIRE(st.shape() == (std::array<std::size_t, 3>{2, 2, 2}));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j) CHECK((st(i, j, 0) == A(i, j) && st(i, j, 1) == A(i, j)));
  CHECK((ac == xt::xtensor<double, 2>{{1, 2}, {3, 4}, {0.5, 1.5}}));
  try {
    (void)f(A, xt::xtensor<std::int32_t, 2>{{5}}, C);
    FAIL("no error");
  } catch (const xsym::shape_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("Join{axis=1}") != std::string::npos);
    CHECK(what.find("have shapes (2, 2), (1, 1), which differ in axis 0") != std::string::npos);
  }
  auto v = xsym::vector<float>("v");
  const auto parts = xsym::split(v, {2, -1});
  auto g = xsym::function("g", xsym::inputs(v), xsym::outputs(parts[0], parts[1], parts[2]));
  auto [p0, p1, p2] = g(xt::xtensor<float, 1>{1, 2, 3, 4, 5});
  CHECK((p0 == xt::xtensor<float, 1>{1, 2}));
  CHECK((p1 == xt::xtensor<float, 1>{3, 4}));
  CHECK((p2 == xt::xtensor<float, 1>{5}));
}

TEST_CASE("slices, set/inc_subtensor, reshape and joins have their gradients", "[slicing][grad]") {
  std::mt19937 rng(36);
  auto x = xsym::matrix<double>("x");
  auto y = xsym::matrix<double>("y");
  auto r = xsym::vector<double>("r");
  const auto X = uniform<2>(rng, {5, 4}, -2, 2);
  const auto Y = uniform<2>(rng, {2, 2}, -2, 2);
  const auto Rv = uniform<1>(rng, {2}, -2, 2);
  check_grad("x[1:-1, ::-2]", weighted<2>(rng, sqr(x(range(1, -1), range(_, _, -2))), {3, 2}), at(x, X));
  check_grad("x[3] and x[:, -1]", weighted<1>(rng, exp(x(3)) + 0.5 * x(all(), -1)(range(_, 4)), {4}), at(x, X));
  const auto region = x(range(4, 0, -2), range(1, 3));
  check_grad("set_subtensor", weighted<2>(rng, sqr(xsym::set_subtensor(region, y * y)), {5, 4}), at(x, X), at(y, Y));
  check_grad("inc_subtensor, a row broadcast", weighted<2>(rng, sqr(xsym::inc_subtensor(region, r)), {5, 4}), at(x, X),
             at(r, Rv));
  check_grad("reshape", weighted<3>(rng, sqr(xsym::reshape(x.T(), {2, -1, 5})), {2, 2, 5}), at(x, X));
  check_grad("flatten", weighted<1>(rng, tanh(xsym::flatten(x)), {20}), at(x, X));
  check_grad("concatenate", weighted<2>(rng, sqr(xsym::concatenate({x, y * 3.0, x}, 0)), {12, 4}), at(x, X),
             at(y, uniform<2>(rng, {2, 4}, -2, 2)));
  check_grad("stack", weighted<3>(rng, sqr(xsym::stack({x, exp(x)}, 1)), {5, 2, 4}), at(x, X));
  const auto parts = xsym::split(x, {1, 3}, 1);
  check_grad("split", weighted<2>(rng, sqr(parts[0]) + parts[1](all(), range(_, 1)) * parts[2], {5, 1}), at(x, X));
}
