// set_subtensor_fusion: set_subtensor(x[slices], e) with e elementwise is one IncSubtensor node
// that runs e into its output's region. Each result is checked bit for bit against the graph
// with the rewrite excluded (two nodes) and against a loop written from numpy's definition.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <xsym/xsym.hpp>

#include "compile_util.hpp"

using xsym::range;
using xsym::placeholders::_;

// Named, not anonymous: the area compiles in batches of four files (unity builds).
namespace set_fusion_test {

template <class T, std::size_t N>
xt::xtensor<T, N> random_array(const std::array<std::size_t, N>& shape, std::mt19937& rng) {
  xt::xtensor<T, N> a = xt::empty<T>(shape);
  std::uniform_int_distribution<int> d(-50, 50);
  for (auto& e : a) e = static_cast<T>(d(rng)) / static_cast<T>(std::is_integral_v<T> ? 1 : 8);
  return a;
}

template <class F>
std::vector<std::string> names(const F& f) {
  std::vector<std::string> n;
  for (const auto& node : f.toposort()) n.push_back(node.op_name());
  return n;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// The 5-point stencil u + r (up + down + left + right - 4 u) on the interior of a grid, by loops.
template <class T>
xt::xtensor<T, 2> stencil_loop(const xt::xtensor<T, 2>& u, T r) {
  xt::xtensor<T, 2> out = u;
  for (std::size_t i = 1; i + 1 < u.shape(0); ++i)
    for (std::size_t j = 1; j + 1 < u.shape(1); ++j)
      out(i, j) = u(i, j) + r * ((u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1)) - T(4) * u(i, j));
  return out;
}

template <class T>
void check_stencil() {
  xsym_test::clean_config guard;
  std::mt19937 rng(11);
  const T r = std::is_integral_v<T> ? T(2) : T(0.2);
  // Interiors of one element, rows shorter than a batch, rows with a tail, rows of a few hundred.
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{3, 3}, {4, 9}, {7, 37}, {33, 300}, {130, 17}}) {
    auto x = xsym::matrix<T>("x");
    const auto inner = x(range(1, -1), range(1, -1));
    const auto up = x(range(_, -2), range(1, -1)), down = x(range(2, _), range(1, -1));
    const auto left = x(range(1, -1), range(_, -2)), right = x(range(1, -1), range(2, _));
    auto next = xsym::set_subtensor(inner, inner + r * (up + down + left + right - T(4) * inner));
    auto fused = xsym::function("f", xsym::inputs(x), next);
    auto two = xsym::function("f", xsym::inputs(x), next, xsym::optimizer_excluding("set_subtensor_fusion"));
    const auto fn = names(fused), tn = names(two);
    CHECK(std::count_if(fn.begin(), fn.end(), [](const std::string& s) { return starts_with(s, "Elemwise"); }) == 0);
    CHECK(std::count_if(fn.begin(), fn.end(), [](const std::string& s) {
            return starts_with(s, "IncSubtensor{Set;1:-1:, 1:-1:;Composite{");
          }) == 1);
    CHECK(std::count(tn.begin(), tn.end(), "IncSubtensor{Set;1:-1:, 1:-1:}") == 1);
    const auto X = random_array<T, 2>({rows, cols}, rng);
    const xt::xtensor<T, 2> got = fused(X), want = two(X);
    INFO(rows << " x " << cols);
    REQUIRE(got.shape() == X.shape());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0);
    const auto loop = stencil_loop<T>(X, r);
    double worst = 0;
    for (std::size_t k = 0; k < X.size(); ++k)
      worst = std::max(worst, std::abs(static_cast<double>(got.data()[k]) - static_cast<double>(loop.data()[k])));
    CHECK(worst <= (std::is_integral_v<T> ? 0.0 : 1e-4 * 50));
    // The edge is x's, untouched.
    for (std::size_t j = 0; j < cols; ++j) CHECK((got(0, j) == X(0, j) && got(rows - 1, j) == X(rows - 1, j)));
    for (std::size_t i = 0; i < rows; ++i) CHECK((got(i, 0) == X(i, 0) && got(i, cols - 1) == X(i, cols - 1)));
  }
}


