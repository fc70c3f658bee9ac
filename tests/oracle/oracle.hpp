#ifndef XSYM_TESTS_ORACLE_ORACLE_HPP
#define XSYM_TESTS_ORACLE_ORACLE_HPP

// An evaluator of xsym's symbolic graphs written from the math, not from the library's kernels:
// every node in long double with plain loops (numpy's semantics: broadcasting, integer
// wraparound, truncating casts), each result rounded to its node's dtype. It reads only the
// graph (expr/variable.hpp, expr/op.hpp) and ndarray's memory; no kernel, rewrite or executor.
#include <xsym/xsym.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace oracle {

using xsym::dtype;
using xsym::op_kind;
using xsym::reduce_op;
using xsym::scalar_op;
using xsym::var_ptr;
using real = long double;

/// @brief A value: dtype, shape and elements in C order. Integers and bools are held exactly.
struct tensor {
  dtype type = dtype::float64;
  std::vector<std::int64_t> shape;
  std::vector<real> v;

  std::int64_t size() const {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
};

inline bool floating(dtype t) { return t == dtype::float32 || t == dtype::float64; }

// The integer two's complement of x in `bits` bits (x an integer that fits in int64 or uint64).
inline std::int64_t wrap_int(std::uint64_t x, dtype t) {
  if (t == dtype::int32) return static_cast<std::int32_t>(static_cast<std::uint32_t>(x));
  return static_cast<std::int64_t>(x);
}

inline std::uint64_t as_bits(real x) {
  // x is integral; negative values go through int64 so that the bits are two's complement.
  if (x < 0) return static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
  return static_cast<std::uint64_t>(x);
}

/// @brief x as an element of type t holds it: rounded to float32 or float64, truncated toward
/// zero and wrapped into an integer type, nonzero as a bool (numpy's casts).
inline real to_type(real x, dtype t) {
  switch (t) {
    case dtype::bool_: return x != 0 ? 1 : 0;
    case dtype::int32:
    case dtype::int64: return static_cast<real>(wrap_int(as_bits(std::trunc(x)), t));
    case dtype::float32: return static_cast<float>(x);
    case dtype::float64: return static_cast<double>(x);
  }
  return x;
}

// + - * / and sqrt in the type itself: IEEE gives the correctly rounded result directly.
inline real basic(scalar_op op, dtype t, real a, real b) {
  auto in_type = [&](auto x, auto y) -> real {
    switch (op) {
      case scalar_op::add: return x + y;
      case scalar_op::sub: return x - y;
      case scalar_op::mul: return x * y;
      case scalar_op::true_div: return x / y;
      case scalar_op::sqr: return x * x;
      default: return std::sqrt(x);
    }
  };
  if (t == dtype::float32) return in_type(static_cast<float>(a), static_cast<float>(b));
  return in_type(static_cast<double>(a), static_cast<double>(b));
}

/// @brief One scalar op on values of the type t it computes in; the result before its final
/// rounding to the output type (done by the caller). c is switch's third argument. `exact`:
/// floating-point arithmetic in long double, not in t.
inline real scalar(scalar_op op, dtype t, real a, real b, real c, bool exact = false) {
  const bool f = floating(t);
  if (exact && f) t = dtype::float64;  // then basic() below is not used for it
  const bool in_long_double = exact && f;
  // Integer arithmetic wraps around, as numpy's does.
  auto int_op = [&](auto fn) { return static_cast<real>(wrap_int(fn(as_bits(a), as_bits(b)), t)); };
  switch (op) {
    case scalar_op::add:
      if (!f) return int_op([](std::uint64_t x, std::uint64_t y) { return x + y; });
      return in_long_double ? a + b : basic(op, t, a, b);
    case scalar_op::sub:
      if (!f) return int_op([](std::uint64_t x, std::uint64_t y) { return x - y; });
      return in_long_double ? a - b : basic(op, t, a, b);
    case scalar_op::mul:
      if (!f) return int_op([](std::uint64_t x, std::uint64_t y) { return x * y; });
      return in_long_double ? a * b : basic(op, t, a, b);
    case scalar_op::sqr:
      if (!f) return int_op([](std::uint64_t x, std::uint64_t) { return x * x; });
      return in_long_double ? a * a : basic(op, t, a, b);
    case scalar_op::neg:
      if (!f) return int_op([](std::uint64_t x, std::uint64_t) { return std::uint64_t{0} - x; });
      return -a;
    case scalar_op::abs:
      if (!f) return a < 0 ? int_op([](std::uint64_t x, std::uint64_t) { return std::uint64_t{0} - x; }) : a;
      return std::fabs(a);
    case scalar_op::true_div: return in_long_double ? a / b : basic(op, t, a, b);
    case scalar_op::sqrt: return in_long_double ? std::sqrt(a) : basic(op, t, a, b);
    case scalar_op::pow: return std::pow(a, b);
    case scalar_op::exp: return std::exp(a);
    case scalar_op::log: return std::log(a);
    case scalar_op::log1p: return std::log1p(a);
    case scalar_op::expm1: return std::expm1(a);
    case scalar_op::tanh: return std::tanh(a);
    case scalar_op::sin: return std::sin(a);
    case scalar_op::cos: return std::cos(a);
    case scalar_op::tan: return std::tan(a);
    case scalar_op::arcsin: return std::asin(a);
    case scalar_op::arccos: return std::acos(a);
    case scalar_op::arctan: return std::atan(a);
    case scalar_op::sinh: return std::sinh(a);
    case scalar_op::cosh: return std::cosh(a);
    case scalar_op::arcsinh: return std::asinh(a);
    case scalar_op::arccosh: return std::acosh(a);
    case scalar_op::arctanh: return std::atanh(a);
    case scalar_op::erf: return std::erf(a);
    case scalar_op::erfc: return std::erfc(a);
    case scalar_op::log2: return std::log2(a);
    case scalar_op::log10: return std::log10(a);
    case scalar_op::exp2: return std::exp2(a);
    case scalar_op::floor: return std::floor(a);
    case scalar_op::ceil: return std::ceil(a);
    case scalar_op::round: {  // half to even, from the definition
      const long double f = std::floor(a), d = a - f;
      if (d < 0.5L) return f;
      if (d > 0.5L) return f + 1;
      return std::fmod(f, 2.0L) == 0 ? f : f + 1;
    }
    case scalar_op::sigmoid: return 1 / (1 + std::exp(-a));
    case scalar_op::softplus: return a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a));
    case scalar_op::floor_div:
    case scalar_op::mod: {
      // Python's: the quotient rounded toward -inf, the remainder a - q b (the divisor's sign).
      if (!f) {
        if (b == 0) return 0;
        if (b == -1) return op == scalar_op::mod ? 0 : int_op([](std::uint64_t x, std::uint64_t) { return std::uint64_t{0} - x; });
        const real q = std::floor(a / b);
        return op == scalar_op::floor_div ? q : a - q * b;
      }
      if (b == 0) return op == scalar_op::floor_div ? a / b : std::fmod(a, b);
      const real q = std::floor(a / b), r = a - q * b;
      if (op == scalar_op::floor_div) return q == 0 ? std::copysign(real(0), a / b) : q;
      return r == 0 ? std::copysign(real(0), b) : r;
    }
    case scalar_op::bit_and: return static_cast<real>(static_cast<std::int64_t>(a) & static_cast<std::int64_t>(b));
    case scalar_op::bit_or: return static_cast<real>(static_cast<std::int64_t>(a) | static_cast<std::int64_t>(b));
    case scalar_op::bit_xor: return static_cast<real>(static_cast<std::int64_t>(a) ^ static_cast<std::int64_t>(b));
    case scalar_op::invert: return t == dtype::bool_ ? real(a == 0) : static_cast<real>(~static_cast<std::int64_t>(a));
    case scalar_op::maximum: return a < b ? b : a;
    case scalar_op::minimum: return b < a ? b : a;
    case scalar_op::gt: return a > b;
    case scalar_op::lt: return a < b;
    case scalar_op::ge: return a >= b;
    case scalar_op::le: return a <= b;
    case scalar_op::eq: return a == b;
    case scalar_op::neq: return a != b;
    case scalar_op::switch_: return a != 0 ? b : c;
    case scalar_op::cast:
    case scalar_op::identity: return a;
  }
  throw std::logic_error("oracle: unknown scalar op");
}

