#ifndef XSYM_TESTS_GRAD_GRAD_CHECK_HPP
#define XSYM_TESTS_GRAD_GRAD_CHECK_HPP

// Gradient checking for the grad tests: the symbolic gradient of a scalar cost, compiled and
// run, against central finite differences of the compiled cost, element by element.
//
// Values travel as `arg`s (a symbolic input or shared variable, a shape and data in C order),
// so one untyped checker serves every rank; check_grad(...) is the typed front end that calls
// xsym::grad(cost, x, y, ...) itself.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace grad_test {

/// A value in C order with its shape: a compiled function's result, flattened.
struct flat_value {
  std::vector<std::int64_t> shape;
  std::vector<double> data;
};
inline flat_value to_flat(double v) { return {{}, {v}}; }
template <class T, std::size_t N>
flat_value to_flat(const xt::xtensor<T, N>& a) {
  flat_value f;
  for (std::size_t d = 0; d < N; ++d) f.shape.push_back(static_cast<std::int64_t>(a.shape()[d]));
  f.data.assign(a.begin(), a.end());
  return f;
}

inline std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

/// A symbolic input (Shared: a shared variable) with the value to check the gradient at.
template <std::size_t N, bool Shared>
struct at_t {
  static constexpr std::size_t rank = N;
  static constexpr bool is_shared = Shared;
  std::conditional_t<Shared, xsym::shared_var<double, N>, xsym::var<double, N>> v;
  xt::xtensor<double, N> value;
};
template <std::size_t N>
at_t<N, false> at(const xsym::var<double, N>& v, xt::xtensor<double, N> value) {
  return {v, std::move(value)};
}
template <std::size_t N>
at_t<N, true> at(const xsym::shared_var<double, N>& v, xt::xtensor<double, N> value) {
  return {v, std::move(value)};
}

/// The most outputs the runtime runs in one Apply node (xsym::limits::max_outputs).
inline constexpr std::size_t max_node_outputs = 8;

struct fd_options {
  xsym::disconnected policy = xsym::disconnected::raise;
  double h = 1e-6;     // step, relative to max(1, |x|)
  double tol = 1e-6;   // |g - fd| <= tol * max(1, |fd|)
  bool fast_compile_too = true;  // also compile the gradient with FAST_COMPILE (reference kernels)
  std::string excluding;         // rewrites left out of the FAST_RUN builds (optimizer_excluding)
};

/// Compiles the gradient of cost wrt every `at` (xsym::grad, xsym::function: the public API)
/// and the cost, and compares the gradient with central differences of the compiled cost.
template <class... A>
class checker {
 public:
  checker(const xsym::var<double, 0>& cost, const fd_options& opt, const A&... in)
      : m_cost(cost), m_opt(opt), m_in(in...), m_vals(in.value...) {}

