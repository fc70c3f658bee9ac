// Every elementwise op against a plain loop computed in double, on every dtype it accepts,
// for sizes that exercise the SIMD bodies, their tails and the fused kernels' blocks, with
// both the vectorized (cvm) and the reference (py) kernels.
#include "expr_util.hpp"

#include <cstring>
#include <fstream>

#include <xtensor/xadapt.hpp>

using namespace xsym_test;

namespace {

const char* const linkers[] = {"cvm", "py"};

// The element type numpy gives a unary function of T.
template <class T, bool FloatOnly>
using unary_result_t = std::conditional_t<FloatOnly && !std::is_floating_point_v<T>, double, T>;

using unary_ref = double (*)(double);
using binary_ref = double (*)(double, double);

// The loops, instantiated once per (input type, result type), not once per op: compile time.
template <class T, class R>
void run_unary(const char* op, const xsym::var<T, 1>& x, const xsym::var<R, 1>& e, unary_ref ref, double lo,
               double hi) {
  std::mt19937 rng(20240601);
  for (const char* l : linkers) {
    auto f = xsym::function(op, xsym::inputs(x), e, xsym::linker(l));
    for (std::size_t n : sizes) {
      INFO("linker " << l << ", size " << n);
      const auto a = random_tensor<T, 1>(rng, {n}, lo, hi);
      const xt::xtensor<R, 1> r = f(a);
      std::vector<double> expected(n);
      for (std::size_t i = 0; i < n; ++i) expected[i] = ref(static_cast<double>(a(i)));
      CHECK(differences(r, expected) == "");
    }
  }
}

template <class T, bool FloatOnly, class Build>
void check_unary(const char* op, Build build, unary_ref ref, double lo, double hi) {
  auto x = xsym::vector<T>("x");
  auto e = build(x);
  using R = typename decltype(e)::value_type;
  INFO(op << " on " << type_name<T>());
  CHECK(std::is_same_v<R, unary_result_t<T, FloatOnly>>);
  run_unary<T, R>(op, x, e, ref, lo, hi);
}

enum class result_kind { same, float_only, comparison };

template <class T, result_kind K>
using binary_result_t = std::conditional_t<K == result_kind::comparison, bool,
                                           std::conditional_t<K == result_kind::float_only && !std::is_floating_point_v<T>,
                                                              double, T>>;

struct range {
  double lo, hi;
};

struct binary_case {
  range a, b;
  bool ties = false;      // make a third of the pairs equal (comparisons, maximum, minimum)
  bool nonzero_b = false;  // b is a divisor
};

// op(vector, vector), op(vector, scalar tensor) and op(scalar tensor, vector); the loops are
// instantiated once per (input type, result type).
template <class T, class R>
void run_binary(const char* op, const xsym::var<T, 1>& x, const xsym::var<T, 1>& y, const xsym::var<T, 0>& s,
                const xsym::var<R, 1>& vv, const xsym::var<R, 1>& vs, const xsym::var<R, 1>& sv, binary_ref ref,
                const binary_case& c) {
  std::mt19937 rng(777);
  auto fix_b = [&](T v) {
    if constexpr (!std::is_same_v<T, bool>)
      if (c.nonzero_b && v == T(0)) return T(1);
    return v;
  };
  for (const char* l : linkers) {
    auto f_vv = xsym::function(op, xsym::inputs(x, y), vv, xsym::linker(l));
    auto f_vs = xsym::function(op, xsym::inputs(x, s), vs, xsym::linker(l));
    auto f_sv = xsym::function(op, xsym::inputs(s, y), sv, xsym::linker(l));
    for (std::size_t n : sizes) {
      INFO("linker " << l << ", size " << n);
      auto a = random_tensor<T, 1>(rng, {n}, c.a.lo, c.a.hi);
      auto b = random_tensor<T, 1>(rng, {n}, c.b.lo, c.b.hi);
      for (std::size_t i = 0; i < n; ++i) {
        b(i) = fix_b(b(i));
        if (c.ties && i % 3 == 0) b(i) = a(i);
      }
      const T sa = random_value<T>(rng, c.a.lo, c.a.hi);
      const T sb = fix_b(random_value<T>(rng, c.b.lo, c.b.hi));
      if (c.ties && n > 2) {
        a(1) = sa;
        b(2) = sb;
      }
      {
        const xt::xtensor<R, 1> r = f_vv(a, b);
        std::vector<double> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = ref(static_cast<double>(a(i)), static_cast<double>(b(i)));
        INFO("vector op vector");
        CHECK(differences(r, expected) == "");
      }
      {
        // A plain C++ number is accepted for a rank-0 input.
        const xt::xtensor<R, 1> r = f_vs(a, sb);
        std::vector<double> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = ref(static_cast<double>(a(i)), static_cast<double>(sb));
        INFO("vector op scalar");
        CHECK(differences(r, expected) == "");
      }
      {
        xt::xtensor<T, 0> s0;
        s0() = sa;
        const xt::xtensor<R, 1> r = f_sv(s0, b);
        std::vector<double> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = ref(static_cast<double>(sa), static_cast<double>(b(i)));
        INFO("scalar op vector");
        CHECK(differences(r, expected) == "");
      }
    }
  }
}

template <class T, result_kind K, class Build>
void check_binary(const char* op, Build build, binary_ref ref, const binary_case& c) {
  auto x = xsym::vector<T>("x");
  auto y = xsym::vector<T>("y");
  auto s = xsym::scalar<T>("s");
  auto vv = build(x, y);
  auto vs = build(x, s);
  auto sv = build(s, y);
  using R = typename decltype(vv)::value_type;
  INFO(op << " on " << type_name<T>());
  CHECK(std::is_same_v<R, binary_result_t<T, K>>);
  CHECK(std::is_base_of_v<xsym::var<R, 1>, decltype(vs)>);
  CHECK(std::is_base_of_v<xsym::var<R, 1>, decltype(sv)>);
  if constexpr (std::is_base_of_v<xsym::var<R, 1>, decltype(vs)> && std::is_base_of_v<xsym::var<R, 1>, decltype(sv)>)
    run_binary<T, R>(op, x, y, s, vv, vs, sv, ref, c);
}

double ref_sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
double ref_softplus(double a) { return a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a)); }

}  // namespace

TEST_CASE("unary elementwise ops match a loop on every numeric dtype", "[expr][elemwise]") {
  for_each_type(numeric_types{}, []<class T>() {
    check_unary<T, false>("neg", [](auto x) { return -x; }, [](double a) { return -a; }, -100, 100);
    check_unary<T, false>("sqr", [](auto x) { return xsym::sqr(x); }, [](double a) { return a * a; }, -100, 100);
    check_unary<T, false>("abs", [](auto x) { return xsym::abs(x); }, [](double a) { return std::abs(a); }, -100, 100);
    check_unary<T, true>("sqrt", [](auto x) { return xsym::sqrt(x); }, [](double a) { return std::sqrt(a); }, 0, 100);
    check_unary<T, true>("exp", [](auto x) { return xsym::exp(x); }, [](double a) { return std::exp(a); }, -10, 10);
    check_unary<T, true>("log", [](auto x) { return xsym::log(x); }, [](double a) { return std::log(a); }, 0.01, 100);
    check_unary<T, true>("log1p", [](auto x) { return xsym::log1p(x); }, [](double a) { return std::log1p(a); }, -0.9,
                         10);
    check_unary<T, true>("expm1", [](auto x) { return xsym::expm1(x); }, [](double a) { return std::expm1(a); }, -3, 3);
    check_unary<T, true>("tanh", [](auto x) { return xsym::tanh(x); }, [](double a) { return std::tanh(a); }, -5, 5);
    check_unary<T, true>("sigmoid", [](auto x) { return xsym::sigmoid(x); }, ref_sigmoid, -20, 20);
    check_unary<T, true>("softplus", [](auto x) { return xsym::softplus(x); }, ref_softplus, -30, 30);
  });
}

TEST_CASE("float32 exp is within 2 ulps over its range, as are sigmoid and softplus built on it", "[expr][elemwise]") {
  // 600000 arguments from -104 to 89, every SIMD lane used; against double.
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("exp32", xsym::inputs(x), xsym::outputs(xsym::exp(x), xsym::sigmoid(x), xsym::softplus(x)),
                          xsym::optimizer_excluding("fusion"));
  const std::size_t n = 600000;
  xt::xtensor<float, 1> a = xt::empty<float>({n});
  for (std::size_t i = 0; i < n; ++i) a(i) = static_cast<float>(-104.0 + 193.0 * static_cast<double>(i) / n);
  const auto [e, s, p] = f(a);
  auto ulps = [](float got, double want) {
    const float w = static_cast<float>(want);
    const double ulp = std::nextafter(std::abs(w), INFINITY) - std::abs(w);
    return std::abs(static_cast<double>(got) - want) / ulp;
  };
  double worst_exp = 0, worst_sig = 0, worst_sp = 0;
  std::size_t bad_subnormal = 0;
  const double exp_finite_to = 88.7;  // finite up to FLT_MAX (2^k applied as two factors, or scalef)
  for (std::size_t i = 0; i < n; ++i) {
    const double v = a(i), want = std::exp(v);
    const double sig = v >= 0 ? 1 / (1 + std::exp(-v)) : std::exp(v) / (1 + std::exp(v));
    const double sp = std::max(v, 0.0) + std::log1p(std::exp(-std::abs(v)));
    if (static_cast<float>(sig) >= std::numeric_limits<float>::min()) worst_sig = std::max(worst_sig, ulps(s(i), sig));
    worst_sp = std::max(worst_sp, sp >= std::numeric_limits<float>::min() ? ulps(p(i), sp) : 0.0);
    if (v > -87.3 && v < exp_finite_to) worst_exp = std::max(worst_exp, ulps(e(i), want));
    // Subnormal results are kept (xsimd's exp gives 0 below -88.38) and results up to FLT_MAX
    // are finite (xsimd's gives infinity above 88.38).
    if (v <= -87.3 && std::abs(static_cast<double>(e(i)) - want) > 0x1p-149) ++bad_subnormal;
    if (v >= 88.7 && v < 88.72) CHECK(std::isfinite(e(i)));
  }
  CHECK(worst_exp <= 2);
  CHECK(worst_sig <= 3);  // exp, one addition and one division
  CHECK(worst_sp <= 3);
  CHECK(bad_subnormal == 0);
  const xt::xtensor<float, 1> special{NAN, INFINITY, -INFINITY, 89.0f, -105.0f, 0.0f, -0.0f, 1.0f,
                                      NAN, INFINITY, -INFINITY, 89.0f, -105.0f, 0.0f, -0.0f, 1.0f, 2.0f};
  const auto [es, ss, ps] = f(special);
  for (std::size_t i = 0; i < special.size(); ++i) {
    INFO("exp(" << special(i) << ") = " << es(i));
    const float want = std::exp(special(i));
    CHECK((std::isnan(want) ? std::isnan(es(i)) : std::isinf(want) ? es(i) == want : ulps(es(i), want) <= 1));
  }
}

