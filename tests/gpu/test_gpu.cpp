// The GPU backend, run through Thrust's OpenMP system (no GPU needed): every result equals the
// CPU backend's on random inputs, transfers sit where expected, device memory is counted exactly.
// Built with XSYM_COMPUTE_GPU_MEM_USED=1; the same file is compiled by nvcc (make cuda), and that
// build is what runs on a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include <xsym/gpu.hpp>

#include "compile/compile_util.hpp"
#include "compile/replicas.hpp"
#include "expr/typed_util.hpp"

namespace {
using xsym_test::clean_config;

std::mt19937& rng() {
  static std::mt19937 r(7);
  return r;
}

template <class T, std::size_t N>
xt::xtensor<T, N> random_array(const std::array<std::size_t, N>& shape, double lo = -2, double hi = 2) {
  xt::xtensor<T, N> a(shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& v : a) v = static_cast<T>(u(rng()));
  return a;
}

template <class A, class B>
void require_close(const A& got, const B& want, double rtol) {
  REQUIRE(got.shape() == want.shape());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got.data()[i]), w = static_cast<double>(want.data()[i]);
    INFO("element " << i << ": gpu " << g << ", cpu " << w);
    REQUIRE(std::abs(g - w) <= rtol * (1 + std::abs(w)));
  }
}

template <class F>
std::vector<std::string> names(const F& f) {
  return xsym_test::op_names(f);
}

using xsym_test::message_of;
}  // namespace

TEST_CASE("fused elementwise on the device equals the CPU backend, one kernel per Composite", "[gpu]") {
  clean_config cfg;
  auto x = xsym::matrix<float>("x");
  auto y = xsym::matrix<float>("y");
  auto r = xsym::row<float>("r");
  auto expr = xsym::exp(-x) * 2 + y / (1 + xsym::abs(r)) - xsym::log1p(xsym::sqr(x)) + xsym::tanh(y) * xsym::sigmoid(x);
  auto cpu = xsym::function("cpu", xsym::inputs(x, y, r), expr);
  auto gpu = xsym::function("gpu", xsym::inputs(x, y, r), expr, xsym::device("cuda"));
  const auto n = names(gpu);
  // Three inputs up, one fused kernel, one result down.
  REQUIRE(n.size() == 5);
  CHECK(std::count(n.begin(), n.end(), "GpuFromHost") == 3);
  CHECK(n[3].rfind("GpuElemwise{Composite{", 0) == 0);
  CHECK(n[4] == "HostFromGpu");
  for (std::size_t rows : {1u, 7u, 300u}) {
    const auto a = random_array<float, 2>({rows, 37}), b = random_array<float, 2>({rows, 37});
    const auto c = random_array<float, 2>({1, 37});
    require_close(gpu(a, b, c), cpu(a, b, c), 1e-5);
  }
}

TEST_CASE("AllReduce on the device goes through host memory and gives the CPU backend's values", "[gpu]") {
  clean_config cfg;
  auto group = std::make_shared<xsym_test::replicas>(3);
  auto x = xsym::matrix<float>("x");
  auto expr = xsym::allreduce(xsym::exp(x) * 2, group) - x;
  auto cpu = xsym::function("cpu", xsym::inputs(x), expr);
  auto gpu = xsym::function("gpu", xsym::inputs(x), expr, xsym::device("cuda"));
  const auto n = names(gpu);
  // On the CPU between the transfers: the GPU Composite's result down, the sum back up.
  CHECK(std::count(n.begin(), n.end(), "AllReduce{sum}") == 1);
  CHECK(std::count(n.begin(), n.end(), "HostFromGpu") == 2);  // x's Composite down; the result
  CHECK(std::count(n.begin(), n.end(), "GpuFromHost") == 2);  // x up; the sum up
  for (std::size_t rows : {1u, 9u}) {
    const auto a = random_array<float, 2>({rows, 13});
    require_close(gpu(a), cpu(a), 1e-6);
  }
  CHECK(group->calls == 4);
}

TEST_CASE("take, add_at, the gradient through take and argmax run on the device through host memory", "[gpu]") {
  clean_config cfg;
  auto x = xsym::matrix<float>("x");
  auto i = xsym::vector<std::int32_t>("i");
  auto cost = sum(exp(xsym::take(x, i)) * 2);
  auto [gx] = xsym::grad(cost, x);
  auto y = xsym::add_at(x, i, xsym::take(x, i) * 3);
  auto cpu = xsym::function("cpu", xsym::inputs(x, i), xsym::outputs(xsym::take(x, i, 1), gx, y, xsym::argmax(x, 1)));
  auto gpu = xsym::function("gpu", xsym::inputs(x, i), xsym::outputs(xsym::take(x, i, 1), gx, y, xsym::argmax(x, 1)),
                            xsym::device("cuda"));
  const auto n = names(gpu);
  CHECK(std::count(n.begin(), n.end(), "AdvancedSubtensor1") >= 1);  // on the CPU, between transfers
  CHECK(std::count(n.begin(), n.end(), "AdvancedIncSubtensor1{no_inplace,inc}") >= 1);
  CHECK(std::count(n.begin(), n.end(), "HostFromGpu") >= 2);
  const auto a = random_array<float, 2>({4, 4});
  const xt::xtensor<std::int32_t, 1> idx = {3, -1, 0, 3};
  auto [c0, c1, c2, c3] = cpu(a, idx);
  auto [g0, g1, g2, g3] = gpu(a, idx);
  CHECK((g3 == c3));
  require_close(g0, c0, 0);
  require_close(g1, c1, 1e-6);
  require_close(g2, c2, 1e-6);
  CHECK_THROWS_AS(gpu(a, xt::xtensor<std::int32_t, 1>{4}), xsym::index_error);
}