// Row-major strides of a shape.
inline std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Calls f(i, idx) for every flat index i of shape in C order, idx the multi-index.
template <class F>
void for_each_index(const std::vector<std::int64_t>& shape, F&& f) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    f(i, idx);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

/// @brief An ndarray's elements (any strides) as a tensor.
inline tensor from_ndarray(const xsym::ndarray& a) {
  tensor t;
  t.type = a.type();
  for (int d = 0; d < a.rank(); ++d) t.shape.push_back(a.shape(d));
  t.v.resize(static_cast<std::size_t>(t.size()));
  for_each_index(t.shape, [&](std::int64_t i, const std::vector<std::int64_t>& idx) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * a.stride(static_cast<int>(d));
    real x = 0;
    switch (a.type()) {
      case dtype::bool_: x = a.data_as<bool>()[off]; break;
      case dtype::int32: x = a.data_as<std::int32_t>()[off]; break;
      case dtype::int64: x = static_cast<real>(a.data_as<std::int64_t>()[off]); break;
      case dtype::float32: x = a.data_as<float>()[off]; break;
      case dtype::float64: x = a.data_as<double>()[off]; break;
    }
    t.v[static_cast<std::size_t>(i)] = x;
  });
  return t;
}

/// @brief Evaluates graphs; inputs are bound by variable, values are kept per node. Each node's
/// value is rounded to its dtype, as a graph computes it; `exact` keeps floating-point values in
/// long double until value() rounds the result once (the math a stabilising rewrite approximates
/// better than the literal formula does in float32).
class evaluator {
 public:
  explicit evaluator(bool exact = false) : m_exact(exact) {}

