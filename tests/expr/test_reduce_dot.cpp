// Reductions over every axis combination, every dtype and ranks 1 to 3; dot in its four rank
// combinations (plain, through the BLAS rewrite and with reference kernels) with transposed
// operands; dimshuffle / transpose values. All against loops.
#include "expr_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <xtensor/xadapt.hpp>
#include <xtensor/xview.hpp>

using namespace xsym_test;

namespace {

enum class red { sum, prod, max, min, mean };
constexpr red all_reductions[] = {red::sum, red::prod, red::max, red::min, red::mean};

const char* red_name(red r) {
  switch (r) {
    case red::sum: return "sum";
    case red::prod: return "prod";
    case red::max: return "max";
    case red::min: return "min";
    case red::mean: return "mean";
  }
  return "?";
}

template <red R>
struct reducer {
  template <class... A>
  auto operator()(const A&... a) const {
    if constexpr (R == red::sum) return xsym::sum(a...);
    else if constexpr (R == red::prod) return xsym::prod(a...);
    else if constexpr (R == red::max) return xsym::max(a...);
    else if constexpr (R == red::min) return xsym::min(a...);
    else return xsym::mean(a...);
  }
};

// numpy's result types, written out independently of the library's traits.
template <red R, class T>
using expected_reduce_t = std::conditional_t<
    R == red::max || R == red::min, T,
    std::conditional_t<std::is_floating_point_v<T>, T, std::conditional_t<R == red::mean, double, std::int64_t>>>;

// Reference: reduce data (C order, shape) over the normalized axes; returns the kept shape and values.
std::pair<std::vector<std::size_t>, std::vector<double>> ref_reduce(red r, const std::vector<double>& data,
                                                                    const std::vector<std::size_t>& shape,
                                                                    const std::vector<int>& axes) {
  const std::size_t rank = shape.size();
  std::vector<bool> reduced(rank, false);
  for (int a : axes) reduced[static_cast<std::size_t>(a)] = true;
  std::vector<std::size_t> out_shape;
  for (std::size_t d = 0; d < rank; ++d)
    if (!reduced[d]) out_shape.push_back(shape[d]);
  std::size_t out_size = 1, count = 1;
  for (std::size_t d = 0; d < rank; ++d) (reduced[d] ? count : out_size) *= shape[d];
  const double init = r == red::prod ? 1.0
                      : r == red::max ? -std::numeric_limits<double>::infinity()
                      : r == red::min ? std::numeric_limits<double>::infinity()
                                      : 0.0;
  std::vector<double> acc(out_size, init);
  std::vector<std::size_t> idx(rank, 0);
  for (std::size_t flat = 0; flat < data.size(); ++flat) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < rank; ++d)
      if (!reduced[d]) o = o * shape[d] + idx[d];
    const double v = data[flat];
    double& a = acc[o];
    switch (r) {
      case red::sum:
      case red::mean: a += v; break;
      case red::prod: a *= v; break;
      case red::max: a = std::max(a, v); break;
      case red::min: a = std::min(a, v); break;
    }
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  if (r == red::mean)
    for (double& a : acc) a /= static_cast<double>(count);
  return {out_shape, acc};
}

template <class T>
T reduce_test_value(std::mt19937& rng, red r) {
  if (r != red::prod) return random_value<T>(rng, -100, 100);
  // Products of a thousand numbers stay finite (and exact for integers).
  if constexpr (std::is_same_v<T, bool>) return std::bernoulli_distribution(0.97)(rng);
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>((std::bernoulli_distribution(0.04)(rng) ? 2 : 1) * (std::bernoulli_distribution(0.5)(rng) ? 1 : -1));
  else return random_value<T>(rng, 0.6, 1.5);
}

std::vector<int> normalized(std::vector<int> axes, int rank) {
  for (int& a : axes)
    if (a < 0) a += rank;
  std::sort(axes.begin(), axes.end());
  return axes;
}

// Compiles e = reduction(x) and checks it on every shape; instantiated once per (input type,
// rank, result type, result rank) rather than once per reduction and axis list.
template <class T, std::size_t N, class V, std::size_t K>
void run_reduction(red r, const xsym::var<T, N>& x, const xsym::var<V, K>& e,
                   const std::vector<std::array<std::size_t, N>>& shapes, const std::vector<int>& axes) {
  auto f = xsym::function("reduce", xsym::inputs(x), e);
  std::mt19937 rng(static_cast<unsigned>(N * 100 + axes.size()));
  const auto norm = normalized(axes, static_cast<int>(N));
  for (const auto& shape : shapes) {
    std::string shape_text;
    for (auto d : shape) shape_text += std::to_string(d) + " ";
    INFO("shape " << shape_text);
    xt::xtensor<T, N> data(shape);
    for (auto& v : data) v = reduce_test_value<T>(rng, r);
    auto [rshape, expected] = ref_reduce(r, to_doubles(data), shape_vector(shape), norm);
    if constexpr (K == 0) {
      const V res = f(data);
      CHECK(differences(xt::xtensor<V, 1>{res}, expected) == "");
    } else {
      const xt::xtensor<V, K> res = f(data);
      CHECK(shape_vector(res.shape()) == rshape);
      CHECK(differences(res, expected) == "");
    }
  }
}

