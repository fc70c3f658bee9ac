// An op added as docs/design.md's recipe says: one row of the op table (through XSYM_USER_OPS,
// the table's extension point) and nothing else. The CPU kernels, the fused programs, the
// kernels cxx compiles, the GPU functor, grad and the profile's flops all read that row.
#define XSYM_USER_OPS(OP) OP(cube, "cube", 1, "", floating, 2, (mul(mul(g, c(3)), ew(scalar_op::sqr, a))), a * a * a)

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>
#include <string>

#ifdef XSYM_TEST_GPU
#include <xsym/gpu.hpp>
#endif
#include <xsym/xsym.hpp>
#include <xtensor/xview.hpp>

#include "compile/compile_util.hpp"

namespace {
using xsym::scalar_op;
using xsym_test::clean_config;

template <class E, std::size_t N>
auto cube(const xsym::var<E, N>& a) {
  return xsym::detail::unary<scalar_op::cube>(a);
}

// Lengths around every SIMD width (a batch of 2 to 16 elements, and the scalar tail after it).
template <class T>
xt::xtensor<T, 1> values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-3, 3);
  xt::xtensor<T, 1> a = xt::xtensor<T, 1>::from_shape({n});
  for (auto& v : a) v = static_cast<T>(u(rng));
  return a;
}

// The row's value computed in double, rounded once to T: a * a * a in T rounds twice, so the
// kernel is allowed that much.
template <class T>
void require_cubes(const xt::xtensor<T, 1>& got, const xt::xtensor<T, 1>& x, double scale = 1, double shift = 0) {
  REQUIRE(got.size() == x.size());
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = static_cast<double>(x(i));
    const double want = v * v * v * scale + shift;
    INFO("element " << i << " of " << x.size() << ": x = " << v);
    REQUIRE(std::abs(static_cast<double>(got(i)) - want) <= 4 * eps * (std::abs(v * v * v * scale) + std::abs(shift) + 1));
  }
}
}  // namespace

static_assert(xsym::info(scalar_op::cube).name == "cube");
static_assert(xsym::info(scalar_op::cube).arity == 1 && xsym::info(scalar_op::cube).float_only);
static_assert(xsym::info(scalar_op::cube).flops == 2);
static_assert(xsym::info(scalar_op::cube).expression == "a * a * a");
static_assert(static_cast<int>(scalar_op::cube) == xsym::scalar_op_count - 1, "a user row follows the built-in ones");

TEMPLATE_TEST_CASE("a row added to the op table runs alone and fused, at every position of a batch", "[op_recipe]",
                   float, double) {
  clean_config cfg;
  auto x = xsym::vector<TestType>("x");
  auto alone = xsym::function("alone", xsym::inputs(x), cube(x), xsym::optimizer_excluding("fusion"));
  REQUIRE(xsym_test::op_names(alone) == std::vector<std::string>{"Elemwise{cube,no_inplace}"});
  auto fused = xsym::function("fused", xsym::inputs(x), cube(x) * 2 + 1);
  REQUIRE(xsym_test::op_names(fused).size() == 1);
  CHECK_THAT(xsym_test::op_names(fused)[0], Catch::Contains("cube(i0)"));
  for (std::size_t n : {1u, 7u, 16u, 17u, 33u, 1000u}) {
    const auto a = values<TestType>(n, static_cast<unsigned>(n));
    require_cubes<TestType>(alone(a), a);
    require_cubes<TestType>(fused(a), a, 2, 1);
  }
  // A strided view: every other element.
  const auto a = values<TestType>(40, 3);
  const xt::xtensor<TestType, 1> every_other = xt::view(a, xt::range(0, 40, 2));
  require_cubes<TestType>(alone(xt::view(a, xt::range(0, 40, 2))), every_other);
}

TEST_CASE("an added floating row computes integers in float64", "[op_recipe]") {
  clean_config cfg;
  auto i = xsym::vector<std::int32_t>("i");
  auto f = xsym::function("f", xsym::inputs(i), cube(i));
  const xt::xtensor<std::int32_t, 1> a{-3, 0, 2, 1290};
  const auto r = f(a);
  static_assert(std::is_same_v<typename std::decay_t<decltype(r)>::value_type, double>);
  for (std::size_t k = 0; k < a.size(); ++k) CHECK(r(k) == std::pow(static_cast<double>(a(k)), 3));
}

TEST_CASE("an added row's derivative column is its gradient", "[op_recipe]") {
  clean_config cfg;
  auto x = xsym::vector<double>("x");
  auto cost = xsym::sum(cube(x));
  auto [gx] = xsym::grad(cost, x);
  auto f = xsym::function("g", xsym::inputs(x), xsym::outputs(cost, gx));
  auto c = xsym::function("c", xsym::inputs(x), cost);
  xt::xtensor<double, 1> a = values<double>(9, 11);
  const auto [value, g] = f(a);
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double h = 1e-5, saved = a(k);
    a(k) = saved + h;
    const double up = static_cast<double>(c(a));
    a(k) = saved - h;
    const double down = static_cast<double>(c(a));
    a(k) = saved;
    INFO("element " << k);
    CHECK(g(k) == Approx((up - down) / (2 * h)).epsilon(1e-6));
  }
  CHECK(static_cast<double>(value) == Approx(xt::sum(a * a * a)()).epsilon(1e-12));
}

TEST_CASE("an added row's flops reach the profile", "[op_recipe]") {
  clean_config cfg;
  auto stats = std::make_shared<xsym::profile_stats>("recipe", false);
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), cube(x), xsym::optimizer_excluding("fusion"), xsym::profile(stats));
  f(values<float>(5000, 1));
  std::ostringstream json;
  xsym::write_json(*stats, json);
  CHECK_THAT(json.str(), Catch::Contains("\"flops\": 10000") && Catch::Contains("\"apply\": \"Elemwise{cube,no_inplace}(x)\""));
}

TEST_CASE("an added row is in the text cxx compiles", "[op_recipe]") {
  const std::string prelude = xsym::cpu::detail::jit_prelude();
  CHECK_THAT(prelude, Catch::Contains("f_cube([[maybe_unused]] X a, [[maybe_unused]] X b) { return a * a * a; }"));
#ifdef XSYM_TEST_CXX
  clean_config cfg;
  xsym_test::cxx_on cxx("op_recipe");
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), cube(x) * 2 + 1);
  REQUIRE(f.runtime()->compiled_kernels().kernels == 1);
  const auto a = values<double>(37, 5);
  require_cubes<double>(f(a), a, 2, 1);
#endif
}

#ifdef XSYM_TEST_GPU
TEST_CASE("an added row runs on the device", "[op_recipe][gpu]") {
  clean_config cfg;
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), cube(x) * 2 + 1, xsym::device("cuda"));
  const auto names = xsym_test::op_names(f);
  REQUIRE(names.size() == 3);
  CHECK_THAT(names[1], Catch::StartsWith("GpuElemwise{Composite{") && Catch::Contains("cube(i0)"));
  const auto a = values<float>(301, 9);
  require_cubes<float>(f(a), a, 2, 1);
}
#endif
