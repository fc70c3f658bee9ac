// Random composite expressions (fixed seeds): trees of unary and binary elementwise ops, C++
// numbers, reductions, dot and dimshuffle over a scalar, a vector and two matrices; the
// gradient wrt every input against finite differences.
//
// Each candidate node is compiled and evaluated at the test point while the tree grows, so
// that log and sqrt only see positive values (else they get exp, softplus or sqr + 1 of it),
// abs, maximum, minimum, switch, max and min stay away from their kinks and ties, and every
// intermediate value stays moderate (|v| <= 20): then finite differences are accurate.
#include "grad_check.hpp"

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <variant>

using namespace grad_test;

namespace {

using s_t = xsym::var<double, 0>;
using v_t = xsym::var<double, 1>;
using m_t = xsym::var<double, 2>;
using value = std::variant<s_t, v_t, m_t>;

/// A generated expression and its C++ text (printed when its check fails).
struct expr {
  value v;
  std::string text;
};

constexpr std::size_t n = 3;  // vectors have n elements, matrices n x n

int rank_of(const expr& e) { return static_cast<int>(e.v.index()); }

template <class F>
expr map1(const expr& x, F f, std::string text) {
  return {std::visit([&](const auto& a) -> value { return f(a); }, x.v), std::move(text)};
}
template <class F>
expr map2(const expr& x, const expr& y, F f, std::string text) {
  return {std::visit([&](const auto& a, const auto& b) -> value { return f(a, b); }, x.v, y.v), std::move(text)};
}
std::string call(const char* f, const expr& x) { return std::string(f) + "(" + x.text + ")"; }
std::string call(const char* f, const expr& x, const expr& y) { return std::string(f) + "(" + x.text + ", " + y.text + ")"; }
std::string infix(const expr& x, const char* op, const expr& y) { return "(" + x.text + " " + op + " " + y.text + ")"; }
std::string num(double k) {
  std::ostringstream os;
  os << k;
  return os.str();
}

class generator {
 public:
  explicit generator(unsigned seed)
      : m_rng(seed),
        m_S(uniform<0>(m_rng, {}, -1, 1)),
        m_A(uniform<1>(m_rng, {n}, -1, 1)),
        m_MV(uniform<2>(m_rng, {n, n}, -1, 1)),
        m_NV(uniform<2>(m_rng, {n, n}, -1, 1)) {}

  /// A random tree of at most `depth` levels of ops above the inputs.
  expr tree(int depth) {
    if (depth == 0 || chance(0.15)) return leaf();
    for (int attempt = 0; attempt < 10; ++attempt) {
      std::optional<expr> e;
      const double u = unit();
      if (u < 0.32) e = unary(depth);
      else if (u < 0.60) e = binary(depth);
      else if (u < 0.70) e = with_number(depth);
      else if (u < 0.83) e = reduction(depth);
      else if (u < 0.93) e = product(depth);
      else e = shape(depth);
      if (e && moderate(*e)) return *e;
    }
    return leaf();
  }

  /// The scalar cost: the tree itself, or sum(tree * R) / mean(tree) for a tensor.
  s_t cost(const expr& e) {
    switch (rank_of(e)) {
      case 0: return std::get<0>(e.v) * 1.0;
      case 1: return chance(0.2) ? mean(std::get<1>(e.v)) : sum(std::get<1>(e.v) * weights<1>(m_rng, {n}));
      default: return chance(0.2) ? mean(std::get<2>(e.v)) : sum(std::get<2>(e.v) * weights<2>(m_rng, {n, n}));
    }
  }

  void check(const std::string& what, const s_t& c, const std::string& excluding) {
    fd_options o;
    o.policy = xsym::disconnected::zeros;  // a tree need not use every input
    o.excluding = excluding;
    check_grad_opt(what, o, c, at(m_s, m_S), at(m_a, m_A), at(m_M, m_MV), at(m_N, m_NV));
  }

  const std::map<std::string, int>& used() const { return m_used; }

 private:
  double unit() { return std::uniform_real_distribution<double>(0, 1)(m_rng); }
  bool chance(double p) { return unit() < p; }
  int pick(int count) { return std::uniform_int_distribution<int>(0, count - 1)(m_rng); }
  expr note(const char* what, expr e) {
    ++m_pending[what];
    return e;
  }