TEST_CASE("slices (device views), set/inc_subtensor, reshape, concatenate and their gradients on the device",
          "[gpu]") {
  clean_config cfg;
  using xsym::range;
  using xsym::placeholders::_;
  auto x = xsym::matrix<float>("x");
  auto y = xsym::vector<float>("y");
  const auto rev = x(range(_, _, -1), range(1, _, 2));  // negative strides into device memory
  auto cost = sum(exp(rev) * 2) + sum(sqr(xsym::concatenate({xsym::flatten(x), y}))) +
              sum(xsym::set_subtensor(x(range(1, -1)), y) * x);
  auto [gx, gy] = xsym::grad(cost, x, y);
  auto outs = [&] {
    return xsym::outputs(rev * 3.0f, xsym::inc_subtensor(x(0), y), xsym::reshape(x.T(), {-1, 2}),
                         xsym::concatenate({x, x(range(_, 1))}, 0), gx, gy);
  };
  auto cpu = xsym::function("cpu", xsym::inputs(x, y), outs());
  auto gpu = xsym::function("gpu", xsym::inputs(x, y), outs(), xsym::device("cuda"));
  const auto n = names(gpu);
  CHECK(std::count(n.begin(), n.end(), "GpuSubtensor{::-1, 1::2}") == 1);
  CHECK(std::count(n.begin(), n.end(), "Join{axis=0}") >= 1);
  const auto a = random_array<float, 2>({4, 4});
  const auto b = random_array<float, 1>({4});
  auto [c0, c1, c2, c3, c4, c5] = cpu(a, b);
  auto [g0, g1, g2, g3, g4, g5] = gpu(a, b);
  require_close(g0, c0, 0);
  require_close(g1, c1, 0);
  require_close(g2, c2, 0);
  require_close(g3, c3, 0);
  require_close(g4, c4, 1e-6);
  require_close(g5, c5, 1e-6);
  CHECK_THROWS_AS(gpu(a, random_array<float, 1>({3})), xsym::shape_error);
}

TEST_CASE("alloc, arange, eye, cumsum, batched_dot, tensordot and the int-label cross-entropy on the device",
          "[gpu]") {
  clean_config cfg;
  auto x = xsym::matrix<float>("x");
  auto t = xsym::tensor3<float>("t");
  auto y = xsym::vector<std::int32_t>("y");
  auto cost = sum(xsym::categorical_crossentropy(xsym::softmax(x), y)) + sum(sqr(xsym::cumsum(x, 0))) +
              sum(xsym::batched_dot(xsym::tensordot(t, x, {2}, {0}), t(xsym::all(), 0)));
  auto [gx, gt] = xsym::grad(cost, x, t);
  auto outs = [&] {
    return xsym::outputs(xsym::zeros_like(x) + xsym::eye<float>(xsym::shape(x, 0), xsym::shape(x, 1)),
                         xsym::arange<float>(xsym::shape(x, 1)), gx, gt, cost);
  };
  auto cpu = xsym::function("cpu", xsym::inputs(x, t, y), outs());
  auto gpu = xsym::function("gpu", xsym::inputs(x, t, y), outs(), xsym::device("cuda"));
  const auto n = names(gpu);
  CHECK(std::count(n.begin(), n.end(), "BatchedDot") >= 1);
  CHECK(std::count(n.begin(), n.end(), "Alloc") >= 1);
  CHECK(std::count(n.begin(), n.end(), "GpuBatchedDot") == 0);
  const auto a = random_array<float, 2>({4, 4});
  const auto b = random_array<float, 3>({2, 3, 4});
  const xt::xtensor<std::int32_t, 1> labels = {3, 0, 1, 1};
  auto [c0, c1, c2, c3, c4] = cpu(a, b, labels);
  auto [g0, g1, g2, g3, g4] = gpu(a, b, labels);
  require_close(g0, c0, 0);
  require_close(g1, c1, 0);
  require_close(g2, c2, 1e-5);
  require_close(g3, c3, 1e-5);
  CHECK(std::abs(g4 - c4) <= 1e-5 * (1 + std::abs(c4)));
  CHECK_THROWS_AS(gpu(a, b, xt::xtensor<std::int32_t, 1>{4, 0, 0, 0}), xsym::assertion_error);
}

TEST_CASE("strided and broadcast operands, comparisons, switch, casts and integer arithmetic on the device", "[gpu]") {
  clean_config cfg;
  auto x = xsym::matrix<double>("x");
  auto c = xsym::col<double>("c");
  auto i = xsym::matrix<std::int32_t>("i");
  auto expr = xsym::switch_(x.T() > 0.5, x.T() * c.T(), xsym::maximum(x.T(), -1.0)) + xsym::cast<double>(i * 3 - 1);
  auto cmp = x >= 0;
  auto cpu = xsym::function("cpu", xsym::inputs(x, c, i), xsym::outputs(expr, cmp));
  auto gpu = xsym::function("gpu", xsym::inputs(x, c, i), xsym::outputs(expr, cmp), xsym::device("cuda"));
  const auto a = random_array<double, 2>({5, 4});
  const auto col = random_array<double, 2>({5, 1});
  xt::xtensor<std::int32_t, 2> ints = xt::xtensor<std::int32_t, 2>::from_shape({4, 5});
  for (std::size_t k = 0; k < ints.size(); ++k) ints.data()[k] = static_cast<std::int32_t>(k) - 7;
  auto [g0, g1] = gpu(a, col, ints);
  auto [c0, c1] = cpu(a, col, ints);
  require_close(g0, c0, 1e-12);
  REQUIRE(bool(g1 == c1));
}

