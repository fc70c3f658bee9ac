// compute_test_value: nodes computed on test values as the graph is built, so a bad shape is
// reported at the line that made the node; the four settings; the line kept to the first call.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "compile/compile_util.hpp"

namespace {
using xsym_test::message_of;

std::string here(int line) { return std::string(__FILE__) + ":" + std::to_string(line) + ":"; }

// What f writes to stderr (the warnings go there).
std::string stderr_of(const std::function<void()>& f) {
  std::fflush(stderr);
  char path[] = "/tmp/xsym-test-values-XXXXXX";
  const int fd = ::mkstemp(path);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  return text;
}
}  // namespace

TEST_CASE("compute_test_value=raise reports a shape error at the line that made the node", "[test_value]") {
  xsym_test::clean_config clean;
  xsym::config.compute_test_value = "raise";
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto m = xsym::matrix<double>("m");
  xsym::set_test_value(x, xt::xtensor<double, 1>{1, 2, 3});
  xsym::set_test_value(y, xt::xtensor<double, 1>{1, 2});
  xsym::set_test_value(m, xt::xtensor<double, 2>{{1, 2}, {3, 4}});

  const auto z = xsym::exp(x) * 2.0;  // fine: computed now
  int line = __LINE__ + 1;
  std::string msg = message_of([&] { auto bad = z + y; });
  CHECK(msg.find("compute_test_value") != std::string::npos);
  CHECK(msg.find("Elemwise{add,no_inplace}") != std::string::npos);
  CHECK(msg.find(here(line)) != std::string::npos);
  CHECK(msg.find("(3,) (2,)") != std::string::npos);
  CHECK_THROWS_AS([&] { auto bad = z + y; }(), xsym::shape_error);

  line = __LINE__ + 1;
  msg = message_of([&] { auto bad = xsym::dot(m, x); });
  CHECK(msg.find("dot") != std::string::npos);
  CHECK(msg.find(here(line)) != std::string::npos);
  CHECK(msg.find("(2, 2) (3,)") != std::string::npos);

  line = __LINE__ + 1;
  msg = message_of([&] { auto bad = xsym::maximum(x, y); });
  CHECK(msg.find(here(line)) != std::string::npos);
  line = __LINE__ + 1;
  msg = message_of([&] { auto bad = 1.0 - xsym::switch_(x > 0.0, y, x); });
  CHECK(msg.find(here(line)) != std::string::npos);
  CHECK(msg.find("Elemwise{switch,no_inplace}") != std::string::npos);
}

TEST_CASE("test values equal loops over the test values; shared variables and constants take their values",
          "[test_value]") {
  xsym_test::clean_config clean;
  xsym::config.compute_test_value = "raise";
  auto a = xsym::matrix<double>("a");
  auto r = xsym::row<double>("r");
  xt::xtensor<double, 2> av = {{0.5, -1, 2}, {3, 0.25, -2}};
  xt::xtensor<double, 2> rv = {{1, 2, 3}};
  xt::xtensor<double, 1> wv = {0.1, 0.2, 0.3};
  xsym::set_test_value(a, av);
  xsym::set_test_value(r, rv);
  auto w = xsym::shared(wv, "w");
  const auto e = xsym::tanh(a * r) - 0.5;  // broadcasting of a row
  const auto h = xsym::dot(e, w);
  const auto s = xsym::sum(h);
  const auto cols = xsym::sum(e, 0);
  const auto ev = xsym::get_test_value(e);
  const auto hv = xsym::get_test_value(h);
  const auto cv = xsym::get_test_value(cols);
  double total = 0;
  for (std::size_t i = 0; i < 2; ++i) {
    double hi = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      const double want = std::tanh(av(i, j) * rv(0, j)) - 0.5;
      CHECK(ev(i, j) == Approx(want).epsilon(1e-15));
      hi += want * wv(j);
    }
    CHECK(hv(i) == Approx(hi).epsilon(1e-14));
    total += hi;
  }
  for (std::size_t j = 0; j < 3; ++j)
    CHECK(cv(j) == Approx(std::tanh(av(0, j) * rv(0, j)) + std::tanh(av(1, j) * rv(0, j)) - 1.0).epsilon(1e-14));
  CHECK(xsym::get_test_value(s)() == Approx(total).epsilon(1e-14));
  const bool same = xsym::get_test_value(w) == wv;
  CHECK(same);

  // A changed test value affects the nodes built afterwards, not those built before.
  xsym::set_test_value(a, xt::xtensor<double, 2>{{0, 0, 0}, {0, 0, 0}});
  const auto e2 = xsym::tanh(a * r) - 0.5;
  CHECK(xsym::get_test_value(e2)(1, 2) == -0.5);
  CHECK(xsym::get_test_value(e)(1, 2) == ev(1, 2));
}

TEST_CASE("gradients are computed on the test values too", "[test_value]") {
  xsym_test::clean_config clean;
  xsym::config.compute_test_value = "raise";
  auto X = xsym::matrix<double>("X");
  auto y = xsym::vector<double>("y");
  xt::xtensor<double, 2> Xv = {{1, 2}, {3, -1}, {0.5, 0.25}};
  xt::xtensor<double, 1> yv = {1, -2, 0.5};
  xt::xtensor<double, 1> wv = {0.3, -0.7};
  xsym::set_test_value(X, Xv);
  xsym::set_test_value(y, yv);
  auto w = xsym::shared(wv, "w");
  const auto cost = xsym::sum(xsym::sqr(xsym::dot(X, w) - y));
  const auto gw = std::get<0>(xsym::grad(cost, w));
  const auto g = xsym::get_test_value(gw);
  for (std::size_t j = 0; j < 2; ++j) {
    double want = 0;  // d/dw_j sum_i (X_i . w - y_i)^2 = 2 sum_i (X_i . w - y_i) X_ij
    for (std::size_t i = 0; i < 3; ++i) want += 2 * (Xv(i, 0) * wv(0) + Xv(i, 1) * wv(1) - yv(i)) * Xv(i, j);
    CHECK(g(j) == Approx(want).epsilon(1e-14));
  }
  // The graph still compiles and runs as usual (rewrites make nodes of their own, untested).
  auto f = xsym::function("f", xsym::inputs(X, y), gw);
  CHECK(xt::allclose(f(Xv, yv), g, 1e-14, 0));
}

