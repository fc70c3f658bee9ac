// cxx: fused programs compiled to machine code when a function is built (backend/cpu/jit.hpp).
// Values against float64 loops and against the interpreted steps, in place, broadcast, threads,
// the library cache, the profile's <type>, and every way the compile can fail.
#include "compile_util.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include <xtensor/xadapt.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace xsym_test;
using Catch::Matchers::Contains;

namespace {

template <class F>
std::string compile_error_of(F&& f) {
  try {
    f();
  } catch (const xsym::compile_error& e) {
    return e.what();
  }
  return "no xsym::compile_error";
}

// Largest difference in units in the last place between two float arrays.
template <std::size_t N>
double max_ulps(const xt::xtensor<float, N>& a, const xt::xtensor<float, N>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float x = a.data()[i], y = b.data()[i];
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    worst = std::max(worst, std::abs(double(x) - double(y)) / double(std::nextafter(std::abs(y), INFINITY) - std::abs(y)));
  }
  return worst;
}

}  // namespace

TEST_CASE("cxx compiles the benchmarks' float32 programs; values match float64 loops and the steps", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("float32");
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y"), z = xsym::vector<float>("z");
  auto p_1 = xsym::sigmoid(x * 3.0f - y);
  auto build = [&] {
    return xsym::function("f32", xsym::inputs(x, y, z),
                          xsym::outputs((x + y + z) * 2, -y * log(x) - (1 - y) * log(1 - x), p_1 > 0.5f,
                                        -y * log(p_1) - (1 - y) * log(1 - p_1)),
                          xsym::linker("cvm_nogc"));
  };
  auto compiled = build();
  // Every fused program here, the one with a bool output among them, is compiled.
  int composites = 0;
  for (const auto& n : compiled.toposort()) composites += n.op_name().find("Composite") != std::string::npos;
  CHECK(composites >= 2);
  CHECK(compiled.runtime()->compiled_kernels().kernels == composites);
  xsym::config.cxx = "";
  auto steps = build();
  std::mt19937 rng(5);
  // Lone elements, SIMD tails on either side of a batch, several 256-element blocks.
  for (std::size_t n : {1, 3, 15, 16, 17, 100, 1000, 4099}) {
    INFO("n = " << n);
    auto X = random_tensor<float, 1>(rng, {n}, 0.02, 0.98);
    auto Y = random_tensor<float, 1>(rng, {n}, 0, 1);
    for (auto& v : Y) v = v > 0.5f ? 1.0f : 0.0f;
    auto Z = random_tensor<float, 1>(rng, {n}, -3, 3);
    const auto [add3, xent, pred, xent2] = compiled(X, Y, Z);
    const auto [add3_s, xent_s, pred_s, xent2_s] = steps(X, Y, Z);
    std::vector<double> w_add3, w_xent, w_pred, w_xent2;
    for (std::size_t i = 0; i < n; ++i) {
      const double a = X(i), b = Y(i), c = Z(i);
      w_add3.push_back((a + b + c) * 2);
      w_xent.push_back(-b * std::log(a) - (1 - b) * std::log(1 - a));
      const double p = 1 / (1 + std::exp(-(a * 3 - b)));
      w_pred.push_back(static_cast<float>(p) > 0.5f);  // compared in float32, as the graph does
      w_xent2.push_back(-b * std::log(p) - (1 - b) * std::log(1 - p));
    }
    CHECK(differences(add3, w_add3) == "");
    CHECK(differences(xent, w_xent, {}, 1e-5, 1e-6) == "");
    CHECK(differences(pred, w_pred) == "");
    CHECK(differences(xent2, w_xent2, {}, 1e-5, 1e-6) == "");
    CHECK(max_ulps(add3, add3_s) == 0);  // no multiply to contract: bit for bit
    CHECK(max_ulps(xent, xent_s) <= 4);
    CHECK(differences(pred, to_doubles(pred_s)) == "");
    CHECK(max_ulps(xent2, xent2_s) <= 8);
  }
}