TEST_CASE("float32 log is within 0.75 ulp where AVX-512 runs its table, 1 ulp elsewhere, the C library's at special lanes",
          "[expr][elemwise]") {
  // Where AVX-512 runs the table log, positive normal batches get k ln2 + logc + log1p(r) with
  // the sums' rounding errors kept: within 0.75 ulp of the exact log (every positive normal
  // float was checked once; here random bit patterns, and every float from 0.95 to 1.08, where
  // the table's entries around 1 meet; bench/log_ulps.cpp checks them all). A special lane
  // (zero, -0, a negative, a subnormal, infinity, NaN) gets the C library's log bit for bit, and
  // its neighbours keep the vector path's value. Without AVX-512 the log has no out-of-line
  // lanes: k ln2 + log1p(f) by a polynomial, subnormals scaled first (every positive float was
  // checked once: 0.995 ulp at worst), and zero, negative, infinite and NaN lanes by selects,
  // which give the C library's values.
  using B = xsimd::batch<float>;
  constexpr std::size_t w = B::size;
#if defined(__AVX512F__)
  constexpr bool table_log = true;
  constexpr double bound = 0.75;
#else
  constexpr bool table_log = false;
  constexpr double bound = 1.0;
#endif
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("log32", xsym::inputs(x), xsym::log(x));
  std::mt19937 rng(17);
  const float specials[] = {0.0f, -0.0f, -1.5f, 1e-40f, INFINITY, -INFINITY, NAN, 1.0f};
  auto ulps = [](float got, float v) {
    const double exact = std::log(static_cast<double>(v));
    const float e = static_cast<float>(exact);
    const double ulp = std::nextafter(std::abs(e), INFINITY) - std::abs(e);
    return std::abs(got - exact) / ulp;
  };
  const std::size_t n = 4096 * w;  // whole batches: no element takes the scalar tail
  xt::xtensor<float, 1> a = xt::empty<float>({n});
  std::size_t checked = 0, special_batches = 0, mismatched = 0;
  std::ostringstream first;  // the first few failures
  double worst = 0;
  for (int round = 0; round < 8; ++round) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t bits = 0x00800000u + rng() % (0x7f800000u - 0x00800000u);  // positive normals
      std::memcpy(&a(i), &bits, 4);
    }
    for (std::size_t b = 0; b < n / w; b += 8) a(b * w + rng() % w) = specials[rng() % std::size(specials)];
    if (round == 0)  // the extremes, 1, and the edges of the table's entries around 1
      for (float v : {1.0f, 2.0f, 0.5f, 0.6953125f, 1.390625f, 0.9921875f, 1.015625f, 0.99218744f, 1.0156249f,
                      std::numeric_limits<float>::min(), std::numeric_limits<float>::max()})
        a(3 * w + (checked++ % w)) = v;
    const xt::xtensor<float, 1> got = f(a);
    for (std::size_t i = 0; i < n; i += w) {
      bool special = false;
      for (std::size_t j = 0; j < w; ++j) special |= !(std::isnormal(a(i + j)) && a(i + j) > 0);
      special_batches += special;
      for (std::size_t j = 0; j < w; ++j) {
        const float g = got(i + j), v = a(i + j);
        // Without the table, a subnormal is an ordinary lane (the polynomial's, within 1 ulp).
        const bool subnormal = v > 0 && !std::isnormal(v) && std::isfinite(v);
        const bool lane_special = !(std::isnormal(v) && v > 0) && (table_log || !subnormal);
        const float c = std::log(v);
        ++checked;
        if (lane_special && !(std::memcmp(&g, &c, 4) == 0 || (std::isnan(g) && std::isnan(c))) && ++mismatched <= 5)
          first << "log(" << v << ") = " << g << " against the C library's " << c << "\n";
        if (!lane_special && v > 0) {  // and the value itself, against double
          const double e = ulps(g, v);
          if (e > bound && ++mismatched <= 5) first << "log(" << v << ") = " << g << ": " << e << " ulp\n";
          worst = std::max(worst, e);
        }
      }
    }
  }
  // Every float from 0.95 to 1.08 (1.5 million), in whole batches.
  std::vector<float> dense;
  for (float v = 0.95f; v < 1.08f; v = std::nextafter(v, 2.0f)) dense.push_back(v);
  while (dense.size() % w) dense.push_back(1.0f);
  xt::xtensor<float, 1> d = xt::empty<float>({dense.size()});
  std::copy(dense.begin(), dense.end(), d.begin());
  const xt::xtensor<float, 1> got = f(d);
  for (std::size_t i = 0; i < dense.size(); ++i) {
    const double e = ulps(got(i), d(i));
    if (e > bound && ++mismatched <= 10) first << "log(" << d(i) << ") = " << got(i) << ": " << e << " ulp\n";
    worst = std::max(worst, e);
  }
  INFO(first.str());
  INFO("worst " << worst << " ulp");
  CHECK(mismatched == 0);
  CHECK(worst <= bound);
  CHECK(special_batches > 8 * n / w / 8 / 2);
  CHECK(checked > 8 * n);
  CHECK(dense.size() > 1500000);
}

TEST_CASE("float32 log1p is within 0.77 ulp where AVX-512 runs the table log, xsimd's elsewhere, the C library's at special lanes",
          "[expr][elemwise]") {
  // Where AVX-512 runs the table log, log1p(x) is the table log of u = 1 + x with u's rounding
  // error folded in (every float above -1 was checked once: worst 0.7656 ulp, xsimd's 0.7557;
  // bench/log_ulps.cpp checks them all). A lane with NaN, an infinity, -0 or a value <= -1
  // gets the C library's log1p bit for bit, and its neighbours keep the vector path's value.
  using B = xsimd::batch<float>;
  constexpr std::size_t w = B::size;
#if defined(__AVX512F__)
  constexpr bool table_log = true;
  constexpr double bound = 0.77;
#else
  constexpr bool table_log = false;
  constexpr double bound = 1.0;
#endif
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("log1p32", xsym::inputs(x), xsym::log1p(x));
  std::mt19937 rng(23);
  const float specials[] = {-0.0f, -1.0f, -1.5f, INFINITY, -INFINITY, NAN};
  auto ulps = [](float got, float v) {
    const double exact = std::log1p(static_cast<double>(v));
    const float e = static_cast<float>(exact);
    const double ulp = e == 0 ? std::numeric_limits<float>::denorm_min() : std::nextafter(std::abs(e), INFINITY) - std::abs(e);
    return std::abs(got - exact) / ulp;
  };
  const std::size_t n = 4096 * w;
  xt::xtensor<float, 1> a = xt::empty<float>({n});
  std::size_t checked = 0, special_batches = 0, mismatched = 0;
  std::ostringstream first;
  double worst = 0;
  for (int round = 0; round < 8; ++round) {
    for (std::size_t i = 0; i < n; ++i) {
      // Every finite float above -1: the positive ones (zero and subnormals too) and (-1, 0).
      const std::uint32_t bits = rng() % 2 ? rng() % 0x7f800000u : 0x80000001u + rng() % (0xbf800000u - 0x80000001u);
      std::memcpy(&a(i), &bits, 4);
    }
    for (std::size_t b = 0; b < n / w; b += 8) a(b * w + rng() % w) = specials[rng() % std::size(specials)];
    if (round == 0)  // around u = 1, where the rounding error of 1 + x is most of the result
      for (float v : {0.0f, 1e-30f, 1e-8f, 5.9604645e-8f, -5.9604645e-8f, 1e-4f, -1e-4f, 0.0078125f, -0.0078125f,
                      0.015625f, 1.0f, -0.5f, -0.99999994f, 3.0f, 1e30f, std::numeric_limits<float>::max()})
        a(3 * w + (checked++ % w)) = v;
    const xt::xtensor<float, 1> got = f(a);
    for (std::size_t i = 0; i < n; i += w) {
      alignas(64) float want[w];
      xsimd::log1p(B::load_unaligned(&a(i))).store_aligned(want);
      bool special = false;
      for (std::size_t j = 0; j < w; ++j) {
        const float v = a(i + j);
        special |= std::isnan(v) || std::isinf(v) || v <= -1.0f || (v == 0 && std::signbit(v));
      }
      special_batches += special;
      for (std::size_t j = 0; j < w; ++j) {
        const float g = got(i + j), v = a(i + j);
        const bool lane_special = std::isnan(v) || std::isinf(v) || v <= -1.0f || (v == 0 && std::signbit(v));
        const float c = std::log1p(v);
        ++checked;
        if (lane_special && !(std::memcmp(&g, &c, 4) == 0 || (std::isnan(g) && std::isnan(c))) && ++mismatched <= 5)
          first << "log1p(" << v << ") = " << g << " against the C library's " << c << "\n";
        if (!lane_special && !table_log && std::memcmp(&g, &want[j], 4) != 0 && ++mismatched <= 5)
          first << "log1p(" << v << ") = " << g << " against xsimd's " << want[j] << "\n";
        if (std::isfinite(v) && v > -1.0f && !(v == 0 && std::signbit(v))) {
          const double e = ulps(g, v);
          if (e > bound && ++mismatched <= 5) first << "log1p(" << v << ") = " << g << ": " << e << " ulp\n";
          worst = std::max(worst, e);
        }
      }
    }
  }
  INFO(first.str());
  INFO("worst " << worst << " ulp");
  CHECK(mismatched == 0);
  CHECK(worst <= bound);
  CHECK(special_batches > 8 * n / w / 8 / 2);
  CHECK(checked > 8 * n);
}