namespace {
// NaN equals NaN; otherwise the same bits (the sign of a zero or an infinity counts), or, where
// both are finite, nonzero and the op is not exact, within rtol.
template <class T>
void require_edges_match(const xt::xtensor<T, 1>& got, const xt::xtensor<T, 1>& want, const char* op, bool exact) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const T g = got(i), w = want(i);
    INFO(op << " element " << i << ": gpu " << g << ", cpu " << w);
    if (std::isnan(w)) {
      REQUIRE(std::isnan(g));
    } else if (exact || !std::isfinite(w) || w == 0 || !std::isfinite(g) || g == 0) {
      REQUIRE(std::memcmp(&g, &w, sizeof(T)) == 0);
    } else {
      REQUIRE(std::abs(g - w) <= 8 * std::numeric_limits<T>::epsilon() * std::abs(w));
    }
  }
}

template <class T>
void check_edges_on_device() {
  using lim = std::numeric_limits<T>;
  const T big = sizeof(T) == 4 ? T(88.5) : T(709.5);  // exp's result finite, above vector exp's range
  const T tiny = sizeof(T) == 4 ? T(-100) : T(-740);  // exp's result subnormal
  const std::vector<T> xs = {lim::quiet_NaN(), lim::infinity(), -lim::infinity(), T(0), T(-0.0), lim::denorm_min(),
                             T(1), T(-1), T(2), T(0.5), big, tiny, -big, lim::max(), T(1), T(0)};
  const std::vector<T> ys = {T(0), T(-1), T(0.5), T(-0.0), T(0), T(2), lim::quiet_NaN(), T(-1), T(-0.5), T(149),
                             T(1), T(2), T(0), T(-1), lim::infinity(), T(-1)};
  xt::xtensor<T, 1> a = xt::xtensor<T, 1>::from_shape({xs.size()}), b = a;
  std::copy(xs.begin(), xs.end(), a.begin());
  std::copy(ys.begin(), ys.end(), b.begin());
  auto x = xsym::vector<T>("x");
  auto y = xsym::vector<T>("y");
  // One function per op: the fused form is checked by the CPU's edge tests; here the device's math.
  const std::vector<std::pair<const char*, xsym::var<T, 1>>> ops = {
      {"neg", -x}, {"abs", xsym::abs(x)}, {"maximum", xsym::maximum(x, y)}, {"minimum", xsym::minimum(x, y)},
      {"sqrt", xsym::sqrt(x)}, {"exp", xsym::exp(x)}, {"log", xsym::log(x)}, {"log1p", xsym::log1p(x)},
      {"expm1", xsym::expm1(x)}, {"tanh", xsym::tanh(x)}, {"sigmoid", xsym::sigmoid(x)},
      {"softplus", xsym::softplus(x)}, {"pow", xsym::pow(x, y)}};
  for (const auto& [name, e] : ops) {
    auto cpu = xsym::function("cpu", xsym::inputs(x, y), e, xsym::ignore_unused_inputs{});
    auto gpu = xsym::function("gpu", xsym::inputs(x, y), e, xsym::device("cuda"), xsym::ignore_unused_inputs{});
    const std::string op = name;
    require_edges_match<T>(gpu(a, b), cpu(a, b), name,
                           op == "neg" || op == "abs" || op == "maximum" || op == "minimum" || op == "sqrt");
  }
  auto to_int = xsym::function("cast", xsym::inputs(x), xsym::cast<std::int32_t>(x), xsym::device("cuda"));
  const xt::xtensor<std::int32_t, 1> ints = to_int(a);
  CHECK(ints(0) == std::numeric_limits<std::int32_t>::min());  // NaN
  CHECK(ints(1) == std::numeric_limits<std::int32_t>::min());  // inf
  CHECK(ints(6) == 1);
}
}  // namespace

TEST_CASE("edge values on the device: NaN, infinities, signed zeros, subnormal and near-overflow results", "[gpu]") {
  clean_config cfg;
  check_edges_on_device<float>();
  check_edges_on_device<double>();
}

TEST_CASE("reductions on the device equal the CPU backend over every axis set", "[gpu]") {
  clean_config cfg;
  auto x = xsym::tensor3<double>("x");
  auto outs = xsym::outputs(xsym::sum(x, {0}), xsym::mean(x, {1, 2}), xsym::max(x, {2}), xsym::min(x, {0, 2}),
                            xsym::prod(x, {1}), xsym::sum(x), xsym::max(x), xsym::mean(x));
  auto cpu = xsym::function("cpu", xsym::inputs(x), outs);
  auto gpu = xsym::function("gpu", xsym::inputs(x), outs, xsym::device("cuda"));
  bool saw_reduce = false;
  for (const auto& n : names(gpu)) saw_reduce |= n.rfind("GpuCAReduce{", 0) == 0;
  CHECK(saw_reduce);
  const auto a = random_array<double, 3>({6, 5, 33}, 0.5, 1.5);
  auto g = gpu(a);
  auto c = cpu(a);
  require_close(std::get<0>(g), std::get<0>(c), 1e-12);
  require_close(std::get<1>(g), std::get<1>(c), 1e-12);
  require_close(std::get<2>(g), std::get<2>(c), 0);
  require_close(std::get<3>(g), std::get<3>(c), 0);
  require_close(std::get<4>(g), std::get<4>(c), 1e-12);
  CHECK(std::get<5>(g) == Approx(std::get<5>(c)).epsilon(1e-12));
  CHECK(std::get<6>(g) == std::get<6>(c));
  CHECK(std::get<7>(g) == Approx(std::get<7>(c)).epsilon(1e-12));
}