TEST_CASE("cxx compiles a OnePassGemv's Composite: the one pass's groups and its blocks match the steps",
          "[compile][cxx][one_pass]") {
  clean_config guard;
  cxx_on cxx("one_pass");
  const std::int64_t saved = xsym::cpu::one_pass_min_bytes();
  std::mt19937 rng(11);
  for (const std::int64_t min_bytes : {std::int64_t{0}, std::int64_t{1} << 40}) {  // groups; blocks (cached A)
    xsym::cpu::one_pass_min_bytes() = min_bytes;
    for (std::size_t rows : {1, 37, 203}) {
      const std::size_t feats = 45;
      INFO(rows << " rows, one pass from " << min_bytes << " bytes");
      const auto X = random_tensor<float, 2>(rng, {rows, feats}, -1, 1);
      auto Y = random_tensor<float, 1>(rng, {rows}, 0, 1);
      for (auto& v : Y) v = v > 0.5f ? 1.0f : 0.0f;
      const auto w0 = random_tensor<float, 1>(rng, {feats}, -0.3, 0.3);
      auto build = [&] {
        auto x = xsym::matrix<float>("x");
        auto y = xsym::vector<float>("y");
        auto w = xsym::shared(w0, "w");
        auto b = xsym::shared(0.25f, "b");
        auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
        auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
        auto [gw, gb] = xsym::grad(mean(xent) + 0.01 * sum(w * w), w, b);
        auto f = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                                xsym::updates(xsym::update(w, w - 0.1 * gw), xsym::update(b, b - 0.1 * gb)));
        return std::tuple{f, w};
      };
      xsym::config.cxx = XSYM_TEST_CXX;
      auto [compiled, w_c] = build();
      int composites = 0, one_pass = 0;
      for (const auto& n : compiled.toposort()) {
        composites += n.op_name().find("Composite") != std::string::npos;
        one_pass += n.class_name() == "xsym::OnePassGemv";
      }
      REQUIRE(one_pass == 1);
      CHECK(compiled.runtime()->compiled_kernels().kernels == composites);  // the OnePassGemv's among them
      CHECK(compiled.runtime()->compiled_kernels().block_kernels == 1);     // and its g alone
      xsym::config.cxx = "";
      auto [steps, w_s] = build();
      const auto [pred, xent] = compiled(X, Y);
      const auto [pred_s, xent_s] = steps(X, Y);
      CHECK(max_ulps(xent, xent_s) <= 8);
      for (std::size_t r = 0; r < rows; ++r) CHECK(pred(r) == pred_s(r));
      const auto wc = w_c.get_value(), ws = w_s.get_value();
      for (std::size_t j = 0; j < feats; ++j) CHECK(std::abs(wc(j) - ws(j)) <= 1e-6f * std::max(1.0f, std::abs(ws(j))));
    }
  }
  xsym::cpu::one_pass_min_bytes() = saved;
}

#ifdef _OPENMP
namespace {
// The seeds' step on a matrix the caches keep, by blocks of rows with g compiled: the same bits
// on 1 to 4 threads, and the interpreted steps' values (two products) within rounding.
template <class T>
void check_blocks_threads() {
  std::mt19937 rng(sizeof(T) == 4 ? 21 : 22);
  for (std::size_t rows : {1, 5, 203}) {  // one row; a block short of 4; 4 parts, the last short
    const std::size_t feats = 37;
    const auto X = random_tensor<T, 2>(rng, {rows, feats}, -1, 1);
    auto Y = random_tensor<T, 1>(rng, {rows}, 0, 1);
    for (auto& v : Y) v = v > T(0.5) ? T(1) : T(0);
    const auto w0 = random_tensor<T, 1>(rng, {feats}, -0.3, 0.3);
    auto build = [&] {
      auto x = xsym::matrix<T>("x");
      auto y = xsym::vector<T>("y");
      auto w = xsym::shared(w0, "w");
      auto b = xsym::shared(T(0.25), "b");  // one value, broadcast over the rows
      auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
      auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
      auto [gw, gb] = xsym::grad(mean(xent) + 0.01 * sum(w * w), w, b);
      auto f = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                              xsym::updates(xsym::update(w, w - 0.1 * gw), xsym::update(b, b - 0.1 * gb)));
      return std::tuple{f, w, b};
    };
    xsym::config.cxx = "";
    auto [steps, w_s, b_s] = build();
    const auto [pred_s, xent_s] = steps(X, Y);
    xsym::config.cxx = XSYM_TEST_CXX;
    xsym::config.openmp = true;
    xt::xtensor<T, 1> w_first, xent_first;
    T b_first = 0;
    for (int threads : {1, 2, 3, 4}) {
      omp_set_num_threads(threads);  // read when a function is built
      INFO(rows << " rows, " << threads << " threads, " << (sizeof(T) == 4 ? "float32" : "float64"));
      auto [f, w, b] = build();
      REQUIRE(f.runtime()->compiled_kernels().block_kernels == 1);
      const auto [pred, xent] = f(X, Y);
      if (threads == 1) {
        w_first = w.get_value();
        xent_first = xent;
        b_first = b.get_value()();
        const T tol = sizeof(T) == 4 ? T(1e-5) : T(1e-12);
        CHECK(xt::allclose(xent, xent_s, tol, tol));
        CHECK(xt::allclose(w.get_value(), w_s.get_value(), tol, tol));
        CHECK(std::abs(b_first - b_s.get_value()()) <= tol);
        for (std::size_t r = 0; r < rows; ++r) CHECK(pred(r) == pred_s(r));
        continue;
      }
      CHECK(bool(w.get_value() == w_first));
      CHECK(bool(xent == xent_first));
      CHECK(b.get_value()() == b_first);
    }
    omp_set_num_threads(2);
    xsym::config.openmp = false;
  }
}
}  // namespace

