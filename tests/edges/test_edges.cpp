// Numbers at the edges: every elementwise op on every dtype it takes, at NaN, the
// infinities, signed zeros, subnormals, the extremes of the finite range, 1 and -1, and each
// op's overflow and underflow edges, placed both in a SIMD batch and in the scalar tail, in
// FAST_RUN, FAST_COMPILE, optimizer_excluding=fusion:inplace and inside a fused Composite.
//
// The semantics (numpy 2 agrees):
// - At a special value the result is bitwise the C++ standard library's in the element type
//   (a NaN equals any NaN; the signs of zeros and infinities count), wherever the exact result
//   is representable (NaN, an infinity, a zero, or a value the long double result says is
//   exact). Elsewhere a transcendental function may be off by its documented error, but a
//   result is never a zero or an infinity where the reference is not (exp(709.5) is finite,
//   sigmoid(-100.f) is a subnormal, not 0).
// - maximum and minimum propagate a NaN from either operand and return the first operand on a
//   (-0, +0) tie; neg(+0) is -0; int32 and int64 add, sub, mul, neg and abs wrap around.
// - Casts of NaN, infinities and out-of-range floats to int32 and int64 give the type's minimum
//   (xsym::convert_value).
// - A C++ integer that an integer tensor's type cannot hold throws at graph build.
// - The mean of int64 values is computed in float64.
// - Rewrites that fold arithmetic keep IEEE results (NaN from inf - inf, overflow to inf) unless
//   fast_math is allowed (optimizer_excluding=fast_math turns those off).
//
// Lengths 37 and 19 are odd, so index n-1 is in the scalar tail at every SIMD width (float32:
// 4, 8 or 16 lanes; float64: 2, 4 or 8), index 3 is in a batch, and index n-2 is in the tail
// with 8 or 16 lanes.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Values: names, bit comparison, ulps
// ---------------------------------------------------------------------------------------------
template <class T>
constexpr const char* type_name() {
  return xsym::dtype_name(xsym::dtype_of<T>()).data();  // names are literals: terminated
}

/// Equal bit patterns; any NaN equals any NaN. The signs of zeros and infinities count.
template <class T>
bool same_bits(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) && std::isnan(b)) return true;
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else {
    return a == b;
  }
}

/// A value as the messages print it: decimal with every digit, and its hex form.
template <class T>
std::string show(T v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_integral_v<T>) {
    os << static_cast<long long>(v);
  } else {
    os << std::setprecision(std::numeric_limits<T>::max_digits10) << v;
    if (std::isfinite(v) && v != 0) os << " (" << std::hexfloat << v << ")";
  }
  return os.str();
}

/// |got - exact| in units of the last place of T at the exact value rounded to T.
template <class T>
long double ulps_off(T got, long double exact) {
  T w = std::fabs(static_cast<T>(exact));
  if (std::isinf(w)) w = std::numeric_limits<T>::max();
  const T up = std::nextafter(w, std::numeric_limits<T>::infinity());
  const long double ulp = std::isinf(up) ? static_cast<long double>(w) - std::nextafter(w, T(0))
                                         : static_cast<long double>(up) - w;
  return std::fabs(static_cast<long double>(got) - exact) / ulp;
}

