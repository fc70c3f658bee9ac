// Each rewrite fires where it should (visible in the toposort) and changes no value: results
// equal the graph compiled with no rewrite at all and the reference kernels.
#include <catch2/catch.hpp>

#include <algorithm>

#include <xsym/xsym.hpp>

#include "compile_util.hpp"

namespace {

template <class F>
std::vector<std::string> names(const F& f) {
  std::vector<std::string> n;
  for (const auto& node : f.toposort()) n.push_back(node.op_name());
  return n;
}

bool any_contains(const std::vector<std::string>& v, const std::string& what) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(what) != std::string::npos; });
}

// Compiles `out` twice, with every rewrite and with none, and checks the values agree.
template <class In, class Out, class... Args>
auto check_same(const In& in, const Out& out, const Args&... args) {
  auto opt = xsym::function("optimised", in, out);
  auto ref = xsym::function("reference", in, out, xsym::optimizer("None"), xsym::linker("py"));
  const auto a = opt(args...);
  const auto b = ref(args...);
  REQUIRE(a.shape() == b.shape());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a.flat(i) == Approx(b.flat(i)).epsilon(1e-12).margin(1e-12));
  return opt;
}

}  // namespace

TEST_CASE("stabilize: log(1 - sigmoid) and log(sigmoid) become softplus and stay finite", "[compile][rewrites]") {
  xsym_test::clean_config guard;
  auto z = xsym::vector<double>("z");
  auto p = 1 / (1 + exp(-z));
  auto f = xsym::function("stable", xsym::inputs(z), log(1 - p) + log(p), xsym::optimizer_excluding("fusion"));
  CHECK(any_contains(names(f), "scalar_softplus"));
  CHECK_FALSE(any_contains(names(f), "log"));
  const auto r = f(xt::xtensor<double, 1>{-800, 0, 800});
  CHECK(r(0) == Approx(-800.0).epsilon(1e-12));
  CHECK(r(1) == Approx(2 * std::log(0.5)).epsilon(1e-12));
  CHECK(r(2) == Approx(-800.0).epsilon(1e-12));
  auto naive = xsym::function("naive", xsym::inputs(z), log(1 - p) + log(p), xsym::optimizer("None"));
  CHECK(std::isinf(naive(xt::xtensor<double, 1>{800})(0)));
  auto l = xsym::function("log1p", xsym::inputs(z), log(1 + z), xsym::optimizer_excluding("fusion"));
  CHECK(names(l) == std::vector<std::string>{"Elemwise{log1p,no_inplace}"});
  // -a - b - c is -(a + b + c): the cross-entropy of a sum of three terms stays finite too.
  auto a = xsym::vector<double>("a"), b = xsym::vector<double>("b");
  auto q = 1 / (1 + exp(-z - a - b));
  auto g = xsym::function("three", xsym::inputs(z, a, b), -log(q) - log(1 - q), xsym::optimizer_excluding("fusion"));
  CHECK(any_contains(names(g), "scalar_softplus"));
  CHECK_FALSE(any_contains(names(g), "log"));
  const xt::xtensor<double, 1> big{-700, 1, 700}, zero{0, 0, 0};
  const auto s3 = g(big, zero, zero);
  for (std::size_t i = 0; i < 3; ++i) {
    // -log(q) - log(1 - q) = softplus(-u) + softplus(u) for u = z + a + b.
    const double u = big(i), want = std::abs(u) + 2 * std::log1p(std::exp(-std::abs(u)));
    CHECK(s3(i) == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("canonicalize and constant_folding remove identities and constant arithmetic", "[compile][rewrites]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  auto f = check_same(xsym::inputs(x), (x * 1.0 + 0.0) * (xsym::constant(2.0) * 3.0), xt::xtensor<double, 1>{1, 2});
  CHECK(f.toposort().size() == 1);
  auto g = xsym::function("neg", xsym::inputs(x), -(-x) * 2.0, xsym::optimizer_excluding("fusion"));
  CHECK(names(g) == std::vector<std::string>{"Elemwise{mul,no_inplace}"});
}

TEST_CASE("merge computes identical subexpressions once", "[compile][rewrites]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("merged", xsym::inputs(x), xsym::outputs(exp(x) + exp(x), exp(x)),
                          xsym::optimizer_excluding("fusion:inplace"));
  const auto n = names(f);
  CHECK(std::count(n.begin(), n.end(), "Elemwise{exp,no_inplace}") == 1);
  auto [a, b] = f(xt::xtensor<double, 1>{0, 1});
  CHECK(a(1) == Approx(2 * std::exp(1.0)).epsilon(1e-12));
  CHECK(b(1) == Approx(std::exp(1.0)).epsilon(1e-12));
}

TEST_CASE("merge keeps apart nodes of one op on one input whose outputs differ in dtype (a shape as int64 and as a "
          "float in mean's gradient)", "[compile][rewrites]") {
  xsym_test::clean_config guard;
  auto m = xsym::matrix<double>("m");
  auto mf = xsym::matrix<float>("mf");
  auto [g] = xsym::grad(xsym::sum(xsym::mean(m, 0)), m);  // 1 / rows everywhere, through Shape_i{0} as a double
  auto [gf] = xsym::grad(xsym::sum(xsym::mean(mf, 0)), mf);
  const xt::xtensor<double, 2> M{{1, 2, 3}, {4, 5, 6}};
  const xt::xtensor<float, 2> MF{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  for (const char* mode : {"FAST_RUN", "FAST_COMPILE"}) {
    INFO("mode " << mode);
    // Either order: the first node merge meets is the one that would have stayed.
    auto f = xsym::function("f", xsym::inputs(m), xsym::outputs(g, xsym::shape(m, 0)), xsym::mode(mode));
    auto [gv, rows] = f(M);
    CHECK(rows == 2);
    CHECK(static_cast<bool>(gv == xt::xtensor<double, 2>(xt::full_like(M, 0.5))));
    auto h = xsym::function("h", xsym::inputs(m), xsym::outputs(xsym::shape(m, 0) * 3, g), xsym::mode(mode));
    auto [rows3, gv2] = h(M);
    CHECK(rows3 == 6);
    CHECK(static_cast<bool>(gv2 == xt::xtensor<double, 2>(xt::full_like(M, 0.5))));
    auto k = xsym::function("k", xsym::inputs(mf), xsym::outputs(xsym::shape(mf, 0) + 1, gf), xsym::mode(mode));
    auto [rows1, gfv] = k(MF);
    CHECK(rows1 == 4);
    CHECK(static_cast<bool>(gfv == xt::xtensor<float, 2>(xt::full_like(MF, 1.0f / 3))));
  }
}

TEST_CASE("blas: products become Gemv and Dot22; gemv_accumulate folds scale and add", "[compile][rewrites]") {
  xsym_test::clean_config guard;
  auto m = xsym::matrix<double>("m");
  auto v = xsym::vector<double>("v");
  auto a = xsym::vector<double>("a");
  const xt::xtensor<double, 2> M{{1, 2, 3}, {4, 5, 6}};
  const xt::xtensor<double, 1> V{1, -1, 2}, A{0.5, -0.5}, U{2, 3};
  auto f = check_same(xsym::inputs(m, v), xsym::dot(m, v), M, V);
  CHECK(names(f) == std::vector<std::string>{"Gemv{no_inplace}"});
  auto g = check_same(xsym::inputs(v, m), xsym::dot(v, m.T()), V, M);
  CHECK(any_contains(names(g), "Gemv"));
  auto h = check_same(xsym::inputs(m), xsym::dot(m, m.T()), M);
  CHECK(any_contains(names(h), "Dot22"));
  // a - 0.01 (0.5 a + M v) is 0.995 a - 0.01 M v: a goes in as it is, scaled by beta.
  auto k = check_same(xsym::inputs(a, m, v), a - 0.01 * (a * 0.5 + xsym::dot(m, v)), A, M, V);
  CHECK(names(k) == std::vector<std::string>{"Gemv{no_inplace,alpha=-0.01,beta=0.995}"});
  // Not a multiple of a (a product of arrays, a constant term): the elementwise part runs first.
  auto sq = check_same(xsym::inputs(a, m, v), a - 0.01 * (a * a + xsym::dot(m, v)), A, M, V);
  CHECK(any_contains(names(sq), "Gemv{inplace,alpha=-0.01}"));
  CHECK(any_contains(names(sq), "Elemwise"));
  auto off = check_same(xsym::inputs(a, m, v), a - 0.01 * ((a + 1.0) + xsym::dot(m, v)), A, M, V);
  CHECK(any_contains(names(off), "Gemv{inplace,alpha=-0.01}"));
  auto b = xsym::vector<double>("b");
  auto two = check_same(xsym::inputs(a, b, m, v), a - 0.01 * (b * 0.5 + xsym::dot(m, v)), A, U, M, V);
  CHECK(any_contains(names(two), "Gemv{inplace,alpha=-0.01}"));
  auto q = xsym::matrix<double>("q");
  const xt::xtensor<double, 2> Q{{1, 0}, {0.5, 2}};
  auto gm = check_same(xsym::inputs(q, m), q + 0.5 * xsym::dot(m, m.T()), Q, M);
  CHECK((any_contains(names(gm), "Gemm{inplace,alpha=0.5}") || any_contains(names(gm), "Gemm{no_inplace,alpha=0.5}")));
  auto no_blas = xsym::function("no_blas", xsym::inputs(m, v), xsym::dot(m, v), xsym::optimizer_excluding("blas"));
  CHECK(names(no_blas) == std::vector<std::string>{"dot"});
  CHECK((no_blas(M, V) == f(M, V)));
}

TEST_CASE("fusion: a tree becomes one Composite; multi-output fusion joins shared values", "[compile][rewrites]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto f = check_same(xsym::inputs(x, y), exp(x) * y + 1.0, xt::xtensor<double, 1>{1, 2}, xt::xtensor<double, 1>{3, 4});
  REQUIRE(f.toposort().size() == 1);
  CHECK(names(f)[0] == "Elemwise{Composite{((exp(i0) * i1) + i2)}}");
  auto s = exp(x) * y;  // read by two outputs
  auto g = xsym::function("multi", xsym::inputs(x, y), xsym::outputs(s + 1.0, s * 2.0));
  REQUIRE(g.toposort().size() == 1);
  CHECK(g.toposort()[0].outputs.size() == 2);
  auto [a, b] = g(xt::xtensor<double, 1>{0}, xt::xtensor<double, 1>{3});
  CHECK(a(0) == 4.0);
  CHECK(b(0) == 6.0);
}

TEST_CASE("inplace: a dying intermediate is overwritten and the node says so", "[compile][rewrites]") {
  xsym_test::clean_config guard;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("inplace", xsym::inputs(x), exp(x) + 1.0, xsym::optimizer_excluding("fusion"));
  CHECK(names(f) == std::vector<std::string>{"Elemwise{exp,no_inplace}", "Elemwise{add,inplace}"});
  CHECK(f.toposort()[1].get_op().destroy_map == std::vector<std::pair<int, int>>{{0, 0}});
  const xt::xtensor<double, 1> in{0, 1};
  CHECK(f(in)(1) == Approx(std::exp(1.0) + 1).epsilon(1e-12));
  CHECK(in(1) == 1.0);  // never a function input
  auto t = xsym::function("view", xsym::inputs(x), xsym::dimshuffle(x, 'x', 0), xsym::optimizer_excluding("fusion"));
  CHECK(t.toposort()[0].get_op().view_map() == std::vector<std::pair<int, int>>{{0, 0}});
  // A row broadcast over the output's rows cannot hold it: the sum goes into X's place instead.
  auto m = xsym::matrix<double>("m");
  auto b = xsym::function("broadcast", xsym::inputs(m), exp(xsym::sum(m, 0, xsym::keepdims)) + exp(m),
                          xsym::optimizer_excluding("fusion"));
  for (const auto& node : b.toposort())
    if (node.op_name().rfind("Elemwise{add", 0) == 0) CHECK(node.get_op().destroy_map == std::vector<std::pair<int, int>>{{0, 1}});
  const xt::xtensor<double, 2> mv{{0, 1, 2}, {3, 4, 5}};
  const xt::xtensor<double, 2> r = b(mv);
  REQUIRE(r.shape()[0] == 2);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      CHECK(r(i, j) == Approx(std::exp(mv(0, j) + mv(1, j)) + std::exp(mv(i, j))).epsilon(1e-12));
}