TEST_CASE("compute_test_value: an input without a test value raises, warns or is ignored", "[test_value]") {
  xsym_test::clean_config clean;
  auto x = xsym::vector<double>("x");
  auto u = xsym::vector<double>("u");
  xsym::set_test_value(x, xt::xtensor<double, 1>{1, 2, 3});

  xsym::config.compute_test_value = "raise";
  const int line = __LINE__ + 1;
  const std::string msg = message_of([&] { auto bad = x - u; });
  CHECK(msg.find("'u'") != std::string::npos);
  CHECK(msg.find("no test value") != std::string::npos);
  CHECK(msg.find(here(line)) != std::string::npos);
  CHECK_THROWS_AS([&] { auto bad = x - u; }(), xsym::graph_error);

  xsym::config.compute_test_value = "warn";
  std::string err = stderr_of([&] {
    auto d = x - u;
    auto d2 = d * 2.0;  // warned once, at the node that reads u
    CHECK_THROWS_AS(xsym::get_test_value(d2), xsym::graph_error);
  });
  CHECK(err.find("'u' has no test value") != std::string::npos);
  CHECK(err.find("Elemwise{sub,no_inplace}") != std::string::npos);
  CHECK(err.find("Elemwise{mul") == std::string::npos);

  xsym::config.compute_test_value = "ignore";
  err = stderr_of([&] {
    auto d = x - u;
    CHECK_THROWS_AS(xsym::get_test_value(d), xsym::graph_error);
    auto ok = x * 2.0;  // inputs with test values are still computed
    CHECK(xsym::get_test_value(ok)(2) == 6.0);
  });
  CHECK(err.empty());

  xsym::config.compute_test_value = "off";
  auto y = xsym::vector<double>("y");
  xsym::set_test_value(y, xt::xtensor<double, 1>{1, 2});
  auto never = x + y;  // not computed: no error at build
  CHECK_THROWS_AS(xsym::get_test_value(never), xsym::graph_error);
}

TEST_CASE("compute_test_value through XSYM_FLAGS, an rc file and code; a bad value is named", "[test_value]") {
  xsym_test::clean_config clean;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  xsym::set_test_value(x, xt::xtensor<double, 1>{1, 2, 3});
  xsym::set_test_value(y, xt::xtensor<double, 1>{1, 2});

  ::setenv("XSYM_FLAGS", "compute_test_value=raise", 1);
  xsym::config.reset();
  CHECK_THROWS_AS([&] { auto bad = x + y; }(), xsym::shape_error);

  ::unsetenv("XSYM_FLAGS");
  const std::string rc = "/tmp/xsym-test-values-" + std::to_string(::getpid()) + ".rc";
  {
    std::ofstream(rc) << "[global]\ncompute_test_value = warn\n";
  }
  ::setenv("XSYMRC", rc.c_str(), 1);
  xsym::config.reset();
  CHECK(xsym::config.compute_test_value == "warn");
  CHECK_THROWS_AS([&] { auto bad = x + y; }(), xsym::shape_error);  // the values exist: still an error
  std::remove(rc.c_str());
  ::setenv("XSYMRC", "", 1);
  xsym::config.reset();

  const std::string bad = message_of([] { xsym::config.set("compute_test_value", "maybe"); });
  CHECK(bad.find("compute_test_value") != std::string::npos);
  CHECK(bad.find("off, ignore, warn, raise") != std::string::npos);
}

TEST_CASE("set_test_value refuses a value the variable cannot hold", "[test_value]") {
  xsym_test::clean_config clean;
  auto r = xsym::row<double>("r");
  const std::string msg = message_of([&] { xsym::set_test_value(r, xt::xtensor<double, 2>{{1}, {2}}); });
  CHECK(msg.find("'r'") != std::string::npos);
  CHECK(msg.find("broadcastable in dimension 0") != std::string::npos);
  auto x = xsym::vector<double>("x");
  CHECK_THROWS_WITH(xsym::set_test_value(x, xt::xtensor<double, 2>{{1}}), Catch::Contains("rank 1"));
  CHECK_THROWS_WITH(xsym::get_test_value(x), Catch::Contains("'x' has no test value"));
}

TEST_CASE("without test values, an error at the first call names the line that made the node", "[test_value]") {
  xsym_test::clean_config clean;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  const int line = __LINE__ + 1;
  const auto z = (x + y) * 2.0;
  for (const char* excluding : {"", "fusion:inplace"}) {
    xsym::config.optimizer_excluding = excluding;
    auto f = xsym::function("f", xsym::inputs(x, y), z);
    const std::string msg = message_of([&] { f(xt::xtensor<double, 1>{1, 2, 3}, xt::xtensor<double, 1>{1, 2}); });
    INFO(msg);
    CHECK(msg.find("made at " + here(line)) != std::string::npos);
  }
}
