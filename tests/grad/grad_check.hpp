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

using xsym::var_ptr;

/// The value of one symbolic input or shared variable (float64), in C order.
struct arg {
  var_ptr node;
  std::vector<std::int64_t> shape;
  std::vector<double> data;

  xsym::ndarray array() const {
    xsym::shape_t s;
    s.rank = static_cast<int>(shape.size());
    for (int d = 0; d < s.rank; ++d) s[d] = shape[static_cast<std::size_t>(d)];
    xsym::ndarray a = xsym::ndarray::empty(xsym::dtype::float64, s);
    std::copy(data.begin(), data.end(), a.data_as<double>());
    return a;
  }
};

template <std::size_t N>
arg make_arg(const var_ptr& node, const xt::xtensor<double, N>& value) {
  arg a;
  a.node = node;
  for (std::size_t d = 0; d < N; ++d) a.shape.push_back(static_cast<std::int64_t>(value.shape()[d]));
  a.data.assign(value.begin(), value.end());
  return a;
}

inline std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

inline std::vector<std::int64_t> shape_of(const xsym::ndarray& a) {
  std::vector<std::int64_t> s;
  for (int d = 0; d < a.rank(); ++d) s.push_back(a.shape(d));
  return s;
}

inline std::vector<double> flat(const xsym::ndarray& a) {
  std::vector<double> v(static_cast<std::size_t>(a.size()));
  for (std::int64_t i = 0; i < a.size(); ++i) v[static_cast<std::size_t>(i)] = a.flat_as_double(i);
  return v;
}

/// A compiled function over the symbolic inputs among `args` (shared ones are set before each
/// call), through the untyped runtime that xsym::function wraps.
class compiled {
 public:
  compiled(const std::vector<arg>& args, const std::vector<var_ptr>& outputs, const std::string& mode = "FAST_RUN",
           const std::string& excluding = "") {
    std::vector<var_ptr> ins;
    for (const auto& a : args)
      if (a.node->kind == xsym::var_kind::input) ins.push_back(a.node);
    xsym::function_options o;
    o.mode = mode;
    if (!excluding.empty()) o.excluding = excluding;
    o.ignore_unused_inputs = true;
    m_rt = std::make_shared<xsym::function_runtime>("grad_check", ins, outputs,
                                                    std::vector<std::pair<var_ptr, var_ptr>>{}, o);
  }

  std::vector<xsym::ndarray> operator()(const std::vector<arg>& args) const {
    std::vector<xsym::ndarray> in;
    for (const auto& a : args) {
      if (a.node->kind == xsym::var_kind::input) {
        in.push_back(a.array());
      } else {
        auto& sv = *a.node->shared;
        std::lock_guard lock(sv.mutex);
        sv.value = a.array();
      }
    }
    in.emplace_back();  // never empty
    std::vector<xsym::ndarray> out;
    m_rt->call(in.data(), out);
    return out;
  }

  const xsym::function_graph& graph() const { return m_rt->graph(); }

 private:
  std::shared_ptr<xsym::function_runtime> m_rt;
};

struct fd_options {
  xsym::disconnected policy = xsym::disconnected::raise;
  double h = 1e-6;     // step, relative to max(1, |x|)
  double tol = 1e-6;   // |g - fd| <= tol * max(1, |fd|)
  bool fast_compile_too = true;  // also compile the gradient with FAST_COMPILE (reference kernels)
  std::string excluding;         // rewrites left out of the FAST_RUN builds (optimizer_excluding)
};