TEST_CASE("cxx: a cached matrix's one pass by blocks gives the same bits on 1 to 4 threads",
          "[compile][cxx][one_pass][openmp]") {
  clean_config guard;
  cxx_on cxx("one_pass_blocks");
  const std::int64_t saved = xsym::cpu::one_pass_min_bytes();
  xsym::cpu::one_pass_min_bytes() = std::int64_t{1} << 40;
  check_blocks_threads<float>();
  check_blocks_threads<double>();
  xsym::cpu::one_pass_min_bytes() = saved;
}
#endif

TEST_CASE("cxx compiles sigmoid(u) and sigmoid(-u) sharing one reciprocal", "[compile][cxx]") {
  // The kernel reads three registers (u, exp(-|u|) and the reciprocal). This area is built
  // without -march=native and cxx compiles with it: exp may differ by an ulp or two.
  clean_config guard;
  cxx_on cxx("sigmoid_pair");
  auto u = xsym::vector<float>("u");
  auto build = [&] { return xsym::function("pair", xsym::inputs(u), xsym::outputs(xsym::sigmoid(u), xsym::sigmoid(-u))); };
  auto compiled = build();
  CHECK(compiled.runtime()->compiled_kernels().kernels == 1);
  xsym::config.cxx = "";
  auto steps = build();
  std::mt19937 rng(9);
  for (std::size_t n : {1, 17, 1000}) {
    INFO("n = " << n);
    auto U = random_tensor<float, 1>(rng, {n}, -30, 30);
    const auto [pos, neg] = compiled(U);
    const auto [pos_s, neg_s] = steps(U);
    CHECK(max_ulps(pos, pos_s) <= 2);
    CHECK(max_ulps(neg, neg_s) <= 2);
    std::vector<double> want;
    for (std::size_t i = 0; i < n; ++i) want.push_back(1 / (1 + std::exp(-double(U(i)))));
    CHECK(differences(pos, want, {}, 1e-6, 1e-30) == "");
  }
}

// Products and sums are two roundings in compiled code too (-ffp-contract=off after the flags):
// the default -O3 -march=native would contract x * y + t into one FMA and change the bits.
TEST_CASE("cxx kernels round each product and sum as the interpreter does", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("no_contraction");
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y");
  auto build = [&] { return xsym::function("contract", xsym::inputs(x, y), x * y + y * y * 3); };
  auto compiled = build();
  CHECK(compiled.runtime()->compiled_kernels().kernels == 1);
  xsym::config.cxx = "";
  auto steps = build();
  std::mt19937 rng(21);
  const auto X = random_tensor<float, 1>(rng, {1000}, -1, 1), Y = random_tensor<float, 1>(rng, {1000}, -1, 1);
  const xt::xtensor<float, 1> a = compiled(X, Y), b = steps(X, Y);
  CHECK(max_ulps(a, b) == 0);
}