TEST_CASE("small arguments keep their precision in log1p, expm1 and softplus", "[expr][elemwise]") {
  // Where log(1 + x) and exp(x) - 1 lose every digit: the stable kernels must not.
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("stable", xsym::inputs(x), xsym::outputs(xsym::log1p(x), xsym::expm1(x), xsym::softplus(x)));
  const xt::xtensor<double, 1> a{1e-10, -1e-12, 3e-15, -800.0, 800.0, -30.0};
  auto [l, e, s] = f(a);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(l(i) == Approx(std::log1p(a(i))).epsilon(1e-12));
    CHECK(e(i) == Approx(std::expm1(a(i))).epsilon(1e-12));
  }
  CHECK(std::isnan(l(3)));
  CHECK(e(3) == -1.0);
  CHECK(std::isinf(e(4)));
  CHECK(s(3) == 0.0);  // exp(-800) underflows; log1p(exp(x)) must not turn it into anything else
  CHECK(s(4) == 800.0);  // log(1 + exp(800)) would be inf
  CHECK(s(5) == Approx(std::log1p(std::exp(-30.0))).epsilon(1e-12));
}

TEST_CASE("sigmoid and softplus of u and -u in one Composite keep their precision when they share exp(-|u|)",
          "[expr][elemwise]") {
  // The vectorized kernels compute these four from one exp(-|u|) and one log1p; checked
  // against long double at the extremes, where 1 / (1 + exp(-u)) and max(u, 0) + ... matter.
  for_each_type(type_list<float, double>{}, []<class T>() {
    auto u = xsym::vector<T>("u");
    auto v = u + T(1);  // a repeated subexpression, computed once
    auto f = xsym::function("shared", xsym::inputs(u),
                            xsym::outputs(xsym::sigmoid(u), xsym::sigmoid(-u), xsym::softplus(u), xsym::softplus(-u),
                                          xsym::sigmoid(v) * xsym::softplus(-v) + xsym::sigmoid(-v)));
    std::vector<T> values{T(-800), T(-120), T(-88), T(-30), T(-1e-3), T(0), T(1e-30), T(1e-3), T(17), T(30), T(120), T(800)};
    for (int i = 0; values.size() < 1037; ++i) values.push_back(T(-40 + 80.0 * i / 1000));
    xt::xtensor<T, 1> a = xt::empty<T>({values.size()});
    std::copy(values.begin(), values.end(), a.begin());
    auto [s_pos, s_neg, p_pos, p_neg, mixed] = f(a);
    using L = long double;
    auto sig = [](L x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); };
    auto sp = [](L x) { return std::max(x, L(0)) + std::log1p(std::exp(-std::abs(x))); };
    const L rel = sizeof(T) == 4 ? 2e-6L : 1e-14L, floor = std::numeric_limits<T>::min();
    auto close = [&](T got, L want) { return std::abs(L(got) - want) <= rel * std::abs(want) + floor; };
    for (std::size_t i = 0; i < values.size(); ++i) {
      const L x = values[i], y = x + 1;
      INFO("u = " << values[i]);
      CHECK(close(s_pos(i), sig(x)));
      CHECK(close(s_neg(i), sig(-x)));
      CHECK(close(p_pos(i), sp(x)));
      CHECK(close(p_neg(i), sp(-x)));
      CHECK(close(mixed(i), sig(y) * sp(-y) + sig(-y)));
    }
  });
}

TEST_CASE("sigmoid(u) and sigmoid(-u) share one reciprocal and keep the bits of a lone sigmoid", "[expr][elemwise]") {
  // With two sigmoids of u and -u, r = 1/(1 + exp(-|u|)) is one step both read; with one, the
  // sigmoid computes the same r itself. Either way the same bits.
  for_each_type(type_list<float, double>{}, []<class T>() {
    auto u = xsym::vector<T>("u");
    auto pair = xsym::function("pair", xsym::inputs(u), xsym::outputs(xsym::sigmoid(u), xsym::sigmoid(-u), xsym::softplus(u)));
    auto lone_pos = xsym::function("lone_pos", xsym::inputs(u), xsym::outputs(xsym::sigmoid(u), xsym::softplus(u)));
    auto lone_neg = xsym::function("lone_neg", xsym::inputs(u), xsym::outputs(xsym::sigmoid(-u), xsym::softplus(u)));
    std::mt19937 rng(31);
    std::normal_distribution<double> normal(0, 20);
    for (std::size_t n : {1, 7, 16, 300, 1037}) {
      xt::xtensor<T, 1> a = xt::empty<T>({n});
      for (auto& v : a) v = static_cast<T>(normal(rng));
      a(0) = T(0);
      const auto [s_pos, s_neg, p_pos] = pair(a);
      const auto [l_pos, lp] = lone_pos(a);
      const auto [l_neg, ln] = lone_neg(a);
      INFO("n = " << n);
      CHECK(std::memcmp(s_pos.data(), l_pos.data(), n * sizeof(T)) == 0);
      CHECK(std::memcmp(s_neg.data(), l_neg.data(), n * sizeof(T)) == 0);
      const double rel = sizeof(T) == 4 ? 3e-7 : 1e-15, floor = std::numeric_limits<T>::min();
      for (std::size_t i = 0; i < n; ++i) {  // and the values themselves
        const double x = a(i), pos_want = 1 / (1 + std::exp(-x)), neg_want = 1 / (1 + std::exp(x));
        CHECK(std::abs(double(s_pos(i)) - pos_want) <= rel * pos_want + floor);
        CHECK(std::abs(double(s_neg(i)) - neg_want) <= rel * neg_want + floor);
      }
    }
  });
}

TEST_CASE("binary arithmetic ops match a loop on every numeric dtype", "[expr][elemwise]") {
  const binary_case plain{{-100, 100}, {-100, 100}};
  const binary_case ties{{-100, 100}, {-100, 100}, true};
  for_each_type(numeric_types{}, [&]<class T>() {
    check_binary<T, result_kind::same>("add", [](auto a, auto b) { return a + b; },
                                       [](double a, double b) { return a + b; }, plain);
    check_binary<T, result_kind::same>("sub", [](auto a, auto b) { return a - b; },
                                       [](double a, double b) { return a - b; }, plain);
    check_binary<T, result_kind::same>("mul", [](auto a, auto b) { return a * b; },
                                       [](double a, double b) { return a * b; }, plain);
    check_binary<T, result_kind::float_only>("true_div", [](auto a, auto b) { return a / b; },
                                             [](double a, double b) { return a / b; },
                                             binary_case{{-100, 100}, {-50, 50}, false, true});
    check_binary<T, result_kind::float_only>("pow", [](auto a, auto b) { return xsym::pow(a, b); },
                                             [](double a, double b) { return std::pow(a, b); },
                                             binary_case{{0.5, 3}, {-3, 3}});
    check_binary<T, result_kind::same>("maximum", [](auto a, auto b) { return xsym::maximum(a, b); },
                                       [](double a, double b) { return std::max(a, b); }, ties);
    check_binary<T, result_kind::same>("minimum", [](auto a, auto b) { return xsym::minimum(a, b); },
                                       [](double a, double b) { return std::min(a, b); }, ties);
  });
}

TEST_CASE("comparisons give bool on every dtype, bool included", "[expr][elemwise]") {
  for_each_type(all_types{}, []<class T>() {
    // Small integers so that ties are frequent even without the forced ones.
    const binary_case c{{-5, 5}, {-5, 5}, true};
    check_binary<T, result_kind::comparison>("gt", [](auto a, auto b) { return a > b; },
                                             [](double a, double b) -> double { return a > b; }, c);
    check_binary<T, result_kind::comparison>("lt", [](auto a, auto b) { return a < b; },
                                             [](double a, double b) -> double { return a < b; }, c);
    check_binary<T, result_kind::comparison>("ge", [](auto a, auto b) { return a >= b; },
                                             [](double a, double b) -> double { return a >= b; }, c);
    check_binary<T, result_kind::comparison>("le", [](auto a, auto b) { return a <= b; },
                                             [](double a, double b) -> double { return a <= b; }, c);
    check_binary<T, result_kind::comparison>("eq", [](auto a, auto b) { return a == b; },
                                             [](double a, double b) -> double { return a == b; }, c);
    check_binary<T, result_kind::comparison>("neq", [](auto a, auto b) { return a != b; },
                                             [](double a, double b) -> double { return a != b; }, c);
  });
}