  /// The values of e at the test point (C order).
  std::vector<double> values(const expr& e) const {
    return std::visit(
        [&](const auto& v) {
          auto f = xsym::function("probe", xsym::inputs(m_s, m_a, m_M, m_N), v, xsym::ignore_unused_inputs{});
          return to_flat(f(m_S, m_A, m_MV, m_NV)).data;
        },
        e.v);
  }

  bool moderate(const expr& e) {
    for (double v : values(e))
      if (!std::isfinite(v) || std::abs(v) > 20) {
        m_pending.clear();
        return false;
      }
    for (auto& [k, c] : m_pending) m_used[k] += c;
    m_pending.clear();
    return true;
  }
  static double min_abs(const std::vector<double>& v) {
    double m = INFINITY;
    for (double x : v) m = std::min(m, std::abs(x));
    return m;
  }
  static double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
  static double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

  expr leaf() {
    const double u = unit();
    if (u < 0.15) return {m_s, "s"};
    if (u < 0.45) return {m_a, "a"};
    if (u < 0.75) return {m_M, "M"};
    return {m_N, "N"};
  }

  // A positive form of x for log and sqrt: exp, softplus or sqr + 1 of it.
  expr positive(const expr& x) {
    const auto v = values(x);
    if (min_of(v) >= 0.1) return x;
    switch (pick(3)) {
      case 0:
        if (max_of(v) <= 2.5) return note("exp (positive)", map1(x, [](const auto& a) { return exp(a); }, call("exp", x)));
        [[fallthrough]];
      case 1:
        if (min_of(v) >= -3) return note("softplus (positive)", map1(x, [](const auto& a) { return softplus(a); }, call("softplus", x)));
        [[fallthrough]];
      default: return note("sqr + 1 (positive)", map1(x, [](const auto& a) { return sqr(a) + 1.0; }, "(" + call("sqr", x) + " + 1.0)"));
    }
  }

  std::optional<expr> unary(int depth) {
    const expr x = tree(depth - 1);
    const auto v = values(x);
    switch (pick(13)) {
      case 0: return note("neg", map1(x, [](const auto& a) { return -a; }, "(-" + x.text + ")"));
      case 1: return note("sqr", map1(x, [](const auto& a) { return sqr(a); }, call("sqr", x)));
      case 2: {
        const expr p = positive(x);
        return note("sqrt", map1(p, [](const auto& a) { return sqrt(a); }, call("sqrt", p)));
      }
      case 3:
        if (max_of(v) > 2.5) return std::nullopt;
        return note("exp", map1(x, [](const auto& a) { return exp(a); }, call("exp", x)));
      case 4: {
        const expr p = positive(x);
        return note("log", map1(p, [](const auto& a) { return log(a); }, call("log", p)));
      }
      case 5:
        if (min_of(v) < -0.8)
          return note("log1p", map1(x, [](const auto& a) { return log1p(sqr(a)); }, "log1p(" + call("sqr", x) + ")"));
        return note("log1p", map1(x, [](const auto& a) { return log1p(a); }, call("log1p", x)));
      case 6:
        if (max_of(v) > 2.5) return std::nullopt;
        return note("expm1", map1(x, [](const auto& a) { return expm1(a); }, call("expm1", x)));
      case 7:
        if (min_abs(v) < 0.01) return std::nullopt;
        return note("abs", map1(x, [](const auto& a) { return abs(a); }, call("abs", x)));
      case 8: return note("tanh", map1(x, [](const auto& a) { return tanh(a); }, call("tanh", x)));
      case 9: return note("sigmoid", map1(x, [](const auto& a) { return sigmoid(a); }, call("sigmoid", x)));
      case 10: return note("softplus", map1(x, [](const auto& a) { return softplus(a); }, call("softplus", x)));
      case 11:
        return note("log(sigmoid) (stabilized)",
                    map1(x, [](const auto& a) { return log(1 / (1 + exp(-a))); }, "log(1 / (1 + exp(-" + x.text + ")))"));
      default:
        return note("log(1 - sigmoid) (stabilized)",
                    map1(x, [](const auto& a) { return log(1 - sigmoid(a)); }, "log(1 - sigmoid(" + x.text + "))"));
    }
  }

