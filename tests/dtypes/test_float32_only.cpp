// A program whose expressions are all float32 (and the bool of comparisons) gets the kernels
// of those two element types only, and everything it does still runs: the seeds' training
// step with its gradient in every mode, reductions, a switch on a float condition. This binary
// must make no expression of another element type, or the check below proves nothing.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {
struct config_guard {
  config_guard() { xsym::config.reset(); }
  ~config_guard() { xsym::config.reset(); }
};

void check_only_float32_and_bool() {
  CHECK(xsym::cpu::has_kernels(xsym::dtype::float32));
  CHECK(xsym::cpu::has_kernels(xsym::dtype::bool_));
  CHECK_FALSE(xsym::cpu::has_kernels(xsym::dtype::int32));
  CHECK_FALSE(xsym::cpu::has_kernels(xsym::dtype::int64));
  CHECK_FALSE(xsym::cpu::has_kernels(xsym::dtype::float64));
}
}  // namespace

TEST_CASE("a float32 program trains in every mode on float32 and bool kernels alone", "[dtypes]") {
  config_guard guard;
  const std::size_t n = 37, feats = 11;  // odd sizes: vector bodies and scalar tails
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  xt::xtensor<float, 2> X = xt::empty<float>({n, feats});
  xt::xtensor<float, 1> Y = xt::empty<float>({n}), w0 = xt::empty<float>({feats});
  for (auto& v : X) v = normal(rng);
  for (std::size_t i = 0; i < n; ++i) Y(i) = static_cast<float>(i % 3 == 0);
  for (auto& v : w0) v = normal(rng);

  // One step in float64 loops: p = sigmoid(X w + b), the weights' gradient with decay.
  const double b0 = 0.25;
  std::vector<double> p(n), w_want(feats), g(n);
  double gb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double z = b0;
    for (std::size_t j = 0; j < feats; ++j) z += double(X(i, j)) * double(w0(j));
    p[i] = 1 / (1 + std::exp(-z));
    g[i] = (p[i] - Y(i)) / double(n);
    gb += g[i];
  }
  for (std::size_t j = 0; j < feats; ++j) {
    double gw = 0.02 * double(w0(j));
    for (std::size_t i = 0; i < n; ++i) gw += double(X(i, j)) * g[i];
    w_want[j] = double(w0(j)) - 0.1 * gw;
  }

  for (const char* mode : {"FAST_RUN", "FAST_COMPILE", "DebugMode", "NanGuardMode"}) {
    INFO("mode " << mode);
    auto x = xsym::matrix<float>("x");
    auto y = xsym::vector<float>("y");
    auto w = xsym::shared(w0, "w");
    auto b = xsym::shared(static_cast<float>(b0), "b");
    auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
    auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
    auto cost = mean(xent) + 0.01 * sum(w * w);
    auto [gw, gbias] = xsym::grad(cost, w, b);
    auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                                xsym::updates(xsym::update(w, w - 0.1 * gw), xsym::update(b, b - 0.1 * gbias)),
                                xsym::mode(mode),
                                xsym::profile(std::make_shared<xsym::profile_stats>("dtypes", false)));
    const auto [pred, loss] = train(X, Y);
    const auto w_got = w.get_value();
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(pred(i) == (p[i] > 0.5));
      const double want = Y(i) ? -std::log(p[i]) : -std::log1p(-p[i]);
      CHECK(loss(i) == Approx(want).epsilon(1e-4).margin(1e-6));
    }
    for (std::size_t j = 0; j < feats; ++j) CHECK(w_got(j) == Approx(w_want[j]).epsilon(1e-5).margin(1e-6));
    CHECK(b.get_value()() == Approx(b0 - 0.1 * gb).epsilon(1e-5).margin(1e-6));
  }
  check_only_float32_and_bool();
}

TEST_CASE("reductions and a switch on a float condition need no other element type", "[dtypes]") {
  config_guard guard;
  auto m = xsym::matrix<float>("m");
  auto f = xsym::function("reduce", xsym::inputs(m),
                          xsym::outputs(max(m, 0), min(m, 1), mean(m), sum(m, 1), switch_(m, m * 2, -1.0f)));
  const xt::xtensor<float, 2> M{{1.5f, 0.0f, -2.0f}, {4.0f, -0.5f, 0.25f}};
  const auto [mx, mn, avg, rows, sw] = f(M);
  for (std::size_t j = 0; j < 3; ++j) CHECK(mx(j) == std::max(M(0, j), M(1, j)));
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(mn(i) == std::min({M(i, 0), M(i, 1), M(i, 2)}));
    CHECK(rows(i) == Approx(double(M(i, 0)) + M(i, 1) + M(i, 2)));
    for (std::size_t j = 0; j < 3; ++j) CHECK(sw(i, j) == (M(i, j) != 0 ? 2 * M(i, j) : -1.0f));
  }
  CHECK(avg == Approx((1.5 + 0.0 - 2.0 + 4.0 - 0.5 + 0.25) / 6));
  check_only_float32_and_bool();
}

TEST_CASE("a node of an element type the program never made is an error when the function is built",
          "[dtypes]") {
  // Only the graph API below var<T, N> can make such a node: an int32 step between floats.
  config_guard guard;
  auto v = xsym::vector<float>("v");
  const xsym::var_ptr through_int =
      xsym::detail::cast(xsym::detail::cast(v.node(), xsym::dtype::int32), xsym::dtype::float32);
  const xsym::var<float, 1> rounded(through_int);
  std::string message;
  try {
    auto f = xsym::function("round", xsym::inputs(v), rounded, xsym::mode("FAST_COMPILE"));
    (void)f;
  } catch (const std::logic_error& e) {
    message = e.what();
  }
  CHECK(message.find("no CPU kernels for int32") != std::string::npos);
  check_only_float32_and_bool();
}