template <red R, class T, std::size_t N, class... Axis>
void check_reduction(const xsym::var<T, N>& x, const std::vector<std::array<std::size_t, N>>& shapes,
                     const std::vector<int>& axes, const Axis&... axis) {
  auto e = reducer<R>{}(x, axis...);
  CHECK(std::is_same_v<typename decltype(e)::value_type, expected_reduce_t<R, T>>);
  run_reduction(R, x, e, shapes, axes);
}

template <red R, class T, std::size_t N>
void check_all_axes(const std::vector<std::array<std::size_t, N>>& shapes) {
  auto x = xsym::tensor<T, N>("x");
  std::vector<int> everything(N);
  std::iota(everything.begin(), everything.end(), 0);
  {
    INFO("all axes");
    check_reduction<R>(x, shapes, everything);
  }
  for (int a = -static_cast<int>(N); a < static_cast<int>(N); ++a) {
    INFO("axis " << a);
    check_reduction<R>(x, shapes, {a}, a);
  }
  if constexpr (N >= 2) {
    const std::vector<std::array<int, 2>> pairs =
        N == 2 ? std::vector<std::array<int, 2>>{{0, 1}, {1, 0}, {-1, 0}, {-2, -1}}
               : std::vector<std::array<int, 2>>{{0, 1}, {0, 2}, {1, 2}, {2, 0}, {-1, -3}, {-2, 0}};
    for (const auto& p : pairs) {
      INFO("axes {" << p[0] << ", " << p[1] << "}");
      const int ax[2] = {p[0], p[1]};
      check_reduction<R>(x, shapes, {p[0], p[1]}, ax);
    }
  }
  if constexpr (N == 3) {
    INFO("axes {2, -2, 0}");
    const int ax[3] = {2, -2, 0};
    check_reduction<R>(x, shapes, {2, -2, 0}, ax);
  }
}

template <red R>
void check_reduction_family() {
  for_each_type(all_types{}, []<class T>() {
    INFO(red_name(R) << " on " << type_name<T>());
    check_all_axes<R, T, 1>({{1}, {7}, {33}, {1000}});
    check_all_axes<R, T, 2>({{3, 5}, {1, 9}, {17, 1}, {33, 29}});
    check_all_axes<R, T, 3>({{2, 3, 4}, {5, 1, 7}, {3, 17, 9}});
  });
}

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

TEST_CASE("sum over every axis combination matches a loop", "[expr][reduce]") {
  check_reduction_family<red::sum>();
}

TEST_CASE("prod over every axis combination matches a loop", "[expr][reduce]") {
  check_reduction_family<red::prod>();
}

TEST_CASE("max over every axis combination matches a loop", "[expr][reduce]") {
  check_reduction_family<red::max>();
}

TEST_CASE("min over every axis combination matches a loop", "[expr][reduce]") {
  check_reduction_family<red::min>();
}

TEST_CASE("mean over every axis combination matches a loop", "[expr][reduce]") {
  check_reduction_family<red::mean>();
}

TEST_CASE("the mean of integers is computed in float64 from the start: no wrapped sum", "[expr][reduce]") {
  auto v = xsym::vector<std::int64_t>("v");
  auto m = xsym::matrix<std::int32_t>("m");
  auto f = xsym::function("mean_int64", xsym::inputs(v), xsym::mean(v));
  auto g = xsym::function("mean_int32", xsym::inputs(m), xsym::outputs(xsym::mean(m, 0), xsym::mean(m)));
  constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
  CHECK(f(xt::xtensor<std::int64_t, 1>{big, big}) == static_cast<double>(big));
  CHECK(f(xt::xtensor<std::int64_t, 1>{-big, -big, -big}) == -static_cast<double>(big));
  // 37 rows of int32 max: the column sums pass int32 and the total passes neither int64 mean.
  xt::xtensor<std::int32_t, 2> M = xt::empty<std::int32_t>({std::size_t{37}, std::size_t{3}});
  M.fill(std::numeric_limits<std::int32_t>::max());
  auto [cols, all] = g(M);
  for (double c : cols) CHECK(c == 2147483647.0);
  CHECK(all == 2147483647.0);
}