  std::optional<expr> binary(int depth) {
    expr l = tree(depth - 1);
    expr r = tree(depth - 1);
    auto apart = [&](const expr& a, const expr& b) {
      return min_abs(values(map2(a, b, [](const auto& p, const auto& q) { return p - q; }, ""))) >= 0.01;
    };
    switch (pick(8)) {
      case 0: return note("add", map2(l, r, [](const auto& a, const auto& b) { return a + b; }, infix(l, "+", r)));
      case 1: return note("sub", map2(l, r, [](const auto& a, const auto& b) { return a - b; }, infix(l, "-", r)));
      case 2: return note("mul", map2(l, r, [](const auto& a, const auto& b) { return a * b; }, infix(l, "*", r)));
      case 3:
        if (min_abs(values(r)) < 0.2) r = map1(r, [](const auto& a) { return sqr(a) + 0.5; }, "(" + call("sqr", r) + " + 0.5)");
        return note("true_div", map2(l, r, [](const auto& a, const auto& b) { return a / b; }, infix(l, "/", r)));
      case 4: {
        if (min_of(values(l)) < 0.2) l = map1(l, [](const auto& a) { return sqr(a) + 0.5; }, "(" + call("sqr", l) + " + 0.5)");
        if (max_of(values(r)) > 2 || min_of(values(r)) < -2)
          r = map1(r, [](const auto& a) { return 1.5 * tanh(a); }, "(1.5 * " + call("tanh", r) + ")");
        return note("pow", map2(l, r, [](const auto& a, const auto& b) { return pow(a, b); }, call("pow", l, r)));
      }
      case 5:
        if (!apart(l, r)) return std::nullopt;
        return note("maximum", map2(l, r, [](const auto& a, const auto& b) { return maximum(a, b); }, call("maximum", l, r)));
      case 6:
        if (!apart(l, r)) return std::nullopt;
        return note("minimum", map2(l, r, [](const auto& a, const auto& b) { return minimum(a, b); }, call("minimum", l, r)));
      default: {
        if (!apart(l, r)) return std::nullopt;
        const expr c = tree(depth - 1);
        const expr branches[] = {l, r, c};
        const expr& p = branches[pick(3)];
        const expr& q = branches[pick(3)];
        return note("switch", {std::visit([](const auto& a, const auto& b, const auto& t,
                                             const auto& f) -> value { return xsym::switch_(a > b, t, f); },
                                          l.v, r.v, p.v, q.v),
                               "switch_(" + infix(l, ">", r) + ", " + p.text + ", " + q.text + ")"});
      }
    }
  }

  std::optional<expr> with_number(int depth) {
    const expr x = tree(depth - 1);
    static constexpr double numbers[] = {0.5, -1.5, 2.0, 3.0, 0.25, -0.75};
    const double k = numbers[pick(6)];
    switch (pick(7)) {
      case 0: return note("x + k", map1(x, [k](const auto& a) { return a + k; }, "(" + x.text + " + " + num(k) + ")"));
      case 1: return note("k - x", map1(x, [k](const auto& a) { return k - a; }, "(" + num(k) + " - " + x.text + ")"));
      case 2: return note("k * x", map1(x, [k](const auto& a) { return k * a; }, "(" + num(k) + " * " + x.text + ")"));
      case 3: return note("x / k", map1(x, [k](const auto& a) { return a / k; }, "(" + x.text + " / " + num(k) + ")"));
      case 4:
        return note("k / (sqr(x) + 1)", map1(x, [k](const auto& a) { return k / (sqr(a) + 1); },
                                              "(" + num(k) + " / (" + call("sqr", x) + " + 1))"));
      case 5: return note("pow(x, 3)", map1(x, [](const auto& a) { return pow(a, 3); }, "pow(" + x.text + ", 3)"));
      default: {
        const auto v = values(x);
        for (double e : v)
          if (std::abs(e - k) < 0.01) return std::nullopt;
        return note("maximum(x, k)",
                    map1(x, [k](const auto& a) { return maximum(a, k); }, "maximum(" + x.text + ", " + num(k) + ")"));
      }
    }
  }

  // max and min need a clear winner in every group they reduce.
  static bool no_ties(const std::vector<double>& v, int rank, int axis) {
    std::vector<std::vector<double>> groups;
    if (rank == 1 || axis < 0) {
      groups.push_back(v);
    } else {
      for (std::size_t g = 0; g < n; ++g) {
        groups.emplace_back();
        for (std::size_t i = 0; i < n; ++i) groups.back().push_back(axis == 0 ? v[i * n + g] : v[g * n + i]);
      }
    }
    for (auto& g : groups) {
      std::sort(g.begin(), g.end());
      if (g.size() > 1 && (g[1] - g[0] < 1e-3 || g[g.size() - 1] - g[g.size() - 2] < 1e-3)) return false;
    }
    return true;
  }