std::uint64_t seed_of(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Integer arithmetic as numpy does it: wrapping around (in unsigned, where C++ defines it).
template <class T>
using wide_unsigned = std::conditional_t<(sizeof(T) <= sizeof(unsigned)), unsigned, unsigned long long>;
template <class T>
T wrap_add(T a, T b) { return static_cast<T>(static_cast<wide_unsigned<T>>(a) + static_cast<wide_unsigned<T>>(b)); }
template <class T>
T wrap_sub(T a, T b) { return static_cast<T>(static_cast<wide_unsigned<T>>(a) - static_cast<wide_unsigned<T>>(b)); }
template <class T>
T wrap_mul(T a, T b) { return static_cast<T>(static_cast<wide_unsigned<T>>(a) * static_cast<wide_unsigned<T>>(b)); }
template <class T>
T wrap_neg(T a) { return wrap_sub(T(0), a); }

// ---------------------------------------------------------------------------------------------
// Special values
// ---------------------------------------------------------------------------------------------
template <class T>
std::vector<T> float_specials() {
  using L = std::numeric_limits<T>;
  const T largest_subnormal = std::nextafter(L::min(), T(0));
  return {L::quiet_NaN(), L::infinity(), -L::infinity(), T(0),  -T(0),     L::denorm_min(),
          -L::denorm_min(), largest_subnormal, -largest_subnormal, L::min(), -L::min(), L::max(),
          -L::max(),        T(1),              T(-1)};
}

template <class T>
std::vector<T> int_specials() {
  using L = std::numeric_limits<T>;
  // 46341^2 and 3037000500^2 are the first squares past the int32 and int64 ranges.
  T square_overflow = T(46341);
  if constexpr (std::is_same_v<T, std::int64_t>) square_overflow = T(3037000500LL);
  return {T(0), T(1), T(-1), T(2), T(-2), T(3), T(1290), square_overflow, L::max(), L::min(), T(L::max() - 1),
          T(L::min() + 1)};
}

template <class T>
std::vector<T> specials() {
  if constexpr (std::is_floating_point_v<T>) return float_specials<T>();
  else return int_specials<T>();
}

template <class T>
std::vector<T> plus(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---------------------------------------------------------------------------------------------
// An op under test
// ---------------------------------------------------------------------------------------------
/// Where ordinary inputs are drawn from: uniform in [lo, hi], or log-uniform (lo, hi > 0), or
/// whole numbers.
struct range {
  double lo = -4, hi = 4;
  bool log_uniform = false;
  bool whole = false;
};

template <class T>
T draw(std::mt19937_64& rng, const range& r) {
  if constexpr (std::is_integral_v<T>) {
    // The range clipped to T's.
    const long double lo = std::max<long double>(r.lo, std::numeric_limits<T>::min());
    const long double hi = std::min<long double>(r.hi, std::numeric_limits<T>::max());
    return static_cast<T>(std::uniform_int_distribution<long long>(static_cast<long long>(std::ceil(lo)),
                                                                   static_cast<long long>(std::floor(hi)))(rng));
  } else {
    double v = r.log_uniform ? std::exp(std::uniform_real_distribution<double>(std::log(r.lo), std::log(r.hi))(rng))
                             : std::uniform_real_distribution<double>(r.lo, r.hi)(rng);
    if (r.whole) v = std::round(v);
    return static_cast<T>(v);
  }
}

template <class T, class R>
struct op_case {
  std::string name;
  int arity = 1;
  std::function<xsym::var<R, 1>(const xsym::var<T, 1>&, const xsym::var<T, 1>&)> build;
  std::function<R(T, T)> ref;  // the C++ standard library's result in the element type
  // The exact result, in long double; empty for ops that IEEE (or integer arithmetic) makes
  // exact, whose results must always be bitwise the reference.
  std::function<long double(long double, long double)> exact;
  double ulps = 0;                       // allowed where the exact result is not representable
  std::vector<T> xs;                     // special first operands (the only ones of a unary op)
  std::vector<T> ys;                     // special second operands: every (x, y) pair is tried
  std::vector<std::pair<T, T>> pairs;    // and these pairs
  std::vector<std::array<range, 2>> ranges = {{range{}, range{}}};  // ordinary inputs; the first fills around the specials
  // In the fused mode, outputs beside the op's that share its input (sigmoid with softplus:
  // the shared exp(-|u|)). Their values are checked by their own op's tests.
  std::vector<std::function<xsym::var<R, 1>(const xsym::var<T, 1>&)>> partners;
};

template <class T>
using var1 = xsym::var<T, 1>;

template <class T>
op_case<T, T> unary(std::string name, std::function<var1<T>(const var1<T>&)> build, std::function<T(T)> ref,
                    std::function<long double(long double)> exact = {}, double ulps = 0, std::vector<T> edges = {}) {
  op_case<T, T> c;
  c.name = std::move(name);
  c.arity = 1;
  c.build = [build](const var1<T>& x, const var1<T>&) { return build(x); };
  c.ref = [ref](T a, T) { return ref(a); };
  if (exact) c.exact = [exact](long double a, long double) { return exact(a); };
  c.ulps = ulps;
  c.xs = plus(specials<T>(), edges);
  return c;
}

template <class T, class R>
op_case<T, R> binary(std::string name, std::function<var1<R>(const var1<T>&, const var1<T>&)> build,
                     std::function<R(T, T)> ref) {
  op_case<T, R> c;
  c.name = std::move(name);
  c.arity = 2;
  c.build = std::move(build);
  c.ref = std::move(ref);
  c.xs = specials<T>();
  c.ys = specials<T>();
  return c;
}

// ---------------------------------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------------------------------
enum class mode_id { fast_run, fast_compile, no_fusion_inplace, fused };
constexpr mode_id all_modes[] = {mode_id::fast_run, mode_id::fast_compile, mode_id::no_fusion_inplace, mode_id::fused};
constexpr mode_id plain_modes[] = {mode_id::fast_run, mode_id::fast_compile, mode_id::no_fusion_inplace};

const char* mode_name(mode_id m) {
  switch (m) {
    case mode_id::fast_run: return "FAST_RUN";
    case mode_id::fast_compile: return "FAST_COMPILE";
    case mode_id::no_fusion_inplace: return "optimizer_excluding=fusion:inplace";
    case mode_id::fused: return "FAST_RUN, fused: outputs op * one and op (one Composite)";
  }
  return "?";
}

/// make(option) builds the function; the option selects the mode (fused is FAST_RUN).
template <class F>
auto build_in(mode_id m, F&& make) {
  switch (m) {
    case mode_id::fast_compile: return make(xsym::mode("FAST_COMPILE"));
    case mode_id::no_fusion_inplace: return make(xsym::optimizer_excluding("fusion:inplace"));
    default: return make(xsym::mode("FAST_RUN"));
  }
}

/// A compiled function of (x, y, one), its outputs as a vector.
template <class T, class R>
using runner = std::function<std::vector<xt::xtensor<R, 1>>(const xt::xtensor<T, 1>&, const xt::xtensor<T, 1>&,
                                                              const xt::xtensor<R, 1>&)>;

template <class T, class R, class F>
runner<T, R> to_runner(F f) {
  return [f](const xt::xtensor<T, 1>& x, const xt::xtensor<T, 1>& y, const xt::xtensor<R, 1>& one) {
    auto t = f(x, y, one);
    std::vector<xt::xtensor<R, 1>> v;
    std::apply([&](auto&... e) { (v.push_back(std::move(e)), ...); }, t);
    return v;
  };
}

/// v * one (v == one for bools): the same values, through one more step of a fused Composite.
/// (Adding 0 would turn -0 into +0.)
template <class R>
var1<R> keep_value(const var1<R>& v, const var1<R>& one) {
  if constexpr (std::is_same_v<R, bool>) return v == one;
  else return v * one;
}

template <class T, class R>
runner<T, R> compile(const op_case<T, R>& c, mode_id m) {
  const auto x = xsym::vector<T>("x");
  const auto y = xsym::vector<T>("y");
  const auto one = xsym::vector<R>("one");
  const auto out = c.build(x, y);
  const auto in = xsym::inputs(x, y, one);
  const std::string name = c.name + "_" + type_name<T>();
  const xsym::ignore_unused_inputs unused;
  if (m == mode_id::fused) {
    if (c.partners.size() >= 2)
      return to_runner<T, R>(xsym::function(
          name, in, xsym::outputs(keep_value(out, one), out, c.partners[0](x), c.partners[1](x)), unused));
    return to_runner<T, R>(xsym::function(name, in, xsym::outputs(keep_value(out, one), out), unused));
  }
  return build_in(m, [&](auto option) { return to_runner<T, R>(xsym::function(name, in, xsym::outputs(out), unused, option)); });
}

// ---------------------------------------------------------------------------------------------
// Expected values and the verdict on one element
// ---------------------------------------------------------------------------------------------
template <class R>
struct expected {
  R want{};               // the reference
  bool bitwise = true;    // the result must be want's bits
  long double value = 0;  // else: within ulps of this exact value
  std::string note;       // where the C library's result is not the correctly rounded one
};

// An integer operand of a floating-point op is first converted to float64, as the graph does.
template <class T, class R>
long double operand(T a) {
  if constexpr (std::is_integral_v<T> && std::is_floating_point_v<R>) return static_cast<long double>(static_cast<R>(a));
  else return static_cast<long double>(a);
}

/// What op c must give at (a, b). Bitwise the C library's result where that is NaN, an
/// infinity or a zero; at a special operand (`special`) also where the exact result is
/// representable (then bitwise that value: glibc's tanh of some tiny doubles is an ulp off);
/// elsewhere within c.ulps of the exact value.
template <class T, class R>
expected<R> expect(const op_case<T, R>& c, T a, T b, bool special) {
  expected<R> e;
  e.want = c.ref(a, b);
  if constexpr (std::is_floating_point_v<R>) {
    if (c.exact) {
      e.value = c.exact(operand<T, R>(a), operand<T, R>(b));
      e.bitwise = !std::isfinite(e.want) || e.want == 0 || !std::isfinite(e.value);
      const R rounded = static_cast<R>(e.value);
      if (!e.bitwise && special && static_cast<long double>(rounded) == e.value) {
        e.bitwise = true;
        if (!same_bits(rounded, e.want)) {
          e.note = " (the C library gives " + show(e.want) + ")";
          e.want = rounded;
        }
      }
    }
  }
  return e;
}

/// Empty when got is right, else why not.
template <class R>
std::string judge(R got, const expected<R>& e, double ulps) {
  if constexpr (std::is_floating_point_v<R>) {
    if (!e.bitwise && std::isfinite(got) && got != 0) {
      const long double off = ulps_off(got, e.value);
      if (off <= ulps) return "";
      std::ostringstream os;
      os << std::setprecision(3) << static_cast<double>(off) << " ulps off, " << ulps << " allowed";
      return os.str();
    }
    if (same_bits(got, e.want)) return "";
    if (!e.bitwise) return "NaN, a zero or an infinity where the exact result is a finite nonzero value";
  }
  if (same_bits(got, e.want)) return "";
  return "not bitwise the reference";
}

/// The class of a floating-point result that every mode must agree on: NaN, +-inf, +-0, or a
/// finite nonzero value of either sign.
template <class R>
std::string value_class(R v) {
  if constexpr (std::is_floating_point_v<R>) {
    const char* sign = std::signbit(v) ? "-" : "+";
    switch (std::fpclassify(v)) {
      case FP_NAN: return "NaN";
      case FP_INFINITE: return std::string(sign) + "inf";
      case FP_ZERO: return std::string(sign) + "0";
      default: return std::string(sign) + "finite";
    }
  } else {
    return "";
  }
}

std::string position(std::size_t i, std::size_t n) {
  if (i == 3) return "i=3 (SIMD batch)";
  if (i == n - 1) return "i=" + std::to_string(i) + " (scalar tail)";
  if (i == n - 2) return "i=" + std::to_string(i) + " (tail with 8/16 lanes)";
  return "i=" + std::to_string(i) + " (ordinary value)";
}

/// Failures grouped by what went wrong, so that one message lists every length and position.
class failure_log {
 public:
  void add(const std::string& what, const std::string& where) {
    auto [it, fresh] = m_groups.try_emplace(what);
    if (fresh) m_order.push_back(what);
    auto& list = it->second;
    if (std::find(list.begin(), list.end(), where) == list.end()) list.push_back(where);
  }
  void report(std::size_t most = 60) const {
    for (std::size_t k = 0; k < m_order.size() && k < most; ++k) {
      const auto& where = m_groups.at(m_order[k]);
      std::string at;
      for (std::size_t j = 0; j < where.size(); ++j) at += (j ? ", " : "") + where[j];
      FAIL_CHECK(m_order[k] << "\n    at " << at);
    }
    if (m_order.size() > most) FAIL_CHECK("... and " << m_order.size() - most << " more failing cases of this kind");
  }
  bool empty() const { return m_order.empty(); }

 private:
  std::map<std::string, std::vector<std::string>> m_groups;
  std::vector<std::string> m_order;
};

template <class T>
xt::xtensor<T, 1> filled(std::size_t n, T v) {
  xt::xtensor<T, 1> a(std::array<std::size_t, 1>{n});
  std::fill(a.begin(), a.end(), v);
  return a;
}

template <class T>
xt::xtensor<T, 1> random_array(std::size_t n, const range& r, std::mt19937_64& rng) {
  xt::xtensor<T, 1> a(std::array<std::size_t, 1>{n});
  for (auto& v : a) v = draw<T>(rng, r);
  return a;
}

// ---------------------------------------------------------------------------------------------
// The two drivers: special values (in batch and tail), and ordinary random values
// ---------------------------------------------------------------------------------------------
template <class T, class R>
std::string operands_text(const op_case<T, R>& c, T a, T b) {
  return c.arity == 1 ? "x = " + show(a) : "x = " + show(a) + ", y = " + show(b);
}

/// Every special operand (pair) at indices 3, n-2 and n-1 of arrays of ordinary values, lengths
/// 37 and 19, in every mode; every element checked (outputs 0 and 1 of the fused mode: the op
/// through one more fused step, and the op itself); and every mode's result at the special
/// positions of the same class (NaN, +-inf, +-0, +-finite) as FAST_RUN's.
template <class T, class R>
void check_specials(const op_case<T, R>& c) {
  std::vector<std::pair<T, T>> cases;
  if (c.arity == 1) {
    for (T a : c.xs) cases.push_back({a, T(1)});
  } else {
    for (T a : c.xs)
      for (T b : c.ys) cases.push_back({a, b});
    cases.insert(cases.end(), c.pairs.begin(), c.pairs.end());
  }
  std::vector<runner<T, R>> fs;
  for (mode_id m : all_modes) fs.push_back(compile(c, m));
  const std::string label = c.name + " on " + type_name<T>();
  INFO(label);
  failure_log log;
  std::mt19937_64 rng(seed_of(label));
  for (std::size_t n : {std::size_t{37}, std::size_t{19}}) {
    const auto fx = random_array<T>(n, c.ranges[0][0], rng);
    const auto fy = random_array<T>(n, c.ranges[0][1], rng);
    const auto one = filled<R>(n, R(1));
    const std::size_t at[] = {3, n - 2, n - 1};
    for (const auto& [a, b] : cases) {
      auto x = fx, y = fy;
      for (std::size_t i : at) x(i) = a, y(i) = b;
      std::vector<std::vector<xt::xtensor<R, 1>>> results;
      for (std::size_t k = 0; k < fs.size(); ++k) {
        results.push_back(fs[k](x, y, one));
        const auto& outs = results.back();
        for (std::size_t o = 0; o < std::min<std::size_t>(outs.size(), 2); ++o) {
          for (std::size_t i = 0; i < n; ++i) {
            const bool special = i == 3 || i >= n - 2;
            const expected<R> e = expect(c, x(i), y(i), special);
            const R got = outs[o](i);
            const std::string why = judge(got, e, c.ulps);
            if (why.empty()) continue;
            std::ostringstream what;
            what << label << ", mode " << mode_name(all_modes[k]) << (outs.size() > 1 ? ", output " + std::to_string(o) : "")
                 << ": " << operands_text(c, x(i), y(i)) << ": got " << show(got) << ", want " << show(e.want) << e.note;
            if (!e.bitwise) what << " (exact " << std::setprecision(21) << static_cast<double>(e.value) << ")";
            what << " [" << why << "]";
            log.add(what.str(), "n=" + std::to_string(n) + " " + position(i, n));
          }
        }
      }
      // The modes agree with each other on the class of every special result.
      if constexpr (std::is_floating_point_v<R>) {
        for (std::size_t k = 1; k < fs.size(); ++k)
          for (std::size_t i : at) {
            const R base = results[0][0](i), other = results[k][0](i);
            if (value_class(base) == value_class(other)) continue;
            std::ostringstream what;
            what << label << ": modes disagree at " << operands_text(c, a, b) << ": " << mode_name(mode_id::fast_run)
                 << " gives " << show(base) << ", " << mode_name(all_modes[k]) << " gives " << show(other);
            log.add(what.str(), "n=" + std::to_string(n) + " " + position(i, n));
          }
      }
    }
  }
  log.report();
  CHECK(log.empty());
}

/// Ordinary random values (1037 of them: batches and a tail) from each of the op's ranges, in
/// every mode: within the op's documented ulps of the exact result, bitwise for exact ops.
template <class T, class R>
void check_ordinary(const op_case<T, R>& c) {
  std::vector<runner<T, R>> fs;
  for (mode_id m : all_modes) fs.push_back(compile(c, m));
  const std::string label = c.name + " on " + type_name<T>();
  INFO(label);
  std::mt19937_64 rng(seed_of(label + " ordinary"));
  const std::size_t n = 1037;
  for (std::size_t r = 0; r < c.ranges.size(); ++r) {
    const auto x = random_array<T>(n, c.ranges[r][0], rng);
    const auto y = random_array<T>(n, c.ranges[r][1], rng);
    const auto one = filled<R>(n, R(1));
    for (std::size_t k = 0; k < fs.size(); ++k) {
      const auto outs = fs[k](x, y, one);
      for (std::size_t o = 0; o < std::min<std::size_t>(outs.size(), 2); ++o) {
        std::size_t bad = 0, first = n;
        long double worst = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const expected<R> e = expect(c, x(i), y(i), false);
          const R got = outs[o](i);
          if constexpr (std::is_floating_point_v<R>)
            if (!e.bitwise && std::isfinite(got)) worst = std::max(worst, ulps_off(got, e.value));
          if (judge(got, e, c.ulps).empty()) continue;
          if (!bad++) first = i;
        }
        if (!bad) continue;
        const expected<R> e = expect(c, x(first), y(first), false);
        std::ostringstream os;
        os << label << ", mode " << mode_name(all_modes[k]) << (outs.size() > 1 ? ", output " + std::to_string(o) : "")
           << ", ordinary inputs from range " << r << " [" << c.ranges[r][0].lo << ", " << c.ranges[r][0].hi << "]: "
           << bad << " of " << n << " elements wrong (" << c.ulps << " ulps allowed; worst "
           << std::setprecision(3) << static_cast<double>(worst) << " ulps); first at " << position(first, n) << ": "
           << operands_text(c, x(first), y(first)) << ": got " << show(outs[o](first)) << ", want " << show(e.want)
           << " [" << judge(outs[o](first), e, c.ulps) << "]";
        FAIL_CHECK(os.str());
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The ops
// ---------------------------------------------------------------------------------------------
template <class T>
T pick(double for_float, double for_double) {
  return static_cast<T>(std::is_same_v<T, float> ? for_float : for_double);
}

template <class T>
op_case<T, T> neg_case() {
  op_case<T, T> c = unary<T>(
      "neg", [](const var1<T>& x) { return -x; },
      [](T a) {
        if constexpr (std::is_integral_v<T>) return wrap_neg(a);
        else return T(-a);
      });
  if constexpr (std::is_integral_v<T>) c.ranges = {{range{-1e12, 1e12}, range{}}};
  return c;
}

template <class T>
op_case<T, T> abs_case() {
  op_case<T, T> c = unary<T>(
      "abs", [](const var1<T>& x) { return xsym::abs(x); },
      [](T a) {
        if constexpr (std::is_integral_v<T>) return a < 0 ? wrap_neg(a) : a;  // abs(min) is min
        else return std::fabs(a);
      });
  if constexpr (std::is_integral_v<T>) c.ranges = {{range{-1e12, 1e12}, range{}}};
  return c;
}

template <class T>
op_case<T, T> sqrt_case() {
  op_case<T, T> c = unary<T>(
      "sqrt", [](const var1<T>& x) { return xsym::sqrt(x); }, [](T a) { return std::sqrt(a); }, {}, 0,
      {T(4), T(2), T(0.25)});
  c.ranges = {{range{0, 9}, range{}}, {range{1e-30, 1e30, true}, range{}}};
  return c;
}

template <class T>
op_case<T, T> exp_case() {
  // Finite results up to ln(max) (709.78 / 88.72), subnormal ones from ln(min) (-708.40 /
  // -87.34) down to ln(denorm_min / 2) (-745.13 / -103.97); past them inf and 0.
  const std::vector<T> edges =
      std::is_same_v<T, float>
          ? std::vector<T>{T(88.38f), T(88.5f), T(88.7f), T(88.72f), T(89.0f), T(-87.34f), T(-90.0f), T(-95.0f),
                           T(-100.0f), T(-103.0f), T(-103.97f), T(-105.0f)}
          : std::vector<T>{T(709.44), T(709.5), T(709.7), T(709.78), T(710.0), T(-708.40), T(-710.0), T(-720.0),
                           T(-740.0), T(-745.0), T(-745.13), T(-746.0)};
  op_case<T, T> c = unary<T>(
      "exp", [](const var1<T>& x) { return xsym::exp(x); }, [](T a) { return std::exp(a); },
      [](long double a) { return std::exp(a); }, 2, edges);
  c.ranges = {{range{-10, 10}, range{}}, {range{pick<T>(-87, -708), pick<T>(88.7, 709.7)}, range{}}};
  return c;
}

template <class T>
op_case<T, T> expm1_case() {
  const std::vector<T> edges =
      std::is_same_v<T, float>
          ? std::vector<T>{T(88.38f), T(88.5f), T(88.7f), T(88.72f), T(89.0f), T(-20.0f), T(-100.0f), T(1e-10f), T(-1e-10f)}
          : std::vector<T>{T(709.44), T(709.5), T(709.7), T(709.78), T(710.0), T(-40.0), T(-1000.0), T(1e-20), T(-1e-20)};
  op_case<T, T> c = unary<T>(
      "expm1", [](const var1<T>& x) { return xsym::expm1(x); }, [](T a) { return std::expm1(a); },
      [](long double a) { return std::expm1(a); }, 2, edges);
  c.ranges = {{range{-5, 5}, range{}}, {range{pick<T>(-80, -700), pick<T>(88.7, 709.7)}, range{}}};
  return c;
}

template <class T>
op_case<T, T> log_case() {
  op_case<T, T> c = unary<T>(
      "log", [](const var1<T>& x) { return xsym::log(x); }, [](T a) { return std::log(a); },
      [](long double a) { return std::log(a); }, 1, {T(2), T(0.5), T(-2)});
  c.ranges = {{range{0.01, 100}, range{}}, {range{pick<T>(1.2e-38, 2.3e-308), pick<T>(3e38, 1.7e308), true}, range{}}};
  return c;
}

template <class T>
op_case<T, T> log1p_case() {
  op_case<T, T> c = unary<T>(
      "log1p", [](const var1<T>& x) { return xsym::log1p(x); }, [](T a) { return std::log1p(a); },
      [](long double a) { return std::log1p(a); }, 1,
      {std::nextafter(T(-1), T(0)), T(-2), T(-0.5), T(1e-30), T(-1e-30)});
  // 1e-30 to 1e-10: every float lane of a batch below 2^-25, where log1p(x) is x (a vector of
  // them returns x as it is).
  c.ranges = {{range{-0.9, 10}, range{}},
              {range{1e-20, 1e-3, true}, range{}},
              {range{1, 1e30, true}, range{}},
              {range{1e-30, 1e-10, true}, range{}}};
  return c;
}

template <class T>
op_case<T, T> tanh_case() {
  op_case<T, T> c = unary<T>(
      "tanh", [](const var1<T>& x) { return xsym::tanh(x); }, [](T a) { return std::tanh(a); },
      [](long double a) { return std::tanh(a); }, 2, {T(20), T(-20), T(1e-20), T(-1e-20), T(0.5)});
  c.ranges = {{range{-5, 5}, range{}}, {range{1e-20, 0.5, true}, range{}}};
  return c;
}

long double sigmoid_exact(long double a) { return 1 / (1 + std::exp(-a)); }
// log1p(exp(x)), as x + log1p(exp(-x)) for positive x (expl overflows past 11356).
long double softplus_exact(long double a) {
  return a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a));
}

template <class T>
op_case<T, T> sigmoid_case() {
  // float32 from -88.72 down to -103.97 (float64: -708.40 to -745.13): subnormal results ~ e^x.
  const std::vector<T> edges =
      std::is_same_v<T, float>
          ? std::vector<T>{T(-87.34f), T(-88.72f), T(-95.0f), T(-100.0f), T(-103.0f), T(-103.97f), T(-105.0f),
                           T(17.0f), T(88.72f), T(100.0f)}
          : std::vector<T>{T(-708.40), T(-720.0), T(-740.0), T(-745.13), T(-746.0), T(37.0), T(709.78), T(800.0)};
  op_case<T, T> c = unary<T>(
      "sigmoid", [](const var1<T>& x) { return xsym::sigmoid(x); },
      [](T a) { return static_cast<T>(sigmoid_exact(a)); }, sigmoid_exact, 3, edges);
  c.ranges = {{range{-20, 20}, range{}}, {range{pick<T>(-87, -708), pick<T>(87, 708)}, range{}}};
  c.partners = {[](const var1<T>& x) { return xsym::softplus(x); }, [](const var1<T>& x) { return xsym::sigmoid(-x); }};
  return c;
}

template <class T>
op_case<T, T> softplus_case() {
  const std::vector<T> edges =
      std::is_same_v<T, float>
          ? std::vector<T>{T(-87.34f), T(-95.0f), T(-100.0f), T(-103.97f), T(-105.0f), T(20.0f), T(88.72f), T(100.0f),
                           T(1e10f)}
          : std::vector<T>{T(-708.40), T(-720.0), T(-745.13), T(-746.0), T(40.0), T(709.78), T(800.0), T(1e300)};
  op_case<T, T> c = unary<T>(
      "softplus", [](const var1<T>& x) { return xsym::softplus(x); },
      [](T a) { return static_cast<T>(softplus_exact(a)); }, softplus_exact, 2, edges);
  c.ranges = {{range{-20, 20}, range{}}, {range{pick<T>(-87, -708), pick<T>(87, 708)}, range{}}};
  c.partners = {[](const var1<T>& x) { return xsym::sigmoid(x); }, [](const var1<T>& x) { return xsym::softplus(-x); }};
  return c;
}

template <class T>
op_case<T, T> add_case() {
  auto c = binary<T, T>(
      "add", [](const var1<T>& x, const var1<T>& y) { return x + y; },
      [](T a, T b) {
        if constexpr (std::is_integral_v<T>) return wrap_add(a, b);
        else return T(a + b);
      });
  c.ranges = {{range{-100, 100}, range{-100, 100}}};
  if constexpr (std::is_integral_v<T>) c.ranges.push_back({range{-1e300, 1e300}, range{-1e300, 1e300}});  // the whole range
  return c;
}

template <class T>
op_case<T, T> sub_case() {
  auto c = binary<T, T>(
      "sub", [](const var1<T>& x, const var1<T>& y) { return x - y; },
      [](T a, T b) {
        if constexpr (std::is_integral_v<T>) return wrap_sub(a, b);
        else return T(a - b);
      });
  c.ranges = {{range{-100, 100}, range{-100, 100}}};
  if constexpr (std::is_integral_v<T>) c.ranges.push_back({range{-1e300, 1e300}, range{-1e300, 1e300}});
  return c;
}

template <class T>
op_case<T, T> mul_case() {
  auto c = binary<T, T>(
      "mul", [](const var1<T>& x, const var1<T>& y) { return x * y; },
      [](T a, T b) {
        if constexpr (std::is_integral_v<T>) return wrap_mul(a, b);
        else return T(a * b);
      });
  c.ranges = {{range{-100, 100}, range{-100, 100}}};
  if constexpr (std::is_integral_v<T>) c.ranges.push_back({range{-1e300, 1e300}, range{-1e300, 1e300}});
  return c;
}

// numpy's maximum and minimum: a NaN in either operand is the result; on a tie (-0, +0) the
// first operand.
template <class T>
T maximum_ref(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? b : a;
}
template <class T>
T minimum_ref(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return b < a ? b : a;
}

template <class T>
op_case<T, T> maximum_case() {
  auto c = binary<T, T>(
      "maximum", [](const var1<T>& x, const var1<T>& y) { return xsym::maximum(x, y); }, maximum_ref<T>);
  c.ranges = {{range{-3, 3, false, true}, range{-3, 3, false, true}}};
  return c;
}

template <class T>
op_case<T, T> minimum_case() {
  auto c = binary<T, T>(
      "minimum", [](const var1<T>& x, const var1<T>& y) { return xsym::minimum(x, y); }, minimum_ref<T>);
  c.ranges = {{range{-3, 3, false, true}, range{-3, 3, false, true}}};
  return c;
}

template <class T>
std::vector<op_case<T, bool>> comparison_cases() {
  using B = std::function<var1<bool>(const var1<T>&, const var1<T>&)>;
  using F = std::function<bool(T, T)>;
  const std::vector<std::tuple<std::string, B, F>> ops = {
      {"gt", [](const var1<T>& x, const var1<T>& y) { return x > y; }, [](T a, T b) { return a > b; }},
      {"lt", [](const var1<T>& x, const var1<T>& y) { return x < y; }, [](T a, T b) { return a < b; }},
      {"ge", [](const var1<T>& x, const var1<T>& y) { return x >= y; }, [](T a, T b) { return a >= b; }},
      {"le", [](const var1<T>& x, const var1<T>& y) { return x <= y; }, [](T a, T b) { return a <= b; }},
      {"eq", [](const var1<T>& x, const var1<T>& y) { return x == y; }, [](T a, T b) { return a == b; }},
      {"neq", [](const var1<T>& x, const var1<T>& y) { return x != y; }, [](T a, T b) { return a != b; }},
  };
  std::vector<op_case<T, bool>> cs;
  for (const auto& [name, build, ref] : ops) {
    cs.push_back(binary<T, bool>(name, build, ref));
    cs.back().ranges = {{range{-2, 2, false, true}, range{-2, 2, false, true}}};
  }
  return cs;
}

// pow per C and IEEE 754 (std::pow), special values included.
template <class T>
op_case<T, T> pow_case() {
  auto c = binary<T, T>(
      "pow", [](const var1<T>& x, const var1<T>& y) { return xsym::pow(x, y); },
      [](T a, T b) { return static_cast<T>(std::pow(a, b)); });
  c.exact = [](long double a, long double b) { return std::pow(a, b); };
  c.ulps = 1;
  using L = std::numeric_limits<T>;
  const T nan = L::quiet_NaN(), inf = L::infinity();
  c.ys = plus(c.ys, {T(2), T(3), T(-2), T(-3), T(0.5), T(-0.5)});
  c.pairs = {{T(0), T(0)},     {T(0), T(-1)},     {T(-0.0), T(-1)}, {T(-0.0), T(-2)},  {T(-0.0), T(3)},
             {T(-0.0), T(2)},  {nan, T(0)},       {nan, T(-0.0)},   {T(1), nan},       {T(1), inf},
             {T(1), -inf},     {T(-1), inf},      {T(-1), -inf},    {inf, T(0)},       {-inf, T(0)},
             {-inf, T(3)},     {-inf, T(-3)},     {-inf, T(2)},     {-inf, T(-2)},     {T(0.5), inf},
             {T(0.5), -inf},   {T(2), inf},       {T(2), -inf},     {T(-3), T(2)},     {T(-3), T(3)},
             {T(-2), T(-3)},   {T(-8), T(1) / 3}, {T(0), -inf},     {T(-0.0), -inf},   {T(2), T(0.5)},
             {T(10), T(-2)},   {T(1290), T(3)}};
  if constexpr (std::is_same_v<T, float>)
    c.pairs.insert(c.pairs.end(), {{0.5f, 149.0f}, {0.5f, 150.0f}, {2.0f, 127.9f}, {2.0f, 128.0f}, {2.0f, -149.0f},
                                   {-2.0f, 127.0f}, {10.0f, 38.0f}, {10.0f, -45.0f}});
  else
    c.pairs.insert(c.pairs.end(), {{0.5, 1074.0}, {0.5, 1075.0}, {2.0, 1023.9}, {2.0, 1024.0}, {2.0, -1074.0},
                                   {-2.0, 1023.0}, {10.0, 308.0}, {10.0, -323.0}});
  c.ranges = {{range{0.5, 3}, range{-3, 3}},
              {range{-3, -0.5}, range{-6, 6, false, true}},  // negative bases, whole exponents
              {range{0.01, 100, true}, range{-15, 15}}};
  return c;
}

// pow of integers: computed in float64 (numpy's float_power; the graph casts the operands).
template <class T>
op_case<T, double> int_pow_case() {
  auto c = binary<T, double>(
      "pow", [](const var1<T>& x, const var1<T>& y) { return xsym::pow(x, y); },
      [](T a, T b) { return std::pow(static_cast<double>(a), static_cast<double>(b)); });
  c.exact = [](long double a, long double b) { return std::pow(a, b); };
  c.ulps = 1;
  c.ys = {T(0), T(1), T(2), T(3), T(-1), T(-2)};  // small exponents
  c.pairs = {{T(1290), T(3)}, {T(-1290), T(3)}, {T(46341), T(2)}, {T(2), T(30)}, {T(-2), T(31)}, {T(10), T(9)}};
  c.ranges = {{range{-20, 20}, range{0, 3}}};
  return c;
}

template <class T>
op_case<T, T> sqr_case() {
  op_case<T, T> c = unary<T>(
      "sqr", [](const var1<T>& x) { return xsym::sqr(x); },
      [](T a) {
        if constexpr (std::is_integral_v<T>) return wrap_mul(a, a);
        else return T(a * a);
      });
  if constexpr (std::is_integral_v<T>) c.ranges = {{range{-1e12, 1e12}, range{}}};
  return c;
}

// x / y: IEEE division; integers are divided in float64.
template <class T>
auto true_div_case() {
  using R = std::conditional_t<std::is_floating_point_v<T>, T, double>;
  auto c = binary<T, R>(
      "true_div", [](const var1<T>& x, const var1<T>& y) { return x / y; },
      [](T a, T b) { return static_cast<R>(static_cast<R>(a) / static_cast<R>(b)); });
  c.ranges = {{range{-100, 100}, range{0.25, 4}}};
  return c;
}

// pow(x, k) with k a constant: the rewrites may replace it (pow(x, 2) by sqr(x), pow(x, 1) by
// x), but never by something that differs at a special value (pow(-0, 0.5) is +0 where sqrt
// gives -0; pow(-inf, 0.5) is inf where sqrt gives NaN; pow(NaN, 0) is 1).
template <class T>
op_case<T, T> pow_constant_case(T k) {
  std::ostringstream name;
  name << "pow(x, " << k << ")";
  op_case<T, T> c = unary<T>(
      name.str(), [k](const var1<T>& x) { return xsym::pow(x, k); },
      [k](T a) { return static_cast<T>(std::pow(a, k)); }, [k](long double a) { return std::pow(a, static_cast<long double>(k)); },
      1, {T(-2), T(0.5), T(3), T(-8)});
  c.ranges = {{range{0.5, 3}, range{}}};
  return c;
}

// Casts of floats to integers: NaN, infinities and values out of range give the minimum.
template <class T, class I>
op_case<T, I> cast_case() {
  op_case<T, I> c;
  c.name = std::string("cast to ") + type_name<I>();
  c.arity = 1;
  c.build = [](const var1<T>& x, const var1<T>&) { return xsym::cast<I>(x); };
  c.ref = [](T a, T) { return xsym::convert_value<I>(a); };
  c.xs = plus(specials<T>(), {T(3e9), T(-3e9), T(2147483648.0), T(-2147483648.0), T(2147483520.0), T(-2147483520.0),
                              T(0x1p63), T(-0x1p63), T(1e19), T(-1e19), T(2.7), T(-2.7), T(0.5), T(-0.5)});
  if constexpr (std::is_same_v<T, double>)
    c.xs = plus(c.xs, {2147483647.0, 2147483647.5, -2147483648.5, -2147483649.0, 9223372036854774784.0,
                       -9223372036854774784.0});
  c.ranges = {{range{-1000, 1000}, range{}}};
  return c;
}

}  // namespace

// =============================================================================================
// Unary ops at special values
// =============================================================================================
TEST_CASE("neg: special values bitwise (neg(+0) is -0; int neg(min) wraps to min), batch and tail, every mode",
          "[edges][neg]") {
  check_specials(neg_case<float>());
  check_specials(neg_case<double>());
  check_specials(neg_case<std::int32_t>());
  check_specials(neg_case<std::int64_t>());
}

TEST_CASE("abs: special values bitwise (abs(-0) is +0, abs(-inf) is inf; int abs(min) is min), batch and tail, "
          "every mode",
          "[edges][abs]") {
  check_specials(abs_case<float>());
  check_specials(abs_case<double>());
  check_specials(abs_case<std::int32_t>());
  check_specials(abs_case<std::int64_t>());
}

TEST_CASE("sqrt: special values bitwise (sqrt(-0) is -0, sqrt(-1) NaN, subnormals), batch and tail, every mode",
          "[edges][sqrt]") {
  check_specials(sqrt_case<float>());
  check_specials(sqrt_case<double>());
}

TEST_CASE("exp: special values, finite results up to ln(max), subnormal results down to ln(denorm_min/2), batch "
          "and tail, every mode",
          "[edges][exp]") {
  check_specials(exp_case<float>());
  check_specials(exp_case<double>());
}

TEST_CASE("expm1: special values (expm1(-0) is -0), finite results up to ln(max), batch and tail, every mode",
          "[edges][expm1]") {
  check_specials(expm1_case<float>());
  check_specials(expm1_case<double>());
}

TEST_CASE("log: special values (log(+-0) is -inf, log of a subnormal is finite, log(-x) NaN), batch and tail, "
          "every mode",
          "[edges][log]") {
  check_specials(log_case<float>());
  check_specials(log_case<double>());
}

TEST_CASE("log1p: special values (log1p(-0) is -0, log1p(-1) is -inf, subnormals kept), batch and tail, every mode",
          "[edges][log1p]") {
  check_specials(log1p_case<float>());
  check_specials(log1p_case<double>());
}

TEST_CASE("tanh: special values (tanh(-0) is -0, tanh(+-inf) is +-1, subnormals kept), batch and tail, every mode",
          "[edges][tanh]") {
  check_specials(tanh_case<float>());
  check_specials(tanh_case<double>());
}

TEST_CASE("sigmoid: special values (NaN, sigmoid(inf) = 1, sigmoid(-inf) = +0) and subnormal results near the "
          "bottom, not 0, batch and tail, every mode",
          "[edges][sigmoid]") {
  check_specials(sigmoid_case<float>());
  check_specials(sigmoid_case<double>());
}

TEST_CASE("softplus: special values (softplus(inf) = inf, softplus(-inf) = +0, NaN) and subnormal results near the "
          "bottom, batch and tail, every mode",
          "[edges][softplus]") {
  check_specials(softplus_case<float>());
  check_specials(softplus_case<double>());
}

// =============================================================================================
// Binary ops at every pair of special values
// =============================================================================================
TEST_CASE("add, sub, mul: every pair of special values bitwise (ints wrap around), batch and tail, every mode",
          "[edges][arithmetic]") {
  check_specials(add_case<float>());
  check_specials(add_case<double>());
  check_specials(add_case<std::int32_t>());
  check_specials(add_case<std::int64_t>());
  check_specials(sub_case<float>());
  check_specials(sub_case<double>());
  check_specials(sub_case<std::int32_t>());
  check_specials(sub_case<std::int64_t>());
  check_specials(mul_case<float>());
  check_specials(mul_case<double>());
  check_specials(mul_case<std::int32_t>());
  check_specials(mul_case<std::int64_t>());
}

TEST_CASE("maximum and minimum: NaN from either operand, the first operand on a (-0, +0) tie, batch and tail, "
          "every mode",
          "[edges][maximum][minimum]") {
  check_specials(maximum_case<float>());
  check_specials(maximum_case<double>());
  check_specials(maximum_case<std::int32_t>());
  check_specials(maximum_case<std::int64_t>());
  check_specials(minimum_case<float>());
  check_specials(minimum_case<double>());
  check_specials(minimum_case<std::int32_t>());
  check_specials(minimum_case<std::int64_t>());
}

TEST_CASE("comparisons: every pair of special values (NaN compares false but !=, -0 == +0), batch and tail, "
          "every mode",
          "[edges][comparisons]") {
  for (const auto& c : comparison_cases<float>()) check_specials(c);
  for (const auto& c : comparison_cases<double>()) check_specials(c);
  for (const auto& c : comparison_cases<std::int32_t>()) check_specials(c);
  for (const auto& c : comparison_cases<std::int64_t>()) check_specials(c);
}

TEST_CASE("pow: C/IEEE special cases (pow(0,-1) = inf, pow(-0,-1) = -inf, pow(NaN,0) = 1, pow(1,NaN) = 1, "
          "pow(-3,2) = 9, subnormal and near-overflow results) and every pair of special values, batch and tail, "
          "every mode",
          "[edges][pow]") {
  check_specials(pow_case<float>());
  check_specials(pow_case<double>());
}

TEST_CASE("pow of int32 and int64 with small exponents: float64 results, exact where representable "
          "(pow(1290, 3) = 2146689000), batch and tail, every mode",
          "[edges][pow]") {
  check_specials(int_pow_case<std::int32_t>());
  check_specials(int_pow_case<std::int64_t>());
}

TEST_CASE("cast of NaN, infinities and out-of-range floats to int32 and int64 gives the integer minimum, batch and "
          "tail, every mode",
          "[edges][cast]") {
  check_specials(cast_case<float, std::int32_t>());
  check_specials(cast_case<float, std::int64_t>());
  check_specials(cast_case<double, std::int32_t>());
  check_specials(cast_case<double, std::int64_t>());
}

TEST_CASE("cast of floats to bool: nonzero is true, NaN is true, -0 is false, batch and tail, every mode",
          "[edges][cast]") {
  check_specials(cast_case<float, bool>());
  check_specials(cast_case<double, bool>());
}

TEST_CASE("sqr: special values bitwise (sqr(-0) is +0, sqr(-inf) is inf; ints wrap around), batch and tail, "
          "every mode",
          "[edges][sqr]") {
  check_specials(sqr_case<float>());
  check_specials(sqr_case<double>());
  check_specials(sqr_case<std::int32_t>());
  check_specials(sqr_case<std::int64_t>());
}

TEST_CASE("true_div: every pair of special values bitwise (x / +-0 is +-inf, 0 / 0 NaN; ints divide in float64), "
          "batch and tail, every mode",
          "[edges][true_div]") {
  check_specials(true_div_case<float>());
  check_specials(true_div_case<double>());
  check_specials(true_div_case<std::int32_t>());
  check_specials(true_div_case<std::int64_t>());
}

TEST_CASE("pow with a constant exponent (0, 0.5, 1, 2, 3, -1) gives C's pow at special values, whatever the "
          "rewrites make of it, batch and tail, every mode",
          "[edges][pow]") {
  for (float k : {0.0f, 0.5f, 1.0f, 2.0f, 3.0f, -1.0f}) check_specials(pow_constant_case<float>(k));
  for (double k : {0.0, 0.5, 1.0, 2.0, 3.0, -1.0}) check_specials(pow_constant_case<double>(k));
}

// =============================================================================================
// Ordinary values
// =============================================================================================
TEST_CASE("transcendental ops on ordinary random inputs are within their documented ulps (pow 1, exp 2, expm1 2, "
          "tanh 2, log 1, log1p 1, sigmoid 3, softplus 2) in every mode",
          "[edges][ordinary]") {
  check_ordinary(exp_case<float>());
  check_ordinary(exp_case<double>());
  check_ordinary(expm1_case<float>());
  check_ordinary(expm1_case<double>());
  check_ordinary(log_case<float>());
  check_ordinary(log_case<double>());
  check_ordinary(log1p_case<float>());
  check_ordinary(log1p_case<double>());
  check_ordinary(tanh_case<float>());
  check_ordinary(tanh_case<double>());
  check_ordinary(sigmoid_case<float>());
  check_ordinary(sigmoid_case<double>());
  check_ordinary(softplus_case<float>());
  check_ordinary(softplus_case<double>());
  check_ordinary(pow_case<float>());
  check_ordinary(pow_case<double>());
  check_ordinary(int_pow_case<std::int32_t>());
  check_ordinary(int_pow_case<std::int64_t>());
}

TEST_CASE("exact ops (sqrt, neg, abs, add, sub, mul, maximum, minimum, casts) on ordinary random inputs are "
          "bitwise the std:: result in every mode",
          "[edges][ordinary]") {
  check_ordinary(sqrt_case<float>());
  check_ordinary(sqrt_case<double>());
  check_ordinary(neg_case<float>());
  check_ordinary(neg_case<double>());
  check_ordinary(neg_case<std::int32_t>());
  check_ordinary(neg_case<std::int64_t>());
  check_ordinary(abs_case<float>());
  check_ordinary(abs_case<double>());
  check_ordinary(abs_case<std::int32_t>());
  check_ordinary(abs_case<std::int64_t>());
  check_ordinary(add_case<float>());
  check_ordinary(add_case<std::int32_t>());
  check_ordinary(add_case<std::int64_t>());
  check_ordinary(sub_case<double>());
  check_ordinary(sub_case<std::int32_t>());
  check_ordinary(mul_case<float>());
  check_ordinary(mul_case<std::int64_t>());
  check_ordinary(maximum_case<float>());
  check_ordinary(minimum_case<double>());
  check_ordinary(cast_case<float, std::int32_t>());
  check_ordinary(cast_case<double, std::int64_t>());
}

// =============================================================================================
// Single properties
// =============================================================================================
namespace {
template <class T>
void check_neg_zero() {
  const auto x = xsym::vector<T>("x");
  const std::size_t n = 37;
  std::mt19937_64 rng(seed_of(std::string("neg zero ") + type_name<T>()));
  auto a = random_array<T>(n, range{1, 2}, rng);
  a(3) = T(0), a(n - 2) = T(0), a(n - 1) = -T(0);
  for (mode_id m : plain_modes) {
    auto f = build_in(m, [&](auto option) {
      return xsym::function("neg_zero", xsym::inputs(x), xsym::outputs(-x, 1.0 / (-x)), option);
    });
    const auto [neg, recip] = f(a);
    for (std::size_t i = 0; i < n; ++i) {
      INFO(type_name<T>() << ", mode " << mode_name(m) << ", " << position(i, n) << ", x = " << show(a(i))
                          << ": -x = " << show(neg(i)) << ", 1 / (-x) = " << show(recip(i)));
      CHECK(same_bits(neg(i), T(-a(i))));
      CHECK(same_bits(recip(i), T(T(1) / T(-a(i)))));
    }
  }
}
}  // namespace

TEST_CASE("neg(+0) is -0: 1 / (-x) at x = +0 is -inf (and +inf at x = -0), in every mode", "[edges][neg]") {
  check_neg_zero<float>();
  check_neg_zero<double>();
}

TEST_CASE("integer literals that an int32 tensor cannot hold throw at graph build, naming the value", "[edges][literals]") {
  const auto x = xsym::vector<std::int32_t>("x");
  CHECK_THROWS_AS(x > std::int64_t(3000000000), xsym::graph_error);
  CHECK_THROWS_WITH(x > std::int64_t(3000000000), Catch::Contains("3000000000"));
  CHECK_THROWS_AS(x + std::int64_t(3000000000), xsym::graph_error);
  CHECK_THROWS_WITH(x + std::int64_t(3000000000), Catch::Contains("3000000000"));
  CHECK_THROWS_AS(std::int64_t(3000000000) + x, xsym::graph_error);
  CHECK_THROWS_WITH(x - std::int64_t(-3000000000), Catch::Contains("-3000000000"));
  CHECK_THROWS_WITH(x == std::int64_t(2147483648), Catch::Contains("2147483648"));
  // Numbers that fit are fine, and keep the tensor's type.
  const auto y = x + std::int64_t(5);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>::value_type, std::int32_t>);
  const auto z = x > std::int64_t(-2147483648LL);
  const xt::xtensor<std::int32_t, 1> a = {1, -7, 100, 2147483647, -2147483647 - 1};
  for (mode_id m : plain_modes) {
    INFO("mode " << mode_name(m));
    auto f = build_in(m, [&](auto option) { return xsym::function("literals", xsym::inputs(x), xsym::outputs(y, z), option); });
    const auto [sum, above] = f(a);
    CHECK(sum == xt::xtensor<std::int32_t, 1>{6, -2, 105, -2147483644, -2147483643});  // wrapping, as numpy's int32
    CHECK(above == xt::xtensor<bool, 1>{true, true, true, true, false});
  }
}

TEST_CASE("mean of int64 [INT64_MAX, INT64_MAX] is 9.223372036854775807e18, computed in float64", "[edges][mean]") {
  const auto x = xsym::vector<std::int64_t>("x");
  const auto x32 = xsym::vector<std::int32_t>("x32");
  const xt::xtensor<std::int64_t, 1> big = {std::numeric_limits<std::int64_t>::max(),
                                            std::numeric_limits<std::int64_t>::max()};
  const xt::xtensor<std::int32_t, 1> big32 = {std::numeric_limits<std::int32_t>::max(),
                                              std::numeric_limits<std::int32_t>::max(),
                                              std::numeric_limits<std::int32_t>::max()};
  for (mode_id m : plain_modes) {
    INFO("mode " << mode_name(m));
    auto f = build_in(m, [&](auto option) { return xsym::function("mean64", xsym::inputs(x), xsym::mean(x), option); });
    const double got = f(big);
    INFO("got " << show(got));
    CHECK(same_bits(got, 9.223372036854775807e18));
    auto g = build_in(m, [&](auto option) { return xsym::function("mean32", xsym::inputs(x32), xsym::mean(x32), option); });
    const double got32 = g(big32);
    INFO("int32 mean: got " << show(got32));
    CHECK(same_bits(got32, 2147483647.0));
  }
}

namespace {
// The modes of the rewrite tests: the three plain ones and FAST_RUN without fast_math.
struct rewrite_mode {
  const char* name;
  int id;
};
constexpr rewrite_mode rewrite_modes[] = {{"FAST_RUN", 0},
                                          {"FAST_COMPILE", 1},
                                          {"optimizer_excluding=fusion:inplace", 2},
                                          {"optimizer_excluding=fast_math", 3}};

template <class F>
auto build_rewrite_mode(int id, F&& make) {
  switch (id) {
    case 1: return make(xsym::mode("FAST_COMPILE"));
    case 2: return make(xsym::optimizer_excluding("fusion:inplace"));
    case 3: return make(xsym::optimizer_excluding("fast_math"));
    default: return make(xsym::mode("FAST_RUN"));
  }
}

// w - c1 * (c2 * w + dot(m, v)) with some w non-finite or huge: numpy's result (each step
// rounded in float64) elsewhere; at the marked elements `want` in every mode but FAST_RUN.
void check_rewrite(double c1, double c2, const std::vector<std::pair<std::size_t, double>>& marked, double want,
                   const std::string& text) {
  const auto w = xsym::vector<double>("w");
  const auto v = xsym::vector<double>("v");
  const auto m = xsym::matrix<double>("m");
  const auto e = w - c1 * (c2 * w + xsym::dot(m, v));
  const std::size_t n = 37, k = 19;
  std::mt19937_64 rng(seed_of(text));
  auto wv = random_array<double>(n, range{-1, 1}, rng);
  const auto vv = random_array<double>(k, range{-1, 1}, rng);
  xt::xtensor<double, 2> mv(std::array<std::size_t, 2>{n, k});
  for (auto& a : mv) a = draw<double>(rng, range{-1, 1});
  for (const auto& [i, value] : marked) wv(i) = value;
  std::vector<double> numpy(n);
  std::vector<bool> is_marked(n, false);
  for (const auto& [i, value] : marked) is_marked[i] = true;
  for (std::size_t i = 0; i < n; ++i) {
    long double d = 0;
    for (std::size_t j = 0; j < k; ++j) d += static_cast<long double>(mv(i, j)) * vv(j);
    numpy[i] = wv(i) - c1 * (c2 * wv(i) + static_cast<double>(d));
  }
  for (const auto& mode : rewrite_modes) {
    INFO(text << ", mode " << mode.name);
    try {
      auto f = build_rewrite_mode(mode.id, [&](auto option) {
        return xsym::function("rewrite", xsym::inputs(w, m, v), xsym::outputs(e), option);
      });
      const auto [got] = f(wv, mv, vv);
      for (std::size_t i = 0; i < n; ++i) {
        INFO(position(i, n) << ", w = " << show(wv(i)) << ": got " << show(got(i)) << ", numpy gives "
                            << show(numpy[i]));
        if (is_marked[i]) {
          // FAST_RUN and fusion:inplace keep gemv_scale_fold (tag fast_math): the folded value,
          // as docs/semantics.md says; the other modes give the literal formula's.
          const bool folds = mode.id == 0 || mode.id == 2;
          const double folded = (1 - c1 * c2) * wv(i);
          if (folds) CHECK(same_bits(got(i), folded));
          else CHECK(same_bits(got(i), want));
        } else {
          CHECK(std::fabs(got(i) - numpy[i]) <= 1e-14 * (1 + std::fabs(numpy[i])));
        }
      }
    } catch (const xsym::compile_error& err) {
      FAIL_CHECK("the function does not build: " << err.what());
    }
  }
}
}  // namespace

TEST_CASE("rewrites keep IEEE results: w - 0.01 * (0.01 * w + dot(m, v)) at w = inf is NaN (as numpy) in "
          "FAST_COMPILE and without fast_math, the folded inf with it",
          "[edges][rewrites]") {
  const double inf = std::numeric_limits<double>::infinity();
  check_rewrite(0.01, 0.01, {{3, inf}, {35, -inf}, {36, inf}}, std::numeric_limits<double>::quiet_NaN(),
                "w - 0.01 * (0.01 * w + dot(m, v)), w = +-inf");
}

TEST_CASE("rewrites keep IEEE overflow: w - 2 * (w + dot(m, v)) at w = 1e308 is -inf (as numpy) in FAST_COMPILE "
          "and without fast_math, the folded -1e308 with it",
          "[edges][rewrites]") {
  check_rewrite(2.0, 1.0, {{3, 1e308}, {35, 1e308}, {36, 1e308}}, -std::numeric_limits<double>::infinity(),
                "w - 2 * (w + dot(m, v)), w = 1e308");
}

namespace {
// sigmoid(-x) alone, and beside softplus(x) (where the two share exp(-|x|)): the same subnormal
// at x = big (float32 100: 27 * 2^-149 = 3.78e-44; float64 720: 2.1e-313), in every mode.
template <class T>
void check_sigmoid_pair(T big) {
  const auto x = xsym::vector<T>("x");
  const std::size_t n = 37;
  std::mt19937_64 rng(seed_of(std::string("sigmoid pair ") + type_name<T>()));
  auto a = random_array<T>(n, range{-5, 5}, rng);
  const std::size_t at[] = {3, n - 2, n - 1};
  for (std::size_t i : at) a(i) = big;
  const T want = static_cast<T>(sigmoid_exact(-static_cast<long double>(big)));
  REQUIRE(std::fpclassify(want) == FP_SUBNORMAL);
  for (mode_id m : plain_modes) {
    auto alone = build_in(m, [&](auto option) {
      return xsym::function("sigmoid_alone", xsym::inputs(x), xsym::outputs(xsym::sigmoid(-x)), option);
    });
    auto pair = build_in(m, [&](auto option) {
      return xsym::function("sigmoid_pair", xsym::inputs(x), xsym::outputs(xsym::sigmoid(-x), xsym::softplus(x)),
                            option);
    });
    const auto [s1] = alone(a);
    const auto [s2, sp] = pair(a);
    for (std::size_t i = 0; i < n; ++i) {
      INFO(type_name<T>() << ", mode " << mode_name(m) << ", " << position(i, n) << ", x = " << show(a(i))
                          << ": sigmoid(-x) alone " << show(s1(i)) << ", beside softplus(x) " << show(s2(i))
                          << ", softplus(x) " << show(sp(i)));
      if (a(i) == big) {
        CHECK(same_bits(s1(i), want));
        CHECK(same_bits(s2(i), want));
        CHECK(same_bits(sp(i), big));
      } else {
        CHECK(ulps_off(s1(i), sigmoid_exact(-static_cast<long double>(a(i)))) <= 3);
        CHECK(ulps_off(s2(i), sigmoid_exact(-static_cast<long double>(a(i)))) <= 3);
        CHECK(ulps_off(sp(i), softplus_exact(a(i))) <= 2);
      }
    }
  }
}
}  // namespace

TEST_CASE("sigmoid(-x) alone and sigmoid(-x) beside softplus(x) give the same subnormal at x = 100 (3.78e-44 in "
          "float32) in every mode",
          "[edges][sigmoid][softplus]") {
  check_sigmoid_pair<float>(100.0f);
  check_sigmoid_pair<double>(720.0);
}

TEST_CASE("a finite double literal that would round to infinity next to a float32 tensor throws at graph build",
          "[edges][literals]") {
  const auto x = xsym::vector<float>("x");
  CHECK_THROWS_AS(x * 1e300, xsym::graph_error);
  CHECK_THROWS_WITH(x * 1e300, Catch::Contains("1e+300"));
  CHECK_THROWS_AS(x + 3.5e38, xsym::graph_error);
  CHECK_THROWS_AS(-1e39 - x, xsym::graph_error);
  CHECK_NOTHROW(x * 3.4e38);
  CHECK_NOTHROW(x * std::numeric_limits<double>::infinity());
  CHECK_NOTHROW(x * 1e-300);
}

namespace {
template <class T>
void check_reduction_nan() {
  const auto x = xsym::vector<T>("x");
  const auto m = xsym::matrix<T>("m");
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  std::mt19937_64 rng(seed_of(std::string("reduction nan ") + type_name<T>()));
  for (std::size_t n : {std::size_t{37}, std::size_t{19}}) {
    for (std::size_t at : {std::size_t{0}, std::size_t{3}, n - 2, n - 1}) {
      auto a = random_array<T>(n, range{-4, 4}, rng);
      a(at) = nan;
      a((at + 5) % n) = inf;
      a((at + 7) % n) = -inf;
      xt::xtensor<T, 2> b(std::array<std::size_t, 2>{3, n});
      for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t j = 0; j < n; ++j) b(r, j) = a((j + r) % n);  // one NaN per row, at another column
      for (mode_id md : plain_modes) {
        INFO(type_name<T>() << ", mode " << mode_name(md) << ", n=" << n << ", NaN at " << position(at, n));
        auto f = build_in(md, [&](auto option) {
          return xsym::function("max_min", xsym::inputs(x), xsym::outputs(xsym::max(x), xsym::min(x)), option);
        });
        const auto [mx, mn] = f(a);
        INFO("max " << show(mx) << ", min " << show(mn));
        CHECK(std::isnan(mx));
        CHECK(std::isnan(mn));
        auto g = build_in(md, [&](auto option) {
          return xsym::function("max_min_rows", xsym::inputs(m), xsym::outputs(xsym::max(m, 1), xsym::min(m, 0)), option);
        });
        const auto [rows, cols] = g(b);
        for (std::size_t r = 0; r < 3; ++r) {
          INFO("row " << r << ": max " << show(rows(r)));
          CHECK(std::isnan(rows(r)));
        }
        for (std::size_t j = 0; j < n; ++j) {
          bool has_nan = false;
          T want = b(0, j);
          for (std::size_t r = 0; r < 3; ++r) {
            has_nan |= std::isnan(b(r, j));
            want = std::min(want, b(r, j));
          }
          INFO("column " << j << ": min " << show(cols(j)));
          if (has_nan) CHECK(std::isnan(cols(j)));
          else CHECK(same_bits(cols(j), want));
        }
      }
    }
  }
}
}  // namespace

