// Reductions over every axis combination, every dtype and ranks 1 to 3, against loops.
#include "expr_util.hpp"

#include <algorithm>
#include <numeric>

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

TEST_CASE("bad reduction axes are rejected when the expression is built", "[expr][reduce]") {
  auto m = xsym::matrix<double>("m");
  auto t = xsym::tensor3<double>("t");
  CHECK_THROWS_AS(xsym::sum(m, 2), xsym::graph_error);
  CHECK_THROWS_AS(xsym::max(m, -3), xsym::graph_error);
  CHECK_THROWS_AS(xsym::mean(m, {0, 0}), xsym::graph_error);
  CHECK_THROWS_AS(xsym::prod(t, {1, -2}), xsym::graph_error);
  CHECK_THROWS_WITH(xsym::sum(t, {0, 5}), Catch::Matchers::Contains("axis 5"));
}