TEST_CASE("full reductions on the device: many tiles, NaN, infinities, integers and empty arrays", "[gpu]") {
  clean_config cfg;
  auto v = xsym::vector<float>("v");
  auto f = xsym::function("full", xsym::inputs(v),
                          xsym::outputs(xsym::sum(v), xsym::mean(v), xsym::max(v), xsym::min(v), xsym::prod(v)),
                          xsym::device("cuda"));
  // 1e6 elements: CUB's multi-block path (a few thousand elements fit in one tile).
  auto big = random_array<float, 1>({1000000}, 0.5, 1.5);
  double sum = 0;
  float hi = -INFINITY, lo = INFINITY;
  for (float x : big) {
    sum += x;
    hi = std::max(hi, x);
    lo = std::min(lo, x);
  }
  auto [s, m, mx, mn, p] = f(big);
  CHECK(s == Approx(sum).epsilon(1e-6));
  CHECK(m == Approx(sum / 1e6).epsilon(1e-6));
  CHECK(mx == hi);
  CHECK(mn == lo);
  CHECK(p == 0.f);  // log-mean of U[0.5, 1.5) is -0.045: the product of 1e6 underflows, as in double
  // A NaN anywhere wins max, min and sum; all -inf stays -inf (the identity is not a finite lowest).
  xt::xtensor<float, 1> nan_mid = {1.f, 2.f, NAN, -3.f};
  auto [s2, m2, mx2, mn2, p2] = f(nan_mid);
  CHECK((std::isnan(s2) && std::isnan(mx2) && std::isnan(mn2)));
  xt::xtensor<float, 1> all_neg_inf = {-INFINITY, -INFINITY, -INFINITY};
  auto [s3, m3, mx3, mn3, p3] = f(all_neg_inf);
  CHECK((mx3 == -INFINITY && mn3 == -INFINITY && s3 == -INFINITY));
  CHECK_THROWS_WITH(f(xt::xtensor<float, 1>::from_shape({0})), Catch::Contains("zero-size array"));
  auto sum_prod = xsym::function("sum_prod", xsym::inputs(v), xsym::outputs(xsym::sum(v), xsym::prod(v)),
                                 xsym::device("cuda"));
  auto [s4, p4] = sum_prod(xt::xtensor<float, 1>::from_shape({0}));
  CHECK(s4 == 0.f);
  CHECK(p4 == 1.f);
  // all and any of an empty vector or rows: numpy's true and false (max and min over bool start there).
  auto rows = xsym::matrix<float>("rows");
  auto all_any = xsym::function("all_any", xsym::inputs(v, rows),
                                xsym::outputs(xsym::all(v), xsym::any(v), xsym::all(rows, 1), xsym::any(rows, 1)),
                                xsym::device("cuda"));
  auto [al, an, alr, anr] = all_any(xt::xtensor<float, 1>::from_shape({0}), xt::xtensor<float, 2>::from_shape({2, 0}));
  CHECK(al == true);
  CHECK(an == false);
  CHECK((alr == xt::xtensor<bool, 1>{true, true}));
  CHECK((anr == xt::xtensor<bool, 1>{false, false}));

  auto iv = xsym::vector<std::int32_t>("iv");
  auto int_outs = xsym::outputs(xsym::sum(iv), xsym::max(iv), xsym::min(iv));
  auto g = xsym::function("full_int", xsym::inputs(iv), int_outs, xsym::device("cuda"));
  auto g_cpu = xsym::function("full_int_cpu", xsym::inputs(iv), int_outs);
  xt::xtensor<std::int32_t, 1> ints = xt::xtensor<std::int32_t, 1>::from_shape({5000});
  std::int64_t isum = 0;
  for (std::size_t i = 0; i < ints.size(); ++i) {
    ints(i) = static_cast<std::int32_t>(i % 97) - 60 - static_cast<std::int32_t>(i % 2) * 2147483000;
    isum += ints(i);
  }
  auto [is, imax, imin] = g(ints);
  CHECK(static_cast<std::int64_t>(is) == static_cast<std::int64_t>(static_cast<decltype(is)>(isum)));
  CHECK(is == std::get<0>(g_cpu(ints)));
  CHECK(imax == *std::max_element(ints.begin(), ints.end()));
  CHECK(imin == *std::min_element(ints.begin(), ints.end()));
}

