// Every scalar op, reduction and product form, and fused expressions, compiled in each mode and
// compared with the oracle (oracle.hpp), which computes from the math and not from the op table.
// Lengths put values in SIMD batches and in scalar tails (float32 on AVX-512: 16 lanes).
// tests/oracle/mutation.sh runs this binary once per fault (XSYM_TEST_FAULT) and requires a
// failure every time, so tolerances are in ulps, tight enough to see a perturbed element.
// ORACLE_REPORT=1 prints the largest error seen per op and dtype.
#include <catch2/catch.hpp>

#include "oracle.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using oracle::real;
using oracle::tensor;
using xsym::dtype;
using xsym::reduce_op;
using xsym::scalar_op;
using xsym::var_ptr;
namespace xd = xsym::detail;

constexpr dtype all_dtypes[] = {dtype::bool_, dtype::int32, dtype::int64, dtype::float32, dtype::float64};

std::string name_of(dtype t) { return std::string(xsym::dtype_name(t)); }
std::string name_of(scalar_op op) { return std::string(xsym::info(op).name); }

void setup() { xsym::cpu::register_all_kernels(); }

// ---------------------------------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------------------------------
struct run_mode {
  std::string name;
  xsym::function_options options;
};

std::vector<run_mode> modes(bool debug = false) {
  std::vector<run_mode> m(4);
  m[0].name = "FAST_RUN";
  m[1].name = "FAST_COMPILE";
  m[1].options.mode = "FAST_COMPILE";
  m[2].name = "linker=py";
  m[2].options.linker = "py";
  m[3].name = "optimizer_excluding=fusion:inplace";
  m[3].options.excluding = "fusion:inplace";
  if (debug) {
    m.push_back({});
    m.back().name = "DebugMode";
    m.back().options.mode = "DebugMode";
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------
struct domain {
  double lo = -4, hi = 4;
  bool grid = false;   // on a grid of 0.5 (integers: a small range), so that ties occur
  bool zeros = false;  // every fifth value 0
  bool prod = false;   // integers for products of many: mostly 1 and -1, sometimes 2
};

std::uint64_t seed_of(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Arrays and the buffers they live in (an argument may start past its buffer's first element).
struct arg_set {
  std::vector<xsym::ndarray> keep, args;
};

void add_random(arg_set& set, dtype t, const std::vector<std::int64_t>& shape, const domain& d, std::mt19937_64& rng,
                int offset = 0) {
  std::int64_t n = 1;
  xsym::shape_t s;
  s.rank = static_cast<int>(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s[static_cast<int>(i)] = shape[i];
    n *= shape[i];
  }
  xsym::shape_t flat;
  flat.rank = 1;
  flat[0] = n + offset;
  xsym::ndarray base = xsym::ndarray::empty(t, flat);
  std::uniform_real_distribution<double> u(d.lo, d.hi);
  std::uniform_real_distribution<double> unit(0, 1);
  const long long ilo = static_cast<long long>(std::ceil(d.lo)), ihi = static_cast<long long>(std::floor(d.hi));
  std::uniform_int_distribution<long long> ui(ilo, std::max(ilo, ihi));
  for (std::int64_t i = 0; i < n + offset; ++i) {
    double x = u(rng);
    if (d.grid) x = std::round(x * 2) / 2;
    long long k = ui(rng);
    if (d.prod) {
      const double p = unit(rng);
      k = p < 0.02 ? 2 : p < 0.5 ? -1 : 1;
    }
    if (d.zeros && i % 5 == 0) x = 0, k = 0;
    switch (t) {
      case dtype::bool_: base.data_as<bool>()[i] = d.lo > 0 ? true : unit(rng) < 0.5; break;
      case dtype::int32: base.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(k); break;
      case dtype::int64: base.data_as<std::int64_t>()[i] = k; break;
      case dtype::float32: base.data_as<float>()[i] = static_cast<float>(x); break;
      case dtype::float64: base.data_as<double>()[i] = x; break;
    }
  }
  std::int64_t strides[xsym::max_rank] = {};
  std::int64_t st = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    strides[i] = st;
    st *= s[i];
  }
  const auto skip = offset * static_cast<std::int64_t>(xsym::dtype_size(t));
  set.args.push_back(xsym::ndarray::wrap(t, s, strides, base.data() + skip));
  set.keep.push_back(std::move(base));
}

// ---------------------------------------------------------------------------------------------
// Running and comparing
// ---------------------------------------------------------------------------------------------
std::shared_ptr<xsym::function_runtime> build(const std::string& name, const std::vector<var_ptr>& ins,
                                              const std::vector<var_ptr>& outs, const run_mode& m) {
  return std::make_shared<xsym::function_runtime>(name, ins, outs, std::vector<std::pair<var_ptr, var_ptr>>{}, m.options);
}

std::vector<tensor> call(xsym::function_runtime& rt, const std::vector<xsym::ndarray>& args) {
  return rt.call(args.data(), [&](const xsym::ndarray* out) {
    std::vector<tensor> r;
    for (std::size_t o = 0; o < rt.graph().outputs.size(); ++o) r.push_back(oracle::from_ndarray(out[o]));
    return r;
  });
}

std::vector<tensor> expected(const std::vector<var_ptr>& ins, const std::vector<xsym::ndarray>& args,
                             const std::vector<var_ptr>& outs, bool absolute = false, bool exact = false) {
  oracle::evaluator e(exact);
  for (std::size_t k = 0; k < ins.size(); ++k) {
    tensor t = oracle::from_ndarray(args[k]);
    if (absolute)
      for (auto& x : t.v) x = std::fabs(x);
    e.bind(ins[k], std::move(t));
  }
  std::vector<tensor> r;
  for (const auto& o : outs) r.push_back(e.value(o));
  return r;
}

// The distance from |w| to the next value of type t: the unit of the tolerances.
real ulp_of(real w, dtype t) {
  if (t == dtype::float32) {
    const float a = std::fabs(static_cast<float>(w));
    return static_cast<real>(std::nextafter(a, std::numeric_limits<float>::infinity())) - a;
  }
  const double a = std::fabs(static_cast<double>(w));
  return static_cast<real>(std::nextafter(a, std::numeric_limits<double>::infinity())) - a;
}

real unit_roundoff(dtype t) { return t == dtype::float32 ? std::ldexp(1.0L, -24) : std::ldexp(1.0L, -53); }

// |got - want| <= ulps ulps of want + rel * scale (scale per element: the sum of the terms'
// magnitudes, for sums and products; none when empty). Integers and bools: exact.
struct tolerance {
  double ulps = 0;
  real rel = 0;
  std::vector<real> scale;
};

// The largest error seen per key, in ulps and as a share of its tolerance (ORACLE_REPORT).
std::map<std::string, std::pair<double, double>>& worst() {
  static std::map<std::string, std::pair<double, double>> w;
  return w;
}

struct report_at_exit {
  report_at_exit() { worst(); }  // the map is made first, so it outlives this
  ~report_at_exit() {
    if (!std::getenv("ORACLE_REPORT")) return;
    for (const auto& [k, v] : worst())
      std::cout << "oracle: " << k << ": largest error " << v.first << " ulps, " << v.second << " of its tolerance\n";
  }
} report;

void expect_match(const tensor& got, const tensor& want, const tolerance& tol, const std::string& what,
                  const std::string& key) {
  INFO(what);
  REQUIRE(name_of(got.type) == name_of(want.type));
  REQUIRE(got.shape == want.shape);
  std::int64_t bad = 0, first = -1;
  double largest = 0, share = 0;
  for (std::size_t i = 0; i < want.v.size(); ++i) {
    const real g = got.v[i], w = want.v[i];
    if (g == w || (std::isnan(g) && std::isnan(w))) continue;
    if (!oracle::floating(want.type) || !std::isfinite(w)) {
      ++bad;
      if (first < 0) first = static_cast<std::int64_t>(i);
      continue;
    }
    const real err = std::fabs(g - w), ulp = ulp_of(w, want.type);
    largest = std::max(largest, static_cast<double>(err / ulp));
    const real allowed = static_cast<real>(tol.ulps) * ulp + (tol.scale.empty() ? 0 : tol.rel * tol.scale[i]);
    share = std::max(share, static_cast<double>(err / allowed));
    if (!(err <= allowed)) {
      ++bad;
      if (first < 0) first = static_cast<std::int64_t>(i);
    }
  }
  auto& w = worst()[key];
  w = {std::max(w.first, largest), std::max(w.second, share)};
  if (bad) {
    std::ostringstream os;
    os.precision(21);
    const auto f = static_cast<std::size_t>(first);
    os << bad << " of " << want.v.size() << " elements differ; first at flat index " << first << ": got " << got.v[f]
       << ", want " << want.v[f];
    if (oracle::floating(want.type))
      os << " (" << std::fabs(got.v[f] - want.v[f]) / ulp_of(want.v[f], want.type) << " ulps)";
    FAIL_CHECK(os.str());
  }
}

// ---------------------------------------------------------------------------------------------
// Scalar ops
// ---------------------------------------------------------------------------------------------
// The C library's functions, applied lane by lane.
bool is_libm_op(scalar_op op) {
  switch (op) {
    case scalar_op::sin: case scalar_op::cos: case scalar_op::tan: case scalar_op::arcsin: case scalar_op::arccos:
    case scalar_op::arctan: case scalar_op::sinh: case scalar_op::cosh: case scalar_op::arcsinh: case scalar_op::arccosh:
    case scalar_op::arctanh: case scalar_op::erf: case scalar_op::erfc: case scalar_op::log2: case scalar_op::log10:
    case scalar_op::exp2:
      return true;
    default: return false;
  }
}
bool is_float_op(scalar_op op) {
  switch (op) {
    case scalar_op::true_div: case scalar_op::pow: case scalar_op::sqrt: case scalar_op::exp: case scalar_op::log:
    case scalar_op::log1p: case scalar_op::expm1: case scalar_op::tanh: case scalar_op::sigmoid:
    case scalar_op::softplus:
    case scalar_op::floor:
    case scalar_op::ceil:
    case scalar_op::round:
      return true;
    default: return is_libm_op(op);
  }
}
bool is_comparison(scalar_op op) {
  return op == scalar_op::gt || op == scalar_op::lt || op == scalar_op::ge || op == scalar_op::le ||
         op == scalar_op::eq || op == scalar_op::neq;
}

// The element types each op takes: arithmetic (identity too) is not defined on bool; the rest
// take all five.
bool is_bitwise(scalar_op op) {
  return op == scalar_op::bit_and || op == scalar_op::bit_or || op == scalar_op::bit_xor || op == scalar_op::invert;
}
bool accepts(scalar_op op, dtype t) {
  if (is_bitwise(op)) return !oracle::floating(t);  // integers and bool
  if (t != dtype::bool_) return true;
  return is_float_op(op) || is_comparison(op) || op == scalar_op::switch_ || op == scalar_op::cast;
}

// numpy's result type for an op on arrays of type t.
dtype result_type(scalar_op op, dtype t, dtype cast_to) {
  if (is_comparison(op)) return dtype::bool_;
  if (op == scalar_op::cast) return cast_to;
  // numpy 2's floor, ceil and round of an integer are the integer.
  if ((op == scalar_op::floor || op == scalar_op::ceil || op == scalar_op::round) &&
      (t == dtype::int32 || t == dtype::int64))
    return t;
  if (is_float_op(op)) return oracle::floating(t) ? t : dtype::float64;
  return t;
}

// Where an op's argument k is drawn from: finite results well inside the type's range, away
// from the edges that tests/edges checks (pow's special values, exp's overflow, NaN).
domain domain_of(scalar_op op, int k) {
  switch (op) {
    case scalar_op::true_div: return k == 0 ? domain{-4, 4} : domain{0.25, 4};
    case scalar_op::pow: return k == 0 ? domain{0.5, 3} : domain{-3, 3};
    case scalar_op::sqrt: return {0, 9};
    case scalar_op::exp: return {-10, 10};
    case scalar_op::log: return {0.01, 100};
    case scalar_op::log1p: return {-0.9, 10};
    case scalar_op::expm1: return {-5, 5};
    case scalar_op::tanh: return {-5, 5};
    case scalar_op::sin: case scalar_op::cos: return {-6, 6};
    case scalar_op::tan: return {-1.5, 1.5};
    case scalar_op::arcsin: case scalar_op::arccos: case scalar_op::arctanh: return {-0.99, 0.99};
    case scalar_op::arctan: case scalar_op::arcsinh: return {-20, 20};
    case scalar_op::sinh: case scalar_op::cosh: return {-8, 8};
    case scalar_op::arccosh: return {1.01, 20};
    case scalar_op::erf: case scalar_op::erfc: return {-4, 4};
    case scalar_op::log2: case scalar_op::log10: return {0.01, 100};
    case scalar_op::exp2: return {-20, 20};
    case scalar_op::floor: case scalar_op::ceil: case scalar_op::round: return {-10, 10};
    // Negative divisors, zero ones (0 for integers; inf or NaN for floats) and exact multiples.
    case scalar_op::mod: case scalar_op::floor_div: return k == 0 ? domain{-20, 20, true} : domain{-6, 6, true, true};
    case scalar_op::bit_and: case scalar_op::bit_or: case scalar_op::bit_xor: case scalar_op::invert:
      return {-1000, 1000};
    case scalar_op::sigmoid:
    case scalar_op::softplus: return {-10, 10};
    case scalar_op::add:
    case scalar_op::sub:
    case scalar_op::mul: return {-100, 100};
    case scalar_op::maximum:
    case scalar_op::minimum: return {-3, 3, true};
    case scalar_op::gt: case scalar_op::lt: case scalar_op::ge: case scalar_op::le: case scalar_op::eq:
    case scalar_op::neq:
      return {-2, 2, true};
    case scalar_op::switch_: return k == 0 ? domain{-1, 1} : domain{-4, 4};
    case scalar_op::cast: return {-100, 100, false, true};
    case scalar_op::identity: return {-100, 100};
    default: return {-4, 4};
  }
}

// Ulps allowed per op: the IEEE operations, comparisons, selections and casts are exact; the
// transcendental functions are within a few ulps of the correctly rounded result (at most 1 to
// 4 measured, in float32 and float64, with AVX-512 and without).
double op_ulps(scalar_op op) {
  switch (op) {
    case scalar_op::exp:
    case scalar_op::log:
    case scalar_op::log1p: return 2;
    case scalar_op::expm1: return 3;
    case scalar_op::tanh:
    case scalar_op::sigmoid:
    case scalar_op::softplus: return 4;
    case scalar_op::pow: return 8;
    // The C library's, lane by lane (glibc: within 1 or 2 ulps, erfc 5 in float64).
    case scalar_op::erfc: return 5;
    default: return is_libm_op(op) ? 2 : 0;
  }
}

// Where the arguments of an elementwise node come from, and the shapes they are called with.
struct layout {
  std::string name;
  std::vector<int> rank;             // of each argument as the op sees it
  std::vector<std::uint8_t> bcast;   // its broadcastable pattern
  bool transposed = false;           // argument 0 is a (c, r) input seen through dimshuffle{1,0}
  int offset = 0;                    // arguments start this many elements past their buffers
  std::vector<std::vector<std::vector<std::int64_t>>> sets;  // per call, per input: its shape
};

layout make_layout(std::string name, int arity, int rank) {
  layout l;
  l.name = std::move(name);
  l.rank.assign(static_cast<std::size_t>(arity), rank);
  l.bcast.assign(static_cast<std::size_t>(arity), 0);
  return l;
}

std::vector<layout> layouts(int arity) {
  using shapes = std::vector<std::vector<std::int64_t>>;
  const auto a = static_cast<std::size_t>(arity);
  std::vector<layout> out;
  layout vectors = make_layout("vectors", arity, 1);
  for (std::int64_t n : {0, 1, 7, 37, 1000}) vectors.sets.push_back(shapes(a, {n}));
  out.push_back(vectors);
  for (int k = 0; arity > 1 && k < arity; ++k) {
    layout l = make_layout("argument " + std::to_string(k) + " a scalar", arity, 1);
    l.rank[static_cast<std::size_t>(k)] = 0;
    for (std::int64_t n : {7, 1000}) {
      shapes s(a, {n});
      s[static_cast<std::size_t>(k)] = {};
      l.sets.push_back(s);
    }
    out.push_back(l);
  }
  // A transposed matrix (copied to rows), a row and a column broadcast along it.
  layout grid = make_layout("transposed matrix, row, column", arity, 2);
  const std::uint8_t patterns[3] = {0, 1, 2};
  const shapes grid_shapes = {{37, 5}, {1, 37}, {5, 1}};  // (5, 37) once transposed
  for (std::size_t k = 0; k < a; ++k) grid.bcast[k] = patterns[k];
  grid.transposed = true;
  // Rows of 37 and of 1000 (SIMD body and tail per row), and rows of none.
  for (const shapes& g : {grid_shapes, shapes{{1000, 3}, {1, 1000}, {3, 1}}, shapes{{0, 5}, {1, 0}, {5, 1}}})
    grid.sets.push_back(shapes(g.begin(), g.begin() + arity));
  out.push_back(grid);
  layout offset = make_layout("vectors one element past an aligned start", arity, 1);
  offset.offset = 1;
  for (std::int64_t n : {37, 1000}) offset.sets.push_back(shapes(a, {n}));
  out.push_back(offset);
  return out;
}

void check_scalar_op(scalar_op op, dtype t, dtype cast_to, const std::vector<run_mode>& ms) {
  const int arity = xsym::info(op).arity;
  std::vector<dtype> types(static_cast<std::size_t>(arity), t);
  if (op == scalar_op::switch_) types[0] = dtype::bool_;
  const std::string label = name_of(op) + (op == scalar_op::cast ? "{" + name_of(cast_to) + "}" : "") + " on " + name_of(t);
  for (const layout& l : layouts(arity)) {
    std::vector<var_ptr> ins, args;
    for (int k = 0; k < arity; ++k) {
      const auto ku = static_cast<std::size_t>(k);
      const bool tr = l.transposed && k == 0;
      var_ptr in = xd::make_input(types[ku], l.rank[ku], "a" + std::to_string(k), tr ? 0 : l.bcast[ku]);
      ins.push_back(in);
      args.push_back(tr ? xd::dimshuffle(in, {1, 0}) : in);
    }
    const var_ptr out = op == scalar_op::cast ? xd::cast(args[0], cast_to) : xd::elemwise(op, args);
    {
      INFO(label);
      CHECK(name_of(out->type) == name_of(result_type(op, t, cast_to)));
    }
    std::vector<arg_set> sets;
    std::vector<tensor> want;
    for (std::size_t s = 0; s < l.sets.size(); ++s) {
      std::mt19937_64 rng(seed_of(label + l.name + std::to_string(s)));
      arg_set set;
      for (int k = 0; k < arity; ++k) {
        domain d = domain_of(op, k);
        // Integers to cast: the whole range of int32, or far past float64's 53 bits for int64.
        if (op == scalar_op::cast && t == dtype::int32) d.lo = -2147483648.0, d.hi = 2147483647.0;
        if (op == scalar_op::cast && t == dtype::int64) d.lo = -0x1p62, d.hi = 0x1p62;
        add_random(set, types[static_cast<std::size_t>(k)], l.sets[s][static_cast<std::size_t>(k)], d, rng, l.offset);
      }
      want.push_back(expected(ins, set.args, {out})[0]);
      sets.push_back(std::move(set));
    }
    tolerance tol;
    tol.ulps = op_ulps(op);
    for (const run_mode& m : ms) {
      auto rt = build(label, ins, {out}, m);
      for (std::size_t s = 0; s < sets.size(); ++s) {
        const auto got = call(*rt, sets[s].args);
        expect_match(got[0], want[s], tol,
                     label + ", " + l.name + ", shapes set " + std::to_string(s) + ", mode " + m.name,
                     name_of(op) + " " + name_of(out->type));
      }
    }
  }
}

}  // namespace

TEST_CASE("every scalar op on every element type it takes, in every mode, against the oracle", "[oracle]") {
  setup();
  const auto ms = modes();
  for (int k = 0; k <= static_cast<int>(scalar_op::identity); ++k) {
    const auto op = static_cast<scalar_op>(k);
    for (dtype t : all_dtypes) {
      if (!accepts(op, t)) continue;
      if (op != scalar_op::cast) {
        check_scalar_op(op, t, t, ms);
        continue;
      }
      for (dtype to : all_dtypes)
        if (to != t) check_scalar_op(op, t, to, ms);
    }
  }
}

namespace {
// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------
struct reduce_case {
  std::vector<std::int64_t> shape;  // of the input
  std::vector<int> pattern;         // a dimshuffle of the input first (empty: none)
  std::vector<int> axes;            // of the reduced (possibly dimshuffled) tensor
};

// Every axis choice on ranks 1 to 3, on contiguous inputs and on permuted views of them.
std::vector<reduce_case> reduce_cases(reduce_op r) {
  std::vector<reduce_case> c;
  std::vector<std::int64_t> lengths = {1, 7, 37, 1000};
  if (r == reduce_op::sum || r == reduce_op::prod) lengths.insert(lengths.begin(), 0);
  for (std::int64_t n : lengths) c.push_back({{n}, {}, {0}});
  using shape = std::vector<std::int64_t>;
  const std::vector<std::vector<int>> axes_of_2 = {{0}, {1}, {0, 1}};
  for (const shape& s : {shape{7, 37}, shape{37, 7}, shape{1, 1000}})
    for (const auto& axes : axes_of_2) {
      c.push_back({s, {}, axes});
      c.push_back({s, {1, 0}, axes});
    }
  // No rows: sums of nothing are 0, products 1, means NaN (max and min of nothing raise).
  if (r != reduce_op::max && r != reduce_op::min)
    for (const auto& axes : axes_of_2) c.push_back({{0, 5}, {}, axes});
  const std::vector<std::vector<int>> subsets = {{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const auto& axes : subsets) {
    c.push_back({{3, 5, 37}, {}, axes});
    c.push_back({{5, 37, 3}, {2, 0, 1}, axes});
  }
  return c;
}

std::string text_of(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}
std::string text_of(const std::vector<int>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "}";
}

domain reduce_domain(reduce_op r) {
  switch (r) {
    case reduce_op::sum:
    case reduce_op::mean: return {0.5, 2};  // positive: the sum's scale is the sum itself
    case reduce_op::prod: {
      domain d{0.8, 1.25};
      d.prod = true;
      return d;
    }
    default: return {-4, 4, true};
  }
}
}  // namespace

TEST_CASE("every reduction over every axis choice, in every mode, against the oracle", "[oracle]") {
  setup();
  const auto ms = modes();
  for (reduce_op r : {reduce_op::sum, reduce_op::prod, reduce_op::max, reduce_op::min, reduce_op::mean}) {
    for (dtype t : all_dtypes) {
      for (const reduce_case& rc : reduce_cases(r)) {
        const std::string label = std::string(xsym::reduce_name(r)) + " on " + name_of(t) + " " + text_of(rc.shape) +
                                  (rc.pattern.empty() ? "" : " dimshuffled " + text_of(rc.pattern)) + " over axes " +
                                  text_of(rc.axes);
        const var_ptr x = xd::make_input(t, static_cast<int>(rc.shape.size()), "x");
        const var_ptr seen = rc.pattern.empty() ? x : xd::dimshuffle(x, rc.pattern);
        const var_ptr out = xd::reduce(seen, r, rc.axes, false);
        std::mt19937_64 rng(seed_of(label));
        arg_set set;
        add_random(set, t, rc.shape, reduce_domain(r), rng);
        const tensor want = expected({x}, set.args, {out})[0];
        tolerance tol;
        std::int64_t count = 1;  // elements per result
        for (int a : rc.axes)
          count *= rc.shape[static_cast<std::size_t>(rc.pattern.empty() ? a : rc.pattern[static_cast<std::size_t>(a)])];
        if (oracle::floating(want.type) && (r == reduce_op::sum || r == reduce_op::mean || r == reduce_op::prod)) {
          // Any order of summation is fine: its error is within a small multiple of sqrt(count)
          // rounding errors of the sum of magnitudes (of |prod| for products).
          tol.ulps = 1;
          tol.rel = 2 * std::sqrt(static_cast<real>(count)) * unit_roundoff(want.type);
          tol.scale = expected({x}, set.args, {out}, true)[0].v;
        }
        for (const run_mode& m : ms) {
          auto rt = build(label, {x}, {out}, m);
          expect_match(call(*rt, set.args)[0], want, tol, label + ", mode " + m.name,
                       std::string(xsym::reduce_name(r)) + " " + name_of(t));
        }
      }
    }
  }
}

namespace {
// ---------------------------------------------------------------------------------------------
// Products
// ---------------------------------------------------------------------------------------------
struct product_case {
  std::string name;
  std::vector<std::vector<std::int64_t>> shapes;  // of the inputs
  // The expression; with `magnitude`, the same terms all added (the inputs then hold their
  // absolute values): the scale of its rounding errors.
  std::function<var_ptr(const std::vector<var_ptr>&, dtype, bool magnitude)> make;
  std::int64_t terms = 1;  // products summed per element
  bool floats_only = false;
  xsym::op_kind kind = xsym::op_kind::dot;  // the node FAST_RUN makes of it
  bool accumulate = false;
  bool with_beta = false;  // Gemv with beta != 1 (weight decay folded in)
  int offset = 0;
};

var_ptr constant(dtype t, double v) { return xd::make_constant(xd::scalar_array_of(t, v)); }
var_ptr T(const var_ptr& a) { return xd::dimshuffle(a, {1, 0}); }
var_ptr add(const var_ptr& a, const var_ptr& b) { return xd::elemwise(scalar_op::add, {a, b}); }
var_ptr sub_or_add(const var_ptr& a, const var_ptr& b, bool magnitude) {
  return xd::elemwise(magnitude ? scalar_op::add : scalar_op::sub, {a, b});
}
var_ptr mul(const var_ptr& a, const var_ptr& b) { return xd::elemwise(scalar_op::mul, {a, b}); }

// An operand as dot sees it: as given, transposed ('t'), or a vector as a column ('c') or row ('r').
var_ptr view(const var_ptr& v, char how) {
  if (how == 't') return T(v);
  if (how == 'c') return xd::dimshuffle(v, {0, -1});
  if (how == 'r') return xd::dimshuffle(v, {-1, 0});
  return v;
}

// dot(a, b) with the operands seen as `va` and `vb` say.
product_case plain(std::string name, std::vector<std::vector<std::int64_t>> shapes, std::int64_t terms,
                   xsym::op_kind kind, char va = ' ', char vb = ' ') {
  product_case p;
  p.name = std::move(name);
  p.shapes = std::move(shapes);
  p.make = [va, vb](const std::vector<var_ptr>& x, dtype, bool) { return xd::dot(view(x[0], va), view(x[1], vb)); };
  p.terms = terms;
  p.kind = kind;
  return p;
}

std::vector<product_case> product_cases() {
  using xsym::op_kind;
  using ins = const std::vector<var_ptr>&;
  std::vector<product_case> c;
  for (std::int64_t n : {0, 1, 7, 37, 1000}) c.push_back(plain("v . w", {{n}, {n}}, n, op_kind::dot));
  const std::vector<std::pair<std::int64_t, std::int64_t>> mk = {{1, 1}, {7, 37}, {37, 7}, {33, 100}, {17, 128},
                                                                 {1000, 3}, {9, 1000}, {3, 0}, {0, 5}};
  for (auto [m, k] : mk) {
    c.push_back(plain("A . v", {{m, k}, {k}}, k, op_kind::gemv));
    c.push_back(plain("v . A", {{k}, {k, m}}, k, op_kind::gemv));
    c.push_back(plain("A.T . v", {{k, m}, {k}}, k, op_kind::gemv, 't'));
    c.push_back(plain("v . A.T", {{k}, {m, k}}, k, op_kind::gemv, ' ', 't'));
  }
  // Rows 128 elements apart: loads aligned once the first elements are done one by one.
  for (std::int64_t k : {100, 128}) {
    c.push_back(plain("A . v, one element past an aligned start", {{33, k}, {k}}, k, op_kind::gemv));
    c.back().offset = 1;
    c.push_back(plain("v . A, one element past an aligned start", {{k}, {k, 33}}, k, op_kind::gemv));
    c.back().offset = 1;
  }
  const std::vector<std::array<std::int64_t, 3>> mkn = {{1, 1, 1}, {7, 37, 5}, {37, 7, 33}, {64, 64, 64}, {3, 1000, 2},
                                                        {2, 0, 3}, {0, 4, 3}};
  for (auto [m, k, n] : mkn) {
    c.push_back(plain("A . B", {{m, k}, {k, n}}, k, op_kind::dot22));
    c.push_back(plain("A.T . B", {{k, m}, {k, n}}, k, op_kind::dot22, 't'));
    c.push_back(plain("A . B.T", {{m, k}, {n, k}}, k, op_kind::dot22, ' ', 't'));
    c.push_back(plain("A.T . B.T", {{k, m}, {n, k}}, k, op_kind::dot22, 't', 't'));
    // Vectors made matrices by dimshuffle (a dimension of stride 0), and the outer product.
    c.push_back(plain("A . v[:, None]", {{m, k}, {k}}, k, op_kind::dot22, ' ', 'c'));
    c.push_back(plain("v[None, :] . B", {{k}, {k, n}}, k, op_kind::dot22, 'r'));
    c.push_back(plain("u[:, None] . v[None, :]", {{m}, {n}}, 1, op_kind::dot22, 'c', 'r'));
    // Gemm: y0 + alpha A B.
    product_case g{"Y + 0.5 * dot(A, B)", {{m, n}, {m, k}, {k, n}},
                   [](ins x, dtype t, bool) { return add(x[0], mul(constant(t, 0.5), xd::dot(x[1], x[2]))); }, k, true,
                   op_kind::dot22, true};
    c.push_back(g);
    g.name = "Y - 0.1 * dot(A.T, B)";
    g.shapes = {{m, n}, {k, m}, {k, n}};
    g.make = [](ins x, dtype t, bool mag) {
      return sub_or_add(x[0], mul(constant(t, 0.1), xd::dot(T(x[1]), x[2])), mag);
    };
    c.push_back(g);
  }
  // The forms the gradient step's rewrites make: Gemv{alpha} with y0, with beta, with y0 - c b.
  for (auto [m, k] : mk) {
    product_case g{"w - 0.1 * dot(X.T, v)", {{m}, {k, m}, {k}},
                   [](ins x, dtype t, bool mag) {
                     return sub_or_add(x[0], mul(constant(t, 0.1), xd::dot(T(x[1]), x[2])), mag);
                   },
                   k, true, op_kind::gemv, true};
    c.push_back(g);
    g.name = "w + 0.5 * dot(A, x)";
    g.shapes = {{m}, {m, k}, {k}};
    g.make = [](ins x, dtype t, bool) { return add(x[0], mul(constant(t, 0.5), xd::dot(x[1], x[2]))); };
    c.push_back(g);
    g.name = "0.9 * w - 0.1 * dot(A, x)";
    g.with_beta = true;
    g.make = [](ins x, dtype t, bool mag) {
      return sub_or_add(mul(constant(t, 0.9), x[0]), mul(constant(t, 0.1), xd::dot(x[1], x[2])), mag);
    };
    c.push_back(g);
    g.name = "w - 0.1 * (b + dot(A, x))";
    g.with_beta = false;
    g.shapes = {{m}, {m}, {m, k}, {k}};
    g.make = [](ins x, dtype t, bool mag) {
      return sub_or_add(x[0], mul(constant(t, 0.1), add(x[1], xd::dot(x[2], x[3]))), mag);
    };
    c.push_back(g);
    // y0 = w - 0.1 b dies in the product, which writes into it (and sums the product apart).
    g.name = "w - 0.1 * (b + dot(X.T, v))";
    g.shapes = {{m}, {m}, {k, m}, {k}};
    g.make = [](ins x, dtype t, bool mag) {
      return sub_or_add(x[0], mul(constant(t, 0.1), add(x[1], xd::dot(T(x[2]), x[3]))), mag);
    };
    c.push_back(g);
  }
  return c;
}

bool has_node(const xsym::function_runtime& rt, xsym::op_kind kind, bool accumulate, bool with_beta) {
  for (const auto& n : rt.graph().nodes)
    if (n.fn->kind == kind && n.fn->accumulate == accumulate && (!with_beta || n.fn->beta != 1.0)) return true;
  return false;
}
}  // namespace

TEST_CASE("every product form, transposed operands and the Gemv and Gemm the rewrites make, against the oracle",
          "[oracle]") {
  setup();
  const auto ms = modes(true);
  for (dtype t : {dtype::int32, dtype::int64, dtype::float32, dtype::float64}) {
    for (const product_case& pc : product_cases()) {
      if (pc.floats_only && !oracle::floating(t)) continue;
      std::string label = pc.name + " on " + name_of(t) + ", shapes";
      for (const auto& s : pc.shapes) label += " " + text_of(s);
      std::vector<var_ptr> ins;
      for (std::size_t k = 0; k < pc.shapes.size(); ++k)
        ins.push_back(xd::make_input(t, static_cast<int>(pc.shapes[k].size()), "x" + std::to_string(k)));
      const var_ptr out = pc.make(ins, t, false);
      std::mt19937_64 rng(seed_of(label));
      arg_set set;
      const domain d = oracle::floating(t) ? domain{0.5, 1.5} : domain{-5, 5};
      for (const auto& s : pc.shapes) add_random(set, t, s, d, rng, pc.offset);
      const tensor want = expected(ins, set.args, {out})[0];
      tolerance tol;
      if (oracle::floating(t)) {
        tol.ulps = 2;
        tol.rel = 3 * std::sqrt(static_cast<real>(pc.terms)) * unit_roundoff(t);
        tol.scale = expected(ins, set.args, {pc.make(ins, t, true)}, true)[0].v;
      }
      for (const run_mode& m : ms) {
        auto rt = build(label, ins, {out}, m);
        if (m.name == "FAST_RUN") {
          INFO(label);
          CHECK(has_node(*rt, pc.kind, pc.accumulate, pc.with_beta));
        }
        expect_match(call(*rt, set.args)[0], want, tol, label + ", mode " + m.name, "products " + name_of(t));
      }
    }
  }
}

namespace {
// ---------------------------------------------------------------------------------------------
// Fused expressions
// ---------------------------------------------------------------------------------------------
struct fused_case {
  std::string name;
  std::vector<domain> domains;  // one per input
  std::function<std::vector<var_ptr>(const std::vector<var_ptr>&, dtype)> make;
  double ulps = 4;
  std::vector<dtype> fixed = {};  // the inputs' types, for a case of one type combination
  std::vector<int> scalars = {};  // inputs that are rank 0 in every layout
  bool exact = false;         // compare with the exact value (oracle::evaluator's exact)
};

var_ptr E(scalar_op op, std::vector<var_ptr> a) { return xd::elemwise(op, std::move(a)); }
var_ptr sub(const var_ptr& a, const var_ptr& b) { return E(scalar_op::sub, {a, b}); }
var_ptr quot(const var_ptr& a, const var_ptr& b) { return E(scalar_op::true_div, {a, b}); }

std::vector<fused_case> fused_cases() {
  using S = scalar_op;
  using outs = std::vector<var_ptr>;
  using ins = const std::vector<var_ptr>&;
  const domain pos{0.5, 2}, grid{-2, 2, true};
  std::vector<fused_case> c;
  // Adds a case; the reference stays good until the next one is added.
  auto add_case = [&](std::string name, std::vector<domain> d, double ulps,
                      std::function<outs(ins, dtype)> make) -> fused_case& {
    fused_case f;
    f.name = std::move(name);
    f.domains = std::move(d);
    f.ulps = ulps;
    f.make = std::move(make);
    c.push_back(std::move(f));
    return c.back();
  };
  add_case("(x + y + z) * 2", {pos, pos, pos}, 3,
           [](ins x, dtype t) { return outs{mul(add(add(x[0], x[1]), x[2]), constant(t, 2))}; });
  add_case("-y * log(x)", {{0.1, 10}, pos}, 4, [](ins x, dtype) { return outs{mul(E(S::neg, {x[1]}), E(S::log, {x[0]}))}; });
  add_case("(1 - x) * (2 / y)", {{2, 4}, pos}, 4,
           [](ins x, dtype t) { return outs{mul(sub(constant(t, 1), x[0]), quot(constant(t, 2), x[1]))}; });
  add_case("exp(x - y) * z + log(y)", {{0, 1}, {2, 3}, pos}, 8,
           [](ins x, dtype) { return outs{add(mul(E(S::exp, {sub(x[0], x[1])}), x[2]), E(S::log, {x[1]}))}; });
  add_case("sigmoid(x), sigmoid(-x), softplus(x), softplus(-x)", {{-6, 6}}, 4, [](ins x, dtype) {
    const var_ptr n = E(S::neg, {x[0]});
    return outs{E(S::sigmoid, {x[0]}), E(S::sigmoid, {n}), E(S::softplus, {x[0]}), E(S::softplus, {n})};
  });
  // Stabilised into softpluses: closer to the exact value than the formula rounded step by step
  // (1 - sigmoid(z) loses bits in float32), so compared with the exact value.
  add_case("-y * log(sigmoid(z)) - (1 - y) * log(1 - sigmoid(z))", {{0, 1}, {-4, 4}}, 8, [](ins x, dtype t) {
    const var_ptr s = E(S::sigmoid, {x[1]}), one = constant(t, 1);
    return outs{sub(mul(E(S::neg, {x[0]}), E(S::log, {s})), mul(sub(one, x[0]), E(S::log, {sub(one, s)})))};
  }).exact = true;
  add_case("switch(x > y, x * 2, y - 1)", {grid, grid}, 0, [](ins x, dtype t) {
    return outs{E(S::switch_, {E(S::gt, {x[0], x[1]}), mul(x[0], constant(t, 2)), sub(x[1], constant(t, 1))})};
  });
  add_case("maximum(x, y) * minimum(y, z) + abs(x - z) + sqr(y)", {pos, pos, pos}, 4, [](ins x, dtype) {
    const var_ptr m = mul(E(S::maximum, {x[0], x[1]}), E(S::minimum, {x[1], x[2]}));
    return outs{add(add(m, E(S::abs, {sub(x[0], x[2])})), E(S::sqr, {x[1]}))};
  });
  add_case("sqrt(x) + tanh(y) + expm1(z * 0.1) + log1p(x) + pow(x, z)", {pos, pos, {-2, 2}}, 8, [](ins x, dtype t) {
    const var_ptr a = add(E(S::sqrt, {x[0]}), E(S::tanh, {x[1]}));
    const var_ptr b = add(E(S::expm1, {mul(x[2], constant(t, 0.1))}), E(S::log1p, {x[0]}));
    return outs{add(add(a, b), E(S::pow, {x[0], x[2]}))};
  });
  add_case("((((((x + y) * z) + y) * x) + z) * y + x) * z: a chain longer than one chain", {pos, pos, pos}, 8,
           [](ins x, dtype) {
             const int operand[8] = {1, 2, 1, 0, 2, 1, 0, 2};  // + y, * z, + y, * x, ...
             var_ptr r = x[0];
             for (int k = 0; k < 8; ++k) r = k % 2 ? mul(r, x[operand[k]]) : add(r, x[operand[k]]);
             return outs{r};
           });
  add_case("exp(s) * x + s / x, s a scalar", {{-1, 1}, pos}, 6,
           [](ins x, dtype) { return outs{add(mul(E(S::exp, {x[0]}), x[1]), quot(x[0], x[1]))}; })
      .scalars = {0};
  add_case("x * y + z in float32, float64 and int32 (promoted)", {pos, pos, {-5, 5}}, 3,
           [](ins x, dtype) { return outs{add(mul(x[0], x[1]), x[2])}; })
      .fixed = {dtype::float32, dtype::float64, dtype::int32};
  add_case("x * y - z in int32 and float32 (promoted)", {{-5, 5}, pos, {-4, -3}}, 3,
           [](ins x, dtype) { return outs{sub(mul(x[0], x[1]), x[2])}; })
      .fixed = {dtype::int32, dtype::float32, dtype::float32};
  for (dtype t : {dtype::int32, dtype::int64})
    add_case("(x + y) * z - maximum(x, y) + abs(x - z) + sqr(y) - (-z)", {{-50, 50}, {-50, 50}, {-50, 50}}, 0,
             [](ins x, dtype) {
               const var_ptr a = sub(mul(add(x[0], x[1]), x[2]), E(S::maximum, {x[0], x[1]}));
               return outs{sub(add(add(a, E(S::abs, {sub(x[0], x[2])})), E(S::sqr, {x[1]})), E(S::neg, {x[2]}))};
             })
        .fixed = {t, t, t};
  add_case("cast(x > y) * z + cast(x <= z)", {grid, grid, grid}, 1, [](ins x, dtype t) {
    return outs{add(mul(xd::cast(E(S::gt, {x[0], x[1]}), t), x[2]), xd::cast(E(S::le, {x[0], x[2]}), t))};
  });
  return c;
}

// Writes each output into a caller's array that starts `offset` elements past its buffer.
std::vector<tensor> call_into(xsym::function_runtime& rt, const std::vector<xsym::ndarray>& args,
                              const std::vector<tensor>& like, int offset) {
  std::vector<xsym::ndarray> keep, dests;
  for (const tensor& w : like) {
    xsym::shape_t s, flat;
    s.rank = static_cast<int>(w.shape.size());
    for (int d = 0; d < s.rank; ++d) s[d] = w.shape[static_cast<std::size_t>(d)];
    flat.rank = 1;
    flat[0] = w.size() + offset;
    keep.push_back(xsym::ndarray::empty(w.type, flat));
    std::int64_t strides[xsym::max_rank] = {};
    for (int d = s.rank - 1, st = 1; d >= 0; st *= static_cast<int>(s[d]), --d) strides[d] = st;
    dests.push_back(xsym::ndarray::wrap(w.type, s, strides,
                                        keep.back().data() + offset * static_cast<std::int64_t>(xsym::dtype_size(w.type))));
  }
  rt.call_into(
      [&](xsym::ndarray* values, const std::vector<int>& slots) {
        for (std::size_t i = 0; i < slots.size(); ++i) values[slots[i]] = args[i];
      },
      dests.data());
  std::vector<tensor> r;
  for (const auto& d : dests) r.push_back(oracle::from_ndarray(d));
  return r;
}

struct fused_layout {
  std::string name;
  int rank = 1;
  int offset = 0;
  std::vector<std::int64_t> lengths;  // vectors: one call per length
};

void check_fused(const fused_case& fc, dtype t, const std::vector<run_mode>& ms, int into_offset = -1) {
  const std::size_t n_in = fc.domains.size();
  std::vector<dtype> types = fc.fixed.empty() ? std::vector<dtype>(n_in, t) : fc.fixed;
  std::string label = fc.name + " on";
  for (dtype x : types) label += " " + name_of(x);
  std::vector<fused_layout> ls = {{"vectors", 1, 0, {1, 7, 37, 1000, 5000}},
                                  {"scalars", 0, 0, {1}},
                                  {"a matrix, a row, a column", 2, 0, {1}},
                                  {"rank 3, broadcast along the first and last or the middle axis", 3, 0, {1}},
                                  {"vectors one element past an aligned start", 1, 1, {1000}}};
  if (into_offset >= 0) ls = {{"vectors one element past an aligned start", 1, 1, {37, 1000}}};
  // Ranks 2 and 3: inputs 1 and 2 broadcast along input 0 (a row and a column; (1, 3, 1) and
  // (2, 1, 37)); any others are full.
  struct grid_input {
    std::vector<std::int64_t> shape;
    std::uint8_t bcast;
  };
  const grid_input grids[2][3] = {{{{5, 37}, 0}, {{1, 37}, 1}, {{5, 1}, 2}},
                                  {{{2, 3, 37}, 0}, {{1, 3, 1}, 5}, {{2, 1, 37}, 2}}};
  for (const fused_layout& l : ls) {
    auto grid = [&](std::size_t k) -> const grid_input& { return grids[l.rank - 2][k <= 2 ? k : 0]; };
    std::vector<var_ptr> ins;
    std::vector<std::vector<std::vector<std::int64_t>>> sets;
    for (std::size_t k = 0; k < n_in; ++k) {
      const bool scalar = std::find(fc.scalars.begin(), fc.scalars.end(), static_cast<int>(k)) != fc.scalars.end();
      const std::uint8_t bc = l.rank >= 2 ? grid(k).bcast : 0;
      ins.push_back(xd::make_input(types[k], scalar ? 0 : l.rank, "i" + std::to_string(k), bc));
    }
    for (std::int64_t n : l.lengths) {
      std::vector<std::vector<std::int64_t>> s;
      for (std::size_t k = 0; k < n_in; ++k) {
        if (ins[k]->rank == 0) s.push_back({});
        else if (l.rank == 1) s.push_back({n});
        else s.push_back(grid(k).shape);
      }
      sets.push_back(s);
    }
    const std::vector<var_ptr> outs = fc.make(ins, t);
    std::vector<arg_set> data;
    std::vector<std::vector<tensor>> want;
    for (std::size_t s = 0; s < sets.size(); ++s) {
      std::mt19937_64 rng(seed_of(label + l.name + std::to_string(s)));
      arg_set set;
      for (std::size_t k = 0; k < n_in; ++k) add_random(set, types[k], sets[s][k], fc.domains[k], rng, l.offset);
      want.push_back(expected(ins, set.args, outs, false, fc.exact));
      data.push_back(std::move(set));
    }
    tolerance tol;
    tol.ulps = fc.ulps;
    for (const run_mode& m : ms) {
      auto rt = build(label, ins, outs, m);
      for (std::size_t s = 0; s < data.size(); ++s) {
        const auto got = into_offset >= 0 ? call_into(*rt, data[s].args, want[s], into_offset) : call(*rt, data[s].args);
        for (std::size_t o = 0; o < outs.size(); ++o)
          expect_match(got[o], want[s][o], tol,
                       label + ", " + l.name + ", call " + std::to_string(s) + ", output " + std::to_string(o) + ", mode " +
                           m.name + (into_offset >= 0 ? ", into a destination one element past an aligned start" : ""),
                       "fused " + name_of(want[s][o].type));
      }
    }
  }
}

// The same trees written with the typed API (expr/typed.hpp) and handed to outputs(): their
// kernels are registered, and the linker binds them to the cases' fused programs, whose texts
// they share. So in FAST_RUN those cases check the typed kernels against the math.
template <class T>
void use_typed_trees() {
  const auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
  (void)xsym::outputs((x + y + z) * 2, -y * xsym::log(x), (1 - x) * (2 / y), xsym::exp(x - y) * z + xsym::log(y),
                      xsym::maximum(x, y) * xsym::minimum(y, z) + xsym::abs(x - z) + xsym::sqr(y),
                      xsym::sqrt(x) + xsym::tanh(y) + (xsym::expm1(z * T(0.1)) + xsym::log1p(x)) + xsym::pow(x, z));
}

void check_all_fused(const std::vector<run_mode>& ms, int into_offset = -1) {
  use_typed_trees<float>();
  use_typed_trees<double>();
  for (const fused_case& fc : fused_cases()) {
    if (!fc.fixed.empty()) {
      check_fused(fc, fc.fixed[0], ms, into_offset);
      continue;
    }
    for (dtype t : {dtype::float32, dtype::float64}) check_fused(fc, t, ms, into_offset);
  }
}
}  // namespace

TEST_CASE("fused expressions (chains, shared exps, one-pass chains, broadcasts, scalars), in every mode", "[oracle]") {
  setup();
  check_all_fused(modes(true));
}

TEST_CASE("fused expressions with streaming stores, and into destinations off a cache line", "[oracle]") {
  setup();
  const std::vector<run_mode> fast_run(1, modes()[0]);
  {
    struct streaming {
      std::int64_t saved = xsym::cpu::streaming_min_bytes();
      streaming() { xsym::cpu::streaming_min_bytes() = 0; }  // every node streams
      ~streaming() { xsym::cpu::streaming_min_bytes() = saved; }
    } on;
    check_all_fused(fast_run);
  }
  check_all_fused(fast_run, 1);
}

namespace {
// Restores the fault in force (XSYM_TEST_FAULT's, under mutation.sh) however the test ends.
struct fault_guard {
  std::string saved = xsym::cpu::testing::current_fault().name;
  ~fault_guard() { xsym::cpu::testing::set_fault(saved); }
};
}  // namespace

// Each strided input is copied contiguous before the fused kernel reads it; twelve such inputs
// (more than the copies first made room for) and a broadcast row, read under the sanitizers in CI.
TEST_CASE("a fused node of twelve transposed inputs and a broadcast row gives the naive sum", "[oracle]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<xt::xtensor<double, 2>> m(12, xt::xtensor<double, 2>::from_shape({7, 5}));
  for (auto& a : m)
    for (auto& e : a) e = u(rng);
  auto row = xt::xtensor<double, 1>::from_shape({7});
  for (auto& e : row) e = u(rng);
  std::vector<xsym::var<double, 2>> x;
  for (int k = 0; k < 12; ++k) x.push_back(xsym::matrix<double>("x" + std::to_string(k)));
  auto r = xsym::vector<double>("r");
  xsym::var<double, 2> sum = x[0];
  for (int k = 1; k < 12; ++k) sum = sum + x[static_cast<std::size_t>(k)] * static_cast<double>(k + 1);
  for (const char* mode : {"FAST_RUN", "FAST_COMPILE"}) {
    auto f = xsym::function("twelve", xsym::inputs(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], r),
                            sum + r, xsym::mode(mode));
    auto t = [&](int k) { return xt::transpose(m[static_cast<std::size_t>(k)]); };
    const xt::xtensor<double, 2> got = f(t(0), t(1), t(2), t(3), t(4), t(5), t(6), t(7), t(8), t(9), t(10), t(11), row);
    REQUIRE(got.shape(0) == 5);
    REQUIRE(got.shape(1) == 7);
    for (std::size_t i = 0; i < 5; ++i)
      for (std::size_t j = 0; j < 7; ++j) {
        double want = m[0](j, i);
        for (std::size_t k = 1; k < 12; ++k) want = want + m[k](j, i) * static_cast<double>(k + 1);
        want = want + row(j);
        CHECK(got(i, j) == Approx(want).epsilon(1e-13).margin(1e-13));
      }
  }
}

TEST_CASE("the fault hook spoils one element of what it breaks, and nothing once cleared", "[oracle]") {
  setup();
  fault_guard guard;
  namespace ft = xsym::cpu::testing;
  const var_ptr x = xd::make_input(dtype::float64, 1, "x");
  const std::vector<var_ptr> outs = {xd::elemwise(scalar_op::exp, {x}), xd::reduce(x, reduce_op::sum, {}, true)};
  std::mt19937_64 rng(7);
  arg_set set;
  add_random(set, dtype::float64, {37}, {0.5, 2}, rng);
  const auto want = expected({x}, set.args, outs);
  auto differing = [&](const char* fault) {
    ft::set_fault(fault);
    auto rt = build("fault", {x}, outs, modes()[2]);  // linker=py: exp and sum are nodes of their own
    const auto got = call(*rt, set.args);
    std::vector<std::int64_t> at;
    for (std::size_t o = 0; o < outs.size(); ++o)
      for (std::size_t i = 0; i < want[o].v.size(); ++i)
        if (std::fabs(got[o].v[i] - want[o].v[i]) > 8 * ulp_of(want[o].v[i], dtype::float64))
          at.push_back(static_cast<std::int64_t>(100 * o + i));
    return at;
  };
  CHECK(differing("exp") == std::vector<std::int64_t>{18});  // the middle of 37
  CHECK(differing("exp:simd").empty());                        // linker=py runs the reference kernels
  CHECK(differing("reduce_sum") == std::vector<std::int64_t>{100});
  CHECK(differing("").empty());
  CHECK_THROWS_AS(ft::set_fault("no such op"), std::invalid_argument);
}

TEST_CASE("the fault targets, for mutation.sh", "[.][fault_targets]") {
  for (const auto& name : xsym::cpu::testing::fault_targets()) std::cout << "fault target: " << name << "\n";
}
