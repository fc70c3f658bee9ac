// DebugMode, NanGuardMode and MonitorMode: each catches what it promises, names the node,
// and leaves correct functions alone.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include "compile/compile_util.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

#include <xtensor/xadapt.hpp>

namespace {
struct hooks_guard {
  hooks_guard() { xsym::config.reset(); }
  ~hooks_guard() {
    xsym::cpu::testing::broken_simd_kernel().reset();
    xsym::config.reset();
  }
};

// A deliberately wrong rewrite: every add becomes a sub.
std::vector<xsym::var_ptr> add_becomes_sub(const std::vector<xsym::var_ptr>& roots) {
  return xsym::detail::rebuild(roots, [](const xsym::var_ptr& v, std::vector<xsym::var_ptr>& ins, bool changed) {
    if (v->kind == xsym::var_kind::apply && v->fn->kind == xsym::op_kind::elemwise && v->fn->scalar == xsym::scalar_op::add)
      return xsym::detail::elemwise(xsym::scalar_op::sub, ins);
    return xsym::detail::with_inputs(v, ins, changed);
  });
}

using xsym_test::message_of;
}  // namespace

TEST_CASE("DebugMode passes correct functions, with the seeds' example and the logistic regression", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), 10 * x, xsym::mode("DebugMode"));
  CHECK(f(xt::xtensor<double, 1>{5})(0) == 50.0);
  CHECK(f(xt::xtensor<double, 1>{0})(0) == 0.0);

  auto m = xsym::matrix<float>("m");
  auto y = xsym::vector<float>("y");
  auto w = xsym::shared(xt::xtensor<float, 1>{0.5f, -0.25f, 1.0f}, "w");
  auto b = xsym::shared(0.0f, "b");
  auto p = 1 / (1 + exp(-dot(m, w) - b));
  auto cost = mean(-y * log(p) - (1 - y) * log(1 - p)) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, b);
  auto train = xsym::function("train", xsym::inputs(m, y), xsym::outputs(p > 0.5, cost),
                              xsym::updates(xsym::update(w, w - 0.1 * gw), xsym::update(b, b - 0.1 * gb)),
                              xsym::debug_mode{});
  const xt::xtensor<float, 2> M{{1, 2, 3}, {0, -1, 2}, {2, 0, -1}, {1, 1, 1}};
  const xt::xtensor<float, 1> Y{1, 0, 1, 0};
  // The same steps in float64 loops: DebugMode must pass and give the right numbers.
  std::vector<double> W{0.5, -0.25, 1.0};
  double B = 0;
  for (int step = 0; step < 5; ++step) {
    INFO("step " << step);
    std::vector<double> P(4);
    double cost_want = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      double u = B;
      for (std::size_t j = 0; j < 3; ++j) u += double(M(i, j)) * W[j];
      P[i] = 1 / (1 + std::exp(-u));
      cost_want += (-double(Y(i)) * std::log(P[i]) - (1 - double(Y(i))) * std::log(1 - P[i])) / 4;
    }
    for (double e : W) cost_want += 0.01 * e * e;
    std::vector<double> GW(3, 0.0);
    double GB = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      const double d = (P[i] - double(Y(i))) / 4;
      for (std::size_t j = 0; j < 3; ++j) GW[j] += d * double(M(i, j));
      GB += d;
    }
    for (std::size_t j = 0; j < 3; ++j) W[j] -= 0.1 * (GW[j] + 0.02 * W[j]);
    B -= 0.1 * GB;
    xt::xtensor<bool, 1> pred;
    float cost = 0;
    REQUIRE_NOTHROW(std::tie(pred, cost) = train(M, Y));
    CHECK(cost == Approx(cost_want).epsilon(1e-5));
    for (std::size_t i = 0; i < 4; ++i) CHECK(pred(i) == (P[i] > 0.5));
    const auto w_now = w.get_value();
    for (std::size_t j = 0; j < 3; ++j) CHECK(w_now(j) == Approx(W[j]).epsilon(1e-5));
    CHECK(b.get_value()() == Approx(B).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("DebugMode catches a broken op and names the node, shapes, error and index", "[modes]") {
  hooks_guard guard;
  xsym::cpu::testing::broken_simd_kernel() = xsym::scalar_op::exp;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("broken_op", xsym::inputs(x), exp(x) * 2, xsym::mode("DebugMode"));
  CHECK_THROWS_AS(f(xt::xtensor<double, 1>{1, 2, 3}), xsym::debug_mode_error);
  const std::string msg = message_of([&] { f(xt::xtensor<double, 1>{1, 2, 3}); });
  CHECK(msg.find("function 'broken_op'") != std::string::npos);
  CHECK(msg.find("Apply node 0 Elemwise{Composite{(exp(i0) * i1)}}(x, TensorConstant{(1,) of 2.0})") != std::string::npos);
  CHECK(msg.find("input shapes (3,), (1,)") != std::string::npos);
  CHECK(msg.find("max abs error 0.002") != std::string::npos);
  CHECK(msg.find("first difference at index (0,)") != std::string::npos);
  // Without DebugMode the broken kernel goes unnoticed: that is what DebugMode is for.
  auto g = xsym::function("unchecked", xsym::inputs(x), exp(x) * 2);
  CHECK(g(xt::xtensor<double, 1>{0})(0) != 2.0);
}

TEST_CASE("DebugMode judges a product that cancels by the size of its terms", "[modes]") {
  hooks_guard guard;
  // Each row's last element makes its dot with v zero in exact arithmetic: the float32
  // results are rounding noise. The matrix starts one float past a cache line, so the kernel
  // sums its first elements apart (to align its loads) where DebugMode's aligned copy does not.
  const std::size_t rows = 16, k = 784;
  std::vector<float> storage(rows * k + 16 + 1);
  float* first = storage.data() + 1;
  while (reinterpret_cast<std::uintptr_t>(first - 1) % 64 != 0) ++first;
  auto a = xt::adapt(first, rows * k, xt::no_ownership(), std::array<std::size_t, 2>{rows, k});
  xt::xtensor<float, 1> v = xt::empty<float>({k});
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (auto& e : a) e = normal(rng);
  for (auto& e : v) e = normal(rng);
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::size_t j = 0; j + 1 < k; ++j) s += double(a(r, j)) * double(v(j));
    a(r, k - 1) = static_cast<float>(-s / double(v(k - 1)));
  }
  auto m = xsym::matrix<float>("m");
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("cancel", xsym::inputs(m, x), dot(m, x), xsym::debug_mode{});
  xt::xtensor<float, 1> r;
  REQUIRE_NOTHROW(r = f(a, v));
  for (std::size_t i = 0; i < rows; ++i) CHECK(std::abs(r(i)) < 1e-2f);  // the terms sum to about 600 in size

  // The scale widens the tolerance only as far as the terms' size: a real error still shows.
  xsym::shape_t s;
  s.rank = 1;
  s[0] = 2;
  auto filled = [&](float e0, float e1) {
    auto arr = xsym::ndarray::empty(xsym::dtype::float32, s);
    arr.data_as<float>()[0] = e0;
    arr.data_as<float>()[1] = e1;
    return arr;
  };
  const auto want = filled(1e-5f, 1.0f), scale = filled(600.0f, 1.0f);
  CHECK_FALSE(xsym::detail::compare_arrays(filled(2e-3f, 1.0f), want, &scale));  // 2e-3 < 1e-4 * 600
  CHECK(xsym::detail::compare_arrays(filled(2e-3f, 1.0f), want));                // no scale: far off
  CHECK(xsym::detail::compare_arrays(filled(1.0f, 1.0f), want, &scale));         // 1 > 1e-4 * 600
  CHECK(xsym::detail::compare_arrays(filled(1e-5f, 1.01f), want, &scale));       // element 1: scale 1
}