TEST_CASE("products on the device: GpuGemv, transposed, GpuDot22, vector dot, GpuGemm accumulation", "[gpu]") {
  clean_config cfg;
  auto A = xsym::matrix<double>("A");
  auto B = xsym::matrix<double>("B");
  auto v = xsym::vector<double>("v");
  auto u = xsym::vector<double>("u");
  auto outs = xsym::outputs(xsym::dot(A, v), xsym::dot(A.T(), u), xsym::dot(A, B), xsym::dot(v, v),
                            B - 0.25 * xsym::dot(A.T(), A), u - 0.5 * xsym::dot(A, v));
  auto cpu = xsym::function("cpu", xsym::inputs(A, B, v, u), outs);
  auto gpu = xsym::function("gpu", xsym::inputs(A, B, v, u), outs, xsym::device("cuda"));
  const auto n = names(gpu);
  CHECK(std::any_of(n.begin(), n.end(), [](const std::string& s) { return s.rfind("GpuGemv", 0) == 0; }));
  CHECK(std::any_of(n.begin(), n.end(), [](const std::string& s) { return s.rfind("GpuGemm", 0) == 0; }));
  const auto a = random_array<double, 2>({9, 9}), b = random_array<double, 2>({9, 9});
  const auto vv = random_array<double, 1>({9}), uu = random_array<double, 1>({9});
  auto g = gpu(a, b, vv, uu);
  auto c = cpu(a, b, vv, uu);
  require_close(std::get<0>(g), std::get<0>(c), 1e-12);
  require_close(std::get<1>(g), std::get<1>(c), 1e-12);
  require_close(std::get<2>(g), std::get<2>(c), 1e-12);
  CHECK(std::get<3>(g) == Approx(std::get<3>(c)).epsilon(1e-12));
  require_close(std::get<4>(g), std::get<4>(c), 1e-12);
  require_close(std::get<5>(g), std::get<5>(c), 1e-12);
  // A shape error names the GPU node and the shapes.
  const auto msg = message_of([&] { gpu(a, b, random_array<double, 1>({4}), uu); });
  CHECK_THAT(msg, Catch::Contains("Apply node") && Catch::Contains("Gpu") && Catch::Contains("(4,)"));
}

// u - c dot(M, u): the product's accumulated value is also its operand, so it is not computed in
// u's buffer (each row would read rows already written), on the device or the CPU.
TEST_CASE("an accumulating product whose operand is the accumulated value is not computed in place", "[gpu]") {
  clean_config cfg;
  auto v = xsym::vector<double>("v");
  auto X = xsym::matrix<double>("X");
  auto M = xsym::matrix<double>("M");
  auto u = xsym::exp(v) * 1.0;  // an intermediate that dies in the product
  auto U = xsym::exp(X) * 1.0;
  const xsym::var<double, 1> r1 = u - 0.1 * xsym::dot(M.T(), u), r2 = u - 0.1 * xsym::dot(M, u);
  const xsym::var<double, 2> r3 = U - 0.1 * xsym::dot(U, M);
  const auto vv = random_array<double, 1>({6});
  const auto mm = random_array<double, 2>({6, 6}), xx = random_array<double, 2>({5, 6});
  // The references: naive loops on exp's values.
  xt::xtensor<double, 1> w1 = xt::exp(vv), w2 = xt::exp(vv);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t k = 0; k < 6; ++k) {
      w1(i) -= 0.1 * mm(k, i) * std::exp(vv(k));
      w2(i) -= 0.1 * mm(i, k) * std::exp(vv(k));
    }
  xt::xtensor<double, 2> w3 = xt::exp(xx);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 6; ++j)
      for (std::size_t k = 0; k < 6; ++k) w3(i, j) -= 0.1 * std::exp(xx(i, k)) * mm(k, j);
  for (const char* device : {"cuda", "cpu"}) {
    INFO(device);
    auto f1 = xsym::function("f1", xsym::inputs(v, M), r1, xsym::device(device));
    auto f2 = xsym::function("f2", xsym::inputs(v, M), r2, xsym::device(device));
    auto f3 = xsym::function("f3", xsym::inputs(X, M), r3, xsym::device(device));
    require_close(xt::xtensor<double, 1>(f1(vv, mm)), w1, 1e-13);
    require_close(xt::xtensor<double, 1>(f2(vv, mm)), w2, 1e-13);
    require_close(xt::xtensor<double, 2>(f3(xx, mm)), w3, 1e-13);
  }
}