namespace {
// The scalar loop's max or min, as numpy defines it: NaN wins (each NaN replaces the one
// before: the last), and a value replaces only a greater (smaller) one (of equal zeros, the
// first).
template <class T>
T loop_extreme(bool is_max, const std::vector<T>& v) {
  T a = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  for (T b : v) a = (is_max ? b > a : b < a) || b != b ? b : a;
  return a;
}
template <class T>
bool same_value_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Values for the vector reductions: random, with zeros of both signs where a row's or column's
// extreme is zero, and NaNs of two payloads (which one comes out is the loop's choice).
template <class T>
void fill_edges(xt::xtensor<T, 2>& w, std::size_t case_id) {
  const T nan1 = std::numeric_limits<T>::quiet_NaN();
  const T nan2 = std::is_same_v<T, float> ? static_cast<T>(std::nanf("7")) : static_cast<T>(std::nan("7"));
  const std::size_t R = w.shape(0), C = w.shape(1);
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t c = 0; c < C; ++c) {
      const std::size_t kind = (r * 7 + c * 3 + case_id) % 11;
      if (case_id % 3 == 1 && kind < 6) w(r, c) = kind % 2 ? T(-0.0) : T(0);  // zeros of both signs among negatives
      else if (case_id % 3 == 1) w(r, c) = -std::abs(w(r, c)) - T(1);
      else if (case_id % 3 == 2 && (r * C + c) % 13 == case_id % 13) w(r, c) = (r + c) % 2 ? nan1 : nan2;
    }
}
}  // namespace

TEST_CASE("sums, means, max and min in vectors: along columns, along rows, over views and over two axes",
          "[expr][reduce]") {
  for_each_type(type_list<float, double>{}, []<class T>() {
    INFO(type_name<T>());
    std::mt19937 rng(404);
    auto m = xsym::matrix<T>("m");
    auto f = xsym::function("columns_rows", xsym::inputs(m),
                            xsym::outputs(xsym::sum(m, 0), xsym::mean(m, 0), xsym::max(m, 0), xsym::min(m, 0),
                                          xsym::sum(m, 1), xsym::max(m, 1), xsym::min(m, 1)));
    std::size_t case_id = 0;
    for (std::size_t R : {1, 2, 3, 7, 40}) {
      for (std::size_t C : {2, 3, 7, 8, 9, 15, 16, 17, 33, 64, 65, 130}) {
        ++case_id;
        INFO("shape (" << R << ", " << C << "), values " << case_id % 3);
        // m is the middle C of every row of a wider array: rows apart by C + 3.
        auto wide = random_tensor<T, 2>(rng, {R, C + 3}, -4, 4);
        xt::xtensor<T, 2> mid = xt::view(wide, xt::all(), xt::range(1, C + 1));
        fill_edges(mid, case_id);
        xt::view(wide, xt::all(), xt::range(1, C + 1)) = mid;
        const auto [s0, a0, x0, n0, s1, x1, n1] = f(xt::view(wide, xt::all(), xt::range(1, C + 1)));
        for (std::size_t c = 0; c < C; ++c) {
          std::vector<T> col;
          double sum = 0, scale = 0;
          for (std::size_t r = 0; r < R; ++r) {
            col.push_back(mid(r, c));
            sum += static_cast<double>(mid(r, c));
            scale += std::abs(static_cast<double>(mid(r, c)));
          }
          INFO("column " << c);
          CHECK(same_value_bits(x0(c), loop_extreme(true, col)));
          CHECK(same_value_bits(n0(c), loop_extreme(false, col)));
          const double tol = 4 * std::numeric_limits<T>::epsilon() * scale;
          if (std::isnan(sum)) {
            CHECK(std::isnan(s0(c)));
            CHECK(std::isnan(a0(c)));
          } else {
            CHECK(std::abs(static_cast<double>(s0(c)) - sum) <= tol);
            CHECK(std::abs(static_cast<double>(a0(c)) - sum / static_cast<double>(R)) <= tol / static_cast<double>(R));
          }
        }
        for (std::size_t r = 0; r < R; ++r) {
          std::vector<T> row(mid.begin() + static_cast<std::ptrdiff_t>(r * C), mid.begin() + static_cast<std::ptrdiff_t>((r + 1) * C));
          double sum = 0, scale = 0;
          for (T v : row) {
            sum += static_cast<double>(v);
            scale += std::abs(static_cast<double>(v));
          }
          INFO("row " << r);
          CHECK(same_value_bits(x1(r), loop_extreme(true, row)));
          CHECK(same_value_bits(n1(r), loop_extreme(false, row)));
          if (std::isnan(sum)) CHECK(std::isnan(s1(r)));
          else CHECK(std::abs(static_cast<double>(s1(r)) - sum) <= 4 * std::numeric_limits<T>::epsilon() * scale);
        }
      }
    }
    // Three axes: the last kept and contiguous, the reduced ones one run (a whole array) or not
    // (a view whose rows are apart by more than a row).
    auto t = xsym::tensor3<T>("t");
    auto g = xsym::function("two_axes", xsym::inputs(t),
                            xsym::outputs(xsym::sum(t, {0, 1}), xsym::max(t, {0, 1}),
                                          xsym::sum(t, 1), xsym::min(t, 1)));
    for (auto [A, B, C] : {std::array<std::size_t, 3>{3, 5, 17}, {2, 1, 40}, {4, 6, 3}}) {
      for (bool view : {false, true}) {
        INFO("shape (" << A << ", " << B << ", " << C << ")" << (view ? ", a view" : ""));
        auto wide = random_tensor<T, 3>(rng, {A, B + 2, C + 3}, -4, 4);
        wide(A - 1, B - 1, C - 1) = std::numeric_limits<T>::quiet_NaN();
        xt::xtensor<T, 3> full = xt::view(wide, xt::all(), xt::range(0, B), xt::range(0, C));
        auto run = [&](const auto& arg) { return g(arg); };
        const auto [s01, x01, s1, n1] = view ? run(xt::view(wide, xt::all(), xt::range(0, B), xt::range(0, C))) : run(full);
        for (std::size_t c = 0; c < C; ++c) {
          std::vector<T> all;
          for (std::size_t a = 0; a < A; ++a)
            for (std::size_t b = 0; b < B; ++b) all.push_back(full(a, b, c));
          INFO("column " << c);
          CHECK(same_value_bits(x01(c), loop_extreme(true, all)));
          double sum = 0, scale = 0;
          for (T v : all) {
            sum += static_cast<double>(v);
            scale += std::abs(static_cast<double>(v));
          }
          if (std::isnan(sum)) CHECK(std::isnan(s01(c)));
          else CHECK(std::abs(static_cast<double>(s01(c)) - sum) <= 4 * std::numeric_limits<T>::epsilon() * scale);
          for (std::size_t a = 0; a < A; ++a) {
            std::vector<T> col;
            double cs = 0, cscale = 0;
            for (std::size_t b = 0; b < B; ++b) {
              col.push_back(full(a, b, c));
              cs += static_cast<double>(full(a, b, c));
              cscale += std::abs(static_cast<double>(full(a, b, c)));
            }
            CHECK(same_value_bits(n1(a, c), loop_extreme(false, col)));
            if (std::isnan(cs)) CHECK(std::isnan(s1(a, c)));
            else CHECK(std::abs(static_cast<double>(s1(a, c)) - cs) <= 4 * std::numeric_limits<T>::epsilon() * cscale);
          }
        }
      }
    }
  });
}