TEST_CASE("DebugMode names a NaN or an infinity against a number as such, and a shape mismatch as one", "[modes]") {
  xsym::shape_t s;
  s.rank = 1;
  s[0] = 3;
  auto filled = [&](double e0, double e1, double e2) {
    auto arr = xsym::ndarray::empty(xsym::dtype::float64, s);
    arr.data_as<double>()[0] = e0;
    arr.data_as<double>()[1] = e1;
    arr.data_as<double>()[2] = e2;
    return arr;
  };
  const auto want = filled(1, 2, 3);
  const auto nan = std::nan("");
  auto text = [&](const xsym::ndarray& got, const xsym::ndarray& w) {
    const auto m = xsym::detail::compare_arrays(got, w);
    REQUIRE(m);
    return xsym::detail::describe_mismatch(got, *m);
  };
  CHECK_THAT(text(filled(1, nan, 3), want), Catch::Matchers::Contains("NaN where the reference has a finite value") &&
                                                 Catch::Matchers::Contains("index (1,)"));
  CHECK_THAT(text(want, filled(1, 2, nan)), Catch::Matchers::Contains("a finite value where the reference has NaN"));
  CHECK_THAT(text(filled(1, 2, -INFINITY), want), Catch::Matchers::Contains("-inf where the reference has a finite value"));
  CHECK_THAT(text(filled(INFINITY, 2, 3), filled(-INFINITY, 2, 3)), Catch::Matchers::Contains("+inf where the reference has -inf"));
  CHECK_FALSE(xsym::detail::compare_arrays(filled(nan, 2, INFINITY), filled(nan, 2, INFINITY)));  // NaN equals NaN
  xsym::shape_t s2;
  s2.rank = 1;
  s2[0] = 2;
  CHECK_THAT(text(xsym::ndarray::empty(xsym::dtype::float64, s2), want), Catch::Matchers::Contains("shapes or dtypes differ"));
}