// The interpreter runs bool as int64, where ~1 is -2 (true); integer products sum exactly
// (through a double, 2^53 + 1 became 2^53); one value for two updates is copied to each.
TEST_CASE("bool invert, integer products beyond 2^53 and two updates of one value on the device", "[gpu]") {
  clean_config cfg;
  auto b = xsym::vector<bool>("b");
  auto inv = xsym::function("inv", xsym::inputs(b), xsym::outputs(~b, ~b & b), xsym::device("cuda"));
  auto [nb, none] = inv(xt::xtensor<bool, 1>{false, true, true});
  CHECK((nb == xt::xtensor<bool, 1>{true, false, false}));
  CHECK((none == xt::xtensor<bool, 1>{false, false, false}));
  auto a = xsym::matrix<std::int64_t>("a");
  auto v = xsym::vector<std::int64_t>("v");
  auto prod = xsym::function("prod", xsym::inputs(a, v), xsym::outputs(xsym::dot(a, v), xsym::dot(a, a.T())),
                             xsym::device("cuda"));
  constexpr std::int64_t big = (std::int64_t{1} << 53) + 1;
  auto [gv, gm] = prod(xt::xtensor<std::int64_t, 2>{{big, 0}, {3, big}}, xt::xtensor<std::int64_t, 1>{1, 1});
  CHECK(gv(0) == big);
  CHECK(gv(1) == big + 3);
  CHECK(gm(0, 1) == 3 * big);  // 27021597764222979: odd, not a double
  auto i32 = xsym::matrix<std::int32_t>("i32");
  auto w32 = xsym::vector<std::int32_t>("w32");
  auto wrap = xsym::function("wrap", xsym::inputs(i32, w32), xsym::dot(i32, w32), xsym::device("cuda"));
  const xt::xtensor<std::int32_t, 1> wrapped = wrap(xt::xtensor<std::int32_t, 2>{{2147483647, 2147483647}}, xt::xtensor<std::int32_t, 1>{1, 2});
  CHECK(wrapped(0) == 2147483645);  // 3 * (2^31 - 1) modulo 2^32, as numpy's int32 and the CPU's
  auto s1 = xsym::shared(xt::xtensor<double, 1>{0, 0}, "s1"), s2 = xsym::shared(xt::xtensor<double, 1>{0, 0}, "s2");
  auto x = xsym::vector<double>("x");
  auto both = xsym::function("both", xsym::inputs(x), xsym::sum(x),
                             xsym::updates(xsym::update(s1, x * 2.0), xsym::update(s2, x * 2.0)), xsym::device("cuda"));
  for (double k : {1.0, 3.0}) {
    both(xt::xtensor<double, 1>{k, k + 1});
    CHECK((s1.get_value() == xt::xtensor<double, 1>{2 * k, 2 * k + 2}));
    CHECK((s2.get_value() == xt::xtensor<double, 1>{2 * k, 2 * k + 2}));
  }
}

TEST_CASE("the logistic regression trains on the device as on the CPU; shared variables live on the device",
          "[gpu]") {
  clean_config cfg;
  const std::size_t n = 60, feats = 30;
  const auto X = random_array<float, 2>({n, feats});
  xt::xtensor<float, 1> Y = xt::zeros<float>({n});
  for (std::size_t i = 0; i < n; i += 2) Y(i) = 1;
  const auto w0 = random_array<float, 1>({feats});
  auto build = [&](const char* device, auto& w, auto& b) {
    auto x = xsym::matrix<float>("x");
    auto y = xsym::vector<float>("y");
    auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
    auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
    auto cost = mean(xent) + 0.01 * sum(w * w);
    auto [gw, gb] = xsym::grad(cost, w, b);
    return xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                          xsym::updates(xsym::update(w, w - 0.1 * gw), xsym::update(b, b - 0.1 * gb)),
                          xsym::device(device));
  };
  auto wc = xsym::shared(w0, "w");
  auto bc = xsym::shared(0.0f, "b");
  auto wg = xsym::shared(w0, "w");
  auto bg = xsym::shared(0.0f, "b");
  auto cpu = build("cpu", wc, bc);
  auto gpu = build("cuda", wg, bg);
  const auto n_gpu = names(gpu);
  CHECK(std::any_of(n_gpu.begin(), n_gpu.end(), [](const std::string& s) { return s.rfind("GpuGemv", 0) == 0; }));
  for (const auto& s : n_gpu) INFO(s);
  // Two inputs up, two outputs down: the shared variables w and b need no transfer.
  CHECK(std::count(n_gpu.begin(), n_gpu.end(), "GpuFromHost") == 2);
  CHECK(std::count(n_gpu.begin(), n_gpu.end(), "HostFromGpu") == 2);
  for (int step = 0; step < 25; ++step) {
    auto [pc, ec] = cpu(X, Y);
    auto [pg, eg] = gpu(X, Y);
    require_close(eg, ec, 1e-4);
  }
  require_close(wg.get_value(), wc.get_value(), 1e-4);
  CHECK(bg.get_value()() == Approx(bc.get_value()()).epsilon(1e-4));
  // set_value goes to the host; the next call places it on the device again.
  wg.set_value(w0);
  wc.set_value(w0);
  require_close(std::get<1>(gpu(X, Y)), std::get<1>(cpu(X, Y)), 1e-4);
  require_close(wg.get_value(), wc.get_value(), 1e-4);
}

TEST_CASE("a shared variable moves between a GPU function and a CPU function that both use it", "[gpu]") {
  clean_config cfg;
  auto s = xsym::shared(xt::xtensor<double, 1>{1, 2, 3}, "s");
  auto x = xsym::vector<double>("x");
  auto on_gpu = xsym::function("g", xsym::inputs(x), s * x, xsym::updates(xsym::update(s, s + 1)), xsym::device("cuda"));
  auto on_cpu = xsym::function("c", xsym::inputs(x), s - x, xsym::updates(xsym::update(s, s * 2)));
  const xt::xtensor<double, 1> one{1, 1, 1};
  CHECK(bool(on_gpu(one) == xt::xtensor<double, 1>{1, 2, 3}));  // s -> 2 3 4, on the device
  CHECK(bool(on_cpu(one) == xt::xtensor<double, 1>{1, 2, 3}));  // s -> 4 6 8, back on the host
  CHECK(bool(on_gpu(one) == xt::xtensor<double, 1>{4, 6, 8}));  // s -> 5 7 9
  CHECK(bool(s.get_value() == xt::xtensor<double, 1>{5, 7, 9}));
}