  std::optional<expr> reduction(int depth) {
    const expr x = tree(depth - 1);
    if (rank_of(x) == 0) return std::nullopt;
    const int op = pick(5);
    static constexpr const char* names[] = {"sum", "mean", "prod", "max", "min"};
    // axis: -1 all axes (the overload without axes), 0 or 1 one axis, 2 the list {0, 1}
    const int axis = rank_of(x) == 1 ? (chance(0.5) ? -1 : 0) : pick(4) - 1;
    if (op >= 3 && !no_ties(values(x), rank_of(x), axis == 2 ? -1 : axis)) return std::nullopt;
    const std::string name = std::string(names[op]) + (axis < 0 ? "" : axis == 2 ? "{0,1}" : "(axis)");
    auto red = [&](const auto& a) -> value {
      constexpr std::size_t N = std::remove_cvref_t<decltype(a)>::rank;
      if constexpr (N == 0) {
        return a;
      } else {
        auto go = [&](auto f) -> value {
          if (axis < 0) return f(a);
          if constexpr (N == 2)
            if (axis == 2) return f.template operator()<2>(a, {0, 1});
          return f(a, axis);
        };
        switch (op) {
          case 0: return go(reduce_fn<0>{});
          case 1: return go(reduce_fn<1>{});
          case 2: return go(reduce_fn<2>{});
          case 3: return go(reduce_fn<3>{});
          default: return go(reduce_fn<4>{});
        }
      }
    };
    const std::string text = std::string(names[op]) + "(" + x.text +
                             (axis < 0 ? std::string() : axis == 2 ? std::string(", {0, 1}") : ", " + std::to_string(axis)) + ")";
    return note(name.c_str(), {std::visit(red, x.v), text});
  }

  template <int Op>
  struct reduce_fn {
    template <class A>
    auto operator()(const A& a) const {
      if constexpr (Op == 0) return sum(a);
      else if constexpr (Op == 1) return mean(a);
      else if constexpr (Op == 2) return prod(a);
      else if constexpr (Op == 3) return max(a);
      else return min(a);
    }
    template <class A>
    auto operator()(const A& a, int axis) const {
      if constexpr (Op == 0) return sum(a, axis);
      else if constexpr (Op == 1) return mean(a, axis);
      else if constexpr (Op == 2) return prod(a, axis);
      else if constexpr (Op == 3) return max(a, axis);
      else return min(a, axis);
    }
    template <std::size_t K, class A>
    auto operator()(const A& a, const int (&axes)[K]) const {
      if constexpr (Op == 0) return sum(a, axes);
      else if constexpr (Op == 1) return mean(a, axes);
      else if constexpr (Op == 2) return prod(a, axes);
      else if constexpr (Op == 3) return max(a, axes);
      else return min(a, axes);
    }
  };

  // A vector or matrix operand for dot: a scalar tree is scaled onto the vector input.
  expr operand(int depth) {
    expr x = tree(depth - 1);
    if (rank_of(x) == 0) x = {std::get<0>(x.v) * m_a, "(" + x.text + " * a)"};
    if (rank_of(x) == 2 && chance(0.35)) x = note("transpose (dot operand)", {std::get<2>(x.v).T(), x.text + ".T()"});
    return x;
  }

  std::optional<expr> product(int depth) {
    const expr l = operand(depth);
    const expr r = operand(depth);
    const int rl = rank_of(l), rr = rank_of(r);
    const char* name = rl == 1 ? (rr == 1 ? "dot(vector, vector)" : "dot(vector, matrix)")
                               : (rr == 1 ? "dot(matrix, vector)" : "dot(matrix, matrix)");
    return note(name, {std::visit(
                           [](const auto& a, const auto& b) -> value {
                             constexpr std::size_t NA = std::remove_cvref_t<decltype(a)>::rank;
                             constexpr std::size_t NB = std::remove_cvref_t<decltype(b)>::rank;
                             if constexpr (NA == 0 || NB == 0) return a * b;  // not reached
                             else return dot(a, b);
                           },
                           l.v, r.v),
                       call("dot", l, r)});
  }