TEST_CASE("row sums of whole vectors, eight rows at a time, keep each row's own bits", "[expr][reduce]") {
  // Rows of 8, 16 and 24 values (and their neighbours 7, 9, 32, which take the one-row path)
  // summed and averaged: against a double loop, and bit for bit against sum_contiguous on the
  // row alone, the order the fused reductions (careduce_fusion) reproduce. Row counts around
  // the batches of eight; rows apart by more than a row; two kept axes (a 3-D view).
  for_each_type(type_list<float, double>{}, []<class T>() {
    INFO(type_name<T>());
    std::mt19937 rng(808);
    auto m = xsym::matrix<T>("m");
    auto f = xsym::function("row_sums", xsym::inputs(m), xsym::outputs(xsym::sum(m, 1), xsym::mean(m, 1)));
    auto t = xsym::tensor3<T>("t");
    auto g = xsym::function("row_sums3", xsym::inputs(t), xsym::outputs(xsym::sum(t, 2)));
    // Bits where the row has no NaN (which NaN comes out of an add of two is the compiler's
    // choice of operand order); the mean only where the node computed one.
    auto check_row = [](const T* row, std::size_t C, T got_sum, const T* got_mean) {
      double sum = 0, scale = 0;
      for (std::size_t c = 0; c < C; ++c) {
        sum += static_cast<double>(row[c]);
        scale += std::abs(static_cast<double>(row[c]));
      }
      const double own = xsym::cpu::detail::sum_contiguous(row, static_cast<std::int64_t>(C));
      if (std::isnan(sum)) {
        CHECK(std::isnan(got_sum));
        if (got_mean) CHECK(std::isnan(*got_mean));
        return;
      }
      CHECK(same_value_bits(got_sum, static_cast<T>(own)));
      if (got_mean) CHECK(same_value_bits(*got_mean, static_cast<T>(own / static_cast<double>(C))));
      CHECK(std::abs(static_cast<double>(got_sum) - sum) <= 4 * std::numeric_limits<T>::epsilon() * scale);
    };
    std::size_t case_id = 0;
    for (std::size_t R : {1, 7, 8, 9, 16, 17, 40}) {
      for (std::size_t C : {7, 8, 9, 16, 24, 32}) {
        ++case_id;
        INFO("shape (" << R << ", " << C << ")");
        auto wide = random_tensor<T, 2>(rng, {R, C + 3}, -4, 4);
        xt::xtensor<T, 2> mid = xt::view(wide, xt::all(), xt::range(1, C + 1));
        fill_edges(mid, case_id);
        for (std::size_t c = 0; c < C; ++c) mid(R / 2, c) = T(-0.0);  // a row of -0: its sum is +0
        xt::view(wide, xt::all(), xt::range(1, C + 1)) = mid;
        const auto [s, a] = f(xt::view(wide, xt::all(), xt::range(1, C + 1)));
        for (std::size_t r = 0; r < R; ++r) {
          INFO("row " << r);
          const T mean = a(r);
          check_row(&mid(r, 0), C, s(r), &mean);
        }
        // Kept axes (R, 2) of a (R, 3, C + 1) array: rows apart by C + 1 within a block, more between.
        auto big = random_tensor<T, 3>(rng, {R, 3, C + 1}, -4, 4);
        const auto [s3] = g(xt::view(big, xt::all(), xt::range(0, 2), xt::range(1, C + 1)));
        for (std::size_t r = 0; r < R; ++r)
          for (std::size_t b = 0; b < 2; ++b) {
            INFO("3-D row " << r << ", " << b);
            check_row(&big(r, b, 1), C, s3(r, b), nullptr);
          }
      }
    }
  });
}