// C++20 also tries b == a (and !(a == b) for !=): between vars of two types (a typed tree and a plain var, two ranks,
// two trees) that made == ambiguous. Each form against a loop, both orders, broadcasting.
TEST_CASE("== and != compare vars of any two types, in either order", "[expr][elemwise]") {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto m = xsym::matrix<double>("m");
  auto f = xsym::function("eq", xsym::inputs(x, y, m),
                          xsym::outputs((x * 2.0) == y, y != (x * 2.0), (x * 2.0) == (y + 0.0), x == m, 4.0 == y));
  const xt::xtensor<double, 1> X{1, 2, 3}, Y{2, 4, 0};
  const xt::xtensor<double, 2> M{{1, 0, 3}, {0, 2, 0}};
  const auto [a, b, c, d, e] = f(X, Y, M);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(a(i) == (X(i) * 2 == Y(i)));
    CHECK(b(i) == (Y(i) != X(i) * 2));
    CHECK(c(i) == (X(i) * 2 == Y(i) + 0.0));
    CHECK(e(i) == (Y(i) == 4));
    for (std::size_t r = 0; r < 2; ++r) CHECK(d(r, i) == (X(i) == M(r, i)));
  }
}

TEST_CASE("switch_ and where select elementwise on every dtype", "[expr][elemwise]") {
  for_each_type(all_types{}, []<class T>() {
    INFO("switch on " << type_name<T>());
    std::mt19937 rng(99);
    auto c = xsym::vector<bool>("c");
    auto ci = xsym::vector<std::int32_t>("ci");
    auto cs = xsym::scalar<bool>("cs");
    auto x = xsym::vector<T>("x");
    auto y = xsym::vector<T>("y");
    auto sw = xsym::switch_(c, x, y);
    auto wh = xsym::where(ci, x, y);  // a non-bool condition is cast to bool: nonzero is true
    auto sc = xsym::switch_(cs, x, y);
    CHECK(std::is_same_v<typename decltype(sw)::value_type, T>);
    CHECK(std::is_same_v<typename decltype(wh)::value_type, T>);
    for (const char* l : linkers) {
      auto f = xsym::function("switch", xsym::inputs(c, ci, cs, x, y), xsym::outputs(sw, wh, sc), xsym::linker(l));
      for (std::size_t n : sizes) {
        INFO("linker " << l << ", size " << n);
        const auto cond = random_tensor<bool, 1>(rng, {n}, 0, 1);
        const auto condi = random_tensor<std::int32_t, 1>(rng, {n}, -2, 2);
        const auto a = random_tensor<T, 1>(rng, {n}, -50, 50);
        const auto b = random_tensor<T, 1>(rng, {n}, -50, 50);
        for (bool scalar_cond : {false, true}) {
          auto [r1, r2, r3] = f(cond, condi, scalar_cond, a, b);
          std::vector<double> e1(n), e2(n), e3(n);
          for (std::size_t i = 0; i < n; ++i) {
            e1[i] = static_cast<double>(cond(i) ? a(i) : b(i));
            e2[i] = static_cast<double>(condi(i) != 0 ? a(i) : b(i));
            e3[i] = static_cast<double>(scalar_cond ? a(i) : b(i));
          }
          CHECK(differences(r1, e1) == "");
          CHECK(differences(r2, e2) == "");
          CHECK(differences(r3, e3) == "");
        }
      }
    }
  });
}

TEST_CASE("switch_ with C++ numbers takes the weak type", "[expr][elemwise]") {
  auto c = xsym::vector<bool>("c");
  auto xi = xsym::vector<std::int32_t>("xi");
  auto xf = xsym::vector<float>("xf");
  auto a = xsym::switch_(c, xi, 0);    // int32
  auto b = xsym::switch_(c, 1.5, xi);  // a fraction next to ints: float64
  auto d = xsym::switch_(c, xf, 0.25);  // float32 stays float32
  CHECK(std::is_same_v<decltype(a)::value_type, std::int32_t>);
  CHECK(std::is_same_v<decltype(b)::value_type, double>);
  CHECK(std::is_same_v<decltype(d)::value_type, float>);
  auto f = xsym::function("switch_weak", xsym::inputs(c, xi, xf), xsym::outputs(a, b, d));
  const xt::xtensor<bool, 1> cv{true, false, true, false, false};
  const xt::xtensor<std::int32_t, 1> iv{1, 2, 3, 4, 5};
  const xt::xtensor<float, 1> fv{0.5f, 1.5f, 2.5f, 3.5f, 4.5f};
  auto [ra, rb, rd] = f(cv, iv, fv);
  CHECK(differences(ra, {1, 0, 3, 0, 0}) == "");
  CHECK(differences(rb, {1.5, 2, 1.5, 4, 5}) == "");
  CHECK(differences(rd, {0.5, 0.25, 2.5, 0.25, 0.25}) == "");
}

TEST_CASE("cast converts between every pair of dtypes as static_cast does", "[expr][elemwise]") {
  for_each_type(all_types{}, []<class From>() {
    for_each_type(all_types{}, []<class To>() {
      INFO("cast " << type_name<From>() << " -> " << type_name<To>());
      std::mt19937 rng(5);
      auto x = xsym::vector<From>("x");
      auto e = xsym::cast<To>(x);
      CHECK(std::is_same_v<typename decltype(e)::value_type, To>);
      // A cast feeding another op runs inside a fused kernel: compared there with the expected
      // values, passed in as a second input.
      auto want = xsym::vector<To>("want");
      auto g = xsym::cast<To>(x) == want;
      for (const char* l : linkers) {
        auto f = xsym::function("cast", xsym::inputs(x, want), xsym::outputs(e, g), xsym::linker(l));
        for (std::size_t n : sizes) {
          INFO("linker " << l << ", size " << n);
          auto a = random_tensor<From, 1>(rng, {n}, -3.75, 3.75);
          if constexpr (!std::is_same_v<From, bool>)
            for (std::size_t i = 0; i < n; i += 5) a(i) = From(0);  // zero is false, everything else true
          xt::xtensor<To, 1> cast_a = xt::empty<To>({n});
          for (std::size_t i = 0; i < n; ++i) cast_a(i) = static_cast<To>(a(i));
          auto [r, same] = f(a, cast_a);
          std::vector<double> expected(n);
          for (std::size_t i = 0; i < n; ++i) expected[i] = static_cast<double>(cast_a(i));
          CHECK(differences(r, expected) == "");
          CHECK(differences(same, std::vector<double>(n, 1.0)) == "");
        }
      }
    });
  });
}

TEST_CASE("nodes whose inputs are one element each give the general path's bits", "[expr][elemwise]") {
  // Such a node skips broadcasting and spans (exec/cpu_nodes.hpp, run_elemwise_one) but runs the same
  // kernels. Its results must equal, bit for bit, the first element of the same function called
  // on three elements (the general path), for chains, shared exps, comparisons, several outputs,
  // in place and into destinations; and the scalar (rank 0) twin must agree too.
  for_each_type(type_list<float, double>{}, []<class T>() {
    // The three-element call computes its first element as a scalar only where a SIMD batch
    // holds more than three; with narrower ones (SSE2 and NEON doubles) it takes a batch, whose
    // transcendental results (outputs 1 and 2) may differ from the scalar's in the last bit.
    constexpr bool three_are_scalars = xsimd::batch<T>::size > 3;
    auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
    auto outs = [](const auto& a, const auto& b, const auto& c) {
      return xsym::outputs((a + b + c) * T(2), xsym::sigmoid(a) * xsym::softplus(-a) + xsym::sigmoid(-a),
                           xsym::log1p(a * a) / (b * b + T(1)) - c, a > b, T(3) - (a * b) / c);
    };
    auto f = xsym::function("one_element", xsym::inputs(x, y, z), outs(x, y, z));
    auto sx = xsym::scalar<T>("sx"), sy = xsym::scalar<T>("sy"), sz = xsym::scalar<T>("sz");
    auto g = xsym::function("one_element_scalars", xsym::inputs(sx, sy, sz), outs(sx, sy, sz));
    std::mt19937 rng(17);
    std::uniform_real_distribution<T> dist(T(-3), T(3));
    for (int trial = 0; trial < 200; ++trial) {
      const T a = dist(rng), b = dist(rng), c = dist(rng) + T(4);
      const xt::xtensor<T, 1> A{a}, B{b}, C{c};
      const xt::xtensor<T, 1> A3{a, dist(rng), dist(rng)}, B3{b, dist(rng), dist(rng)}, C3{c, T(5), T(6)};
      INFO("a = " << a << ", b = " << b << ", c = " << c);
      const auto one = f(A, B, C);
      const auto three = f(A3, B3, C3);
      const auto scalars = g(a, b, c);
      auto same = [](auto u, auto v) { return std::memcmp(&u, &v, sizeof u) == 0; };
      CHECK(same(std::get<0>(one)(0), std::get<0>(three)(0)));
      if constexpr (three_are_scalars) {
        CHECK(same(std::get<1>(one)(0), std::get<1>(three)(0)));
        CHECK(same(std::get<2>(one)(0), std::get<2>(three)(0)));
        CHECK(same(T(std::get<2>(scalars)), std::get<2>(three)(0)));
      }
      CHECK(same(T(std::get<2>(scalars)), std::get<2>(one)(0)));
      CHECK(std::get<3>(one)(0) == std::get<3>(three)(0));
      CHECK(same(std::get<4>(one)(0), std::get<4>(three)(0)));
      CHECK(same(T(std::get<0>(scalars)), std::get<0>(three)(0)));
      CHECK(same(T(std::get<4>(scalars)), std::get<4>(three)(0)));
      // And the values themselves, against double.
      const double da = a, db = b, dc = c;
      CHECK(std::abs(std::get<0>(one)(0) - (da + db + dc) * 2) <= 1e-5 * (std::abs(da) + std::abs(db) + dc) * 2);
      CHECK(std::abs(std::get<2>(one)(0) - (std::log1p(da * da) / (db * db + 1) - dc)) <= 1e-5 * (3 + dc));
      CHECK(std::get<3>(one)(0) == (a > b));
      // Into a caller's one-element array: written by the node itself.
      xt::xtensor<T, 1> r0{T(0)}, r1{T(0)}, r2{T(0)}, r4{T(0)};
      xt::xtensor<bool, 1> r3{false};
      f.into(r0, r1, r2, r3, r4)(A, B, C);
      CHECK(same(r0(0), std::get<0>(three)(0)));
      CHECK(same(r2(0), std::get<2>(one)(0)));
      CHECK(r3(0) == std::get<3>(three)(0));
    }
  });
}