TEST_CASE("set_subtensor of an elementwise value is one node that writes the region, numpy's result",
          "[compile][set_fusion]") {
  check_stencil<float>();
  check_stencil<double>();
  check_stencil<std::int32_t>();
}

TEST_CASE("set_subtensor_fusion: strided, reversed, indexed and 3-D regions, broadcast values",
          "[compile][set_fusion]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(5);
  auto x = xsym::matrix<double>("x");
  auto y = xsym::matrix<double>("y");
  auto v = xsym::row<double>("v");  // (1, n): broadcast along the region's rows
  auto c = xsym::tensor3<float>("c");
  const auto X = random_array<double, 2>({9, 300}, rng), Y = random_array<double, 2>({9, 300}, rng);
  const auto V = random_array<double, 2>({1, 150}, rng);
  const auto C = random_array<float, 3>({4, 6, 301}, rng);
  // Rows with a step (rows strided, elements adjacent), a reversed last axis (the value is made
  // and set), a row vector broadcast into the region, an index dropping an axis, a 3-D interior.
  auto outs = [&] {
    return xsym::outputs(xsym::set_subtensor(x(range(_, _, 2), range(1, _)), exp(y(range(_, _, 2), range(_, -1))) * 0.5),
                         xsym::set_subtensor(x(range(_, _, 1), range(_, _, -1)), x * y + 1.0),
                         xsym::set_subtensor(x(range(2, 5), range(0, 150)), v * 3.0 - 1.0),
                         xsym::set_subtensor(x(4), log(abs(y(3)) + 1.0)),
                         xsym::set_subtensor(c(range(1, -1), range(1, -1), range(1, -1)),
                                             c(range(2, _), range(1, -1), range(1, -1)) * 2.0f +
                                                 c(range(1, -1), range(_, -2), range(2, _))));
  };
  auto fused = xsym::function("f", xsym::inputs(x, y, v, c), outs());
  auto two = xsym::function("f", xsym::inputs(x, y, v, c), outs(), xsym::optimizer_excluding("set_subtensor_fusion"));
  const auto fn = names(fused);
  CHECK(std::count_if(fn.begin(), fn.end(), [](const std::string& s) { return s.find(";Composite{") != std::string::npos; }) == 5);
  auto got = fused(X, Y, V, C);
  auto want = two(X, Y, V, C);
  auto same = [](const auto& a, const auto& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(*a.data())) == 0;
  };
  CHECK(same(std::get<0>(got), std::get<0>(want)));
  CHECK(same(std::get<1>(got), std::get<1>(want)));
  CHECK(same(std::get<2>(got), std::get<2>(want)));
  CHECK(same(std::get<3>(got), std::get<3>(want)));
  CHECK(same(std::get<4>(got), std::get<4>(want)));
  // Against numpy's definition, by loops.
  xt::xtensor<double, 2> w0 = X, w1 = X, w2 = X, w3 = X;
  for (std::size_t i = 0; i < 9; i += 2)
    for (std::size_t j = 1; j < 300; ++j) w0(i, j) = std::exp(Y(i, j - 1)) * 0.5;
  for (std::size_t i = 0; i < 9; ++i)
    for (std::size_t j = 0; j < 300; ++j) w1(i, 299 - j) = X(i, j) * Y(i, j) + 1.0;
  for (std::size_t i = 2; i < 5; ++i)
    for (std::size_t j = 0; j < 150; ++j) w2(i, j) = V(0, j) * 3.0 - 1.0;
  for (std::size_t j = 0; j < 300; ++j) w3(4, j) = std::log(std::abs(Y(3, j)) + 1.0);
  xt::xtensor<float, 3> w4 = C;
  for (std::size_t i = 1; i < 3; ++i)
    for (std::size_t j = 1; j < 5; ++j)
      for (std::size_t k = 1; k < 300; ++k) w4(i, j, k) = C(i + 1, j, k) * 2.0f + C(i, j - 1, k + 1);
  auto close = [](const auto& a, const auto& b, double tol) {
    double worst = 0;
    for (std::size_t k = 0; k < a.size(); ++k)
      worst = std::max(worst, std::abs(static_cast<double>(a.data()[k]) - static_cast<double>(b.data()[k])));
    return worst <= tol;
  };
  CHECK(close(std::get<0>(got), w0, 1e-12));
  CHECK(close(std::get<1>(got), w1, 1e-12));
  CHECK(close(std::get<2>(got), w2, 1e-12));
  CHECK(close(std::get<3>(got), w3, 1e-12));
  CHECK(close(std::get<4>(got), w4, 1e-5));
  // A value of the wrong shape: a shape_error naming the node and both shapes.
  const auto bad = random_array<double, 2>({1, 149}, rng);
  const std::string what = xsym_test::message_of([&] { (void)fused(X, Y, bad, C); });
  INFO(what);
  CHECK(what.find("IncSubtensor{Set;2:5:, 0:150:;Composite{") != std::string::npos);
  CHECK(what.find("(1, 149)") != std::string::npos);
  CHECK(what.find("(3, 150)") != std::string::npos);
}