/// "" when grads[k] (the symbolic gradient wrt args[k]; null to skip) has args[k]'s shape and
/// matches central differences of cost in every element; else what differs.
inline std::string fd_mismatch(const var_ptr& cost, const std::vector<arg>& args, const std::vector<var_ptr>& grads,
                               const fd_options& opt = {}) {
  // Shared values are put back as they were afterwards.
  std::vector<xsym::ndarray> saved;
  for (const auto& a : args)
    if (a.node->kind == xsym::var_kind::shared) saved.push_back(a.node->shared->value);

  std::vector<var_ptr> outs;
  for (const auto& g : grads)
    if (g) outs.push_back(g);
  std::vector<std::vector<xsym::ndarray>> results;
  results.push_back(compiled(args, outs, "FAST_RUN", opt.excluding)(args));
  if (opt.fast_compile_too) results.push_back(compiled(args, outs, "FAST_COMPILE")(args));
  const compiled f(args, {cost}, "FAST_RUN", opt.excluding);
  auto eval = [&](const std::vector<arg>& a) { return f(a)[0].flat_as_double(0); };

  std::ostringstream os;
  os.precision(12);
  int bad = 0;
  const double f0 = eval(args);
  if (!std::isfinite(f0)) os << " the cost is not finite (" << f0 << ");", ++bad;
  std::size_t out_index = 0;
  for (std::size_t k = 0; k < args.size() && k < grads.size(); ++k) {
    if (!grads[k]) continue;
    const arg& a = args[k];
    std::vector<double> fd(a.data.size());
    std::vector<arg> p = args;
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      const double x = a.data[i];
      const double h = opt.h * std::max(1.0, std::abs(x));
      p[k].data[i] = x + h;
      const double fp = eval(p);
      p[k].data[i] = x - h;
      const double fm = eval(p);
      p[k].data[i] = x;
      fd[i] = (fp - fm) / (2 * h);
    }
    for (std::size_t r = 0; r < results.size(); ++r) {
      const xsym::ndarray& g = results[r][out_index];
      const char* mode = r == 0 ? "FAST_RUN" : "FAST_COMPILE";
      const std::string who = "d/d" + (a.node->name.empty() ? "arg" + std::to_string(k) : a.node->name);
      if (g.type() != xsym::dtype::float64) {
        os << " " << who << " (" << mode << ") has dtype " << xsym::dtype_name(g.type()) << ";";
        ++bad;
        continue;
      }
      if (shape_of(g) != a.shape) {
        os << " " << who << " (" << mode << ") has shape " << shape_text(shape_of(g)) << ", the variable "
           << shape_text(a.shape) << ";";
        ++bad;
        continue;
      }
      const std::vector<double> gv = flat(g);
      for (std::size_t i = 0; i < fd.size(); ++i) {
        const bool ok = std::abs(gv[i] - fd[i]) <= opt.tol * std::max(1.0, std::abs(fd[i]));
        if (!ok) {
          if (bad < 6) os << " " << who << "[" << i << "] (" << mode << ") = " << gv[i] << ", finite differences " << fd[i] << ";";
          ++bad;
        }
      }
    }
    ++out_index;
  }
  std::size_t s = 0;
  for (const auto& a : args)
    if (a.node->kind == xsym::var_kind::shared) a.node->shared->value = saved[s++];
  if (!bad) return "";
  return std::to_string(bad) + " mismatches:" + os.str();
}

/// A symbolic variable with the value to check its gradient at.
template <std::size_t N>
struct at_t {
  xsym::var<double, N> v;
  xt::xtensor<double, N> value;
};
template <std::size_t N>
at_t<N> at(const xsym::var<double, N>& v, xt::xtensor<double, N> value) {
  return {v, std::move(value)};
}

/// The gradients xsym::grad(policy, cost, x...) returns, as nodes, checked for their static types.
template <std::size_t... N>
std::vector<var_ptr> grad_nodes(xsym::disconnected policy, const xsym::var<double, 0>& cost, const at_t<N>&... in) {
  auto gs = xsym::grad(policy, cost, in.v...);
  static_assert(std::is_same_v<decltype(gs), std::tuple<xsym::var<double, N>...>>);
  std::vector<var_ptr> nodes;
  std::apply([&](const auto&... g) { (nodes.push_back(g.node()), ...); }, gs);
  return nodes;
}

/// Checks the gradient of cost wrt each of in against finite differences (one CHECK).
template <std::size_t... N>
void check_grad(const std::string& what, const xsym::var<double, 0>& cost, const at_t<N>&... in) {
  INFO(what);
  const auto gs = xsym::grad(cost, in.v...);
  static_assert(std::is_same_v<std::remove_const_t<decltype(gs)>, std::tuple<xsym::var<double, N>...>>);
  std::vector<var_ptr> nodes;
  std::apply([&](const auto&... g) { (nodes.push_back(g.node()), ...); }, gs);
  CHECK(fd_mismatch(cost.node(), {make_arg(in.v.node(), in.value)...}, nodes) == "");
}

/// As check_grad, with a step and tolerance of one's own.
template <std::size_t... N>
void check_grad_opt(const std::string& what, const fd_options& opt, const xsym::var<double, 0>& cost,
                    const at_t<N>&... in) {
  INFO(what);
  const auto nodes = grad_nodes(opt.policy, cost, in...);
  CHECK(fd_mismatch(cost.node(), {make_arg(in.v.node(), in.value)...}, nodes, opt) == "");
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
