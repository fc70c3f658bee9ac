// The worst error in ulps of xsym's float32 and float64 exp, expm1, log, log1p, sqrt, tanh,
// sigmoid, softplus and pow, run through xsym functions in the default mode (FAST_RUN: the SIMD
// kernels), against long double references (expl, expm1l, logl, log1pl, sqrtl, tanhl, powl;
// sigmoid = 1/(1+expl(-x)); softplus = log1pl(expl(x)), x + log1pl(expl(-x)) for x > 0).
//
// Per op and dtype, three kinds of points, all in one array:
//   random   131072 points over the op's whole useful domain: log-uniform magnitudes (both signs
//            where the domain allows), uniform over the domain and over its core (near 1 for
//            log, near -1 for log1p); pow: bases log-uniform in [1e-3, 1e3] with real exponents
//            that keep the result a normal number, integer exponents, negative bases with
//            integer exponents.
//   edges    dense grids of 16384 points over each edge region: exp float64 [700, 709.78] and
//            [-745.13, -700], float32 [80, 88.72] and [-103.97, -80]; expm1 the upper ones;
//            sigmoid and softplus the lower ones (the result is subnormal there); log, log1p and
//            sqrt subnormal inputs, log1p just above -1; pow(2, y) and other bases with results
//            near overflow (2^1024, 2^128) and in the subnormal range (down to 2^-1075, 2^-150),
//            pow(0.5, y) across the subnormal range.
//   special  NaN, -NaN, +-inf, +-0, subnormals, the smallest normal, +-max (and log(1),
//            log1p(-1), sqrt(1), sqrt(4)); pow: the pairs whose result IEEE and C fix exactly
//            (a base of NaN, +-inf, +-0 or +-1 with any exponent, an exponent of NaN, +-inf or
//            +-0 with any base, finite bases with exponents 1, +-max, +-the largest odd integer,
//            +-the smallest subnormal; powers of two with small integer exponents). Compared
//            bitwise (any NaN equals any NaN) with the std:: function in the element type
//            (sigmoid: T(1)/(T(1)+std::exp(-x)); softplus: x > 0 ? x + std::log1p(std::exp(-x))
//            : std::log1p(std::exp(x))).
//
// The error of a result is |got - ref| / ulp, ref the long double value and ulp the spacing of
// the element type at ref rounded to it (the subnormal spacing below the smallest normal; at an
// infinite rounded ref, the spacing below max). A result that is inf or NaN where ref rounds to
// a finite value, or 0 where |ref| is above the smallest subnormal, is "wrong": an infinite error,
// counted apart (edge-fail) and left out of the max-ulp columns; the worst such example is the one
// furthest inside the finite range.
//
// Consistency: every point runs in a SIMD batch (the array, its length a multiple of 64, so no
// point falls in a tail), again in a batch at another lane among other neighbours (the
// array in a fixed random order: "perm"), in tails (arrays of 1 to lanes-1 elements, every
// length in turn: "tail") and in FAST_COMPILE (the reference kernels: "FC"); points where those
// differ bitwise from the batch run (any NaN equal to any NaN) are counted.
//
// A report, not a test: it always exits 0. About 1 s on one core.
//
//   make ulps   (builds it in build-bench and runs it; docs/performance.md holds the table)
#include <xsym/xsym.hpp>

#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

enum class op { exp, expm1, log, log1p, sqrt, tanh, sigmoid, softplus, pow };
constexpr op all_ops[] = {op::exp,  op::expm1,   op::log,      op::log1p, op::sqrt,
                          op::tanh, op::sigmoid, op::softplus, op::pow};

const char* op_name(op o) {
  switch (o) {
    case op::exp: return "exp";
    case op::expm1: return "expm1";
    case op::log: return "log";
    case op::log1p: return "log1p";
    case op::sqrt: return "sqrt";
    case op::tanh: return "tanh";
    case op::sigmoid: return "sigmoid";
    case op::softplus: return "softplus";
    case op::pow: return "pow";
  }
  return "?";
}