TEST_CASE("cxx kernels write in place, broadcast rows and columns, and split among threads", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("shapes");
  std::mt19937 rng(6);

  SECTION("an update written over the shared variable it reads") {
    auto w = xsym::shared(random_tensor<double, 1>(rng, {77}, -1, 1), "w");
    auto v = xsym::vector<double>("v");
    auto f = xsym::function("decay", xsym::inputs(v), xsym::outputs(xsym::sum(v)),
                            xsym::updates(xsym::update(w, w - 0.1 * (w * v + xsym::tanh(w)))));
    REQUIRE(f.runtime()->compiled_kernels().kernels == 1);
    const auto V = random_tensor<double, 1>(rng, {77}, -1, 1);
    std::vector<double> want = to_doubles(w.get_value());
    for (int call = 0; call < 3; ++call) {
      f(V);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] -= 0.1 * (want[i] * V(i) + std::tanh(want[i]));
      CHECK(differences(w.get_value(), want) == "");
    }
  }

  SECTION("a row and a column broadcast over a matrix, and a transposed operand") {
    auto m = xsym::matrix<double>("m");
    auto r = xsym::row<double>("r");
    auto c = xsym::col<double>("c");
    auto f = xsym::function("bcast", xsym::inputs(m, r, c), xsym::exp(m * r - c) + m.T().T() * c);
    REQUIRE(f.runtime()->compiled_kernels().kernels == 1);
    CHECK(f.runtime()->compiled_kernels().row_kernels == 1);
    for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 1}, {4, 9}, {13, 70}}) {
      const auto M = random_tensor<double, 2>(rng, {rows, cols}, -1, 1);
      const auto R = random_tensor<double, 2>(rng, {1, cols}, -1, 1);
      const auto C = random_tensor<double, 2>(rng, {rows, 1}, -1, 1);
      std::vector<double> want;
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) want.push_back(std::exp(M(i, j) * R(0, j) - C(i, 0)) + M(i, j) * C(i, 0));
      CHECK(differences(f(M, R, C), want) == "");
      const xt::xtensor<double, 2> MT = xt::transpose(M);  // a strided input: copied, then the same kernel
      auto g = xsym::function("bcast_t", xsym::inputs(m, r, c), xsym::exp(m.T() * r - c) + m.T() * c);
      CHECK(differences(g(MT, R, C), want) == "");
    }
  }

#ifdef _OPENMP
  SECTION("threads take whole blocks: the same bits as one thread") {
    auto a = xsym::vector<double>("a"), b = xsym::vector<double>("b");
    auto build = [&] { return xsym::function("threads", xsym::inputs(a, b), xsym::log1p(xsym::exp(a) * b) - a / (1.0 + b * b)); };
    auto serial = build();
    xsym::config.openmp = true;
    xsym::config.openmp_elemwise_minsize = 1;
    auto parallel = build();
    REQUIRE(parallel.runtime()->compiled_kernels().kernels == 1);
    const auto A = random_tensor<double, 1>(rng, {100003}, -2, 2);
    const auto B = random_tensor<double, 1>(rng, {100003}, 0, 2);
    const xt::xtensor<double, 1> s = serial(A, B), p = parallel(A, B);
    CHECK(std::equal(s.begin(), s.end(), p.begin()));
  }
#endif
}