TEST_CASE("reductions of empty arrays, NaN, and names of the reduce ops", "[expr][reduce]") {
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("empty", xsym::inputs(x), xsym::outputs(xsym::sum(x), xsym::prod(x)));
  const xt::xtensor<double, 1> empty = xt::zeros<double>({0});
  auto [s, p] = f(empty);
  CHECK(s == 0.0);
  CHECK(p == 1.0);
  auto g = xsym::function("empty_max", xsym::inputs(x), xsym::max(x));
  CHECK_THROWS_AS(g(empty), xsym::shape_error);

  // As in numpy, a NaN anywhere makes max and min NaN.
  auto h = xsym::function("nan", xsym::inputs(x), xsym::outputs(xsym::max(x), xsym::min(x)));
  const xt::xtensor<double, 1> with_nan{1.0, std::nan(""), 3.0};
  auto [mx, mn] = h(with_nan);
  CHECK(std::isnan(mx));
  CHECK(std::isnan(mn));

  // Negative axes are normalized and sorted; a full reduction prints without axes.
  auto t = xsym::tensor3<float>("t");
  auto k = xsym::function("names", xsym::inputs(t), xsym::outputs(xsym::sum(t, -1), xsym::sum(t, {2, 0}), xsym::sum(t, {0, 1, 2})));
  std::vector<std::string> names;
  for (const auto& n : k.toposort()) names.push_back(n.op_name());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"Sum", "Sum{0,2}", "Sum{2}"});
}

TEST_CASE("matrices with a zero extent: elementwise, reductions along and across it, and products", "[expr][reduce][dot]") {
  auto m = xsym::matrix<double>("m");
  auto n = xsym::matrix<double>("n");
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("empty2d", xsym::inputs(m, v),
                          xsym::outputs(exp(m) * 2.0 + v, xsym::sum(m, 0), xsym::sum(m, 1), xsym::prod(m, 0), xsym::mean(m, 1),
                                        xsym::dot(m, v)));
  auto g = xsym::function("empty_dot22", xsym::inputs(m, n), xsym::dot(m, n));
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{0, 5}, {3, 0}, {0, 0}}) {
    INFO(rows << " x " << cols);
    const xt::xtensor<double, 2> M = xt::zeros<double>({rows, cols});
    const xt::xtensor<double, 1> V = xt::ones<double>({cols});
    auto [e, s0, s1, p0, m1, d] = f(M, V);
    CHECK(e.shape() == M.shape());
    // Along the empty axis: the identity, once per kept element (numpy's sum and prod).
    REQUIRE(s0.size() == cols);
    REQUIRE(p0.size() == cols);
    for (std::size_t j = 0; j < cols; ++j) {
      CHECK(s0(j) == 0.0);
      CHECK(p0(j) == 1.0);
    }
    REQUIRE(s1.size() == rows);
    REQUIRE(m1.size() == rows);
    REQUIRE(d.size() == rows);
    for (std::size_t i = 0; i < rows; ++i) {
      CHECK(s1(i) == 0.0);
      CHECK(std::isnan(m1(i)));  // 0 / 0, as numpy's mean of an empty row
      CHECK(d(i) == 0.0);
    }
    // (rows x cols) . (cols x 4): an empty inner extent gives zeros, not uninitialised memory.
    const xt::xtensor<double, 2> N = xt::ones<double>({cols, std::size_t{4}});
    const auto P = g(M, N);
    REQUIRE(P.shape(0) == rows);
    REQUIRE(P.shape(1) == 4);
    for (double x : P) CHECK(x == 0.0);
  }
}