template <class T>
struct fp {
  static constexpr bool f64 = std::is_same_v<T, double>;
  static constexpr const char* name = f64 ? "float64" : "float32";
  static constexpr int digits = f64 ? 17 : 9;  // decimal digits that name a value exactly
  static constexpr T max = std::numeric_limits<T>::max();
  static constexpr T min_normal = std::numeric_limits<T>::min();
  static constexpr T denorm = std::numeric_limits<T>::denorm_min();
  static constexpr T inf = std::numeric_limits<T>::infinity();
  static constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  // exp(x) overflows above ovf and rounds to 0 below -unf.
  static constexpr double ovf = f64 ? 709.78 : 88.72, unf = f64 ? 745.13 : 103.97;
  // 2^max_exp2 overflows; 2^-sub_exp2 is the smallest subnormal.
  static constexpr double max_exp2 = f64 ? 1024 : 128, sub_exp2 = f64 ? 1074 : 149;
  static constexpr double min_normal_exp2 = f64 ? 1022 : 126;
  static constexpr std::size_t lanes = xsimd::batch<T>::size;
};

long double reference(op o, long double x, long double y) {
  switch (o) {
    case op::exp: return expl(x);
    case op::expm1: return expm1l(x);
    case op::log: return logl(x);
    case op::log1p: return log1pl(x);
    case op::sqrt: return sqrtl(x);
    case op::tanh: return tanhl(x);
    case op::sigmoid: return 1.0L / (1.0L + expl(-x));
    case op::softplus: return x > 0 ? x + log1pl(expl(-x)) : log1pl(expl(x));
    case op::pow: return powl(x, y);
  }
  return 0;
}

// The std:: function in the element type: what a special value must give, bit for bit.
template <class T>
T std_value(op o, T x, T y) {
  switch (o) {
    case op::exp: return std::exp(x);
    case op::expm1: return std::expm1(x);
    case op::log: return std::log(x);
    case op::log1p: return std::log1p(x);
    case op::sqrt: return std::sqrt(x);
    case op::tanh: return std::tanh(x);
    case op::sigmoid: return T(1) / (T(1) + std::exp(-x));
    case op::softplus: return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    case op::pow: return std::pow(x, y);
  }
  return 0;
}