TEST_CASE("max and min reductions are NaN when any element is NaN, wherever it sits (batch or tail), every mode",
          "[edges][reductions]") {
  check_reduction_nan<float>();
  check_reduction_nan<double>();
}

namespace {
// numpy's all and any along axis 1 of a rows x cols matrix, by loops: true and false where a
// row is empty.
template <class T>
std::pair<std::vector<bool>, std::vector<bool>> all_any_rows(const xt::xtensor<T, 2>& m) {
  std::vector<bool> every, some;
  for (std::size_t i = 0; i < m.shape(0); ++i) {
    bool e = true, s = false;
    for (std::size_t j = 0; j < m.shape(1); ++j) {
      e = e && m(i, j) != T(0);
      s = s || m(i, j) != T(0);
    }
    every.push_back(e);
    some.push_back(s);
  }
  return {every, some};
}

template <class T>
void check_all_any_empty() {
  const auto x = xsym::vector<T>("x");
  const auto m = xsym::matrix<T>("m");
  for (mode_id mode : plain_modes) {
    INFO(type_name<T>() << ", mode " << mode_name(mode));
    auto f = build_in(mode, [&](auto option) {
      return xsym::function("all_any", xsym::inputs(x, m),
                            xsym::outputs(xsym::all(x), xsym::any(x), xsym::all(m, 1), xsym::any(m, 1), xsym::all(m, 0)),
                            option);
    });
    // Empty ones first ((2, 0): every row empty; (0, 3): no rows), then ones with values.
    const std::vector<xt::xtensor<T, 2>> ms = {xt::xtensor<T, 2>(xt::empty<T>({2, 0})),
                                               xt::xtensor<T, 2>(xt::empty<T>({0, 3})),
                                               xt::xtensor<T, 2>{{T(1), T(0), T(2)}, {T(3), T(4), T(5)}, {T(0), T(0), T(0)}}};
    const std::vector<xt::xtensor<T, 1>> xs = {xt::xtensor<T, 1>(xt::empty<T>({0})), xt::xtensor<T, 1>{T(1), T(0)},
                                               xt::xtensor<T, 1>{T(2), T(3)}, xt::xtensor<T, 1>{T(0), T(0)}};
    for (const auto& X : xs)
      for (const auto& M : ms) {
        INFO("x of " << X.size() << " elements, m of shape (" << M.shape(0) << ", " << M.shape(1) << ")");
        bool every = true, some = false;
        for (T v : X) {
          every = every && v != T(0);
          some = some || v != T(0);
        }
        const auto [rows_all, rows_any] = all_any_rows(M);
        std::vector<bool> cols_all(M.shape(1), true);
        for (std::size_t i = 0; i < M.shape(0); ++i)
          for (std::size_t j = 0; j < M.shape(1); ++j) cols_all[j] = cols_all[j] && M(i, j) != T(0);
        const auto [a, s, ar, sr, ac] = f(X, M);
        CHECK(a == every);
        CHECK(s == some);
        REQUIRE(ar.size() == rows_all.size());
        REQUIRE(ac.size() == cols_all.size());
        for (std::size_t i = 0; i < ar.size(); ++i) {
          CHECK(ar(i) == rows_all[i]);
          CHECK(sr(i) == rows_any[i]);
        }
        for (std::size_t j = 0; j < ac.size(); ++j) CHECK(ac(j) == cols_all[j]);
      }
  }
}
}  // namespace