TEST_CASE("bad reduction axes are rejected when the expression is built", "[expr][reduce]") {
  auto m = xsym::matrix<double>("m");
  auto t = xsym::tensor3<double>("t");
  CHECK_THROWS_AS(xsym::sum(m, 2), xsym::graph_error);
  CHECK_THROWS_AS(xsym::max(m, -3), xsym::graph_error);
  CHECK_THROWS_AS(xsym::mean(m, {0, 0}), xsym::graph_error);
  CHECK_THROWS_AS(xsym::prod(t, {1, -2}), xsym::graph_error);
  CHECK_THROWS_WITH(xsym::sum(t, {0, 5}), Catch::Matchers::Contains("axis 5"));
}

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

TEST_CASE("cpu::run_reduce into an output dtype other than the runtime's", "[expr][reduce]") {
  // The same values as a direct cast of the accumulator: float sums in double, int means in double.
  using xsym::ndarray;
  xsym::cpu::register_all_kernels();  // kernels driven directly, not through expressions of these types
  xsym::shape_t s2;
  s2.rank = 2;
  s2[0] = 2;
  s2[1] = 3;
  xsym::shape_t s1;
  s1.rank = 1;
  s1[0] = 2;
  ndarray f = ndarray::empty(xsym::dtype::float32, s2);
  ndarray i = ndarray::empty(xsym::dtype::int32, s2);
  const float fv[] = {0.1f, 0.2f, 0.3f, 1e8f, 1.0f, -1e8f};
  const std::int32_t iv[] = {1, 2, 4, -7, 3, 5};
  for (int k = 0; k < 6; ++k) {
    f.data_as<float>()[k] = fv[k];
    i.data_as<std::int32_t>()[k] = iv[k];
  }
  xsym::op o;
  o.kind = xsym::op_kind::reduce;
  o.axes = {1};

  o.reduction = xsym::reduce_op::sum;
  ndarray sd = ndarray::empty(xsym::dtype::float64, s1);
  xsym::cpu::run_reduce(o, f, sd);
  CHECK(sd.data_as<double>()[0] == (double(0.1f) + double(0.2f)) + double(0.3f));
  CHECK(sd.data_as<double>()[1] == (double(1e8f) + double(1.0f)) + double(-1e8f));

  o.reduction = xsym::reduce_op::mean;
  ndarray mf = ndarray::empty(xsym::dtype::float32, s1);
  xsym::cpu::run_reduce(o, i, mf);
  CHECK(mf.data_as<float>()[0] == static_cast<float>(7.0 / 3.0));
  CHECK(mf.data_as<float>()[1] == static_cast<float>(1.0 / 3.0));

  o.reduction = xsym::reduce_op::max;
  ndarray xi = ndarray::empty(xsym::dtype::int64, s1);
  xsym::cpu::run_reduce(o, f, xi);
  CHECK(xi.data_as<std::int64_t>()[0] == 0);
  CHECK(xi.data_as<std::int64_t>()[1] == 100000000);
}

TEST_CASE("matrix-vector products of matrices that start anywhere in a cache line", "[expr][dot]") {
  // The kernels sum a row's or column's first elements apart when that aligns their vector
  // loads (rows a whole number of vectors apart): every offset from a cache line, in both
  // directions and accumulating into y, must give the float64 loop's result.
  auto m = xsym::matrix<float>("m");
  auto u = xsym::vector<float>("u");
  auto v = xsym::vector<float>("v");
  auto y0 = xsym::vector<float>("y0");
  auto f = xsym::function("products", xsym::inputs(m, u, v, y0),
                          xsym::outputs(xsym::dot(m, u), y0 - 0.5f * xsym::dot(m.T(), v)));
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  const std::size_t rows = 37, cols = 96;  // 96 floats: every row starts at the same offset
  std::vector<float> storage(rows * cols + 64);
  for (auto& e : storage) e = normal(rng);
  float* line = storage.data();
  while (reinterpret_cast<std::uintptr_t>(line) % 64 != 0) ++line;
  xt::xtensor<float, 1> U = xt::empty<float>({cols}), V = xt::empty<float>({rows}), Y0 = xt::empty<float>({cols});
  for (auto& e : U) e = normal(rng);
  for (auto& e : V) e = normal(rng);
  for (auto& e : Y0) e = normal(rng);
  for (std::size_t offset = 0; offset < 16; ++offset) {
    INFO("matrix starts " << offset << " floats past a cache line");
    auto a = xt::adapt(line + offset, rows * cols, xt::no_ownership(), std::array<std::size_t, 2>{rows, cols});
    const auto [rows_product, cols_product] = f(a, U, V, Y0);
    for (std::size_t r = 0; r < rows; ++r) {
      double s = 0, size = 0;
      for (std::size_t c = 0; c < cols; ++c) {
        s += double(a(r, c)) * double(U(c));
        size += std::abs(double(a(r, c)) * double(U(c)));
      }
      CHECK(std::abs(double(rows_product(r)) - s) <= 1e-5 * size);
    }
    for (std::size_t c = 0; c < cols; ++c) {
      double s = 0, size = std::abs(double(Y0(c)));
      for (std::size_t r = 0; r < rows; ++r) {
        s += double(a(r, c)) * double(V(r));
        size += 0.5 * std::abs(double(a(r, c)) * double(V(r)));
      }
      CHECK(std::abs(double(cols_product(c)) - (double(Y0(c)) - 0.5 * s)) <= 1e-5 * size);
    }
  }
}