TEST_CASE("DebugMode catches a wrong rewrite against the unoptimised graph", "[modes]") {
  hooks_guard guard;
  // Registered through the public path, in fast_run, just before fusion.
  const auto registration = xsym::register_rewrite(
      {"add_becomes_sub", {"fast_run"}, 48, [](const std::vector<xsym::var_ptr>& roots, xsym::rewrite_record&) {
         return add_becomes_sub(roots);
       }, {}});
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("wrong_rewrite", xsym::inputs(x), xsym::outputs(x + 1), xsym::mode("DebugMode"));
  const std::string msg = message_of([&] { f(xt::xtensor<double, 1>{1, 2}); });
  CHECK(msg.find("xsym DebugMode: function 'wrong_rewrite'") != std::string::npos);
  CHECK(msg.find("differs from the graph without optimizations") != std::string::npos);
  CHECK(msg.find("0 instead of 2") != std::string::npos);
}

TEST_CASE("DebugMode.check_isfinite reports NaN produced by a node", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("nan", xsym::inputs(x), sqrt(x), xsym::mode("DebugMode"));
  const std::string msg = message_of([&] { f(xt::xtensor<double, 1>{4, -1}); });
  CHECK(msg.find("has NaN at index (1,)") != std::string::npos);
  auto g = xsym::function("nan_ok", xsym::inputs(x), sqrt(x), xsym::debug_mode{false});
  CHECK(std::isnan(g(xt::xtensor<double, 1>{4, -1})(1)));
}

TEST_CASE("a failed DebugMode call leaves shared variables unchanged and the function usable", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  auto s = xsym::shared(xt::xtensor<double, 1>{1, 2}, "s");
  auto f = xsym::function("upd", xsym::inputs(x), xsym::outputs(sqrt(x)), xsym::updates(xsym::update(s, s + x)),
                          xsym::mode("DebugMode"));
  CHECK_THROWS_AS(f(xt::xtensor<double, 1>{-1, 1}), xsym::debug_mode_error);
  CHECK((s.get_value() == xt::xtensor<double, 1>{1, 2}));
  f(xt::xtensor<double, 1>{1, 1});
  CHECK((s.get_value() == xt::xtensor<double, 1>{2, 3}));
}