TEST_CASE("all and any of an empty tensor or axis are true and false (numpy's), every mode", "[edges][reductions]") {
  check_all_any_empty<float>();
  check_all_any_empty<double>();
  check_all_any_empty<std::int32_t>();
  check_all_any_empty<bool>();
  // max and min of an empty float axis still have no identity.
  const auto x = xsym::vector<float>("x");
  auto f = xsym::function("mn", xsym::inputs(x), xsym::min(x));
  CHECK_THROWS_WITH(f(xt::xtensor<float, 1>(xt::empty<float>({0}))), Catch::Contains("which has no identity"));
}

namespace {
// numpy's sign: 1 above 0, -1 below, +0 at either zero, NaN at NaN.
template <class T>
void check_sign_zero_nan() {
  const auto x = xsym::vector<T>("x");
  const std::size_t n = 37;
  std::mt19937_64 rng(seed_of(std::string("sign ") + type_name<T>()));
  auto a = random_array<T>(n, range{-2, 2}, rng);
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const T special[] = {-T(0), T(0), nan, inf, -inf, std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min()};
  for (std::size_t k = 0; k < 7; ++k) {
    a(k) = special[k];          // in a SIMD batch
    a(n - 7 + k) = special[k];  // in the tail
  }
  for (mode_id m : plain_modes) {
    auto f = build_in(m, [&](auto option) { return xsym::function("sign", xsym::inputs(x), xsym::sign(x), option); });
    const xt::xtensor<T, 1> got = f(a);
    for (std::size_t i = 0; i < n; ++i) {
      INFO(type_name<T>() << ", mode " << mode_name(m) << ", " << position(i, n) << ", x = " << show(a(i))
                          << ": sign = " << show(got(i)));
      if (std::isnan(a(i))) CHECK(std::isnan(got(i)));
      else CHECK(same_bits(got(i), a(i) > 0 ? T(1) : a(i) < 0 ? T(-1) : T(+0.0)));
    }
  }
}
}  // namespace