TEST_CASE("the streaming threshold is 3/8 of the last-level cache that sysfs lists", "[expr][elemwise]") {
  // The highest cache level of CPU 0 that holds data, read here with iostreams; sysconf may
  // report a virtual machine's whole host instead.
  const std::string root = "/sys/devices/system/cpu/cpu0/cache/index";
  int top_level = 0;
  std::int64_t top_bytes = -1;
  for (int i = 0; std::ifstream(root + std::to_string(i) + "/level"); ++i) {
    int level = 0;
    std::string type, size;
    std::ifstream(root + std::to_string(i) + "/level") >> level;
    std::ifstream(root + std::to_string(i) + "/type") >> type;
    std::ifstream(root + std::to_string(i) + "/size") >> size;
    if (type == "Instruction" || size.empty() || level < top_level) continue;
    const char unit = size.back();
    const std::int64_t scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
    top_level = level;
    top_bytes = std::stoll(size) * scale;
  }
  if (top_bytes <= 0) {
    WARN("no cache sizes under /sys on this machine: nothing to compare");
    return;
  }
  CHECK(xsym::cpu::detail::sysfs_llc_bytes() == top_bytes);
  CHECK(xsym::cpu::detail::default_streaming_min_bytes() == top_bytes / 8 * 3);
}

TEST_CASE("nodes too large for the cache stream their outputs with the same results", "[expr][elemwise]") {
  // Above xsym::cpu::streaming_min_bytes() a node writes through scratch with streaming stores
  // and prefetches its next block (a lone op other than a chain writes directly). Lowered to 0
  // here, so small arrays take that path: into destinations starting anywhere in a cache line,
  // spans that end mid-block, several outputs, a broadcast scalar; each against a float64
  // loop, and bitwise against the ordinary path.
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y");
  auto s = xsym::scalar<float>("s");
  auto f = xsym::function("streamed", xsym::inputs(x, y, s),
                          xsym::outputs((x + y + s) * 2.0f, xsym::exp(x), x * y - xsym::log(1.0f + y * y)));
  // One chain alone stores from its registers, the elements before the first cache line as scalars.
  auto g = xsym::function("streamed_chain", xsym::inputs(x, y, s), (x - y * s) * 2.0f + x);
  // A chain with a log link streams only from a cache line's start: its scalar head would take
  // the scalar log where the separate kernels take a batch's.
  auto h = xsym::function("streamed_log_chain", xsym::inputs(x, y), xsym::log(x * x + 2.0f) * y);
  // A lone op other than a chain writes its output directly, streaming or not.
  auto lone = xsym::function("lone_op", xsym::inputs(x), xsym::sigmoid(x));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2, 2);
  // Values v where log(v * v + 2) has other bits on a batch than on a scalar (AVX-512's table
  // log), for the elements a misplaced scalar head would compute.
  std::vector<float> head_values;
  {
    auto u = xsym::vector<float>("u");
    auto s0 = xsym::scalar<float>("s0");
    auto log_batch = xsym::function("log_batch", xsym::inputs(u), xsym::log(u));
    auto log_scalar = xsym::function("log_scalar", xsym::inputs(s0), xsym::log(s0));
    xt::xtensor<float, 1> v = xt::empty<float>({std::size_t(4096)}), arg = xt::empty<float>({std::size_t(4096)});
    for (std::size_t i = 0; i < v.size(); ++i) {
      v(i) = dist(rng);
      const float square = v(i) * v(i);
      arg(i) = square + 2.0f;
    }
    const xt::xtensor<float, 1> batch = log_batch(arg);
    for (std::size_t i = 0; i < v.size() && head_values.size() < 16; ++i)
      if (batch(i) != float(log_scalar(arg(i)))) head_values.push_back(v(i));
  }
  struct restore_threshold {
    std::int64_t saved = xsym::cpu::streaming_min_bytes();
    ~restore_threshold() { xsym::cpu::streaming_min_bytes() = saved; }
  } restore;
  for (std::size_t n : {std::size_t(1), std::size_t(15), std::size_t(70), std::size_t(5003)}) {
    xt::xtensor<float, 1> X = xt::empty<float>({n}), Y = xt::empty<float>({n});
    for (auto& e : X) e = dist(rng);
    for (auto& e : Y) e = dist(rng);
    for (std::size_t i = 0; i < std::min(n, head_values.size()); ++i) X(i) = head_values[i];
    const float S = dist(rng);
    xsym::cpu::streaming_min_bytes() = std::int64_t{1} << 62;
    const auto [a0, b0, c0] = f(X, Y, S);
    const xt::xtensor<float, 1> g0 = g(X, Y, S);
    const xt::xtensor<float, 1> h0 = h(X, Y);
    const xt::xtensor<float, 1> lone0 = lone(X);
    xsym::cpu::streaming_min_bytes() = 0;
    const xt::xtensor<float, 1> lone1 = lone(X);
    CHECK(lone1 == lone0);
    for (std::size_t i = 0; i < n; ++i)
      CHECK(std::abs(lone1(i) - 1 / (1 + std::exp(-double(X(i))))) <= 1e-6);
    std::vector<float> storage(5 * (n + 16) + 16);
    float* line = storage.data();
    while (reinterpret_cast<std::uintptr_t>(line) % 64 != 0) ++line;
    for (std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(13)}) {
      INFO("n = " << n << ", destinations " << offset << " floats past a cache line");
      const std::array<std::size_t, 1> shape{n};
      auto a = xt::adapt(line + offset, n, xt::no_ownership(), shape);
      auto b = xt::adapt(line + offset + (n + 16), n, xt::no_ownership(), shape);
      auto c = xt::adapt(line + offset + 2 * (n + 16), n, xt::no_ownership(), shape);
      f.into(a, b, c)(X, Y, S);
      auto e = xt::adapt(line + offset + 3 * (n + 16), n, xt::no_ownership(), shape);
      g.into(e)(X, Y, S);
      auto k = xt::adapt(line + offset + 4 * (n + 16), n, xt::no_ownership(), shape);
      h.into(k)(X, Y);
      for (std::size_t i = 0; i < n; ++i) {
        const double xi = X(i), yi = Y(i);
        CHECK(std::abs(e(i) - ((xi - yi * S) * 2 + xi)) <= 1e-5 * (3 * std::abs(xi) + 2 * std::abs(yi * S)));
        CHECK(e(i) == g0(i));
        CHECK(k(i) == h0(i));
        CHECK(std::abs(k(i) - std::log(xi * xi + 2) * yi) <= 1e-6 * std::log(xi * xi + 2) * std::abs(yi));
        CHECK(std::abs(a(i) - ((xi + yi + S) * 2)) <= 1e-5 * (std::abs(xi) + std::abs(yi) + std::abs(S)) * 2);
        CHECK(std::abs(b(i) - std::exp(xi)) <= 1e-6 * std::exp(xi));
        CHECK(std::abs(c(i) - (xi * yi - std::log(1 + yi * yi))) <= 1e-5 * (std::abs(xi * yi) + std::log(1 + yi * yi)));
        CHECK(a(i) == a0(i));
        CHECK(b(i) == b0(i));
        CHECK(c(i) == c0(i));
      }
    }
    const auto [a1, b1, c1] = f(X, Y, S);  // the function's own outputs, streamed too
    CHECK(a1 == a0);
    CHECK(b1 == b0);
    CHECK(c1 == c0);
  }
}