TEST_CASE("NanGuardMode names the node that produced NaN, Inf or a big value, or the input", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("guarded", xsym::inputs(x), log(x) * 2, xsym::nan_guard_mode{},
                          xsym::optimizer_excluding("fusion"));
  std::string msg = message_of([&] { f(xt::xtensor<double, 1>{1, -1}); });
  CHECK(msg.find("Apply node 0 Elemwise{log,no_inplace}(x) produced NaN in output 0 at index (1,)") != std::string::npos);
  msg = message_of([&] { f(xt::xtensor<double, 1>{1, 0}); });
  CHECK(msg.find("produced Inf") != std::string::npos);
  msg = message_of([&] { f(xt::xtensor<double, 1>{1, std::nan("")}); });
  CHECK(msg.find("input 'x' contains NaN") != std::string::npos);
  CHECK(msg.find("it came from an input") != std::string::npos);
  auto big = xsym::function("big", xsym::inputs(x), exp(x), xsym::nan_guard_mode{true, true, true});
  msg = message_of([&] { big(xt::xtensor<double, 1>{30}); });
  CHECK(msg.find("a value above 1e10") != std::string::npos);
  auto lax = xsym::function("lax", xsym::inputs(x), exp(x), xsym::nan_guard_mode{true, true, false});
  CHECK(lax(xt::xtensor<double, 1>{30})(0) > 1e10);
}

// The check screens whole vectors of elements and reads one by one only those that fail it:
// a bad value in a batch or in the tail, in an input, a shared variable and an output, float32
// and float64, is found at its index, and values at the edge (1e10 itself, -0) pass.
TEMPLATE_TEST_CASE("NanGuardMode finds NaN, Inf and big values at every position, batch or tail", "[modes]", float,
                   double) {
  hooks_guard guard;
  constexpr std::size_t n = 37;
  auto x = xsym::vector<TestType>("x");
  auto w = xsym::shared(xt::xtensor<TestType, 1>(xt::ones<TestType>({n})), "w");
  auto f = xsym::function("guarded", xsym::inputs(x), x * w, xsym::nan_guard_mode{true, true, true});
  const TestType bad[3] = {std::numeric_limits<TestType>::quiet_NaN(), -std::numeric_limits<TestType>::infinity(),
                           TestType(-2e10)};
  const char* names[3] = {"NaN", "Inf", "a value above 1e10 in magnitude"};
  xt::xtensor<TestType, 1> ok = xt::ones<TestType>({n});
  ok(0) = TestType(1e10);
  ok(1) = TestType(-0.0);
  CHECK(f(ok)(0) == TestType(1e10));
  for (std::size_t at : {std::size_t{0}, std::size_t{5}, std::size_t{16}, n - 2, n - 1})
    for (int k = 0; k < 3; ++k) {
      INFO("position " << at << ", " << names[k]);
      xt::xtensor<TestType, 1> in = xt::ones<TestType>({n});
      in(at) = bad[k];
      std::string msg = message_of([&] { f(in); });
      CHECK(msg.find("input 'x' contains " + std::string(names[k]) + " at index (" + std::to_string(at) + ",)") !=
            std::string::npos);
      w.set_value(in);
      msg = message_of([&] { f(ok); });
      CHECK(msg.find("shared variable 'w' contains " + std::string(names[k]) + " at index (" + std::to_string(at) + ",)") !=
            std::string::npos);
      w.set_value(xt::xtensor<TestType, 1>(xt::ones<TestType>({n})));
      // 1e10 times 3 is big, in the output only.
      xt::xtensor<TestType, 1> scaled = xt::ones<TestType>({n});
      scaled(at) = k == 2 ? TestType(1e10) : bad[k];
      auto g = xsym::function("scaled", xsym::inputs(x), x * TestType(3), xsym::nan_guard_mode{true, true, true});
      msg = message_of([&] { g(scaled); });
      if (k == 2) CHECK(msg.find("produced a value above 1e10 in magnitude in output 0 at index (" + std::to_string(at) + ",)") != std::string::npos);
      else CHECK(msg.find("input 'x' contains " + std::string(names[k])) != std::string::npos);
    }
}