TEST_CASE("cxx kernels stream outputs larger than the cache, at any offset from a cache line", "[compile][cxx]") {
  // Above streaming_min_bytes (lowered to 0 here) outputs leave with non-temporal stores from
  // the first cache line on, the elements before it stored normally: against a float64 loop,
  // and within 2 ulps of the same kernel storing normally.
  // Also with AVX2's batches where the machine has them: 8 floats, fewer than a cache line's 16
  // (the head before the first line then spans batches), which AVX-512 never shows.
  std::vector<std::string> flag_sets{""};
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) flag_sets.push_back("-O3 -mavx2 -mfma");
#endif
  for (const std::string& flags : flag_sets) {
    INFO("gcc.cxxflags: " << (flags.empty() ? std::string("the default") : flags));
    clean_config guard;
    cxx_on cxx("stream");
    if (!flags.empty()) xsym::config.gcc.cxxflags = flags;
    auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y");
    auto s = xsym::scalar<float>("s");
    auto f = xsym::function("streamed", xsym::inputs(x, y, s),
                            xsym::outputs((x + y + s) * 2.0f, xsym::exp(x) * y, x * y - xsym::log(1.0f + y * y)));
    REQUIRE(f.runtime()->compiled_kernels().kernels >= 1);
    struct restore_threshold {
      std::int64_t saved = xsym::cpu::streaming_min_bytes();
      ~restore_threshold() { xsym::cpu::streaming_min_bytes() = saved; }
    } restore;
    std::mt19937 rng(8);
    for (std::size_t n : {std::size_t(1), std::size_t(15), std::size_t(70), std::size_t(5003)}) {
      const auto X = random_tensor<float, 1>(rng, {n}, -2, 2), Y = random_tensor<float, 1>(rng, {n}, -2, 2);
      const float S = 0.75f;
      xsym::cpu::streaming_min_bytes() = std::int64_t{1} << 62;
      const auto [a0, b0, c0] = f(X, Y, S);
      xsym::cpu::streaming_min_bytes() = 0;
      std::vector<float> storage(4 * (n + 48));
      float* line = storage.data();
      while (reinterpret_cast<std::uintptr_t>(line) % 64 != 0) ++line;
      // Outputs at one offset (streamed), and at different ones (stored normally).
      for (std::size_t spacing : {((n + 16) + 15) / 16 * 16, n + 17})
        for (std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(13)}) {
          INFO("n = " << n << ", destinations " << offset << " floats past a cache line, " << spacing << " apart");
          const std::array<std::size_t, 1> shape{n};
          REQUIRE(line + offset + 3 * spacing <= storage.data() + storage.size());
          auto a = xt::adapt(line + offset, n, xt::no_ownership(), shape);
          auto b = xt::adapt(line + offset + spacing, n, xt::no_ownership(), shape);
          auto c = xt::adapt(line + offset + 2 * spacing, n, xt::no_ownership(), shape);
          f.into(a, b, c)(X, Y, S);
          std::vector<double> wa, wb, wc;
          for (std::size_t i = 0; i < n; ++i) {
            const double xi = X(i), yi = Y(i);
            wa.push_back((xi + yi + S) * 2);
            wb.push_back(std::exp(xi) * yi);
            wc.push_back(xi * yi - std::log(1 + yi * yi));
          }
          CHECK(differences(xt::xtensor<float, 1>(a), wa) == "");
          CHECK(differences(xt::xtensor<float, 1>(b), wb, {}, 1e-5, 1e-6) == "");
          CHECK(differences(xt::xtensor<float, 1>(c), wc, {}, 1e-5, 1e-5) == "");
          CHECK(max_ulps(xt::xtensor<float, 1>(a), a0) == 0);
          CHECK(max_ulps(xt::xtensor<float, 1>(b), b0) <= 2);
          // Within 2 ulps of the log term, not of the result: x y - log1p(y^2) may cancel most of it.
          double c_worst = 0;
          for (std::size_t i = 0; i < n; ++i) {
            const double term = std::abs(double(X(i)) * Y(i)) + std::log1p(double(Y(i)) * Y(i));
            c_worst = std::max(c_worst, std::abs(double(c(i)) - c0(i)) / (0x1p-23 * term));
          }
          CHECK(c_worst <= 2);
        }
    }
  }
}