TEST_CASE("a product accumulating into a multiple of an array scales it by beta, read where it is",
          "[expr][dot]") {
  // 0.75 y0 - 0.5 op(M) x is one Gemv with beta = 0.75 reading y0 (a function input, never
  // written): rows and columns of the matrix, against float64 loops.
  auto m = xsym::matrix<float>("m");
  auto u = xsym::vector<float>("u");
  auto v = xsym::vector<float>("v");
  auto yr = xsym::vector<float>("yr");
  auto yc = xsym::vector<float>("yc");
  auto f = xsym::function("scaled", xsym::inputs(m, u, v, yr, yc),
                          xsym::outputs(0.75f * yr - 0.5f * xsym::dot(m, u), yc * 0.75f - 0.5f * xsym::dot(m.T(), v)));
  std::size_t with_beta = 0;
  for (const auto& node : f.toposort()) with_beta += node.op_name() == "Gemv{no_inplace,alpha=-0.5,beta=0.75}";
  CHECK(with_beta == 2);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const std::size_t rows = 45, cols = 70;
  xt::xtensor<float, 2> M = xt::empty<float>({rows, cols});
  xt::xtensor<float, 1> U = xt::empty<float>({cols}), V = xt::empty<float>({rows});
  xt::xtensor<float, 1> YR = xt::empty<float>({rows}), YC = xt::empty<float>({cols});
  for (auto* t : {&U, &V, &YR, &YC})
    for (auto& e : *t) e = normal(rng);
  for (auto& e : M) e = normal(rng);
  const xt::xtensor<float, 1> yr_before = YR, yc_before = YC;
  const auto [r_out, c_out] = f(M, U, V, YR, YC);
  CHECK((YR == yr_before));
  CHECK((YC == yc_before));
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0, size = 0.75 * std::abs(double(YR(r)));
    for (std::size_t c = 0; c < cols; ++c) {
      s += double(M(r, c)) * double(U(c));
      size += 0.5 * std::abs(double(M(r, c)) * double(U(c)));
    }
    CHECK(std::abs(double(r_out(r)) - (0.75 * double(YR(r)) - 0.5 * s)) <= 1e-5 * size);
  }
  for (std::size_t c = 0; c < cols; ++c) {
    double s = 0, size = 0.75 * std::abs(double(YC(c)));
    for (std::size_t r = 0; r < rows; ++r) {
      s += double(M(r, c)) * double(V(r));
      size += 0.5 * std::abs(double(M(r, c)) * double(V(r)));
    }
    CHECK(std::abs(double(c_out(c)) - (0.75 * double(YC(c)) - 0.5 * s)) <= 1e-5 * size);
  }
  // Two products whose beta differs past the name's six digits are not merged as one.
  xsym::op a;
  a.kind = xsym::op_kind::gemv;
  a.accumulate = true;
  a.alpha = -0.01;
  a.beta = 0.9998;
  xsym::op b = a;
  b.beta = 0.99980001;
  CHECK(a.name() == b.name());
  CHECK(a.signature() != b.signature());
}

TEST_CASE("the column product sums in its output, in a buffer of its own, or in place, to the same bits",
          "[expr][dot]") {
  // y = 0.75 y0 - 0.5 Mᵀ v with Mᵀ's columns contiguous. The product sums straight into y where
  // y is on a cache line and apart from y0; a misaligned y, or y0 itself, sums in a buffer of its
  // own first. The order of the additions is the same in all three: the same bits, and each
  // against a float64 loop.
  const std::int64_t rows = 37, cols = 300;  // cols: several 8-vector strips and a tail
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float, xsimd::aligned_allocator<float, 64>> mt(rows * cols), v(rows), y0(cols), apart(cols),
      shifted(cols + 1), in_place;
  for (auto& e : mt) e = normal(rng);
  for (auto& e : v) e = normal(rng);
  for (auto& e : y0) e = normal(rng);
  in_place = y0;
  // mt is M (rows x cols, row-major): Mᵀ v walks M's rows as Mᵀ's contiguous columns.
  xsym::cpu::detail::gemv_columns(mt.data(), cols, v.data(), apart.data(), cols, rows, -0.5f, y0.data(), 0.75f);
  xsym::cpu::detail::gemv_columns(mt.data(), cols, v.data(), shifted.data() + 1, cols, rows, -0.5f, y0.data(), 0.75f);
  xsym::cpu::detail::gemv_columns(mt.data(), cols, v.data(), in_place.data(), cols, rows, -0.5f, in_place.data(), 0.75f);
  for (std::int64_t c = 0; c < cols; ++c) {
    double s = 0, size = 0.75 * std::abs(double(y0[c]));
    for (std::int64_t r = 0; r < rows; ++r) {
      s += double(mt[r * cols + c]) * double(v[r]);
      size += 0.5 * std::abs(double(mt[r * cols + c]) * double(v[r]));
    }
    CHECK(std::abs(double(apart[c]) - (0.75 * double(y0[c]) - 0.5 * s)) <= 1e-5 * size);
    CHECK(apart[c] == shifted[c + 1]);
    CHECK(apart[c] == in_place[c]);
  }
}