TEST_CASE("sign(-0) is +0 and sign(NaN) NaN (numpy's), batch and tail, every mode", "[edges][sign]") {
  check_sign_zero_nan<float>();
  check_sign_zero_nan<double>();
}

// =============================================================================================
// The C library's functions lane by lane (trigonometric, hyperbolic, erf, log2, log10, exp2) and
// the exact roundings: bitwise the C library at every special value, within its ulps elsewhere.
// =============================================================================================
#define XSYM_LIBM_CASE(op, cfn, ulps, ...)                                                                  \
  template <class T>                                                                                        \
  op_case<T, T> op##_case() {                                                                               \
    op_case<T, T> c = unary<T>(                                                                             \
        #op, [](const var1<T>& x) { return xsym::op(x); }, [](T a) { return std::cfn(a); },              \
        [](long double a) { return std::cfn(a); }, ulps, {__VA_ARGS__});                                   \
    return c;                                                                                               \
  }
XSYM_LIBM_CASE(sin, sin, 1, T(3.14159274), T(1e-30), T(-1e-30), T(1e20))
XSYM_LIBM_CASE(cos, cos, 1, T(1.5707964), T(1e20))
XSYM_LIBM_CASE(tan, tan, 2, T(1.5707964), T(-1.5707964))
XSYM_LIBM_CASE(arcsin, asin, 1, T(1), T(-1), std::nextafter(T(1), T(2)))
XSYM_LIBM_CASE(arccos, acos, 1, T(1), T(-1), std::nextafter(T(-1), T(-2)))
XSYM_LIBM_CASE(arctan, atan, 1, T(1e30), T(-1e30))
XSYM_LIBM_CASE(sinh, sinh, 2, T(89), T(-89), T(711), T(1e-30))
XSYM_LIBM_CASE(cosh, cosh, 2, T(89), T(-89), T(711))
XSYM_LIBM_CASE(arcsinh, asinh, 2, T(1e30), T(-1e-30))
XSYM_LIBM_CASE(arccosh, acosh, 2, T(1), T(0.5), T(1e30))
XSYM_LIBM_CASE(arctanh, atanh, 2, T(1), T(-1), T(1.5), T(1e-30))
XSYM_LIBM_CASE(erf, erf, 2, T(6), T(-6), T(1e-30))
XSYM_LIBM_CASE(erfc, erfc, 5, T(10), T(27), T(-6), T(1e-30))
XSYM_LIBM_CASE(log2, log2, 1, T(1), T(8), T(-1))
XSYM_LIBM_CASE(log10, log10, 2, T(1), T(1000), T(-1))
XSYM_LIBM_CASE(exp2, exp2, 1, T(128), T(-149), T(-150), T(1024), T(-1075))
#undef XSYM_LIBM_CASE
#define XSYM_ROUNDING_CASE(op, cfn)                                                                         \
  template <class T>                                                                                        \
  op_case<T, T> op##_case() {                                                                               \
    return unary<T>(                                                                                        \
        #op, [](const var1<T>& x) { return xsym::op(x); }, [](T a) { return std::cfn(a); }, {}, 0,         \
        {T(0.5), T(-0.5), T(1.5), T(2.5), T(-2.5), T(-0.49999997), T(8388607.5), T(4503599627370495.5), T(1e30)}); \
  }
