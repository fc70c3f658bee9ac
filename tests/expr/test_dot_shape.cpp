// dot in its four rank combinations (plain, through the BLAS rewrite and with reference
// kernels), with transposed operands, against loops; and dimshuffle / transpose values.
#include "expr_util.hpp"

using namespace xsym_test;

namespace {

// Naive matrix product in double; returns the values and, per element, sum |a_ik b_kj| (the
// scale that float rounding is relative to).
struct product {
  std::vector<double> value, scale;
};
product ref_matmul(const std::vector<double>& a, const std::vector<double>& b, std::size_t m, std::size_t k,
                   std::size_t n) {
  product p{std::vector<double>(m * n, 0.0), std::vector<double>(m * n, 0.0)};
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t q = 0; q < k; ++q) {
        p.value[i * n + j] += a[i * k + q] * b[q * n + j];
        p.scale[i * n + j] += std::abs(a[i * k + q] * b[q * n + j]);
      }
  return p;
}

template <class T, std::size_t N>
std::vector<double> transposed_doubles(const xt::xtensor<T, N>& a) {
  if constexpr (N == 1) return to_doubles(a);
  else return to_doubles(xt::xtensor<T, 2>(xt::transpose(a)));
}

struct dot_shape {
  std::size_t m, k, n;
};
const dot_shape dot_shapes[] = {{1, 1, 1}, {4, 7, 5}, {1, 33, 1}, {9, 1, 3}, {37, 53, 29}, {2, 300, 3}};

// Every option set a dot must give the same values under.
template <class F>
void for_each_dot_config(F&& f) {
  f("default", xsym::linker("cvm"));
  f("no blas rewrite", xsym::optimizer_excluding("blas"));
  f("reference kernels", xsym::linker("py"));
}

// numpy's type for a product of TA and TB, written out for the pairs tested below.
template <class TA, class TB>
using expected_dot_t = std::conditional_t<std::is_same_v<TA, TB>, TA,
                                          std::conditional_t<std::is_integral_v<TA> && std::is_integral_v<TB>,
                                                             std::int64_t, double>>;

template <class R, std::size_t N>
std::string dot_mismatch(const xt::xtensor<R, N>& r, const product& p) {
  // Rounding grows with the length of the sums; relative to sum |a_k b_k| it stays small.
  return differences(r, p.value, p.scale, std::is_same_v<R, float> ? 1e-4 : tolerance<R>::rtol, tolerance<R>::atol);
}

template <class TA, class TB>
void check_dot_pair() {
  using R = expected_dot_t<TA, TB>;
  INFO("dot of " << type_name<TA>() << " and " << type_name<TB>());
  auto A = xsym::matrix<TA>("A");    // (m, k)
  auto At = xsym::matrix<TA>("At");  // (k, m), used transposed
  auto B = xsym::matrix<TB>("B");    // (k, n)
  auto Bt = xsym::matrix<TB>("Bt");  // (n, k), used transposed
  auto u = xsym::vector<TA>("u");    // (k)
  auto v = xsym::vector<TB>("v");    // (k)
  auto vv = xsym::dot(u, v);
  auto mv = xsym::dot(A, v);
  auto vm = xsym::dot(u, B);
  auto mm = xsym::dot(A, B);
  CHECK(std::is_same_v<typename decltype(vv)::value_type, R>);
  CHECK(decltype(vv)::rank == 0);
  CHECK(decltype(mv)::rank == 1);
  CHECK(decltype(vm)::rank == 1);
  CHECK(decltype(mm)::rank == 2);
  auto outs = xsym::outputs(vv, mv, xsym::dot(At.T(), v), vm, xsym::dot(u, Bt.T()), mm, xsym::dot(At.T(), B),
                            xsym::dot(A, Bt.T()), xsym::dot(xsym::transpose(At), xsym::transpose(Bt)));
  const double lo = std::is_integral_v<TA> ? -10 : -1, hi = -lo;
  for_each_dot_config([&](const char* config, const auto& option) {
    auto f = xsym::function("dot", xsym::inputs(A, At, B, Bt, u, v), outs, option);
    std::mt19937 rng(1001);
    for (const auto& s : dot_shapes) {
      INFO(config << ", m " << s.m << ", k " << s.k << ", n " << s.n);
      const auto a = random_tensor<TA, 2>(rng, {s.m, s.k}, lo, hi);
      const xt::xtensor<TA, 2> at = xt::transpose(a);
      const auto b = random_tensor<TB, 2>(rng, {s.k, s.n}, lo, hi);
      const xt::xtensor<TB, 2> bt = xt::transpose(b);
      const auto uu = random_tensor<TA, 1>(rng, {s.k}, lo, hi);
      const auto vvv = random_tensor<TB, 1>(rng, {s.k}, lo, hi);
      auto [r_vv, r_mv, r_mtv, r_vm, r_vmt, r_mm, r_mtm, r_mmt, r_mtmt] = f(a, at, b, bt, uu, vvv);
      const auto da = to_doubles(a), db = to_doubles(b), du = to_doubles(uu), dv = to_doubles(vvv);
      const product p_vv = ref_matmul(du, dv, 1, s.k, 1);
      const product p_mv = ref_matmul(da, dv, s.m, s.k, 1);
      const product p_vm = ref_matmul(du, db, 1, s.k, s.n);
      const product p_mm = ref_matmul(da, db, s.m, s.k, s.n);
      CHECK(dot_mismatch(xt::xtensor<R, 1>{r_vv}, p_vv) == "");
      CHECK(dot_mismatch(r_mv, p_mv) == "");
      CHECK(dot_mismatch(r_mtv, p_mv) == "");
      CHECK(dot_mismatch(r_vm, p_vm) == "");
      CHECK(dot_mismatch(r_vmt, p_vm) == "");
      REQUIRE(shape_vector(r_mm.shape()) == std::vector<std::size_t>{s.m, s.n});
      CHECK(dot_mismatch(r_mm, p_mm) == "");
      CHECK(dot_mismatch(r_mtm, p_mm) == "");
      CHECK(dot_mismatch(r_mmt, p_mm) == "");
      CHECK(dot_mismatch(r_mtmt, p_mm) == "");
    }
  });
}

}  // namespace