namespace {
// y[i] = fma(A[j, i], xs[j], y[i]) for j in order, by std::fma: the column block's contract.
template <class T>
void check_subnormal_coefficients(std::mt19937& rng) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr U mantissa = (U(1) << (std::numeric_limits<T>::digits - 1)) - 1;
  std::normal_distribution<double> normal;
  auto subnormal = [&] {  // any subnormal, either sign
    U bits = (static_cast<U>(rng()) << 16 ^ static_cast<U>(rng())) & mantissa;
    if (bits == 0) bits = 1;
    if (rng() % 2) bits |= U(1) << (8 * sizeof(T) - 1);
    T v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  const T tiny = std::numeric_limits<T>::min();
  std::size_t compared = 0, moved = 0;
  for (std::int64_t m : {1, 7, 15, 16, 17, 100, 128, 131, 300}) {
    for (std::int64_t cols : {1, 5, 16}) {
      const std::int64_t lda = m + 3;
      std::vector<T> a(static_cast<std::size_t>(cols * lda)), xs(static_cast<std::size_t>(cols));
      for (auto& e : a) e = static_cast<T>(normal(rng));
      a[0] = T(0);
      a[static_cast<std::size_t>(lda / 2)] = -T(0);
      if (m > 3) a[2] = std::numeric_limits<T>::infinity();
      for (std::size_t j = 0; j < xs.size(); ++j) xs[j] = j % 3 == 1 ? static_cast<T>(normal(rng)) : subnormal();
      if (cols == 1) xs[0] = subnormal();
      // y: values the terms cannot move (1, 1e6), values they move (0, -0, subnormal, a few
      // smallest normals), values a subnormal term moves by an ulp or leaves (a term near a
      // subnormal's size against y's ulp), and NaN.
      std::vector<T> y(static_cast<std::size_t>(m));
      const int edge = std::numeric_limits<T>::min_exponent + std::numeric_limits<T>::digits;
      const T starts[] = {T(1),         T(-1e6), T(0), -T(0), tiny, -tiny * T(3), T(0.5) * tiny, T(1e-3),
                          std::ldexp(T(1), edge - 4), std::ldexp(T(-1.5), edge - 6), std::ldexp(T(1.25), edge - 2)};
      constexpr std::size_t n_starts = sizeof(starts) / sizeof(starts[0]);
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = starts[(i + static_cast<std::size_t>(cols)) % n_starts];
      if (m > 5) y[5] = std::numeric_limits<T>::quiet_NaN();
      std::vector<T> want = y;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < cols; ++j) want[static_cast<std::size_t>(i)] = std::fma(a[static_cast<std::size_t>(j * lda + i)], xs[static_cast<std::size_t>(j)], want[static_cast<std::size_t>(i)]);
      std::vector<T> got = y;
      xsym::cpu::detail::gemv_column_block(a.data(), lda, xs.data(), got.data(), m, cols);
      for (std::int64_t i = 0; i < m; ++i) {
        const auto k = static_cast<std::size_t>(i);
        INFO(m << " outputs, " << cols << " coefficients, output " << i << ": " << got[k] << " against " << want[k]);
        if (std::isnan(want[k])) {
          CHECK(std::isnan(got[k]));
          continue;
        }
        CHECK(std::memcmp(&got[k], &want[k], sizeof(T)) == 0);
        ++compared;
        moved += std::memcmp(&want[k], &y[k], sizeof(T)) != 0;
      }
    }
  }
  // Both kinds of term occur: ones that leave y as it was and ones that change it.
  CHECK(moved > compared / 4);
  CHECK(moved < compared);
}
}  // namespace

TEST_CASE("a column product with subnormal coefficients gives the bits of the FMA chain", "[expr][dot]") {
  // A gradient's coefficients can be subnormal (a saturated sigmoid times the learning rate);
  // the column block leaves out only the terms that cannot change y, with the same bits.
  // Leaving them out or not is this core's choice (subnormal_terms_pay): both are checked.
  for (int left_out : {1, 0}) {
    INFO((left_out ? "terms left out" : "every term an FMA"));
    const xsym::cpu::testing::subnormal_terms_set forced(left_out);
    std::mt19937 rng(17);
    check_subnormal_coefficients<float>(rng);
    check_subnormal_coefficients<double>(rng);
  }
}