XSYM_ROUNDING_CASE(floor, floor)
XSYM_ROUNDING_CASE(ceil, ceil)
XSYM_ROUNDING_CASE(round, nearbyint)
#undef XSYM_ROUNDING_CASE

TEST_CASE("the C library's functions (sin .. arctanh, erf, erfc, log2, log10, exp2): special values bitwise, batch "
          "and tail, every mode",
          "[edges][libm]") {
#define XSYM_BOTH(op)                 \
  check_specials(op##_case<float>()); \
  check_specials(op##_case<double>());
  XSYM_BOTH(sin) XSYM_BOTH(cos) XSYM_BOTH(tan) XSYM_BOTH(arcsin) XSYM_BOTH(arccos) XSYM_BOTH(arctan)
  XSYM_BOTH(sinh) XSYM_BOTH(cosh) XSYM_BOTH(arcsinh) XSYM_BOTH(arccosh) XSYM_BOTH(arctanh)
  XSYM_BOTH(erf) XSYM_BOTH(erfc) XSYM_BOTH(log2) XSYM_BOTH(log10) XSYM_BOTH(exp2)
#undef XSYM_BOTH
}

TEST_CASE("the C library's functions on ordinary random inputs are within their ulps (1 or 2, erfc 5) in every mode",
          "[edges][libm][ordinary]") {
#define XSYM_BOTH(op)                 \
  check_ordinary(op##_case<float>()); \
  check_ordinary(op##_case<double>());
  XSYM_BOTH(sin) XSYM_BOTH(cos) XSYM_BOTH(tan) XSYM_BOTH(arcsin) XSYM_BOTH(arccos) XSYM_BOTH(arctan)
  XSYM_BOTH(sinh) XSYM_BOTH(cosh) XSYM_BOTH(arcsinh) XSYM_BOTH(arccosh) XSYM_BOTH(arctanh)
  XSYM_BOTH(erf) XSYM_BOTH(erfc) XSYM_BOTH(log2) XSYM_BOTH(log10) XSYM_BOTH(exp2)
#undef XSYM_BOTH
}

TEST_CASE("floor, ceil and round (half to even, numpy's) are exact: halves, -0, large values, NaN, infinities, "
          "batch and tail, every mode",
          "[edges][rounding]") {
  check_specials(floor_case<float>());
  check_specials(floor_case<double>());
  check_specials(ceil_case<float>());
  check_specials(ceil_case<double>());
  check_specials(round_case<float>());
  check_specials(round_case<double>());
  check_ordinary(floor_case<float>());
  check_ordinary(ceil_case<double>());
  check_ordinary(round_case<float>());
  check_ordinary(round_case<double>());
}