  void bind(const var_ptr& input, tensor value) { m_values[input->id] = std::move(value); }

  /// @brief v's value, rounded to its dtype.
  tensor value(const var_ptr& v) {
    tensor t = eval(v);
    for (auto& x : t.v) x = to_type(x, t.type);
    return t;
  }

 private:
  const tensor& eval(const var_ptr& v) {
    if (auto it = m_values.find(v->id); it != m_values.end()) return it->second;
    tensor t;
    switch (v->kind) {
      case xsym::var_kind::input: throw std::logic_error("oracle: input '" + v->name + "' is not bound");
      case xsym::var_kind::shared: t = from_ndarray(v->shared->value); break;
      case xsym::var_kind::constant: t = from_ndarray(v->constant); break;
      case xsym::var_kind::apply: t = apply(*v); break;
    }
    if (t.type != v->type) throw std::logic_error("oracle: a node's value has another dtype than the node");
    return m_values[v->id] = std::move(t);
  }

  tensor apply(const xsym::variable& v) {
    const xsym::op& o = *v.fn;
    std::vector<const tensor*> in;
    for (const auto& x : v.inputs) in.push_back(&eval(x));
    switch (o.kind) {
      case op_kind::elemwise: return elementwise(v, o, in);
      case op_kind::dimshuffle: return dimshuffle(o, *in[0]);
      case op_kind::reduce: return reduce(v, o, *in[0]);
      case op_kind::dot: return dot(v, *in[0], *in[1]);
      case op_kind::shape_prod: {
        tensor t;
        t.type = v.type;
        std::int64_t n = 1;
        for (int a : o.axes) n *= in[0]->shape[static_cast<std::size_t>(a)];
        t.v = {to_type(static_cast<real>(n), v.type)};
        return t;
      }
      default: throw std::logic_error("oracle: " + o.name() + " is made by rewrites only, never by a user's graph");
    }
  }