template <class T>
bool same(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
std::string show(T v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", fp<T>::digits, static_cast<double>(v));
  return buf;
}

// NaN, inf, -inf, 0, -0, 1, or a finite number: kinds of special-value mismatches.
template <class T>
std::string value_class(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  if (v == 1) return "1";
  return "x";
}

template <class T>
std::string show_input(op o, T x, T y) {
  return o == op::pow ? "pow(" + show(x) + ", " + show(y) + ")" : show(x);
}

// The spacing of T at r (already rounded to T): the subnormal spacing below the smallest normal,
// the spacing below max at infinity.
template <class T>
long double ulp_at(T r) {
  using L = fp<T>;
  T a = std::fabs(r);
  if (std::isinf(a)) a = L::max;
  if (a < L::min_normal) return L::denorm;
  if (a == L::max) return static_cast<long double>(a) - std::nextafter(a, T(0));
  return static_cast<long double>(std::nextafter(a, L::inf)) - a;
}

enum kind : unsigned char { random_pt, edge_pt, special_pt, pad_pt };

template <class T>
struct points {
  std::vector<T> x, y;  // y: pow's exponent (unused by the unary ops)
  std::vector<unsigned char> kind;
  void add(double a, double b, unsigned char k) {
    x.push_back(static_cast<T>(a));
    y.push_back(static_cast<T>(b));
    kind.push_back(k);
  }
  std::size_t size() const { return x.size(); }
};

struct sampler {
  std::mt19937_64 rng;
  explicit sampler(std::uint64_t seed) : rng(seed) {}
  double uni(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  double logu(double lo, double hi) { return std::exp(uni(std::log(lo), std::log(hi))); }
  double sign() { return (rng() >> 63) ? -1.0 : 1.0; }
  bool coin() { return (rng() >> 62) & 1; }
};

constexpr std::size_t n_random = 131072;
constexpr std::size_t n_grid = 16384;

// A unary op's random point number k (four kinds in turn).
template <class T>
double random_unary(op o, sampler& s, std::size_t k) {
  using L = fp<T>;
  const double tiny = L::f64 ? 1e-300 : 1e-37;  // the smallest magnitude drawn (a normal number)
  const double big = 0.99 * static_cast<double>(L::max);
  const double eps = std::numeric_limits<T>::epsilon();
  const int part = static_cast<int>(k % 4);
  switch (o) {
    case op::exp:
      if (part < 2) return s.sign() > 0 ? s.logu(1e-20, L::ovf) : -s.logu(1e-20, L::unf);
      return part == 2 ? s.uni(-L::unf, L::ovf) : s.uni(-1, 1);
    case op::expm1:
      if (part < 2) return s.sign() > 0 ? s.logu(tiny, L::ovf) : -s.logu(tiny, L::unf);
      return part == 2 ? s.uni(-L::unf, L::ovf) : s.uni(-1, 1);
    case op::log:
      if (part < 2) return s.logu(L::min_normal, big);
      return part == 2 ? s.uni(0.5, 2) : 1 + s.sign() * s.logu(eps / 2, 0.5);
    case op::log1p:
      if (part == 0) return s.logu(tiny, big);
      if (part == 1) return -s.logu(tiny, 1);
      return part == 2 ? s.uni(-1, 4) : -1 + s.logu(eps / 2, 0.5);
    case op::sqrt: return part < 3 ? s.logu(L::min_normal, big) : s.uni(0, 4);
    case op::tanh:
      if (part < 2) return s.sign() * s.logu(tiny, 40);
      return part == 2 ? s.uni(-20, 20) : s.uni(-1, 1);
    case op::sigmoid:
      if (part < 2) return s.sign() > 0 ? s.logu(1e-20, 40) : -s.logu(1e-20, L::unf);
      return part == 2 ? s.uni(-L::unf, 40) : s.uni(-10, 10);
    case op::softplus:
      if (part == 0) return s.logu(1e-20, big);
      if (part == 1) return -s.logu(1e-20, L::unf);
      return part == 2 ? s.uni(-L::unf, 800) : s.uni(-10, 10);
    case op::pow: break;
  }
  return 1;
}

template <class T>
void add_grid(points<T>& p, double lo, double hi, double y = 0) {
  for (std::size_t i = 0; i < n_grid; ++i) p.add(lo + (hi - lo) * static_cast<double>(i) / (n_grid - 1), y, edge_pt);
}

template <class T>
void add_edges(op o, points<T>& p, sampler& s) {
  using L = fp<T>;
  const double ovf_lo = L::f64 ? 700 : 80;
  switch (o) {
    case op::exp:
      add_grid(p, ovf_lo, L::ovf);
      add_grid(p, -L::unf, -ovf_lo);
      break;
    case op::expm1: add_grid(p, ovf_lo, L::ovf); break;
    case op::sigmoid:
    case op::softplus: add_grid(p, -L::unf, -ovf_lo); break;
    case op::log:
    case op::sqrt:
    case op::log1p:
      for (std::size_t i = 0; i < n_grid; ++i) p.add(s.logu(L::denorm, L::min_normal), 0, edge_pt);
      if (o == op::log1p)  // just above -1: 1 + x loses all of x's low bits
        for (std::size_t i = 0; i < n_grid; ++i) p.add(-1 + s.logu(L::denorm, 1e-3), 0, edge_pt);
      break;
    case op::tanh: break;
    case op::pow: {
      const double span = L::f64 ? 64 : 30;
      // 2^y near overflow and across the subnormal range, 0.5^y across the subnormal range.
      for (std::size_t i = 0; i < n_grid; ++i) {
        const double t = static_cast<double>(i) / (n_grid - 1);
        p.add(2, L::max_exp2 - 10 + 10 * t, edge_pt);
        p.add(2, -(L::sub_exp2 + 1) + span * t, edge_pt);
        p.add(0.5, L::sub_exp2 + 1 - span * t, edge_pt);
      }
      // Other bases, the exponent picked so that the result lands in the same regions.
      for (std::size_t i = 0; i < 2 * n_grid; ++i) {
        const T x = static_cast<T>(s.logu(1e-3, 1e3));
        const double l2 = std::log2(static_cast<double>(x));
        if (std::fabs(l2) < 0.25) {
          --i;
          continue;
        }
        const double low = -(L::sub_exp2 + 1);
        const double target = i % 2 ? s.uni(L::max_exp2 - 10, L::max_exp2) : s.uni(low, low + span);
        p.add(x, target / l2, edge_pt);
      }
      break;
    }
  }
}

// NaN, -NaN, +-inf, +-0, subnormals, the smallest normal, +-max: results that the std::
// function fixes exactly (no rounding of an inexact value is asked for).
template <class T>
std::vector<T> special_values(sampler& s) {
  using L = fp<T>;
  std::vector<T> v = {L::nan,
                      -L::nan,
                      L::inf,
                      -L::inf,
                      T(0),
                      -T(0),
                      L::denorm,
                      -L::denorm,
                      L::min_normal / 2,
                      -L::min_normal / 2,
                      L::min_normal - L::denorm,
                      -(L::min_normal - L::denorm),
                      L::min_normal,
                      -L::min_normal,
                      L::max,
                      -L::max};
  for (int i = 0; i < 8; ++i) {
    const T sub = static_cast<T>(s.logu(L::denorm, L::min_normal));
    v.push_back(sub);
    v.push_back(-sub);
  }
  return v;
}

template <class T>
void add_specials(op o, points<T>& p, sampler& s) {
  using L = fp<T>;
  const std::vector<T> sv = special_values<T>(s);
  if (o != op::pow) {
    for (T v : sv) p.add(v, 0, special_pt);
    // Exact results at ordinary points: log(1) = 0, log1p(-1) = -inf, sqrt(1) and sqrt(4).
    if (o == op::log) p.add(1, 0, special_pt);
    if (o == op::log1p) p.add(-1, 0, special_pt);
    if (o == op::sqrt) p.add(1, 0, special_pt), p.add(4, 0, special_pt);
    return;
  }
  // pow: pairs whose result IEEE / C fix exactly. Every exponent with a base of NaN, +-inf, +-0,
  // +-1; every base with an exponent of NaN, +-inf, +-0; finite bases with exponents 1, +-max,
  // the largest odd integer and its negation, an even integer above it, +-the smallest subnormal
  // (results x, 0, inf or 1); powers of two with small integer exponents (exact powers of two,
  // or 0 or inf).
  const T odd_big = std::ldexp(T(1), std::numeric_limits<T>::digits) - 1;
  const std::vector<T> special_bases = {L::nan, -L::nan, L::inf, -L::inf, T(0), -T(0), T(1), T(-1)};
  const std::vector<T> special_exps = {L::nan, -L::nan, L::inf, -L::inf, T(0), -T(0)};
  const std::vector<T> all_exps = {L::nan,    -L::nan, L::inf,  -L::inf, T(0),      -T(0),      T(1),   T(-1),
                                   T(2),      T(-2),   T(3),    T(-3),   T(0.5),    T(-0.5),    T(1.5), T(-1.5),
                                   L::denorm, -L::denorm, L::max, -L::max, odd_big, -odd_big, odd_big + 3,
                                   T(1e-3),   T(-1e-3)};
  std::vector<T> finite_bases = {T(0.5), T(-0.5), T(2), T(-2), T(3.7), T(-3.7)};
  for (T v : sv)
    if (std::isfinite(v) && v != 0) finite_bases.push_back(v);
  const std::vector<T> two_powers = {T(0.5),         T(-0.5),   T(2),       T(-2),
                                     L::min_normal,  -L::min_normal,     L::denorm,  -L::denorm,
                                     L::min_normal / 2, -L::min_normal / 2};
  std::vector<std::pair<T, T>> pairs;
  auto add = [&](T b, T e) {
    for (const auto& [pb, pe] : pairs)
      if (std::memcmp(&pb, &b, sizeof(T)) == 0 && std::memcmp(&pe, &e, sizeof(T)) == 0) return;
    pairs.emplace_back(b, e);
  };
  for (T b : special_bases)
    for (T e : all_exps) add(b, e);
  for (T b : finite_bases) {
    for (T e : special_exps) add(b, e);
    for (T e : {T(1), L::max, -L::max, odd_big, -odd_big, T(odd_big + 3), L::denorm, -L::denorm}) add(b, e);
  }
  for (T b : two_powers)
    for (T e : {T(2), T(3), T(-1), T(-2), T(-3)}) add(b, e);
  for (const auto& [b, e] : pairs) p.add(b, e, special_pt);
}

template <class T>
points<T> make_points(op o) {
  using L = fp<T>;
  sampler s(0x5eed0000u + static_cast<std::uint64_t>(o) * 2 + L::f64);
  points<T> p;
  if (o != op::pow) {
    for (std::size_t k = 0; k < n_random; ++k) p.add(random_unary<T>(o, s, k), 0, random_pt);
  } else {
    // Results kept normal: |y log2 x| <= 0.98 times the exponent of the smallest normal.
    const double lim = 0.98 * L::min_normal_exp2;
    for (std::size_t k = 0; k < n_random; ++k) {
      const int part = static_cast<int>(k % 4);
      const T x = static_cast<T>((part == 3 ? -1 : 1) * s.logu(1e-3, 1e3));
      const double l2 = std::fabs(std::log2(std::fabs(static_cast<double>(x))));
      const double ymax = std::min(1e5, l2 > 0 ? lim / l2 : 1e5);
      double y;
      if (part == 0) y = s.sign() * s.logu(1e-6, ymax);
      else if (part == 1) y = s.uni(-ymax, ymax);
      else if (s.coin()) y = std::round(s.uni(-16.49, 16.49));
      else y = std::trunc(s.uni(-std::min(ymax, 1e4), std::min(ymax, 1e4)));
      p.add(x, y, random_pt);
    }
  }
  add_edges<T>(o, p, s);
  add_specials<T>(o, p, s);
  // Padded to a multiple of 64: the batch run puts no point in a tail.
  while (p.size() % 64) p.add(0.5, 0.5, pad_pt);
  return p;
}

template <class T>
xsym::var<T, 1> expression(op o, const xsym::var<T, 1>& x, const xsym::var<T, 1>& y) {
  switch (o) {
    case op::exp: return xsym::exp(x);
    case op::expm1: return xsym::expm1(x);
    case op::log: return xsym::log(x);
    case op::log1p: return xsym::log1p(x);
    case op::sqrt: return xsym::sqrt(x);
    case op::tanh: return xsym::tanh(x);
    case op::sigmoid: return xsym::sigmoid(x);
    case op::softplus: return xsym::softplus(x);
    case op::pow: return xsym::pow(x, y);
  }
  return x;
}

// Runs f over n points starting at x and y into out.
template <bool Binary, class F, class T>
void run(const F& f, const T* x, const T* y, std::size_t n, T* out) {
  const std::array<std::size_t, 1> shape{n};
  auto xa = xt::adapt(x, n, xt::no_ownership(), shape);
  xt::xtensor<T, 1> r;
  if constexpr (Binary) r = f(xa, xt::adapt(y, n, xt::no_ownership(), shape));
  else r = f(xa);
  std::copy(r.begin(), r.end(), out);
}

template <class T>
struct results {
  std::vector<T> batch, perm, tail, fc;
};

template <bool Binary, class T>
results<T> evaluate(op o, const points<T>& p) {
  auto x = xsym::vector<T>("x");
  auto y = xsym::vector<T>("y");
  auto out = expression<T>(o, x, y);
  const std::string name = std::string("ulps_") + op_name(o);
  auto fast = [&] {
    if constexpr (Binary) return xsym::function(name, xsym::inputs(x, y), out);
    else return xsym::function(name, xsym::inputs(x), out);
  }();
  auto compile = [&] {
    if constexpr (Binary) return xsym::function(name + "_fc", xsym::inputs(x, y), out, xsym::mode("FAST_COMPILE"));
    else return xsym::function(name + "_fc", xsym::inputs(x), out, xsym::mode("FAST_COMPILE"));
  }();
  const std::size_t n = p.size();
  results<T> r;
  r.batch.resize(n), r.perm.resize(n), r.tail.resize(n), r.fc.resize(n);
  run<Binary>(fast, p.x.data(), p.y.data(), n, r.batch.data());
  run<Binary>(compile, p.x.data(), p.y.data(), n, r.fc.data());
  // The same points in a fixed random order: other lanes, other neighbours.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(0xfeedu));
  std::vector<T> px(n), py(n), pout(n);
  for (std::size_t j = 0; j < n; ++j) px[j] = p.x[order[j]], py[j] = p.y[order[j]];
  run<Binary>(fast, px.data(), py.data(), n, pout.data());
  for (std::size_t j = 0; j < n; ++j) r.perm[order[j]] = pout[j];
  // Tails: arrays shorter than a batch, of every length 1 .. lanes-1 in turn.
  const std::size_t short_max = std::max<std::size_t>(1, fp<T>::lanes - 1);
  for (std::size_t i = 0, k = 0; i < n; ++k) {
    const std::size_t len = std::min(n - i, 1 + k % short_max);
    run<Binary>(fast, p.x.data() + i, p.y.data() + i, len, r.tail.data() + i);
    i += len;
  }
  return r;
}

struct err_class {
  double ulps = 0;
  bool wrong = false;
  double wrong_score = 0;  // how far inside the finite range a wrong result's ref is (log2 units)
};

template <class T>
err_class classify(T got, long double ref) {
  using L = fp<T>;
  err_class e;
  const T ref_t = static_cast<T>(ref);
  if (std::isnan(ref)) {
    if (!std::isnan(got)) e.ulps = INFINITY;  // not expected in the sweep
    return e;
  }
  const long double mag = fabsl(ref);
  if (std::isnan(got)) {
    e.wrong = true, e.wrong_score = INFINITY;
    return e;
  }
  if (std::isinf(got)) {
    if (std::isinf(ref_t) && std::signbit(ref_t) == std::signbit(got)) return e;
    if (!std::isinf(ref_t)) {
      e.wrong = true;
      e.wrong_score = static_cast<double>(L::max_exp2 - log2l(mag));
      return e;
    }
  }
  if (got == 0 && mag > static_cast<long double>(L::denorm)) {
    e.wrong = true;
    e.wrong_score = static_cast<double>(log2l(mag) + L::sub_exp2);
    return e;
  }
  e.ulps = static_cast<double>(fabsl(static_cast<long double>(got) - ref) / ulp_at(ref_t));
  return e;
}

struct example {
  double score = -1;
  std::string text;
};

struct row {
  std::string op, dtype;
  std::size_t points = 0;
  double ulp_random = 0, ulp_edges = 0, ulp_tail = 0;
  std::string worst_random, worst_edge, worst_tail;
  std::size_t wrong = 0, tail_wrong = 0;
  bool has_edges = false;
  example worst_wrong;
  std::size_t d_perm = 0, d_tail = 0, d_fc = 0, specials = 0, special_bad = 0;
  std::vector<std::string> disagree_examples, special_examples, special_keys;
  int shown[3] = {0, 0, 0};
};

template <class T>
row measure(op o) {
  const points<T> p = make_points<T>(o);
  const results<T> r = o == op::pow ? evaluate<true, T>(o, p) : evaluate<false, T>(o, p);
  row w;
  w.op = op_name(o);
  w.dtype = fp<T>::name;
  auto detail = [&](std::size_t i, T got, long double ref) {
    return show_input(o, p.x[i], p.y[i]) + ": got " + show(got) + ", ref " + show(static_cast<T>(ref)) +
           " (long double " + [&] {
             char b[64];
             std::snprintf(b, sizeof b, "%.21Lg", ref);
             return std::string(b);
           }() + ")";
  };
  for (std::size_t i = 0; i < p.size(); ++i) {
    const unsigned char k = p.kind[i];
    if (k == pad_pt) continue;
    ++w.points;
    w.has_edges |= k == edge_pt;
    const T x = p.x[i], y = p.y[i];
    // Consistency: batch against another batch lane, the scalar tail and FAST_COMPILE.
    const bool dp = !same(r.batch[i], r.perm[i]), dt = !same(r.batch[i], r.tail[i]), df = !same(r.batch[i], r.fc[i]);
    w.d_perm += dp, w.d_tail += dt, w.d_fc += df;
    // Up to two examples of each kind: another lane, the tail, FAST_COMPILE apart from the tail.
    const bool show_p = dp && w.shown[0] < 2, show_t = dt && w.shown[1] < 2;
    const bool show_f = df && !same(r.fc[i], r.tail[i]) && w.shown[2] < 2;
    w.shown[0] += show_p, w.shown[1] += show_t, w.shown[2] += show_f;
    if (show_p || show_t || show_f)
      w.disagree_examples.push_back(show_input(o, x, y) + ": batch " + show(r.batch[i]) + ", other lane " +
                                    show(r.perm[i]) + ", tail " + show(r.tail[i]) + ", FAST_COMPILE " + show(r.fc[i]));
    if (k == special_pt) {
      ++w.specials;
      const T want = std_value(o, x, y);
      if (!same(r.batch[i], want)) {
        ++w.special_bad;
        // The first example of each kind of mismatch (what the result is, what std's is).
        const std::string key = value_class(r.batch[i]) + value_class(want);
        const bool new_kind = std::find(w.special_keys.begin(), w.special_keys.end(), key) == w.special_keys.end();
        if (w.special_examples.size() < 8 && new_kind) {
          w.special_keys.push_back(key);
          w.special_examples.push_back(show_input(o, x, y) + ": got " + show(r.batch[i]) + ", std " + show(want) +
                                       (same(r.tail[i], want) ? " (the tail gives std's)" : ""));
        }
      }
      continue;
    }
    const long double ref = reference(o, x, y);
    const err_class e = classify(r.batch[i], ref);
    if (e.wrong) {
      ++w.wrong;
      if (e.wrong_score > w.worst_wrong.score) w.worst_wrong = {e.wrong_score, detail(i, r.batch[i], ref)};
    } else if (k == random_pt && e.ulps > w.ulp_random) {
      w.ulp_random = e.ulps, w.worst_random = detail(i, r.batch[i], ref);
    } else if (k == edge_pt && e.ulps > w.ulp_edges) {
      w.ulp_edges = e.ulps, w.worst_edge = detail(i, r.batch[i], ref);
    }
    const err_class et = same(r.tail[i], r.batch[i]) ? e : classify(r.tail[i], ref);
    if (et.wrong) ++w.tail_wrong;
    else if (et.ulps > w.ulp_tail) w.ulp_tail = et.ulps, w.worst_tail = detail(i, r.tail[i], ref);
  }
  return w;
}

std::string fmt_ulps(double u) {
  char b[32];
  if (std::isinf(u)) return "inf";
  std::snprintf(b, sizeof b, u < 1e6 ? "%.4f" : "%.3g", u);
  return b;
}

}  // namespace

int main() {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<row> rows;
  for (op o : all_ops) {
    rows.push_back(measure<float>(o));
    rows.push_back(measure<double>(o));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("xsym ops in FAST_RUN against long double references; error in ulps of the element type\n");
  std::printf("SIMD: %s, %zu float32 lanes, %zu float64 lanes\n\n", xsimd::default_arch::name(), fp<float>::lanes,
              fp<double>::lanes);
  std::printf("%-9s %-8s %7s %11s %11s  %-42s %9s %15s  %-22s %s\n", "op", "dtype", "points", "ulp(random)",
              "ulp(edges)", "worst input", "edge-fail", "ulp(tail)", "disagree perm/tail/FC", "special bad");
  for (const row& w : rows) {
    const bool edge_worse = w.ulp_edges > w.ulp_random;
    std::string worst = edge_worse ? w.worst_edge : w.worst_random;
    worst = worst.substr(0, worst.find(':'));
    const std::string dis = std::to_string(w.d_perm) + "/" + std::to_string(w.d_tail) + "/" + std::to_string(w.d_fc);
    const std::string tail = fmt_ulps(w.ulp_tail) + (w.tail_wrong ? " +" + std::to_string(w.tail_wrong) + "w" : "");
    const std::string edges = w.has_edges ? fmt_ulps(w.ulp_edges) : "-";
    std::printf("%-9s %-8s %7zu %11s %11s  %-42s %9zu %15s  %-22s %zu/%zu\n", w.op.c_str(), w.dtype.c_str(), w.points,
                fmt_ulps(w.ulp_random).c_str(), edges.c_str(), worst.c_str(), w.wrong, tail.c_str(), dis.c_str(),
                w.special_bad, w.specials);
  }
  std::printf("\nColumns: ulp(random), ulp(edges): the worst error of the batch (SIMD) results on finite ones; worst\n"
              "input: where the larger of the two is; edge-fail: results inf, NaN or 0 where the reference is finite\n"
              "and nonzero (infinite errors, not in the ulp columns); ulp(tail): the worst error of the scalar-tail\n"
              "results (+Nw: wrong ones); disagree: points whose result differs bitwise from the batch run at another\n"
              "lane / in a scalar tail / in FAST_COMPILE; special bad: special values whose batch result is not the\n"
              "std:: function's bits, of those tried.\n");

  std::printf("\nWorst points (batch results):\n");
  for (const row& w : rows) {
    const char *o = w.op.c_str(), *t = w.dtype.c_str();
    if (!w.worst_random.empty()) std::printf("  %-8s %s random: %s\n", o, t, w.worst_random.c_str());
    if (!w.worst_edge.empty()) std::printf("  %-8s %s edges:  %s\n", o, t, w.worst_edge.c_str());
    if (!w.worst_tail.empty() && w.ulp_tail > std::max(w.ulp_random, w.ulp_edges))
      std::printf("  %-8s %s tail:   %s\n", o, t, w.worst_tail.c_str());
  }
  std::printf("\nWrong at edges (count, worst example):\n");
  bool any = false;
  for (const row& w : rows)
    if (w.wrong) {
      any = true;
      std::printf("  %-8s %s %zu wrong; worst %s\n", w.op.c_str(), w.dtype.c_str(), w.wrong,
                  w.worst_wrong.text.c_str());
    }
  if (!any) std::printf("  none\n");
  std::printf("\nBatch / other lane / tail / FAST_COMPILE disagreements (the first two of each kind):\n");
  any = false;
  for (const row& w : rows)
    for (const std::string& s : w.disagree_examples)
      any = true, std::printf("  %-8s %s %s\n", w.op.c_str(), w.dtype.c_str(), s.c_str());
  if (!any) std::printf("  none\n");
  std::printf("\nSpecial-value mismatches against std:: (the first of each kind):\n");
  any = false;
  for (const row& w : rows)
    for (const std::string& s : w.special_examples)
      any = true, std::printf("  %-8s %s %s\n", w.op.c_str(), w.dtype.c_str(), s.c_str());
  if (!any) std::printf("  none\n");
  std::printf("\n%.1f s\n", seconds);
  return 0;
}