TEST_CASE("set_subtensor_fusion in place on an intermediate, and where the value reads it", "[compile][set_fusion]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(3);
  auto x = xsym::matrix<double>("x");
  auto y = xsym::matrix<double>("y");
  const auto t = x * 2.0;
  auto outs = [&] {
    return xsym::outputs(
        xsym::set_subtensor(t(range(1, 3)), exp(y(range(0, 2))) + 1.0),           // into t's buffer
        xsym::set_subtensor((x + 1.0)(range(_, _)), (x + 1.0) * (x + 1.0) - 3.0),  // the value reads all of it
        xsym::set_subtensor((y - 1.0)(range(1, _)), (y - 1.0)(range(_, -1)) * 0.5),  // a shifted view of it
        xsym::set_subtensor((x - 2.0)(range(_, _, -1)), x - 2.0));  // x's own slot as the value: not fused
  };
  auto fused = xsym::function("f", xsym::inputs(x, y), outs());
  auto two = xsym::function("f", xsym::inputs(x, y), outs(), xsym::optimizer_excluding("set_subtensor_fusion"));
  const auto fn = names(fused);
  CHECK(std::count_if(fn.begin(), fn.end(), [](const std::string& s) { return starts_with(s, "IncSubtensor{InplaceSet;1:3:;Composite{"); }) == 1);
  CHECK(std::count(fn.begin(), fn.end(), "IncSubtensor{InplaceSet;::-1}") == 1);  // x's slot read as the value too
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{4, 5}, {5, 600}}) {
    const auto X = random_array<double, 2>({rows, cols}, rng), Y = random_array<double, 2>({rows, cols}, rng);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the first one's buffers
      auto [a, b, c, d] = fused(X, Y);
      auto [wa, wb, wc, wd] = two(X, Y);
      CHECK(bool(a == wa));
      CHECK(bool(b == wb));
      CHECK(bool(c == wc));
      CHECK(bool(d == wd));
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          const double xi = X(i, j) + 1.0;
          const double wa = i >= 1 && i < 3 ? std::exp(Y(i - 1, j)) + 1.0 : X(i, j) * 2.0;
          CHECK(std::abs(a(i, j) - wa) <= 1e-15 * std::abs(wa));  // xsimd's exp, not the libm's
          CHECK(b(i, j) == xi * xi - 3.0);
          CHECK(c(i, j) == (i >= 1 ? (Y(i - 1, j) - 1.0) * 0.5 : Y(i, j) - 1.0));
          CHECK(d(i, j) == X(rows - 1 - i, j) - 2.0);
        }
    }
  }
}

TEST_CASE("set_subtensor_fusion updates a shared grid; a failed call leaves it", "[compile][set_fusion]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(9);
  const auto start = random_array<float, 2>({40, 70}, rng);
  auto u = xsym::shared(start, "u");
  auto s = xsym::scalar<float>("s");
  const auto inner = u(range(1, -1), range(1, -1));
  auto next = xsym::set_subtensor(inner, inner + 0.2f * (u(range(_, -2), range(1, -1)) + u(range(2, _), range(1, -1)) +
                                                         u(range(1, -1), range(_, -2)) + u(range(1, -1), range(2, _)) -
                                                         4.0f * inner));
  // The check fails for s < 0 after the update's value is computed: u must not change.
  auto step = xsym::function("step", xsym::inputs(s), xsym::outputs(xsym::check(s, "s >= 0", s >= 0.0f)),
                             xsym::updates(xsym::update(u, next)));
  xt::xtensor<float, 2> want = start;
  for (int k = 0; k < 5; ++k) {
    (void)step(1.0f);
    want = stencil_loop<float>(want, 0.2f);
    const xt::xtensor<float, 2> now = u.get_value();
    CHECK(bool(now == want));
  }
  const xt::xtensor<float, 2> before = u.get_value();
  CHECK_THROWS(step(-1.0f));
  CHECK(bool(u.get_value() == before));
}

