#ifndef XSYM_TESTS_EXPR_EXPR_UTIL_HPP
#define XSYM_TESTS_EXPR_EXPR_UTIL_HPP

// Helpers shared by the expr and compile tests: random data with fixed seeds, loops over
// dtypes, and element-by-element comparison against a reference computed in double.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace xsym_test {

template <class... T>
struct type_list {};

/// Calls f.template operator()<T>() for every T of the list (a C++20 template lambda).
template <class... T, class F>
void for_each_type(type_list<T...>, F&& f) {
  (f.template operator()<T>(), ...);
}

using numeric_types = type_list<std::int32_t, std::int64_t, float, double>;
using all_types = type_list<bool, std::int32_t, std::int64_t, float, double>;

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, float>) return "float32";
  else return "float64";
}

/// Sizes that hit empty arrays, a lone element, SIMD tails, several SIMD bodies and several
/// 256-element blocks of the fused kernels.
inline const std::vector<std::size_t> sizes = {0, 1, 7, 33, 1000};

/// A value uniform in [lo, hi]: integers uniform over the integers of the range, bool a coin.
template <class T>
T random_value(std::mt19937& rng, double lo, double hi) {
  if constexpr (std::is_same_v<T, bool>) {
    return std::bernoulli_distribution(0.5)(rng);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(std::uniform_int_distribution<long long>(static_cast<long long>(std::ceil(lo)),
                                                                   static_cast<long long>(std::floor(hi)))(rng));
  } else {
    return static_cast<T>(std::uniform_real_distribution<double>(lo, hi)(rng));
  }
}

template <class T, std::size_t N>
xt::xtensor<T, N> random_tensor(std::mt19937& rng, const std::array<std::size_t, N>& shape, double lo, double hi) {
  xt::xtensor<T, N> a(shape);
  for (auto& v : a) v = random_value<T>(rng, lo, hi);
  return a;
}

/// Comparison tolerance for results of type R: exact for integers and bool.
template <class R>
struct tolerance {
  static constexpr double rtol = 0, atol = 0;
};
template <>
struct tolerance<float> {
  static constexpr double rtol = 1e-5, atol = 1e-6;
};
template <>
struct tolerance<double> {
  static constexpr double rtol = 1e-12, atol = 1e-13;
};

/// "" when actual (read in C order) matches expected element by element, else what differs.
/// An element passes when |a - e| <= atol + rtol * max(|e|, scale[i]) (scale: e.g. sum |a_i b_i|
/// of a dot product, the size of the terms that cancelled).
template <class R, std::size_t N>
std::string differences(const xt::xtensor<R, N>& actual, const std::vector<double>& expected,
                     const std::vector<double>& scale = {}, double rtol = tolerance<R>::rtol,
                     double atol = tolerance<R>::atol) {
  if (actual.size() != expected.size())
    return "size " + std::to_string(actual.size()) + " but expected " + std::to_string(expected.size());
  std::ostringstream os;
  os.precision(17);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double a = static_cast<double>(actual.data()[i]);
    const double e = expected[i];
    const double s = scale.empty() ? std::abs(e) : std::max(std::abs(e), scale[i]);
    const bool ok = (std::isnan(a) && std::isnan(e)) || a == e || std::abs(a - e) <= atol + rtol * s;
    if (!ok) {
      if (bad < 4) os << " [" << i << "] got " << a << ", expected " << e << ";";
      ++bad;
    }
  }
  if (!bad) return "";
  return std::to_string(bad) + " of " + std::to_string(expected.size()) + " elements differ:" + os.str();
}

template <class T, std::size_t N>
std::vector<double> to_doubles(const xt::xtensor<T, N>& a) {
  std::vector<double> v(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) v[i] = static_cast<double>(a.data()[i]);
  return v;
}

template <class S>
std::vector<std::size_t> shape_vector(const S& s) {
  return std::vector<std::size_t>(s.begin(), s.end());
}

}  // namespace xsym_test

#endif