  /// "" when every gradient has its variable's shape and matches in every element; else what differs.
  std::string mismatch() {
    auto gs = std::apply([&](const auto&... a) { return xsym::grad(m_opt.policy, m_cost, a.v...); }, m_in);
    static_assert(std::is_same_v<decltype(gs), std::tuple<xsym::var<double, A::rank>...>>,
                  "xsym::grad returns expressions of the variables' types");
    const auto outs = std::apply([](const auto&... g) { return xsym::outputs(g...); }, gs);
    std::vector<std::pair<const char*, std::vector<flat_value>>> results;
    {
      auto g = build(outs, xsym::mode("FAST_RUN"), xsym::optimizer_excluding(m_opt.excluding));
      if (auto e = too_many_outputs(g); !e.empty()) return e;
      results.emplace_back("FAST_RUN", to_flat_all(call(g)));
    }
    if (m_opt.fast_compile_too) {
      auto g = build(outs, xsym::mode("FAST_COMPILE"));
      results.emplace_back("FAST_COMPILE", to_flat_all(call(g)));
    }
    const auto f = build(m_cost, xsym::mode("FAST_RUN"), xsym::optimizer_excluding(m_opt.excluding));
    if (auto e = too_many_outputs(f); !e.empty()) return e;

    std::ostringstream os;
    os.precision(12);
    int bad = 0;
    const double f0 = call(f);
    if (!std::isfinite(f0)) os << " the cost is not finite (" << f0 << ");", ++bad;
    for_each_index([&](auto k) {
      auto& value = std::get<k>(m_vals);
      const auto& a = std::get<k>(m_in);
      std::vector<double> fd(value.size());
      for (std::size_t i = 0; i < value.size(); ++i) {
        const double x = value.data()[i];
        const double h = m_opt.h * std::max(1.0, std::abs(x));
        value.data()[i] = x + h;
        const double fp = call(f);
        value.data()[i] = x - h;
        const double fm = call(f);
        value.data()[i] = x;
        fd[i] = (fp - fm) / (2 * h);
      }
      const std::string who = "d/d" + a.v.name();
      const flat_value expected = to_flat(a.value);
      for (const auto& [mode, r] : results) {
        const flat_value& g = r[k];
        if (g.shape != expected.shape) {
          os << " " << who << " (" << mode << ") has shape " << shape_text(g.shape) << ", the variable "
             << shape_text(expected.shape) << ";";
          ++bad;
          continue;
        }
        for (std::size_t i = 0; i < fd.size(); ++i)
          if (!(std::abs(g.data[i] - fd[i]) <= m_opt.tol * std::max(1.0, std::abs(fd[i])))) {
            if (bad < 6) os << " " << who << "[" << i << "] (" << mode << ") = " << g.data[i] << ", finite differences " << fd[i] << ";";
            ++bad;
          }
      }
    });
    // Shared variables get their values back.
    for_each_index([&](auto k) {
      if constexpr (std::tuple_element_t<k, std::tuple<A...>>::is_shared) std::get<k>(m_in).v.set_value(std::get<k>(m_in).value);
    });
    if (!bad) return "";
    return std::to_string(bad) + " mismatches:" + os.str();
  }

 private:
  // The CPU runtime runs an elementwise node with at most 8 outputs; multi_output_fusion
  // caps groups there. Should a node ever exceed it, the check fails here with its name.
  template <class F>
  static std::string too_many_outputs(const F& f) {
    for (const auto& nd : f.toposort())
      if (nd.outputs.size() > max_node_outputs)
        return "not run: the compiled function has an Apply node with " + std::to_string(nd.outputs.size()) +
               " outputs (the runtime holds " + std::to_string(max_node_outputs) + "): " + nd.op_name().substr(0, 200);
    return "";
  }

  template <class F>
  void for_each_index(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::integral_constant<std::size_t, I>{}), ...); }(
        std::index_sequence_for<A...>{});
  }

  // A function of the symbolic inputs among the `at`s (shared variables are no inputs).
  template <class Out, class... Options>
  auto build(const Out& out, const Options&... options) const {
    const auto ins = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple_cat(input_of<I>()...);
    }(std::index_sequence_for<A...>{});
    return std::apply(
        [&](const auto&... v) {
          return xsym::function("grad_check", xsym::inputs(v...), out, xsym::ignore_unused_inputs{}, options...);
        },
        ins);
  }
  template <std::size_t I>
  auto input_of() const {
    using a_t = std::tuple_element_t<I, std::tuple<A...>>;
    if constexpr (a_t::is_shared) return std::tuple<>{};
    else return std::tuple<xsym::var<double, a_t::rank>>{std::get<I>(m_in).v};
  }

  // Calls f with the current values: shared variables are set, inputs passed.
  template <class F>
  auto call(const F& f) {
    for_each_index([&](auto k) {
      if constexpr (std::tuple_element_t<k, std::tuple<A...>>::is_shared) std::get<k>(m_in).v.set_value(std::get<k>(m_vals));
    });
    const auto args = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple_cat(value_of<I>()...);
    }(std::index_sequence_for<A...>{});
    return std::apply([&](const auto&... v) { return f(v...); }, args);
  }
  template <std::size_t I>
  auto value_of() const {
    using a_t = std::tuple_element_t<I, std::tuple<A...>>;
    if constexpr (a_t::is_shared) return std::tuple<>{};
    else return std::tuple<const xt::xtensor<double, a_t::rank>&>{std::get<I>(m_vals)};
  }

  template <class... R>
  static std::vector<flat_value> to_flat_all(const std::tuple<R...>& r) {
    return std::apply([](const auto&... v) { return std::vector<flat_value>{to_flat(v)...}; }, r);
  }

  xsym::var<double, 0> m_cost;
  fd_options m_opt;
  std::tuple<A...> m_in;
  std::tuple<xt::xtensor<double, A::rank>...> m_vals;
};