TEST_CASE("set_subtensor_fusion under DebugMode, cxx and profiling", "[compile][set_fusion][modes]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(2);
  auto x = xsym::matrix<float>("x");
  const auto X = random_array<float, 2>({20, 90}, rng);
  auto value = [&] { return tanh(x(range(2, _), range(_, -2))) * 3.0f - x(range(1, -1), range(2, _)); };
  auto plain = xsym::function("f", xsym::inputs(x), xsym::set_subtensor(x(range(1, -1), range(2, _)), value()));
  const xt::xtensor<float, 2> want = plain(X);
  auto debug = xsym::function("f", xsym::inputs(x), xsym::set_subtensor(x(range(1, -1), range(2, _)), value()),
                              xsym::mode("DebugMode"));
  CHECK(bool(xt::xtensor<float, 2>(debug(X)) == want));  // checked against the reference kernels
  auto report = [&](auto& f) {
    (void)f(X);
    std::ostringstream os;
    f.profile().print_summary(os);
    return os.str();
  };
  {
    auto stats = std::make_shared<xsym::profile_stats>("prof", false);
    auto f = xsym::function("prof", xsym::inputs(x), xsym::set_subtensor(x(range(1, -1), range(2, _)), value()),
                            xsym::profile(stats));
    const std::string text = report(f);
    INFO(text);
    CHECK(text.find("IncSubtensor{Set;1:-1:, 2::;Composite{") != std::string::npos);
    CHECK(text.find("    composite: ((tanh(i0) * i1) - i2)") != std::string::npos);
    CHECK(text.find("    absorbed: ") != std::string::npos);
  }
#ifdef XSYM_TEST_CXX
  {
    xsym_test::cxx_on on("set_fusion");
    auto stats = std::make_shared<xsym::profile_stats>("cxx", false);
    auto f = xsym::function("cxx", xsym::inputs(x), xsym::set_subtensor(x(range(1, -1), range(2, _)), value()),
                            xsym::profile(stats));
    CHECK(f.runtime()->compiled_kernels().kernels == 1);
    const xt::xtensor<float, 2> got = f(X);
    double worst = 0;  // the compiled loop may contract a product and a sum
    for (std::size_t k = 0; k < got.size(); ++k)
      worst = std::max(worst, std::abs(double(got.data()[k]) - double(want.data()[k])));
    CHECK(worst <= 1e-5);
    const std::string text = report(f);
    INFO(text);
    CHECK(text.find(" cxx ") != std::string::npos);
  }
#endif
}

#ifdef _OPENMP
TEST_CASE("set_subtensor_fusion gives the same bits on 1 to 4 threads", "[compile][set_fusion][openmp]") {
  REQUIRE(xsym::cpu::openmp_compiled_in);
  xsym_test::clean_config guard;
  std::mt19937 rng(4);
  const auto X = random_array<float, 2>({301, 517}, rng);
  auto x = xsym::matrix<float>("x");
  auto make = [&] {
    const auto inner = x(range(1, -1), range(1, -1));
    return xsym::function("f", xsym::inputs(x), xsym::set_subtensor(inner, inner + 0.2f * (x(range(_, -2), range(1, -1)) + x(range(2, _), range(1, -1)) - 2.0f * inner)));
  };
  const xt::xtensor<float, 2> serial = make()(X);
  xsym::config.openmp = true;
  xsym::config.openmp_elemwise_minsize = 1;
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);  // read when a function is built
    const xt::xtensor<float, 2> got = make()(X);
    CHECK(std::memcmp(got.data(), serial.data(), got.size() * sizeof(float)) == 0);
  }
  omp_set_num_threads(2);
  xsym::config.openmp = false;
}
#endif

}  // namespace set_fusion_test