TEST_CASE("chains of arithmetic run in one pass with the separate kernels' results", "[expr][elemwise]") {
  // The vectorized set runs a run of add/sub/mul/div, each step taking the one before's
  // result, as one chain kernel (acc on either side, arguments vectors or broadcast scalars,
  // chains longer than one kernel takes). The reference set runs every step apart: the same
  // IEEE operations in the same order, so the results must be equal bit for bit.
  for_each_type(type_list<float, double>{}, []<class T>() {
    auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
    auto s = xsym::scalar<T>("s");
    xsym::var<T, 1> long_chain = x;
    using V = xsym::var<T, 1>;
    for (int k = 0; k < 17; ++k)
      long_chain = k % 4 == 0 ? V(y - long_chain) : k % 4 == 1 ? V(long_chain * s) : k % 4 == 2 ? V(z / long_chain) : V(long_chain + x);
    auto outs = xsym::outputs((x + y + z) * T(2), T(3) - (x * y) / z, s / (x - y * s) + z, long_chain,
                              (x + y) * (x + y) - z);  // the last: its sum is read twice, so no chain through it
    auto fast = xsym::function("chains", xsym::inputs(x, y, z, s), outs);
    auto ref = xsym::function("chains_ref", xsym::inputs(x, y, z, s), outs, xsym::linker("py"));
    std::mt19937 rng(11);
    std::uniform_real_distribution<T> dist(T(0.5), T(2));
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(64), std::size_t(1000), std::size_t(4099)}) {
      xt::xtensor<T, 1> X = xt::empty<T>({n}), Y = xt::empty<T>({n}), Z = xt::empty<T>({n});
      for (auto& e : X) e = dist(rng);
      for (auto& e : Y) e = dist(rng);
      for (auto& e : Z) e = dist(rng);
      const T S = dist(rng);
      const auto got = fast(X, Y, Z, S);
      const auto want = ref(X, Y, Z, S);
      INFO(type_name<T>() << ", n = " << n);
      CHECK(std::get<0>(got) == std::get<0>(want));
      CHECK(std::get<1>(got) == std::get<1>(want));
      CHECK(std::get<2>(got) == std::get<2>(want));
      CHECK(std::get<3>(got) == std::get<3>(want));
      CHECK(std::get<4>(got) == std::get<4>(want));
      for (std::size_t i = 0; i < n; ++i) {  // and the arithmetic itself, against double
        const double a = X(i), b = Y(i), c = Z(i);
        CHECK(std::abs(std::get<0>(got)(i) - (a + b + c) * 2) <= 1e-5 * (a + b + c) * 2);
        CHECK(std::abs(std::get<1>(got)(i) - (3 - a * b / c)) <= 1e-5 * (3 + a * b / c));
      }
    }
  });
}

TEST_CASE("a chain of arithmetic gives the same bits wherever its arrays start in a cache line",
          "[expr][elemwise]") {
  // One chain without exp or log computes the elements before dst's first cache line as
  // scalars where its first array argument is as far past a line as dst is (so that the batches
  // load and store whole lines). Every offset of the arrays in a line, the same for all or
  // dst alone moved, against the reference set and against float64.
  for_each_type(type_list<float, double>{}, []<class T>() {
    auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
    auto s = xsym::scalar<T>("s");
    auto fast = xsym::function("chain", xsym::inputs(x, y, z, s), (x + y - z) * s / y);
    auto scaled = xsym::function("scaled", xsym::inputs(s, x), s * x + s);  // arg 0 broadcast
    auto scaled_ref = xsym::function("scaled_ref", xsym::inputs(s, x), s * x + s, xsym::linker("py"));
    auto ref = xsym::function("chain_ref", xsym::inputs(x, y, z, s), (x + y - z) * s / y, xsym::linker("py"));
    constexpr std::size_t line = 64 / sizeof(T);
    std::mt19937 rng(5);
    std::uniform_real_distribution<T> dist(T(0.5), T(2));
    for (std::size_t n : {std::size_t(9), std::size_t(8 * line - 1), std::size_t(8 * line), std::size_t(1003)}) {
      std::vector<T> bx(n + line), by(n + line), bz(n + line), bout(n + 2 * line);
      for (auto* b : {&bx, &by, &bz})
        for (auto& e : *b) e = dist(rng);
      const T S = dist(rng);
      const std::array<std::size_t, 1> shape{n};
      for (std::size_t at = 0; at < line; ++at)
        for (const bool dst_alone : {false, true}) {
          // Where the buffers start in a line: the inputs at `at` past bx's start (or at its
          // start, for dst alone moved), dst at `at` past its buffer's first line.
          const std::size_t in = dst_alone ? 0 : at;
          const auto lead = (64 - reinterpret_cast<std::uintptr_t>(bout.data()) % 64) % 64 / sizeof(T);
          auto X = xt::adapt(bx.data() + in, n, xt::no_ownership(), shape);
          auto Y = xt::adapt(by.data() + in, n, xt::no_ownership(), shape);
          auto Z = xt::adapt(bz.data() + in, n, xt::no_ownership(), shape);
          auto out = xt::adapt(bout.data() + lead + at, n, xt::no_ownership(), shape);
          std::fill(bout.begin(), bout.end(), std::numeric_limits<T>::quiet_NaN());
          fast.into(out)(X, Y, Z, S);
          const xt::xtensor<T, 1> Xc = X, Yc = Y, Zc = Z;
          const xt::xtensor<T, 1> want = ref(Xc, Yc, Zc, S), got = out;
          INFO(type_name<T>() << ", n = " << n << ", offset " << at << (dst_alone ? ", dst alone" : ""));
          CHECK(got == want);
          for (std::size_t i = 0; i < n; ++i) {
            const double a = Xc(i), b = Yc(i), c = Zc(i);
            CHECK(std::abs(out(i) - (a + b - c) * S / b) <= 1e-5 * std::abs((a + b - c) * S / b) + 1e-6);
          }
          scaled.into(out)(S, X);
          const xt::xtensor<T, 1> scaled_got = out, scaled_want = scaled_ref(S, Xc);
          CHECK(scaled_got == scaled_want);
        }
    }
  });
}

namespace {
// One IEEE operation per call: the expected values below must not fuse a multiply and an add
// into one rounding (tests build as gnu++20, where GCC contracts them).
template <class T>
[[gnu::noinline]] T ieee_mul(T a, T b) {
  return a * b;
}
template <class T>
[[gnu::noinline]] T ieee_sub(T a, T b) {
  return a - b;
}
template <class T>
[[gnu::noinline]] T ieee_add(T a, T b) {
  return a + b;
}
template <class T>
[[gnu::noinline]] T ieee_div(T a, T b) {
  return a / b;
}

// The steps the vectorized set runs for a function's only Composite, and how many are chains.
std::pair<std::size_t, std::size_t> steps_and_chains(const xsym::function_graph& g) {
  for (const auto& node : g.nodes)
    if (node.fn->fused) {
      const auto cp = xsym::cpu::compile_program<true>(node.fn->fused);
      std::size_t chains = 0;
      for (const auto& st : cp.steps) chains += st.chain != nullptr;
      return {cp.steps.size(), chains};
    }
  return {0, 0};
}
}  // namespace

