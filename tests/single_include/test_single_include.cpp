// The generated single header on its own: this file sees single_include/ and xtensor,
// never include/, so it fails to build if the amalgamation misses a header.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

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