  // numpy broadcasting over inputs of one rank: a dimension of 1 repeats.
  tensor elementwise(const xsym::variable& v, const xsym::op& o, const std::vector<const tensor*>& in) const {
    tensor t;
    t.type = v.type;
    const std::size_t rank = static_cast<std::size_t>(v.rank);
    t.shape.assign(rank, 1);
    for (const tensor* x : in) {
      if (x->shape.size() != rank) throw std::logic_error("oracle: elementwise inputs of different ranks");
      for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t s = x->shape[d];
        if (s != 1 && t.shape[d] != 1 && s != t.shape[d]) throw std::logic_error("oracle: shapes do not broadcast");
        if (s != 1) t.shape[d] = s;
      }
    }
    std::vector<std::vector<std::int64_t>> st;
    for (const tensor* x : in) {
      auto s = strides_of(x->shape);
      for (std::size_t d = 0; d < rank; ++d)
        if (x->shape[d] == 1) s[d] = 0;
      st.push_back(s);
    }
    // The type it computes in: the inputs' (the graph cast them), switch's values for switch.
    const dtype compute = o.scalar == scalar_op::switch_ ? in[1]->type : in[0]->type;
    t.v.resize(static_cast<std::size_t>(t.size()));
    for_each_index(t.shape, [&](std::int64_t i, const std::vector<std::int64_t>& idx) {
      real a[3] = {0, 0, 0};
      for (std::size_t k = 0; k < in.size(); ++k) {
        std::int64_t off = 0;
        for (std::size_t d = 0; d < rank; ++d) off += idx[d] * st[k][d];
        a[k] = in[k]->v[static_cast<std::size_t>(off)];
      }
      const real r = scalar(o.scalar, compute, a[0], a[1], a[2], m_exact);
      t.v[static_cast<std::size_t>(i)] = m_exact && floating(t.type) ? r : to_type(r, t.type);
    });
    return t;
  }

  static tensor dimshuffle(const xsym::op& o, const tensor& x) {
    tensor t;
    t.type = x.type;
    for (int p : o.pattern) t.shape.push_back(p < 0 ? 1 : x.shape[static_cast<std::size_t>(p)]);
    const auto xs = strides_of(x.shape);
    t.v.resize(static_cast<std::size_t>(t.size()));
    for_each_index(t.shape, [&](std::int64_t i, const std::vector<std::int64_t>& idx) {
      std::int64_t off = 0;
      for (std::size_t k = 0; k < o.pattern.size(); ++k)
        if (o.pattern[k] >= 0) off += idx[k] * xs[static_cast<std::size_t>(o.pattern[k])];
      t.v[static_cast<std::size_t>(i)] = x.v[static_cast<std::size_t>(off)];
    });
    return t;
  }

  // Sums in long double with the rounding error of each addition carried along (Neumaier);
  // products and extrema directly; integer sums and products wrap in 64 bits, as numpy's do.
  static tensor reduce(const xsym::variable& v, const xsym::op& o, const tensor& x) {
    tensor t;
    t.type = v.type;
    std::vector<bool> reduced(x.shape.size(), false);
    for (int a : o.axes) reduced[static_cast<std::size_t>(a)] = true;
    std::vector<std::int64_t> kept_dims, red_dims;
    for (std::size_t d = 0; d < x.shape.size(); ++d) (reduced[d] ? red_dims : kept_dims).push_back(x.shape[d]);
    t.shape = kept_dims;
    const auto xs = strides_of(x.shape);
    std::int64_t count = 1;
    for (auto s : red_dims) count *= s;
    t.v.resize(static_cast<std::size_t>(t.size()));
    const bool integral = !floating(x.type);
    for_each_index(kept_dims, [&](std::int64_t i, const std::vector<std::int64_t>& kidx) {
      std::int64_t base = 0;
      for (std::size_t d = 0, k = 0; d < x.shape.size(); ++d)
        if (!reduced[d]) base += kidx[k++] * xs[d];
      real sum = 0, carry = 0, prod = 1, best = 0;
      std::uint64_t isum = 0, iprod = 1;
      bool first = true;
      for_each_index(red_dims, [&](std::int64_t, const std::vector<std::int64_t>& ridx) {
        std::int64_t off = base;
        for (std::size_t d = 0, k = 0; d < x.shape.size(); ++d)
          if (reduced[d]) off += ridx[k++] * xs[d];
        const real e = x.v[static_cast<std::size_t>(off)];
        const real s = sum + e;
        carry += std::fabs(sum) >= std::fabs(e) ? (sum - s) + e : (e - s) + sum;
        sum = s;
        prod *= e;
        if (integral) {
          isum += as_bits(e);
          iprod *= as_bits(e);
        }
        if (first || (o.reduction == reduce_op::max ? e > best : e < best)) best = e;
        first = false;
      });
      real r = 0;
      switch (o.reduction) {
        case reduce_op::sum: r = integral ? static_cast<real>(static_cast<std::int64_t>(isum)) : sum + carry; break;
        case reduce_op::prod: r = integral ? static_cast<real>(static_cast<std::int64_t>(iprod)) : prod; break;
        case reduce_op::mean: r = (sum + carry) / static_cast<real>(count); break;
        case reduce_op::max:
        case reduce_op::min:
          if (first) throw std::logic_error("oracle: max or min of nothing");
          r = best;
          break;
      }
      t.v[static_cast<std::size_t>(i)] = to_type(r, t.type);
    });
    return t;
  }

  // numpy's dot for vectors and matrices; long double sums, wrapped into integer types.
  static tensor dot(const xsym::variable& v, const tensor& a, const tensor& b) {
    tensor t;
    t.type = v.type;
    const bool av = a.shape.size() == 1, bv = b.shape.size() == 1;
    const std::int64_t m = av ? 1 : a.shape[0], k = a.shape.back(), n = bv ? 1 : b.shape[1];
    if (b.shape[0] != k) throw std::logic_error("oracle: dot of misaligned shapes");
    if (!av) t.shape.push_back(m);
    if (!bv) t.shape.push_back(n);
    const bool integral = !floating(v.type);
    t.v.resize(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        real s = 0;
        std::uint64_t is = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const real x = a.v[static_cast<std::size_t>(i * k + p)], y = b.v[static_cast<std::size_t>(p * n + j)];
          s += x * y;
          if (integral) is += as_bits(x) * as_bits(y);
        }
        const real r = integral ? static_cast<real>(static_cast<std::int64_t>(is)) : s;
        t.v[static_cast<std::size_t>(i * n + j)] = to_type(r, v.type);
      }
    return t;
  }

  bool m_exact = false;
  std::unordered_map<std::uint64_t, tensor> m_values;
};

}  // namespace oracle

#endif