TEST_CASE("chains take neg, sqr, abs, exp and log as links, with the separate kernels' values",
          "[expr][elemwise]") {
  // A unary link computes acc = op(acc) with the op's own kernel function: batches where the
  // separate kernel runs batches, scalars in the tail, and a scalar where the separate kernel
  // gets one broadcast value (log(c) * m, c a column). exp and log give other bits on a batch than on a
  // scalar, so the expected values take them from functions of that one op, on the same
  // positions, and do the rest one IEEE operation at a time.
  for_each_type(type_list<float, double>{}, []<class T>() {
    auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), u = xsym::vector<T>("u");
    auto s = xsym::scalar<T>("s");
    auto xent = xsym::function("xent", xsym::inputs(x, y), -y * xsym::log(x) - (1 - y) * xsym::log(1 - x));
    auto scaled_exp = xsym::function("scaled_exp", xsym::inputs(x, y, s), xsym::exp(x - y) * s);
    auto no_exp = xsym::function("no_exp", xsym::inputs(x, y), -xsym::sqr(xsym::abs(x - y)) / y);
    auto m = xsym::matrix<T>("m");
    auto c = xsym::col<T>("c");  // one value per row: the chain's arg 0 is broadcast in each row
    auto log_lead = xsym::function("log_lead", xsym::inputs(m, c), xsym::log(c) * m);
    auto log_only = xsym::function("log_only", xsym::inputs(u), xsym::log(u));
    auto exp_only = xsym::function("exp_only", xsym::inputs(u), xsym::exp(u));
    auto log_scalar = xsym::function("log_scalar", xsym::inputs(s), xsym::log(s));

    // Negations read by a product or a quotient move after it (-a * b is -(a * b)):
    // (-x * y) / -y is one chain (x: * y, neg, / y, neg), and xent is three steps,
    // (x: log, * y, neg); 1 - y; (1 - x: log, * (1 - y), (-y * log(x)) - acc).
    auto negs = xsym::function("negs", xsym::inputs(x, y), (-x * y) / -y);
    CHECK(steps_and_chains(negs.graph()) == std::pair<std::size_t, std::size_t>{1, 1});
    CHECK(steps_and_chains(xent.graph()) == std::pair<std::size_t, std::size_t>{3, 2});
    CHECK(steps_and_chains(scaled_exp.graph()) == std::pair<std::size_t, std::size_t>{1, 1});
    CHECK(steps_and_chains(no_exp.graph()) == std::pair<std::size_t, std::size_t>{1, 1});
    CHECK(steps_and_chains(log_lead.graph()) == std::pair<std::size_t, std::size_t>{1, 1});

    std::mt19937 rng(13);
    std::uniform_real_distribution<T> prob(T(0.02), T(0.98)), wide(T(-3), T(3));
    // Column values whose log differs between a batch and a scalar (float32 with AVX-512's
    // table log: about 0.6% of them), so that a batch log of the broadcast lead would show.
    std::vector<T> lead_values;
    {
      xt::xtensor<T, 1> candidates = xt::empty<T>({std::size_t(4096)});
      for (auto& e : candidates) e = prob(rng);
      const xt::xtensor<T, 1> batch_log = log_only(candidates);  // 4096: no scalar tail
      for (std::size_t i = 0; i < candidates.size() && lead_values.size() < 16; ++i)
        if (batch_log(i) != T(log_scalar(candidates(i)))) lead_values.push_back(candidates(i));
      for (std::size_t i = 0; lead_values.size() < 16; ++i) lead_values.push_back(candidates(i));
    }
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(64), std::size_t(1000), std::size_t(4099)}) {
      INFO(type_name<T>() << ", n = " << n);
      xt::xtensor<T, 1> X = xt::empty<T>({n}), Y = xt::empty<T>({n}), W = xt::empty<T>({n}), V = xt::empty<T>({n});
      for (auto& e : X) e = prob(rng);
      for (auto& e : Y) e = prob(rng);
      for (auto& e : W) e = wide(rng);
      for (auto& e : V) e = wide(rng);
      const T S = prob(rng);
      xt::xtensor<T, 1> one_minus_x = xt::empty<T>({n}), w_minus_v = xt::empty<T>({n});
      for (std::size_t i = 0; i < n; ++i) {
        one_minus_x(i) = ieee_sub(T(1), X(i));
        w_minus_v(i) = ieee_sub(W(i), V(i));
      }
      const xt::xtensor<T, 1> log_x = log_only(X), log_1mx = log_only(one_minus_x), exp_wv = exp_only(w_minus_v);
      xt::xtensor<T, 2> M = xt::empty<T>({std::size_t(3), n}), C = xt::empty<T>({std::size_t(3), std::size_t(1)});
      for (auto& e : M) e = wide(rng);
      for (std::size_t r = 0; r < 3; ++r) C(r, 0) = lead_values[(3 * n + r) % lead_values.size()];

      const xt::xtensor<T, 1> got_negs = negs(W, Y);
      const xt::xtensor<T, 1> got_xent = xent(X, Y), got_exp = scaled_exp(W, V, S), got_no_exp = no_exp(W, Y);
      const xt::xtensor<T, 2> got_lead = log_lead(M, C);
      for (std::size_t i = 0; i < n; ++i) {
        const T first = ieee_mul(-Y(i), log_x(i)), second = ieee_mul(ieee_sub(T(1), Y(i)), log_1mx(i));
        CHECK(got_xent(i) == ieee_sub(first, second));
        CHECK(got_negs(i) == ieee_div(ieee_mul(-W(i), Y(i)), -Y(i)));
        CHECK(got_exp(i) == ieee_mul(exp_wv(i), S));
        const T d = std::abs(ieee_sub(W(i), Y(i)));
        CHECK(got_no_exp(i) == ieee_div(-ieee_mul(d, d), Y(i)));
        for (std::size_t r = 0; r < 3; ++r) CHECK(got_lead(r, i) == ieee_mul(T(log_scalar(C(r, 0))), M(r, i)));
        // and the values themselves, against double
        const double p = X(i), q = Y(i);
        const double want = -q * std::log(p) - (1 - q) * std::log(1 - p);
        CHECK(std::abs(got_xent(i) - want) <= (std::is_same_v<T, float> ? 1e-5 : 1e-13) * (std::abs(want) + 1));
      }
    }
  });
}

TEST_CASE("chains with an exp or a log run in one pass, with the step-by-step results bit for bit",
          "[expr][elemwise]") {
  // A program whose steps are all chains (or lone links) and that has an exp or a log runs
  // every chain on four batches before going on (cp.chains); without one it runs step by
  // step. Compared with the same functions built to run step by step: tails, several blocks,
  // batches with special lanes for log (0, a negative, infinity, NaN, a subnormal), a later
  // chain whose arg 0 is a broadcast value with a leading log, and spans that would stream.
  struct restore_settings {
    std::int64_t threshold = xsym::cpu::streaming_min_bytes();
    ~restore_settings() {
      xsym::cpu::streaming_min_bytes() = threshold;
      xsym::cpu::testing::one_pass_chains() = true;
    }
  } restore;
  auto runs_in_one_pass = [](const xsym::function_graph& g) {
    std::size_t n = 0;
    for (const auto& node : g.nodes)
      if (node.fn->fused) n += xsym::cpu::compile_program<true>(node.fn->fused).chains != nullptr;
    return n == 1;
  };
  for_each_type(type_list<float, double>{}, [&]<class T>() {
    auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), s = xsym::scalar<T>("s");
    auto m = xsym::matrix<T>("m");
    auto c = xsym::col<T>("c");  // one value per row
    auto u = xsym::vector<T>("u");
    auto log_only = xsym::function("log_only", xsym::inputs(u), xsym::log(u));
    auto build = [&] {
      auto xent = xsym::function("xent", xsym::inputs(x, y, s), -y * xsym::log(x) - (1 - y) * xsym::log(1 - x) + s);
      auto expy = xsym::function("expy", xsym::inputs(x, y, s), xsym::exp(x * s) * (y - x) / (x + s));
      // steps: m - c, then (c: log, * m, * (m - c)): in each row the second chain's arg 0 is
      // one value, whose log a lone log would compute as a scalar
      auto lead = xsym::function("lead", xsym::inputs(m, c), (m - c) * (xsym::log(c) * m));
      return std::make_tuple(std::vector<decltype(xent)>{xent, expy}, lead);
    };
    const auto [one_pass, one_pass_lead] = build();
    xsym::cpu::testing::one_pass_chains() = false;
    const auto [step_by_step, step_by_step_lead] = build();
    xsym::cpu::testing::one_pass_chains() = true;
    for (const auto& f : one_pass) {
      INFO(f.name());
      CHECK(runs_in_one_pass(f.graph()));
    }
    CHECK(runs_in_one_pass(one_pass_lead.graph()));
    // Adds and multiplies alone run step by step: the jumps would cost more than the pass saves.
    CHECK(!runs_in_one_pass(xsym::function("cheap", xsym::inputs(x, y, s), (x + y) * (x - s)).graph()));

    std::mt19937 rng(21);
    std::uniform_real_distribution<T> prob(T(0.02), T(0.98));
    const T specials[] = {T(0), T(-1), std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN(),
                          std::numeric_limits<T>::denorm_min()};
    // One special value every 101 elements: some groups of four batches have one, some none.
    auto value = [&](std::size_t i) { return i % 101 == 5 ? specials[(i / 101) % 5] : prob(rng); };
    for (std::size_t n : {1, 5, 63, 64, 65, 1000, 5003})
      for (const bool stream : {false, true}) {
        xsym::cpu::streaming_min_bytes() = stream ? 0 : std::int64_t(1) << 60;
        INFO(type_name<T>() << ", n = " << n << (stream ? ", streaming" : ""));
        xt::xtensor<T, 1> X = xt::empty<T>({n}), Y = xt::empty<T>({n});
        for (std::size_t i = 0; i < n; ++i) {
          X(i) = value(i);
          Y(i) = prob(rng) > T(0.5) ? T(1) : T(0);
        }
        const T S = prob(rng);
        for (std::size_t k = 0; k < one_pass.size(); ++k) {
          INFO(one_pass[k].name());
          const xt::xtensor<T, 1> got = one_pass[k](X, Y, S), want = step_by_step[k](X, Y, S);
          CHECK(std::memcmp(got.data(), want.data(), n * sizeof(T)) == 0);
        }
        // Both of the above run chain_loop's log link, which tests four batches at once for
        // special lanes; xent against the lone log kernel, one batch at a time, and single
        // IEEE operations (equal, or both NaN: a sunk negation may flip a NaN's sign).
        xt::xtensor<T, 1> one_minus_x = xt::empty<T>({n});
        for (std::size_t i = 0; i < n; ++i) one_minus_x(i) = ieee_sub(T(1), X(i));
        const xt::xtensor<T, 1> xent = one_pass[0](X, Y, S), log_x = log_only(X), log_1mx = log_only(one_minus_x);
        for (std::size_t i = 0; i < n; ++i) {
          const T first = ieee_mul(-Y(i), log_x(i)), second = ieee_mul(ieee_sub(T(1), Y(i)), log_1mx(i));
          const T want = ieee_add(ieee_sub(first, second), S);
          INFO("x = " << X(i) << ", y = " << Y(i));
          CHECK((xent(i) == want || (std::isnan(xent(i)) && std::isnan(want))));
        }
        xt::xtensor<T, 2> M = xt::empty<T>({std::size_t(3), n}), C = xt::empty<T>({std::size_t(3), std::size_t(1)});
        for (std::size_t i = 0; i < M.size(); ++i) M.data()[i] = value(i);
        for (std::size_t r = 0; r < 3; ++r) C(r, 0) = prob(rng);
        const xt::xtensor<T, 2> got = one_pass_lead(M, C), want = step_by_step_lead(M, C);
        CHECK(std::memcmp(got.data(), want.data(), M.size() * sizeof(T)) == 0);
      }
  });
}