  std::optional<expr> shape(int depth) {
    switch (pick(3)) {
      case 0: {
        const expr x = tree(depth - 1);
        if (rank_of(x) != 2) return std::nullopt;
        return note("transpose", {transpose(std::get<2>(x.v)), call("transpose", x)});
      }
      case 1: {  // an outer sum or product of two vectors: a column against a row
        const expr u = vector_of(tree(depth - 1));
        const expr w = vector_of(tree(depth - 1));
        const auto col = dimshuffle(std::get<1>(u.v), 0, 'x');
        const auto row = dimshuffle(std::get<1>(w.v), 'x', 0);
        const std::string ct = "dimshuffle(" + u.text + ", 0, 'x')", rt = "dimshuffle(" + w.text + ", 'x', 0)";
        return chance(0.5) ? note("outer sum (dimshuffle)", {col + row, "(" + ct + " + " + rt + ")"})
                           : note("outer product (dimshuffle)", {col * row, "(" + ct + " * " + rt + ")"});
      }
      default: {  // a vector broadcast along a matrix's columns
        const expr m = tree(depth - 1);
        if (rank_of(m) != 2) return std::nullopt;
        const expr u = vector_of(tree(depth - 1));
        return note("column broadcast (dimshuffle)", {std::get<2>(m.v) * dimshuffle(std::get<1>(u.v), 0, 'x'),
                                                      "(" + m.text + " * dimshuffle(" + u.text + ", 0, 'x'))"});
      }
    }
  }

  // A vector from any tree: a scalar scales the vector input, a matrix multiplies it.
  expr vector_of(const expr& x) {
    switch (rank_of(x)) {
      case 0: return {std::get<0>(x.v) * m_a, "(" + x.text + " * a)"};
      case 1: return x;
      default: return {dot(std::get<2>(x.v), m_a), "dot(" + x.text + ", a)"};
    }
  }

  std::mt19937 m_rng;
  s_t m_s = xsym::scalar<double>("s");
  v_t m_a = xsym::vector<double>("a");
  m_t m_M = xsym::matrix<double>("M");
  m_t m_N = xsym::matrix<double>("N");
  xt::xtensor<double, 0> m_S;
  xt::xtensor<double, 1> m_A;
  xt::xtensor<double, 2> m_MV, m_NV;
  std::map<std::string, int> m_pending, m_used;
};

}  // namespace

namespace {
// The 100 expressions of the test below, compiled without the rewrites in `excluding`.
std::map<std::string, int> check_random_expressions(const std::string& excluding) {
  std::map<std::string, int> used;
  int nodes = 0;
  const int count = 100;
  for (int i = 0; i < count; ++i) {
    generator g(1000u + static_cast<unsigned>(i));
    const expr e = g.tree(3 + i % 3);
    const s_t c = g.cost(e);
    nodes += xsym::detail::count_applies({c.node()});
    g.check("expression " + std::to_string(i) + " (seed " + std::to_string(1000 + i) + "): " + e.text +
                (rank_of(e) == 0 ? "" : " in sum(_ * R) or mean(_)"),
            c, excluding);
    for (const auto& [k, v] : g.used()) used[k] += v;
  }
  if (std::getenv("XSYM_GRAD_RANDOM_STATS")) {
    std::cout << nodes << " Apply nodes in " << count << " costs\n";
    for (const auto& [k, v] : used) std::cout << "  " << k << ": " << v << "\n";
  }
  return used;
}
}  // namespace

TEST_CASE("grad of random composite expressions matches finite differences", "[grad][random]") {
  // multi_output_fusion is left out: see the next test.
  const auto used = check_random_expressions("multi_output_fusion");
  // Every kind of node was drawn somewhere.
  for (const char* k : {"neg", "sqr", "sqrt", "exp", "log", "log1p", "expm1", "abs", "tanh", "sigmoid", "softplus", "add",
                        "sub", "mul", "true_div", "pow", "maximum", "minimum", "switch", "x + k", "k * x", "sum", "mean",
                        "prod", "max", "min", "dot(vector, vector)", "dot(matrix, vector)", "dot(vector, matrix)",
                        "dot(matrix, matrix)", "transpose", "outer sum (dimshuffle)", "column broadcast (dimshuffle)"}) {
    int total = 0;
    for (const auto& [name, c] : used)
      if (name == k || name.rfind(std::string(k) + "(", 0) == 0 || name.rfind(std::string(k) + "{", 0) == 0) total += c;
    INFO(k);
    CHECK(total > 0);
  }
}

TEST_CASE("grad of random composite expressions, compiled with every FAST_RUN rewrite", "[grad][random][fusion]") {
  // Library bugs in multi_output_fusion (rewrite/multi_fusion.hpp): some of these gradients
  // fail to compile ("multi_output_fusion produced a cycle") or get nodes with more outputs
  // than the runtime holds (see the chain test).
  check_random_expressions("");
}