TEST_CASE("MonitorMode calls back before and after every node with its values", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  std::vector<std::string> log;
  auto pre = [&](const xsym::node_event& e) { log.push_back("pre " + e.text()); };
  auto post = [&](const xsym::node_event& e) {
    log.push_back("post " + e.node->op_name() + " = " + std::to_string(e.outputs[0]->flat_as_double(0)));
  };
  auto f = xsym::function("monitored", xsym::inputs(x), exp(x) + 1, xsym::monitor_mode{pre, post},
                          xsym::optimizer_excluding("fusion:inplace"));
  CHECK(f(xt::xtensor<double, 1>{0})(0) == 2.0);
  REQUIRE(log.size() == 4);
  CHECK(log[0] == "pre Elemwise{exp,no_inplace}(x)");
  CHECK(log[1] == "post Elemwise{exp,no_inplace} = 1.000000");
  CHECK(log[3] == "post Elemwise{add,no_inplace} = 2.000000");
}

// A profiled call, or any call while a profile_scope is open, times its nodes; the checks of
// DebugMode, NanGuardMode and MonitorMode run with them.
TEST_CASE("profiled functions, and calls inside a profile_scope, keep their mode's checks", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  auto stats = std::make_shared<xsym::profile_stats>("checked", false);
  const xt::xtensor<double, 1> bad{1, -1};
  auto guarded = xsym::function("guarded", xsym::inputs(x), log(x) * 2, xsym::nan_guard_mode{}, xsym::profile(stats));
  CHECK_THROWS_AS(guarded(bad), xsym::nan_guard_error);
  auto debug = xsym::function("debug", xsym::inputs(x), sqrt(x), xsym::mode("DebugMode"), xsym::profile(stats));
  CHECK_THROWS_AS(debug(bad), xsym::debug_mode_error);
  int posts = 0;
  auto monitored = xsym::function("monitored", xsym::inputs(x), exp(x) + 1,
                                  xsym::monitor_mode{nullptr, [&](const xsym::node_event&) { ++posts; }},
                                  xsym::optimizer_excluding("fusion:inplace"), xsym::profile(stats));
  CHECK(monitored(xt::xtensor<double, 1>{0})(0) == 2.0);
  CHECK(posts == 2);
  auto unprofiled = xsym::function("unprofiled", xsym::inputs(x), log(x) * 2, xsym::nan_guard_mode{});
  {
    xsym::profile_scope scope("scope", false);
    CHECK_THROWS_AS(unprofiled(bad), xsym::nan_guard_error);
  }
  if (xsym::profiling_compiled_in) {  // the checked calls that succeeded were timed
    std::ostringstream os;
    stats->print_summary(os);
    CHECK(os.str().find("monitored") != std::string::npos);
  }
}

TEST_CASE("modes are chosen by flag too, and an unknown mode is a clear error", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  xsym::config.mode = "NanGuardMode";
  auto f = xsym::function("flagged", xsym::inputs(x), log(x));
  CHECK_THROWS_AS(f(xt::xtensor<double, 1>{-1}), xsym::nan_guard_error);
  xsym::config.reset();
  CHECK_THROWS_WITH(xsym::function("bad", xsym::inputs(x), x, xsym::mode("FAST_WALK")),
                    Catch::Contains("unknown mode 'FAST_WALK'"));
  CHECK_THROWS_WITH(xsym::function("typo", xsym::inputs(x), x, xsym::mode("DebugMod")),
                    Catch::Contains("did you mean 'DebugMode'"));
}

TEST_CASE("openmp=True in a program compiled without OpenMP is a clear error", "[modes]") {
  // This area is compiled without -fopenmp (the compile area's threads tests run with it).
  static_assert(!xsym::cpu::openmp_compiled_in, "tests/modes must be compiled without OpenMP");
  hooks_guard guard;
  auto x = xsym::vector<float>("x");
  xsym::config.openmp = true;
  auto msg = message_of([&] { xsym::function("f", xsym::inputs(x), x + 1); });
  CHECK_THAT(msg, Catch::Contains("openmp=True") && Catch::Contains("-fopenmp"));
  xsym::config.openmp = false;
  auto f = xsym::function("f", xsym::inputs(x), x + 1);
  CHECK(f(xt::xtensor<float, 1>{1})(0) == 2.0f);
}