/// Checks the gradient of cost wrt each of in against finite differences (one CHECK).
template <class... A>
void check_grad(const std::string& what, const xsym::var<double, 0>& cost, const A&... in) {
  INFO(what);
  CHECK(checker<A...>(cost, fd_options{}, in...).mismatch() == "");
}

/// As check_grad, with a policy, step or tolerance of one's own.
template <class... A>
void check_grad_opt(const std::string& what, const fd_options& opt, const xsym::var<double, 0>& cost, const A&... in) {
  INFO(what);
  CHECK(checker<A...>(cost, opt, in...).mismatch() == "");
}

// ---- random data ----------------------------------------------------------------------------

template <std::size_t N>
xt::xtensor<double, N> uniform(std::mt19937& rng, const std::array<std::size_t, N>& shape, double lo, double hi) {
  xt::xtensor<double, N> a(shape);
  std::uniform_real_distribution<double> d(lo, hi);
  for (auto& v : a) v = d(rng);
  return a;
}

/// Values with |v| in [lo, hi] and a random sign: away from 0 (abs, divisors).
template <std::size_t N>
xt::xtensor<double, N> signed_uniform(std::mt19937& rng, const std::array<std::size_t, N>& shape, double lo, double hi) {
  xt::xtensor<double, N> a = uniform(rng, shape, lo, hi);
  std::bernoulli_distribution coin(0.5);
  for (auto& v : a)
    if (coin(rng)) v = -v;
  return a;
}

/// Distinct values, a shuffled grid 0.1 apart around `offset` plus noise of at most 0.02: no ties
/// for max, min, maximum. Values drawn with offsets 0 and 0.05 are at least 0.01 apart.
template <std::size_t N>
xt::xtensor<double, N> distinct(std::mt19937& rng, const std::array<std::size_t, N>& shape, double offset = 0.0) {
  xt::xtensor<double, N> a(shape);
  std::vector<double> v(a.size());
  std::uniform_real_distribution<double> noise(-0.02, 0.02);
  const double half = static_cast<double>(v.size() / 2);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = offset + 0.1 * (static_cast<double>(i) - half) + noise(rng);
  std::shuffle(v.begin(), v.end(), rng);
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}

/// A constant weight tensor of that shape, so that every element of a result reaches the cost.
template <std::size_t N>
xsym::var<double, N> weights(std::mt19937& rng, const std::array<std::size_t, N>& shape) {
  return xsym::constant(uniform(rng, shape, -1.0, 1.0));
}

/// sum(e * r) with a fresh random weight r of e's shape (shape given, e's rank is static).
template <std::size_t N>
xsym::var<double, 0> weighted(std::mt19937& rng, const xsym::var<double, N>& e, const std::array<std::size_t, N>& shape) {
  if constexpr (N == 0) return e * xsym::constant(std::uniform_real_distribution<double>(0.5, 1.5)(rng));
  else return sum(e * weights(rng, shape));
}

}  // namespace grad_test

#endif