TEST_CASE("dot in all four rank combinations, with transposed operands", "[expr][dot]") {
  check_dot_pair<float, float>();
  check_dot_pair<double, double>();
  check_dot_pair<std::int32_t, std::int32_t>();
  check_dot_pair<std::int64_t, std::int64_t>();
  check_dot_pair<std::int32_t, float>();
  check_dot_pair<float, double>();
}

TEST_CASE("dot of vectors of every length, and shapes that do not align", "[expr][dot]") {
  auto u = xsym::vector<double>("u");
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("vdot", xsym::inputs(u, v), xsym::dot(u, v));
  std::mt19937 rng(4);
  for (std::size_t n : sizes) {
    INFO("size " << n);
    const auto a = random_tensor<double, 1>(rng, {n}, -1, 1);
    const auto b = random_tensor<double, 1>(rng, {n}, -1, 1);
    const product p = ref_matmul(to_doubles(a), to_doubles(b), 1, n, 1);
    CHECK(dot_mismatch(xt::xtensor<double, 1>{f(a, b)}, p) == "");
  }
  const xt::xtensor<double, 1> three = xt::ones<double>({3}), four = xt::ones<double>({4});
  CHECK_THROWS_AS(f(three, four), xsym::shape_error);
  auto m = xsym::matrix<double>("m");
  auto g = xsym::function("mdot", xsym::inputs(m, v), xsym::dot(m, v));
  const xt::xtensor<double, 2> m34 = xt::ones<double>({3, 4});
  CHECK_THROWS_AS(g(m34, three), xsym::shape_error);
  auto h = xsym::function("mmdot", xsym::inputs(m), xsym::dot(m, m));
  CHECK_THROWS_AS(h(m34), xsym::shape_error);
}

TEST_CASE("dimshuffle and transpose move values where the pattern says", "[expr][shape]") {
  std::mt19937 rng(6);
  auto m = xsym::matrix<double>("m");
  auto v = xsym::vector<double>("v");
  auto t = xsym::tensor3<double>("t");
  auto f = xsym::function("shuffle", xsym::inputs(m, v, t),
                          xsym::outputs(xsym::transpose(m), xsym::dimshuffle(m, 1, 'x', 0), xsym::dimshuffle(v, 'x', 0),
                                        xsym::dimshuffle(v, 0, 'x'), xsym::dimshuffle(t, 2, 0, 1), m.T().T(),
                                        xsym::dimshuffle(m, 'x', 1, 'x', 0), xsym::transpose(v)));
  const auto M = random_tensor<double, 2>(rng, {3, 5}, -9, 9);
  const auto V = random_tensor<double, 1>(rng, {4}, -9, 9);
  const auto T = random_tensor<double, 3>(rng, {2, 3, 4}, -9, 9);
  auto [mt, m1x0, vrow, vcol, t201, mtt, mx1x0, vt] = f(M, V, T);
  CHECK(shape_vector(mt.shape()) == std::vector<std::size_t>{5, 3});
  CHECK(shape_vector(m1x0.shape()) == std::vector<std::size_t>{5, 1, 3});
  CHECK(shape_vector(vrow.shape()) == std::vector<std::size_t>{1, 4});
  CHECK(shape_vector(vcol.shape()) == std::vector<std::size_t>{4, 1});
  CHECK(shape_vector(t201.shape()) == std::vector<std::size_t>{4, 2, 3});
  CHECK(shape_vector(mx1x0.shape()) == std::vector<std::size_t>{1, 5, 1, 3});
  std::vector<double> e_mt, e_t201;
  for (std::size_t j = 0; j < 5; ++j)
    for (std::size_t i = 0; i < 3; ++i) e_mt.push_back(M(i, j));
  for (std::size_t k = 0; k < 4; ++k)
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j) e_t201.push_back(T(i, j, k));
  CHECK(differences(mt, e_mt) == "");
  CHECK(differences(m1x0, e_mt) == "");
  CHECK(differences(mx1x0, e_mt) == "");
  CHECK(differences(vrow, to_doubles(V)) == "");
  CHECK(differences(vcol, to_doubles(V)) == "");
  CHECK(differences(t201, e_t201) == "");
  CHECK(differences(mtt, to_doubles(M)) == "");
  CHECK(differences(vt, to_doubles(V)) == "");

  bool named = false;
  for (const auto& n : f.toposort()) named |= n.op_name() == "InplaceDimShuffle{1,x,0}";
  CHECK(named);
}

TEST_CASE("bad dimshuffle patterns are rejected when the expression is built", "[expr][shape]") {
  auto m = xsym::matrix<double>("m");
  auto v = xsym::vector<double>("v");
  CHECK_THROWS_AS(xsym::dimshuffle(m, 0, 0), xsym::graph_error);       // dimension 1 dropped
  CHECK_THROWS_AS(xsym::dimshuffle(m, 0, 2), xsym::graph_error);       // no dimension 2
  CHECK_THROWS_AS(xsym::dimshuffle(m, 'y', 0, 1), xsym::graph_error);  // only 'x' is a new axis
  CHECK_THROWS_AS(xsym::dimshuffle(v, 0, 0), xsym::graph_error);       // dimension 0 twice
  CHECK_THROWS_AS(xsym::dimshuffle(m, 1, -2, 0), xsym::graph_error);
}
