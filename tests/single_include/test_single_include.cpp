// The generated single header on its own: this file sees single_include/ and xtensor,
// never include/, so it fails to build if the amalgamation misses a header.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>
#include <xtensor/xview.hpp>

#include <sstream>

#if __has_include(<xsym/config/config.hpp>)
#error "test_single_include must not see the in-tree headers (include/): link it without xsym::xsym"
#endif
#ifndef XSYM_VERSION_STRING
#error "the single header lost version.hpp"
#endif

TEST_CASE("single header: (x + y + z) * 2 is one fused node with the right values", "[single_include]") {
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto z = xsym::vector<double>("z");
  auto f = xsym::function("f", xsym::inputs(x, y, z), xsym::outputs((x + y + z) * 2));

  auto [r] = f(xt::xtensor<double, 1>{1, 10}, xt::xtensor<double, 1>{2, 20}, xt::xtensor<double, 1>{3, 30});
  REQUIRE(r.shape(0) == 2);
  CHECK(r(0) == 12.0);
  CHECK(r(1) == 120.0);
  REQUIRE(f.toposort().size() == 1);
  CHECK(f.toposort()[0].class_name() == "xsym::Elemwise");
}

TEST_CASE("single header: sum and dot", "[single_include]") {
  auto a = xsym::matrix<float>("a");
  auto v = xsym::vector<float>("v");
  auto f = xsym::function("sum_dot", xsym::inputs(a, v), xsym::outputs(sum(v), dot(a, v)));

  const xt::xtensor<float, 2> A = {{1, 2, 3}, {4, 5, 6}};
  const xt::xtensor<float, 1> V = {1, 0, -1};
  auto [s, d] = f(A, V);
  CHECK(s == 0.0f);
  REQUIRE(d.shape(0) == 2);
  CHECK(d(0) == -2.0f);
  CHECK(d(1) == -2.0f);
}

TEST_CASE("single header: a profiled function reports in Theano's format", "[single_include]") {
  auto x = xsym::vector<double>("x");
  auto stats = std::make_shared<xsym::profile_stats>("single header", /*print_at_exit=*/false);
  auto f = xsym::function("g", xsym::inputs(x), exp(x) + 1, xsym::profile(stats));
  for (int i = 0; i < 3; ++i) {
    const xt::xtensor<double, 1> r = f(xt::xtensor<double, 1>{0, 0});
    CHECK(r(1) == 2.0);
  }
  std::ostringstream os;
  stats->print_summary(os);
  CHECK(os.str().find("Message: single header") != std::string::npos);
  if (xsym::profiling_compiled_in) CHECK(os.str().find("Time in 3 calls to Function.__call__") != std::string::npos);
}

// With XTENSOR_USE_XSIMD, xtensor 0.24's own assignment of a view of a view with a newaxis reads
// from its container's first element. set_value and the conversions of arguments read such a
// view, alone or inside an expression, from the view's first element.
TEST_CASE("single header: a view of a view with a newaxis is read from its own start", "[single_include]") {
  xt::xtensor<float, 3> a3 = xt::empty<float>({2, 3, 4});
  for (std::size_t i = 0; i < a3.size(); ++i) a3.data()[i] = static_cast<float>(i) + 0.5f;
  auto v = xt::view(xt::view(a3, 1, 2), xt::newaxis(), xt::all());  // shape (1, 4): a3(1, 2, :)
  const auto expect = [&](const auto& got, float scale, const char* what) {
    INFO(what);
    REQUIRE(got.shape()[0] == 1);
    REQUIRE(got.shape()[1] == 4);
    for (std::size_t j = 0; j < 4; ++j) CHECK(static_cast<double>(got(0, j)) == static_cast<double>(a3(1, 2, j) * scale));
  };
  auto w = xsym::shared(xt::xtensor<float, 2>(xt::zeros<float>({1, 4})), "w");
  w.set_value(v);
  expect(w.get_value(), 1, "set_value(view)");
  w.set_value(v * 1.0f);
  expect(w.get_value(), 1, "set_value(view * 1)");
  auto m = xsym::matrix<float>("m");
  auto md = xsym::matrix<double>("md");
  auto f = xsym::function("twice", xsym::inputs(m), m * 2);
  auto fd = xsym::function("twice_d", xsym::inputs(md), md * 2);
  expect(f(v), 2, "argument: the view");
  expect(f(v * 1.0f), 2, "argument: view * 1");
  expect(fd(v), 2, "argument: the view, converted to float64");
}