TEST_CASE("the device flag places every function; device(\"cpu\") keeps one on the host", "[gpu]") {
  clean_config cfg;
  xsym::config.device = std::string("cuda");
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 3);
  auto g = xsym::function("g", xsym::inputs(x), x * 3, xsym::device("cpu"));
  CHECK(names(f) == std::vector<std::string>{"GpuFromHost", "GpuElemwise{mul,no_inplace}", "HostFromGpu"});
  CHECK(names(g) == std::vector<std::string>{"Elemwise{mul,no_inplace}"});
  // An output that is an input comes back untouched: no transfer.
  auto h = xsym::function("h", xsym::inputs(x), xsym::outputs(x, x + 1));
  const auto nh = names(h);
  CHECK(std::count(nh.begin(), nh.end(), "GpuFromHost") == 1);
  CHECK(std::count(nh.begin(), nh.end(), "HostFromGpu") == 1);
  const auto [same, plus] = h(xt::xtensor<float, 1>{1, 2});
  CHECK(bool(same == xt::xtensor<float, 1>{1, 2}));
  CHECK(bool(plus == xt::xtensor<float, 1>{2, 3}));
}

TEST_CASE("device memory is counted exactly, and a warm call allocates none", "[gpu]") {
  clean_config cfg;
  const std::size_t n = 1000;
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2 + 1, xsym::device("cuda"));
  const auto a = random_array<float, 1>({n});
  const auto before = xsym::cuda::allocated();
  xsym::cuda::reset_peak_memory();
  f(a);
  const auto first = xsym::cuda::allocated();
  // GpuFromHost(x) and the kernel's output, both n floats, alive together; both kept for reuse.
  CHECK(first.peak - before.current == static_cast<std::int64_t>(2 * n * sizeof(float)));
  CHECK(first.allocations - before.allocations == 2);
  f(a);
  f(a);
  CHECK(xsym::cuda::allocated().allocations == first.allocations);
  CHECK(xsym::cuda::allocated().current == first.current);
}

TEST_CASE("the profile shows the device: GPU ops and classes, the implementation, GPU memory", "[gpu]") {
  clean_config cfg;
  xsym::config.profile_memory = true;
  auto stats = std::make_shared<xsym::profile_stats>("gpu profile", false);
  auto x = xsym::matrix<float>("x");
  auto v = xsym::vector<float>("v");
  auto f = xsym::function("f", xsym::inputs(x, v), xsym::sum(xsym::exp(xsym::dot(x, v)) + 1), xsym::device("cuda"),
                          xsym::profile(stats));
  const auto a = random_array<float, 2>({100, 50});
  const auto b = random_array<float, 1>({50});
  for (int i = 0; i < 3; ++i) f(a, b);
  std::ostringstream os;
  stats->print_summary(os);
  const std::string text = os.str();
  INFO(text);
#ifdef __CUDACC__
  const char* implementation = "     cuda  ";
#else
  const char* implementation = "thrust-omp";
#endif
  for (const char* want : {"Function profiling", "Message: gpu profile", "Time in 3 calls", "xsym::GpuFromHost", "xsym::GpuGemv",
                           "xsym::HostFromGpu", "GpuCAReduce{add}", implementation, "Memory Profile"})
    CHECK_THAT(text, Catch::Contains(want));
  // Device bytes are measured too (XSYM_COMPUTE_GPU_MEM_USED=1), in brackets after the simulated ones.
  CHECK_THAT(text, Catch::Matches("[\\s\\S]*GPU: [1-9][0-9]*KB \\([1-9][0-9]*KB\\)[\\s\\S]*"));
  const auto& prof = *stats->functions().front();
  for (std::size_t i = 0; i < prof.graph().nodes.size(); ++i) CHECK(prof.node_calls[i] == 3);
}

TEST_CASE("device=cuda refuses the host-checking modes with a clear error", "[gpu]") {
  clean_config cfg;
  auto x = xsym::vector<float>("x");
  const auto msg = message_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::device("cuda"), xsym::mode("DebugMode")); });
  CHECK_THAT(msg, Catch::Contains("mode=DebugMode") && Catch::Contains("device=cuda"));
}

TEST_CASE("into(...) writes a device function's outputs into the caller's arrays", "[gpu]") {
  clean_config cfg;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), xsym::outputs(xsym::exp(x) * 2, xsym::sum(x)), xsym::device("cuda"));
  const auto a = random_array<double, 1>({50});
  xt::xtensor<double, 1> out = xt::zeros<double>({50});
  double total = 0;
  f.into(out, total)(a);
  const auto [want, want_total] = f(a);
  require_close(out, want, 0);
  CHECK(total == want_total);
  xt::xtensor<double, 1> wrong = xt::zeros<double>({49});
  CHECK_THROWS_AS(f.into(wrong, total)(a), xsym::shape_error);
}

namespace {
// The same bits, NaN for NaN (any NaN).
template <class T, std::size_t N>
void require_same_bits(const xt::xtensor<T, N>& got, const xt::xtensor<T, N>& want) {
  REQUIRE(got.shape() == want.shape());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const T g = got.data()[i], w = want.data()[i];
    INFO("element " << i << ": typed " << g << ", op by op " << w);
    if (std::isnan(w)) REQUIRE(std::isnan(g));
    else REQUIRE(std::memcmp(&g, &w, sizeof(T)) == 0);
  }
}

// Random values with edge values at a few places (they land in every kernel's positions).
template <class T>
xt::xtensor<T, 2> values_with_edges(std::size_t rows, std::size_t cols) {
  auto a = random_array<T, 2>({rows, cols});
  using lim = std::numeric_limits<T>;
  const T edges[] = {lim::quiet_NaN(), lim::infinity(), -lim::infinity(), T(-0.0), T(0), lim::denorm_min(), lim::max(), T(-1)};
  for (std::size_t k = 0; k < a.size(); k += 5) a.data()[k] = edges[(k / 5) % 8];
  return a;
}