TEST_CASE("maximum and minimum propagate NaN and keep the first operand of a tie, in batches and the tail",
          "[expr][elemwise][nan]") {
  for_each_type(type_list<float, double>{}, []<class T>() {
    INFO(type_name<T>());
    const T nan = std::numeric_limits<T>::quiet_NaN();
    // 37 elements: whole SIMD batches, then a scalar tail; each special pair sits in both.
    const std::size_t n = 37;
    xt::xtensor<T, 1> a = xt::linspace<T>(-3, 3, n), b = xt::linspace<T>(2, -2, n);
    for (std::size_t i : {std::size_t{1}, std::size_t{34}}) a(i) = nan;      // NaN first
    for (std::size_t i : {std::size_t{2}, std::size_t{35}}) b(i) = nan;      // NaN second
    for (std::size_t i : {std::size_t{3}, std::size_t{36}}) a(i) = b(i) = nan;
    for (std::size_t i : {std::size_t{4}, std::size_t{33}}) {
      a(i) = T(-0.0);
      b(i) = T(0.0);
    }
    auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y");
    auto outs = xsym::outputs(xsym::maximum(x, y), xsym::minimum(x, y), xsym::maximum(x, T(0)) * T(2) + y,
                              xsym::minimum(y, x));
    auto check = [&](auto& f, const char* how) {
      INFO(how);
      auto [mx, mn, relu, mn_swapped] = f(a, b);
      for (std::size_t i = 0; i < n; ++i) {
        INFO("element " << i << ": " << a(i) << ", " << b(i));
        const bool any_nan = std::isnan(a(i)) || std::isnan(b(i));
        if (any_nan) {
          CHECK(std::isnan(mx(i)));
          CHECK(std::isnan(mn(i)));
          CHECK(std::isnan(mn_swapped(i)));
        } else {
          // numpy: the first operand unless the second is strictly larger (smaller).
          const T want_mx = a(i) < b(i) ? b(i) : a(i), want_mn = b(i) < a(i) ? b(i) : a(i);
          CHECK(mx(i) == want_mx);
          CHECK(std::signbit(mx(i)) == std::signbit(want_mx));
          CHECK(mn(i) == want_mn);
          CHECK(std::signbit(mn(i)) == std::signbit(want_mn));
          const T want_sw = a(i) < b(i) ? a(i) : b(i);
          CHECK(mn_swapped(i) == want_sw);
          CHECK(std::signbit(mn_swapped(i)) == std::signbit(want_sw));
        }
        // A ReLU written maximum(x, 0) keeps NaN NaN.
        if (std::isnan(a(i)) || std::isnan(b(i))) CHECK(std::isnan(relu(i)));
        else CHECK(relu(i) == (a(i) < T(0) ? T(0) : a(i)) * T(2) + b(i));
      }
    };
    auto fast = xsym::function("max_nan", xsym::inputs(x, y), outs);
    auto ref = xsym::function("max_nan_ref", xsym::inputs(x, y), outs, xsym::mode("FAST_COMPILE"));
    auto unfused = xsym::function("max_nan_unfused", xsym::inputs(x, y), outs, xsym::optimizer_excluding("fusion:inplace"));
    check(fast, "FAST_RUN");
    check(ref, "FAST_COMPILE");
    check(unfused, "fusion:inplace excluded");
  });
}

TEST_CASE("casting NaN, infinities and out-of-range floats to integers gives the type's minimum everywhere",
          "[expr][elemwise][cast]") {
  for_each_type(type_list<float, double>{}, []<class F>() {
    for_each_type(type_list<std::int32_t, std::int64_t>{}, []<class I>() {
      INFO(type_name<F>() << " -> " << type_name<I>());
      constexpr I low = std::numeric_limits<I>::min();
      const F specials[] = {std::numeric_limits<F>::quiet_NaN(), std::numeric_limits<F>::infinity(),
                            -std::numeric_limits<F>::infinity(), F(1e30), F(-1e30),
                            -static_cast<F>(std::numeric_limits<I>::min()),  // 2^31 or 2^63: one past the range
                            static_cast<F>(std::numeric_limits<I>::min())};   // the minimum itself: in range
      // Each special value at a position in a SIMD batch and one in the tail of 37 elements.
      const std::size_t n = 37;
      for (F v : specials) {
        INFO("value " << v);
        xt::xtensor<F, 1> a = xt::linspace<F>(-100, 100, n);
        a(3) = a(35) = v;
        auto x = xsym::vector<F>("x");
        auto fast = xsym::function("cast_edge", xsym::inputs(x), xsym::outputs(xsym::cast<I>(x), xsym::cast<I>(x * F(1)) + I(1)));
        auto ref = xsym::function("cast_edge_ref", xsym::inputs(x), xsym::outputs(xsym::cast<I>(x), xsym::cast<I>(x * F(1)) + I(1)),
                                  xsym::mode("FAST_COMPILE"));
        for (auto* f : {&fast, &ref}) {
          auto [c, c1] = (*f)(a);
          for (std::size_t i : {std::size_t{3}, std::size_t{35}}) {
            const I want = low;  // out of range, or the minimum itself
            CHECK(c(i) == want);
            CHECK(c1(i) == static_cast<I>(static_cast<std::make_unsigned_t<I>>(want) + 1u));
          }
          CHECK(c(0) == -100);
        }
      }
    });
  });
}

TEST_CASE("log1p of a number below 2^-25 in magnitude is the number itself, in a batch and in the tail",
          "[expr][elemwise]") {
  // There the vector log1p returns its input without the polynomial, whose terms would be
  // subnormal (each an assist on Intel cores): that must be the rounded log1p, x - x^2/2 + ...
  // being within a quarter ulp of x. Random bit patterns of both signs, subnormals and -0
  // among them, in batches beside ordinary values and in the last elements of the array.
  auto x = xsym::vector<float>("x");
  auto y = xsym::vector<double>("y");
  auto f = xsym::function("log1p_small", xsym::inputs(x, y), xsym::outputs(xsym::log1p(x), xsym::log1p(y)));
  std::mt19937 rng(23);
  const std::size_t n = 4099;  // whole batches and a tail
  xt::xtensor<float, 1> a = xt::empty<float>({n});
  xt::xtensor<double, 1> b = xt::empty<double>({n});
  std::size_t small = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t top = i % 5 == 4 ? 0x3f000000u : 0x33000000u;  // some ordinary lanes, below 0.5
    std::uint32_t bits = static_cast<std::uint32_t>(rng()) % top | (rng() % 2 ? 0x80000000u : 0u);
    if (i % 97 == 0) bits = 0x80000000u;
    std::memcpy(&a(i), &bits, 4);
    const std::uint64_t dbits = (static_cast<std::uint64_t>(rng()) << 32 | rng()) % 0x3c90000000000000ull;  // below 2^-54
    std::memcpy(&b(i), &dbits, 8);
    b(i) = i % 2 ? -b(i) : b(i);
    small += top == 0x33000000u;
  }
  const auto [got, got_d] = f(a, b);
  for (std::size_t i = 0; i < n; ++i) {
    INFO("element " << i << " of " << n << ": log1p(" << a(i) << ") = " << got(i));
    if (std::abs(a(i)) < std::ldexp(1.0f, -25)) {
      CHECK(std::memcmp(&got(i), &a(i), 4) == 0);
      CHECK(got(i) == std::log1p(a(i)));
    } else {
      CHECK(std::abs(double(got(i)) - std::log1p(double(a(i)))) <= 1.5 * std::abs(std::nextafter(got(i), 0.0f) - got(i)));
    }
    CHECK(std::memcmp(&got_d(i), &b(i), 8) == 0);  // float64: subnormals and numbers far below an ulp of 1
  }
  CHECK(small > n / 2);
}

TEST_CASE("sigmoid(x) and sigmoid(-x) computed together are within two ulps of float64, subnormal results included",
          "[expr][elemwise]") {
  // Both sigmoids in one Composite share exp(-|x|) and 1 / (1 + e): the negative side is e r
  // (two roundings after e's), or e itself where r is 1 (no multiply of a subnormal e). The
  // expression p sigmoid(x) + q sigmoid(-x) with (p, q) = (1, 0) or (0, 1) gives one of the two
  // exactly. Uniform inputs over the whole range, saturated ones among them, whose results are
  // subnormal, and the tail.
  auto x = xsym::vector<float>("x");
  auto p = xsym::vector<float>("p");
  auto q = xsym::vector<float>("q");
  auto f = xsym::function("sigmoid_pair", xsym::inputs(x, p, q), p * xsym::sigmoid(x) + q * xsym::sigmoid(-x));
  std::size_t composites = 0;
  for (const auto& node : f.toposort()) composites += node.op_name().find("scalar_sigmoid((-i") != std::string::npos;
  REQUIRE(composites == 1);  // one Composite with both sigmoids
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> over(-110.0f, 110.0f);
  const std::size_t n = 4103;
  xt::xtensor<float, 1> a = xt::empty<float>({n}), pa = xt::empty<float>({n}), qa = xt::empty<float>({n});
  for (std::size_t i = 0; i < n; ++i) {
    a(i) = i % 7 == 0 ? -std::abs(over(rng)) * 0.9f - 8.0f : over(rng);  // more saturated ones
    pa(i) = static_cast<float>(i / 2 % 2);
    qa(i) = 1 - pa(i);
  }
  const xt::xtensor<float, 1> got = f(a, pa, qa);
  std::size_t subnormal = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const long double v = pa(i) == 1 ? a(i) : -static_cast<long double>(a(i));
    const long double exact = 1 / (1 + std::exp(-v));
    const float e = static_cast<float>(exact);
    const long double ulp = std::nextafter(std::abs(e), INFINITY) - std::abs(e);
    INFO("x = " << a(i) << ": sigmoid(" << (pa(i) == 1 ? "x" : "-x") << ") = " << got(i) << ", exact " << double(exact));
    CHECK(std::abs(static_cast<long double>(got(i)) - exact) <= 2 * ulp);
    subnormal += std::fpclassify(got(i)) == FP_SUBNORMAL;
  }
  CHECK(subnormal > 20);
}