TEST_CASE("into(...) runs a cxx program straight on the caller's arrays, with the call loop's bits", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("direct");
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y"), z = xsym::vector<float>("z");
  const auto e = xsym::exp(x - y) * 0.5f + z;
  auto f = xsym::function("direct", xsym::inputs(x, y, z), e);
  const auto stats = std::make_shared<xsym::profile_stats>("direct", false);
  auto looped = xsym::function("direct_looped", xsym::inputs(x, y, z), e, xsym::profile(stats));  // profiled: the loop
  REQUIRE(f.runtime()->compiled_kernels().kernels == 1);
  REQUIRE(f.runtime()->has_direct());
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<std::size_t> sizes{1000, 1003};
  for (std::size_t n = 1; n <= 40; ++n) sizes.push_back(n);
  for (std::size_t n : sizes) {
    xt::xtensor<float, 1> a = xt::empty<float>({n}), b = xt::empty<float>({n}), c = xt::empty<float>({n});
    for (std::size_t i = 0; i < n; ++i) a(i) = u(rng), b(i) = u(rng), c(i) = u(rng);
    xt::xtensor<float, 1> out = xt::zeros<float>({n}), want = xt::zeros<float>({n});
    f.into(out)(a, b, c);
    looped.into(want)(a, b, c);
    INFO("n = " << n);
    CHECK(std::memcmp(out.data(), want.data(), n * sizeof(float)) == 0);
    for (std::size_t i = 0; i < n; ++i)
      CHECK(double(out(i)) == Approx(std::exp(double(a(i)) - double(b(i))) * 0.5 + double(c(i))).epsilon(1e-5).margin(1e-5));
    // A destination that is an argument takes the loop: each element's inputs are read before it is written.
    xt::xtensor<float, 1> in_place = a;
    f.into(in_place)(in_place, b, c);
    CHECK(std::memcmp(in_place.data(), want.data(), n * sizeof(float)) == 0);
    // The destination and an argument in one buffer, shifted either way: overlapping shifts take
    // the loop, the others the compiled loops straight; all give the arguments' results.
    for (std::size_t shift : {std::size_t{1}, std::size_t{5}, n, n + 3}) {
      for (bool dest_first : {true, false}) {
        std::vector<float> buf(n + shift, 7.0f);
        float* dp = buf.data() + (dest_first ? 0 : shift);
        float* ap = buf.data() + (dest_first ? shift : 0);
        std::copy(a.begin(), a.end(), ap);
        const std::array<std::size_t, 1> sh{n};
        auto dest = xt::adapt(dp, n, xt::no_ownership(), sh);
        auto arg = xt::adapt(ap, n, xt::no_ownership(), sh);
        f.into(dest)(arg, b, c);
        INFO("shift " << shift << (dest_first ? ", destination first" : ", argument first"));
        CHECK(std::memcmp(dp, want.data(), n * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("cxx libraries are reused: from this process, then from compiledir", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("cache");
  auto x = xsym::vector<float>("x");
  auto build = [&] { return xsym::function("cached", xsym::inputs(x), xsym::exp(x) * x + 1.0f); };
  auto first = build();
  const auto stats = first.runtime()->compiled_kernels();
  REQUIRE(stats.kernels == 1);
  CHECK(stats.compiled == 1);
  CHECK(std::filesystem::path(stats.library).parent_path() == cxx.dir());
  CHECK(std::filesystem::exists(stats.library));
  // The generated source is kept beside the library, for a look at what ran.
  auto source = stats.library;
  source.replace(source.size() - 3, 3, ".cpp");
  std::ifstream in(source);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Contains("vexp_batch(const xsimd::batch<double, A>& a)") && Contains("extern \"C\" void xsym_kernel_0"));

  auto second = build();
  CHECK(second.runtime()->compiled_kernels().compiled == 0);
  CHECK(second.runtime()->compiled_kernels().library == stats.library);
  xsym::cpu::detail::loaded_modules().clear();  // as a new process would start
  auto third = build();
  CHECK(third.runtime()->compiled_kernels().compiled == 0);
  CHECK(third.runtime()->compiled_kernels().kernels == 1);
  const xt::xtensor<float, 1> X{0.5f, -1.0f, 2.0f};
  CHECK(differences(third(X), {std::exp(0.5) * 0.5 + 1, std::exp(-1.0) * -1 + 1, std::exp(2.0) * 2 + 1}) == "");

  // Other flags, another library: gcc.cxxflags is part of the key.
  xsym::config.gcc.cxxflags = "-O2";
  auto fourth = build();
  CHECK(fourth.runtime()->compiled_kernels().compiled == 1);
  CHECK(fourth.runtime()->compiled_kernels().library != stats.library);
}

// A compiledir copied from elsewhere, or damaged, may hold another module's library at a key's
// name: each library's key is checked after it loads, and a stranger's is built again, not run.
TEST_CASE("a library at a cached name that was built from other text is built again, not run", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("foreign");
  auto x = xsym::vector<float>("x");
  auto mine = [&] { return xsym::function("mine", xsym::inputs(x), xsym::exp(x) * x + 1.0f); };
  const std::string own = mine().runtime()->compiled_kernels().library;
  const std::string other = xsym::function("other", xsym::inputs(x), xsym::exp(x) - x).runtime()->compiled_kernels().library;
  REQUIRE(own != other);
  const auto copied = cxx.dir() / "copied";
  std::filesystem::create_directories(copied);
  const auto at = copied / std::filesystem::path(own).filename();
  std::filesystem::copy_file(other, at);
  auto digest = [](std::string lib) { return lib.replace(lib.size() - 3, 3, ".sum"); };
  std::filesystem::copy_file(digest(other), digest(at.string()));  // intact bytes: the key check refuses it
  xsym::config.compiledir = copied.string();
  xsym::cpu::detail::loaded_modules().clear();  // as a new process would start
  auto again = mine();
  CHECK(again.runtime()->compiled_kernels().compiled == 1);
  CHECK(again.runtime()->compiled_kernels().library == at.string());
  const xt::xtensor<float, 1> X{0.5f, -1.0f, 2.0f};
  CHECK(differences(again(X), {std::exp(0.5) * 0.5 + 1, std::exp(-1.0) * -1 + 1, std::exp(2.0) * 2 + 1}) == "");
}

// A truncated library faults inside dlopen (SIGBUS) and a damaged one runs its bytes: each is
// checked against the size and hash recorded beside it, and built again where they differ.
// The damage is done to copies: this process has the original mapped.
TEST_CASE("a truncated or damaged library in compiledir is built again, not loaded", "[compile][cxx]") {
  namespace fs = std::filesystem;
  clean_config guard;
  cxx_on cxx("damaged");
  auto x = xsym::vector<float>("x");
  auto build = [&] { return xsym::function("damaged", xsym::inputs(x), xsym::exp(x) * x + 1.0f); };
  xsym::cpu::detail::loaded_modules().clear();  // another test's compiledir may hold this module
  const fs::path lib = build().runtime()->compiled_kernels().library;
  const fs::path sum = fs::path(lib).replace_extension(".sum");
  REQUIRE(fs::exists(sum));
  for (const std::string damage : {"truncated", "bytes changed", "digest missing", "intact"}) {
    INFO(damage);
    const fs::path dir = cxx.dir() / damage;
    fs::create_directories(dir);
    fs::copy_file(lib, dir / lib.filename());
    fs::copy_file(sum, dir / sum.filename());
    const fs::path copy = dir / lib.filename();
    const auto size = fs::file_size(copy);
    if (damage == "truncated") {
      fs::resize_file(copy, size / 2);
    } else if (damage == "bytes changed") {
      std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size / 2));
      f.write("\xcc\xcc\xcc\xcc", 4);
    } else if (damage == "digest missing") {
      fs::remove(dir / sum.filename());
    }
    xsym::config.compiledir = dir.string();
    xsym::cpu::detail::loaded_modules().clear();  // as a new process would start
    auto again = build();
    CHECK(again.runtime()->compiled_kernels().compiled == (damage == "intact" ? 0 : 1));
    CHECK(again.runtime()->compiled_kernels().library == copy.string());
    const xt::xtensor<float, 1> X{0.5f, -1.0f, 2.0f};
    CHECK(differences(again(X), {std::exp(0.5) * 0.5 + 1, std::exp(-1.0) * -1 + 1, std::exp(2.0) * 2 + 1}) == "");
  }
}

TEST_CASE("cxx kernels show as <type> cxx in the profile; py and DebugMode's reference stay interpreted", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("profile");
  auto x = xsym::vector<double>("x");
  auto stats = std::make_shared<xsym::profile_stats>("prof", false);  // not printed at exit
  auto f = xsym::function("prof", xsym::inputs(x), xsym::outputs(xsym::exp(x) * 2.0 + x, x > 0.0), xsym::profile(stats));
  f(xt::xtensor<double, 1>{1, 2, 3});
  std::ostringstream os;
  f.profile().print_summary(os);
  const std::string report = os.str();
  CHECK_THAT(report, Contains("cxx kernels of prof: " + f.runtime()->compiled_kernels().library + " (compiled now)"));
  CHECK_THAT(report, Contains(" cxx ") && Contains("Elemwise{Composite{((exp(i0) * i1) + i0)}}"));
  CHECK_THAT(report, !Contains("with cxx=g++ it is compiled"));  // the tip is for interpreted Composites
  std::ostringstream json;
  xsym::write_json(f.profile(), json);
  CHECK_THAT(json.str(), Contains("\"compiled_library\": \"" + f.runtime()->compiled_kernels().library + "\"") &&
                             Contains("\"implementation\": \"cxx\"") && Contains("\"implementation\": \"cpu\""));

  auto py = xsym::function("py", xsym::inputs(x), xsym::exp(x) * 2.0 + x, xsym::linker("py"));
  CHECK(py.runtime()->compiled_kernels().kernels == 0);
  auto debug = xsym::function("debug", xsym::inputs(x), xsym::exp(x) * 2.0 + x, xsym::mode("DebugMode"));
  CHECK(debug.runtime()->compiled_kernels().kernels == 1);
  const auto r = debug(xt::xtensor<double, 1>{0.25, -4, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // checked against the reference
  CHECK(r(0) == Approx(std::exp(0.25) * 2 + 0.25).epsilon(1e-12));
}

TEST_CASE("a compiler that cannot run or fails, or an unusable compiledir, is a clear compile_error", "[compile][cxx][errors]") {
  clean_config guard;
  cxx_on cxx("errors");
  auto x = xsym::vector<double>("x");
  auto build = [&] { return xsym::function("bad", xsym::inputs(x), xsym::exp(x) + x); };

  xsym::config.cxx = "xsym-no-such-compiler";
  auto msg = compile_error_of(build);
  CHECK_THAT(msg, Contains("xsym::function 'bad'") && Contains("cxx=xsym-no-such-compiler") &&
                      Contains("cannot run the compiler") && Contains("empty value"));

  xsym::config.cxx = XSYM_TEST_CXX;
  xsym::config.gcc.cxxflags = "-O2 -fno-such-flag-xsym";
  msg = compile_error_of(build);
  CHECK_THAT(msg, Contains("failed (exit status") && Contains("-fno-such-flag-xsym") && Contains("compiler output") &&
                      Contains("gcc.cxxflags"));
  // The source that failed is kept where the message says.
  const auto at = msg.find("compiling ") + 10;
  const std::string source = msg.substr(at, msg.find('\n', at) - at);
  CHECK(std::filesystem::exists(source));

  // A compiler that a signal ends is named with the signal, not as an exit status.
  const auto crashing = cxx.dir() / "crashing-cxx";
  std::filesystem::create_directories(cxx.dir());
  std::ofstream(crashing) << "#!/bin/sh\nkill -SEGV $$\n";
  std::filesystem::permissions(crashing, std::filesystem::perms::owner_all);
  xsym::config.cxx = crashing.string();
  xsym::config.gcc.cxxflags = "-O2";
  msg = compile_error_of(build);
  CHECK_THAT(msg, Contains("failed (killed by signal 11, Segmentation fault)") && Contains("crashing-cxx"));

  // A "compiler" that exits 0 and writes nothing, and flags that make no library: named as
  // such, and nothing is left at a library's name.
  xsym::config.cxx = "true";
  xsym::config.gcc.cxxflags = "-O2";
  msg = compile_error_of(build);
  CHECK_THAT(msg, Contains("cxx=true exited 0 but wrote no library") && Contains("command: true"));
  xsym::config.cxx = XSYM_TEST_CXX;
  xsym::config.gcc.cxxflags = "-O2 -E";
  msg = compile_error_of(build);
  CHECK_THAT(msg, Contains("wrote a library that does not load") && Contains("-O2 -E") && Contains("gcc.cxxflags"));
  for (const auto& e : std::filesystem::directory_iterator(cxx.dir())) {
    INFO(e.path());
    CHECK(e.path().extension() != ".so");
    CHECK(e.path().extension() != ".log");
  }

  xsym::config.gcc.cxxflags = "-O2";
  const auto file = cxx.dir() / "a-file";
  std::filesystem::create_directories(cxx.dir());
  std::ofstream(file) << "not a directory";
  xsym::config.compiledir = (file / "sub").string();
  msg = compile_error_of(build);
  CHECK_THAT(msg, Contains("compiledir=" + (file / "sub").string()) && Contains("writable directory"));

  // An empty compiledir is refused when the flag is set, naming the flag.
  CHECK_THROWS_WITH(xsym::config.set("compiledir", ""), Contains("compiledir") && Contains("empty"));
  // Nothing was half-built: with cxx off the same function builds and runs.
  xsym::config.cxx = "";
  CHECK(build()(xt::xtensor<double, 1>{0.0})(0) == 1.0);
}