template <class T>
void check_typed_on_device() {
  const auto m = xsym::matrix<T>("m"), n = xsym::matrix<T>("n"), y = xsym::matrix<T>("y");
  const auto r = xsym::row<T>("r");
  const auto s = xsym::scalar<T>("s");
  // m read twice, r broadcast down the rows, s one value, n.T() a strided view on the device.
  const auto strided = (m * m + r) * s - xsym::exp(-n.T()) / (r * r + 1);
  // Every leaf laid out as the output, or a number: the kernel's flat path.
  const auto flat = xsym::sigmoid(m) * y - xsym::log1p(xsym::abs(m)) + xsym::softplus(y) * xsym::tanh(m) + (m + y + y) * 2;
  auto stats = std::make_shared<xsym::profile_stats>("typed on the device", false);
  auto typed = xsym::function("typed", xsym::inputs(m, n, y, r, s), xsym::outputs(strided, flat), xsym::device("cuda"),
                              xsym::profile(stats));
  auto op_by_op = xsym::function("op by op", xsym::inputs(m, n, y, r, s), xsym::outputs(strided, flat),
                                 xsym::device("cuda"), xsym::optimizer_excluding("fusion"));
  auto cpu = xsym::function("cpu", xsym::inputs(m, n, y, r, s), xsym::outputs(strided, flat));
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 1}, {7, 3}, {300, 37}, {3, 1001}}) {
    CAPTURE(rows, cols);
    const auto a = values_with_edges<T>(rows, cols), b = random_array<T, 2>({cols, rows}), c = values_with_edges<T>(rows, cols);
    const auto row = random_array<T, 2>({1, cols});
    const T sv = T(0.75);
    const auto [t0, t1] = typed(a, b, c, row, sv);
    const auto [o0, o1] = op_by_op(a, b, c, row, sv);
    require_same_bits(t0, o0);
    require_same_bits(t1, o1);
    // And close to the CPU's (its own vector math) where the values are finite.
    const auto [c0, c1] = cpu(a, b, c, row, sv);
    for (std::size_t i = 0; i < t1.size(); ++i) {
      const double g = t1.data()[i], w = c1.data()[i];
      if (std::isfinite(w) && std::isfinite(g)) REQUIRE(std::abs(g - w) <= 1e-5 * (1 + std::abs(w)));
    }
  }
  const auto types = xsym_test::node_types(typed, "typed");
  CHECK(std::count(types.begin(), types.end(), "typed") == 2);  // both Composites
  // Contiguous views, one not on 16 bytes (x[1:]): the flat path without 16-byte packs; and
  // lengths around a pack of 16 bytes for the packed path's last elements.
  using xsym::range;
  using xsym::placeholders::_;
  const auto xv = xsym::vector<T>("xv"), yv = xsym::vector<T>("yv");
  const auto shifted = xv(range(1, _)) * yv(range(_, -1)) + xv(range(1, _)) / 3;
  const auto packed = xsym::tanh(xv) * yv - 1;
  auto typed_v = xsym::function("typed views", xsym::inputs(xv, yv), xsym::outputs(shifted, packed), xsym::device("cuda"),
                                xsym::profile(stats));
  auto op_by_op_v = xsym::function("views op by op", xsym::inputs(xv, yv), xsym::outputs(shifted, packed),
                                   xsym::device("cuda"), xsym::optimizer_excluding("fusion"));
  for (std::size_t n : {2u, 3u, 5u, 6u, 9u, 1003u}) {
    CAPTURE(n);
    const auto a = random_array<T, 1>({n}), b = random_array<T, 1>({n});
    const auto [t0, t1] = typed_v(a, b);
    const auto [o0, o1] = op_by_op_v(a, b);
    require_same_bits(t0, o0);
    require_same_bits(t1, o1);
  }
  const auto view_types = xsym_test::node_types(typed_v, "typed views");
  CHECK(std::count(view_types.begin(), view_types.end(), "typed") == 2);
}
}  // namespace

TEST_CASE("typed trees run their own device kernel, bit for bit the op-by-op kernels, on views and broadcasts",
          "[gpu][typed]") {
  clean_config cfg;
  check_typed_on_device<float>();
  check_typed_on_device<double>();
  // An interpreted program (integers and a switch) next to a typed one keeps its interpreter.
  auto x = xsym::vector<float>("x");
  auto i = xsym::vector<std::int32_t>("i");
  auto stats = std::make_shared<xsym::profile_stats>("mixed", false);
  auto f = xsym::function("mixed", xsym::inputs(x, i), xsym::outputs(xsym::switch_(i > 0, x * 2, x) + 1, x * x + x),
                          xsym::device("cuda"), xsym::profile(stats));
  const xt::xtensor<float, 1> a{1, -2, 3};
  const xt::xtensor<std::int32_t, 1> b{1, 0, -1};
  const auto [u, v] = f(a, b);
  CHECK((u == xt::xtensor<float, 1>{3, -1, 4}));
  CHECK((v == xt::xtensor<float, 1>{2, 2, 12}));
  const auto types = xsym_test::node_types(f, "mixed");
  CHECK(std::count(types.begin(), types.end(), "typed") == 1);
}