TEST_CASE("device=cuda without the GPU backend, or an unknown device, is a clear error", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<float>("x");
  auto msg = message_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::device("cuda")); });
  CHECK_THAT(msg, Catch::Contains("device=cuda") && Catch::Contains("without xsym's GPU backend") &&
                      Catch::Contains("<xsym/gpu.hpp>"));
  xsym::config.device = std::string("cuda");
  msg = message_of([&] { xsym::function("f", xsym::inputs(x), x + 1); });
  CHECK_THAT(msg, Catch::Contains("without xsym's GPU backend"));
  // The per-function option wins over the flag.
  auto f = xsym::function("f", xsym::inputs(x), x + 1, xsym::device("cpu"));
  CHECK(f(xt::xtensor<float, 1>{1})(0) == 2.0f);
  msg = message_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::device("tpu")); });
  CHECK_THAT(msg, Catch::Contains("device=tpu is unknown"));
}

TEST_CASE("NanGuardMode names the constant that holds a NaN or an Inf, not the node reading it", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("const_inf", xsym::inputs(x), x + INFINITY, xsym::nan_guard_mode{});
  std::string msg = message_of([&] { f(xt::xtensor<double, 1>{1}); });
  CHECK_THAT(msg, Catch::Contains("Apply node 0 ") && Catch::Contains(" produced Inf in output 0") &&
                      Catch::Contains("(it came from its input 1, the constant TensorConstant{(1,) of inf}, which holds Inf "
                                      "at index (0,))"));
  CHECK_THAT(msg, !Catch::Contains("it came from this node"));
  auto g = xsym::function("const_nan", xsym::inputs(x), x * 2 + std::nan(""), xsym::nan_guard_mode{},
                          xsym::optimizer_excluding("fusion"));
  msg = message_of([&] { g(xt::xtensor<double, 1>{1}); });
  CHECK_THAT(msg, Catch::Contains("produced NaN") &&
                      Catch::Contains("it came from its input 1, the constant TensorConstant{(1,) of nan}, which holds NaN"));
  // Only what the guard is asked for: with Inf allowed the constant inf passes.
  auto lax = xsym::function("const_inf_lax", xsym::inputs(x), x + INFINITY, xsym::nan_guard_mode{true, false, true});
  CHECK(std::isinf(lax(xt::xtensor<double, 1>{1})(0)));
  // A node that makes an Inf from finite constants is still the one named.
  auto made = xsym::function("made", xsym::inputs(x), x * 1e300 * 1e300, xsym::nan_guard_mode{true, true, false},
                             xsym::optimizer_excluding("fusion:canonicalize"));
  CHECK_THAT(message_of([&] { made(xt::xtensor<double, 1>{1}); }), Catch::Contains("it came from this node"));
}

TEST_CASE("a MonitorMode callback's exception reaches the caller as thrown, and nothing is updated", "[modes]") {
  hooks_guard guard;
  auto x = xsym::vector<double>("x");
  auto s = xsym::shared(xt::xtensor<double, 1>{1, 2}, "s");
  struct user_error {
    int code;
  };
  int calls = 0;
  auto post = [&](const xsym::node_event&) {
    ++calls;
    if (calls == 1) throw std::out_of_range("user's range");
    if (calls == 2) throw user_error{7};
  };
  auto f = xsym::function("monitored", xsym::inputs(x), exp(x) + 1, xsym::updates(xsym::update(s, s + x)),
                          xsym::monitor_mode{nullptr, post});
  const xt::xtensor<double, 1> a{0, 1};
  try {
    f(a);
    FAIL("the callback's exception did not reach the caller");
  } catch (const std::out_of_range& e) {
    CHECK(std::string(e.what()) == "user's range");
  }
  CHECK((s.get_value() == xt::xtensor<double, 1>{1, 2}));
  try {
    f(a);
    FAIL("the callback's exception did not reach the caller");
  } catch (const user_error& e) {
    CHECK(e.code == 7);
  }
  CHECK((s.get_value() == xt::xtensor<double, 1>{1, 2}));
  const xt::xtensor<double, 1> r = f(a);  // the function is usable afterwards
  CHECK(r(0) == 2.0);
  CHECK((s.get_value() == xt::xtensor<double, 1>{1, 3}));
}
