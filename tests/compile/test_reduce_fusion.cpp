// careduce_fusion: a reduction of an elementwise value read by nothing else is one CAReduce node
// that reduces the value as it is computed. Each result is checked against the graph with the
// rewrite excluded (two nodes): bit for bit where the node sums in the two nodes' order (sums
// and means over trailing axes, every max and min) and within float64 rounding where it combines
// blocks (sums over axis 0); and against loops in double written from numpy's definition.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <xsym/xsym.hpp>

#include "compile_util.hpp"

// Named, not anonymous: the area compiles in batches of four files (unity builds).
namespace reduce_fusion_test {

template <class T, std::size_t N>
xt::xtensor<T, N> random_array(const std::array<std::size_t, N>& shape, std::mt19937& rng) {
  xt::xtensor<T, N> a = xt::empty<T>(shape);
  std::normal_distribution<double> d(0.5, 2.0);
  for (auto& e : a) e = static_cast<T>(d(rng));
  return a;
}

template <class A, class B>
bool same_bits(const A& a, const B& b) {
  if constexpr (std::is_arithmetic_v<A>) return std::memcmp(&a, &b, sizeof(A)) == 0;  // a rank-0 output
  else return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(*a.data())) == 0;
}

template <class A>
double worst_relative(const A& got, const std::vector<double>& want, const std::vector<double>& scale) {
  double worst = 0;
  for (std::size_t k = 0; k < want.size(); ++k)
    worst = std::max(worst, std::abs(static_cast<double>(got.data()[k]) - want[k]) / std::max(scale[k], 1e-300));
  return worst;
}

// Lengths around a batch, sum_contiguous's 32-element step and the node's blocks of 16 KiB.
const std::size_t lengths[] = {1, 7, 8, 9, 31, 33, 100, 4095, 4097, 8192, 20011};

template <class T>
void check_full_sums() {
  xsym_test::clean_config guard;
  std::mt19937 rng(21);
  auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y");
  // sqr(x - y) is a typed tree: its sums run compiled (bind_typed_sum); d * d, d erased into a
  // var, runs the program a block at a time.
  xsym::var<T, 1> d = x + y;
  auto outs = [&] { return xsym::outputs(mean(sqr(x - y)), sum(d * d + T(1)), sum(exp(x) * T(0.5))); };
  auto fused = xsym::function("f", xsym::inputs(x, y), outs());
  auto two = xsym::function("f", xsym::inputs(x, y), outs(), xsym::optimizer_excluding("careduce_fusion"));
  const auto fn = xsym_test::op_names(fused), tn = xsym_test::op_names(two);
  CHECK(std::count(fn.begin(), fn.end(), "Mean{Composite{sqr((i0 - i1))}}") == 1);
  CHECK(std::count_if(fn.begin(), fn.end(), [](const std::string& s) { return s.rfind("Sum{Composite{", 0) == 0; }) == 2);
  CHECK(std::count_if(fn.begin(), fn.end(), [](const std::string& s) { return s.rfind("Elemwise", 0) == 0; }) == 0);
  CHECK(std::count(tn.begin(), tn.end(), "Mean") == 1);
  CHECK(std::count_if(tn.begin(), tn.end(), [](const std::string& s) { return s.rfind("Elemwise", 0) == 0; }) == 3);
  for (std::size_t n : lengths) {
    INFO(n << " elements");
    const auto X = random_array<T, 1>({n}, rng), Y = random_array<T, 1>({n}, rng);
    auto [a, b, c] = fused(X, Y);
    auto [wa, wb, wc] = two(X, Y);
    CHECK(same_bits(a, wa));
    CHECK(same_bits(b, wb));
    CHECK(same_bits(c, wc));
    double ms = 0, s = 0, e = 0, es = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double dk = static_cast<double>(static_cast<T>(X(k) - Y(k)));
      const double pk = static_cast<double>(static_cast<T>(X(k) + Y(k)));
      ms += static_cast<double>(static_cast<T>(dk * dk));
      s += static_cast<double>(static_cast<T>(static_cast<T>(pk * pk) + T(1)));
      e += static_cast<double>(std::exp(X(k))) * 0.5;
      es += std::abs(static_cast<double>(std::exp(X(k))) * 0.5);
    }
    const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-13;
    CHECK(std::abs(static_cast<double>(a) - ms / static_cast<double>(n)) <= tol * ms / static_cast<double>(n));
    CHECK(std::abs(static_cast<double>(b) - s) <= tol * s);
    CHECK(std::abs(static_cast<double>(c) - e) <= 4 * tol * es);  // two exps: a few ulps each
  }
}

TEST_CASE("careduce_fusion: full sums and means are one node with the two nodes' bits", "[compile][reduce_fusion]") {
  check_full_sums<float>();
  check_full_sums<double>();
}

template <class T>
void check_axes() {
  xsym_test::clean_config guard;
  std::mt19937 rng(8);
  auto x = xsym::matrix<T>("x"), z = xsym::matrix<T>("z");
  auto b = xsym::row<T>("b");     // (1, n): the same row for every row
  auto u = xsym::col<T>("u");     // (m, 1): one value per row
  auto c = xsym::tensor3<T>("c");
  auto e = xsym::tensor3<T>("e");  // (m, 3, 5): many blocks whose kept rows are 2-D
  auto outs = [&] {
    return xsym::outputs(sum(x * z, 1),                 // typed sums, row by row
                         mean(x * b - z, 1),            // a row broadcast along the rows
                         sum(x * u, 1),                 // a column along the rows: blocks of rows
                         sum(xsym::transpose(x) * T(2), 1),  // a strided operand: blocks of rows
                         max(exp(x) - z, 1), min(z * z - x, 0),  // max and min: blocks
                         sum(sqr(x) + z, 0), mean(x - z, 0),  // axis 0: blocks combined
                         sum(c * T(3), {1, 2}), mean(c + T(1), {0, 2}), max(c * c, {0, 1, 2}),
                         max(e * T(2), 1), mean(e - T(1), 2));
  };
  auto fused = xsym::function("f", xsym::inputs(x, z, b, u, c, e), outs());
  auto two = xsym::function("f", xsym::inputs(x, z, b, u, c, e), outs(), xsym::optimizer_excluding("careduce_fusion"));
  const auto fn = xsym_test::op_names(fused);
  CHECK(std::count_if(fn.begin(), fn.end(), [](const std::string& s) { return s.find("Composite{") != std::string::npos; }) == 13);
  CHECK(std::count(fn.begin(), fn.end(), "Sum{1;Composite{(i0 * i1)}}") == 3);  // x * z, x * u, transpose(x) * 2
  // Rows of one element, shorter than a batch, with a tail, many rows of a block each, and
  // rows of whole vectors summed eight at a time (around the batches of eight rows).
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{1, 1}, {5, 3}, {300, 17}, {64, 100}, {3, 5000}, {5000, 2}, {2000, 40},
                      {17, 8}, {40, 16}, {9, 24}}) {
    INFO(m << " x " << n);
    const auto X = random_array<T, 2>({m, n}, rng), Z = random_array<T, 2>({m, n}, rng);
    const auto B = random_array<T, 2>({1, n}, rng);
    const auto U = random_array<T, 2>({m, 1}, rng);
    const auto C = random_array<T, 3>({m % 7 + 1, n % 9 + 2, 33}, rng);
    const auto E = random_array<T, 3>({m, 3, 5}, rng);
    auto got = fused(X, Z, B, U, C, E);
    auto want = two(X, Z, B, U, C, E);
    CHECK(same_bits(std::get<0>(got), std::get<0>(want)));
    CHECK(same_bits(std::get<1>(got), std::get<1>(want)));
    CHECK(same_bits(std::get<2>(got), std::get<2>(want)));
    CHECK(same_bits(std::get<3>(got), std::get<3>(want)));
    CHECK(same_bits(std::get<4>(got), std::get<4>(want)));
    CHECK(same_bits(std::get<5>(got), std::get<5>(want)));
    CHECK(same_bits(std::get<8>(got), std::get<8>(want)));
    CHECK(same_bits(std::get<10>(got), std::get<10>(want)));
    CHECK(same_bits(std::get<11>(got), std::get<11>(want)));
    CHECK(same_bits(std::get<12>(got), std::get<12>(want)));
    // Over axis 0 the blocks' sums are added in another order: against double loops.
    const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-13;
    std::vector<double> s6(n, 0), a6(n, 0), s7(n, 0), a7(n, 0), s0(m, 0), a0(m, 0);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const double v6 = static_cast<double>(static_cast<T>(static_cast<T>(X(i, j) * X(i, j)) + Z(i, j)));
        const double v7 = static_cast<double>(static_cast<T>(X(i, j) - Z(i, j)));
        const double v0 = static_cast<double>(static_cast<T>(X(i, j) * Z(i, j)));
        s6[j] += v6, a6[j] += std::abs(v6), s7[j] += v7 / static_cast<double>(m), a7[j] += std::abs(v7) / static_cast<double>(m);
        s0[i] += v0, a0[i] += std::abs(v0);
      }
    CHECK(worst_relative(std::get<0>(got), s0, a0) <= tol);
    CHECK(worst_relative(std::get<6>(got), s6, a6) <= tol);
    CHECK(worst_relative(std::get<7>(got), s7, a7) <= tol);
    CHECK(worst_relative(std::get<6>(want), s6, a6) <= tol);
    const auto& mc = std::get<9>(got);
    std::vector<double> s9(C.shape(1), 0), a9(C.shape(1), 0);
    const double count = static_cast<double>(C.shape(0) * C.shape(2));
    for (std::size_t i = 0; i < C.shape(0); ++i)
      for (std::size_t j = 0; j < C.shape(1); ++j)
        for (std::size_t k = 0; k < C.shape(2); ++k) {
          const double v = static_cast<double>(static_cast<T>(C(i, j, k) + T(1)));
          s9[j] += v / count, a9[j] += std::abs(v) / count;
        }
    CHECK(worst_relative(mc, s9, a9) <= tol);
  }
}

TEST_CASE("careduce_fusion over axes: rows, a broadcast row or column, a transpose, axis 0, 3-D",
          "[compile][reduce_fusion]") {
  check_axes<float>();
  check_axes<double>();
}

TEST_CASE("careduce_fusion: max and min keep the loop's NaN and signed zero, in every block", "[compile][reduce_fusion]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(4);
  auto x = xsym::matrix<float>("x");
  auto outs = [&] {
    return xsym::outputs(max(x * 1.5f, 0), min(x - 0.0f, 1), max(abs(x) * -1.0f), min(x + x));
  };
  auto fused = xsym::function("f", xsym::inputs(x), outs());
  auto two = xsym::function("f", xsym::inputs(x), outs(), xsym::optimizer_excluding("careduce_fusion"));
  const float nan_a = std::numeric_limits<float>::quiet_NaN();
  float nan_b;
  const std::uint32_t payload = 0x7fc01234u;
  std::memcpy(&nan_b, &payload, 4);
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{5000, 3}, {700, 40}, {20, 3000}}) {
    auto X = random_array<float, 2>({m, n}, rng);
    for (std::size_t k = 0; k < X.size(); k += 97) X.data()[k] = 0.0f;
    for (std::size_t k = 13; k < X.size(); k += 389) X.data()[k] = -0.0f;
    X.data()[X.size() / 3] = nan_a;
    X.data()[X.size() - 2] = nan_b;
    INFO(m << " x " << n);
    auto got = fused(X);
    auto want = two(X);
    CHECK(same_bits(std::get<0>(got), std::get<0>(want)));
    CHECK(same_bits(std::get<1>(got), std::get<1>(want)));
    CHECK(same_bits(std::get<2>(got), std::get<2>(want)));
    CHECK(same_bits(std::get<3>(got), std::get<3>(want)));
    // numpy: a NaN anywhere in a column makes its maximum NaN.
    const std::size_t col = (X.size() / 3) % n;
    CHECK(std::isnan(std::get<0>(got)(col)));
    CHECK(std::isnan(std::get<3>(got)));
  }
}

#ifdef _OPENMP
// check(f) on a function from make() with openmp=True, at both minsizes and 1 to 4 threads (the
// thread count is read when a function is built).
template <class Make, class Check>
void on_each_thread_count(Make make, Check check) {
  xsym::config.openmp = true;
  for (std::int64_t minsize : {std::int64_t{1}, std::int64_t{200000}}) {
    xsym::config.openmp_elemwise_minsize = minsize;
    for (int threads : {1, 2, 3, 4}) {
      omp_set_num_threads(threads);
      auto f = make();
      INFO(threads << " threads, minsize " << minsize);
      check(f);
    }
  }
  omp_set_num_threads(2);
}

// A sum over axis 0 adds float64 blocks of rows in order on one thread; with threads the value
// is computed at once and its blocks are still added in that order: one thread's bits.
TEST_CASE("careduce_fusion over axis 0 gives one thread's bits on 1 to 4 threads", "[compile][reduce_fusion][openmp]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(12);
  auto x = xsym::matrix<double>("x");
  const xt::xtensor<double, 2> X = random_array<double, 2>({403, 787}, rng) * 0.2;
  const xt::xtensor<double, 2> XT = xt::transpose(random_array<double, 2>({787, 403}, rng));
  auto make = [&] {
    return xsym::function("f", xsym::inputs(x), xsym::outputs(xsym::sum(exp(x) * 0.5, 0), xsym::mean(x * 2.0, 0)));
  };
  xsym::config.openmp = false;
  auto serial_f = make();
  const auto serial = serial_f(X);
  const auto serial_t = serial_f(XT);
  REQUIRE(xsym_test::op_names(serial_f).size() == 2);  // each sum fused with its elementwise work
  // The serial sums against float64 loops.
  for (std::size_t j = 0; j < 787; ++j) {
    double s = 0, m = 0;
    for (std::size_t i = 0; i < 403; ++i) {
      s += std::exp(X(i, j)) * 0.5;
      m += X(i, j) * 2.0;
    }
    CHECK(std::get<0>(serial)(j) == Approx(s).epsilon(1e-13));
    CHECK(std::get<1>(serial)(j) == Approx(m / 403).epsilon(1e-12).margin(1e-13));
  }
  on_each_thread_count(make, [&](auto& f) {
    const auto got = f(X);
    CHECK(same_bits(std::get<0>(got), std::get<0>(serial)));
    CHECK(same_bits(std::get<1>(got), std::get<1>(serial)));
    const auto got_t = f(XT);
    CHECK(same_bits(std::get<0>(got_t), std::get<0>(serial_t)));
    CHECK(same_bits(std::get<1>(got_t), std::get<1>(serial_t)));
  });
}

// A sum over every axis is added in sum_contiguous's order on one thread (the two nodes'
// bits); with threads the value is computed at once and summed in that order too.
TEST_CASE("careduce_fusion over every axis gives one thread's bits on 1 to 4 threads", "[compile][reduce_fusion][openmp]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(13);
  auto x = xsym::matrix<double>("x");
  auto y = xsym::matrix<double>("y");
  auto make = [&] {
    return xsym::function("f", xsym::inputs(x, y), xsym::outputs(xsym::sum(x * y + 1.0), xsym::mean(exp(x) - y)));
  };
  for (auto [r, c] : {std::pair{1000, 300}, std::pair{447, 449}, std::pair{17, 11765}}) {
    const xt::xtensor<double, 2> X = random_array<double, 2>({static_cast<std::size_t>(r), static_cast<std::size_t>(c)}, rng);
    const xt::xtensor<double, 2> Y = random_array<double, 2>({static_cast<std::size_t>(r), static_cast<std::size_t>(c)}, rng);
    xsym::config.openmp = false;
    xsym::config.openmp_elemwise_minsize = 200000;
    auto serial_f = make();
    REQUIRE(xsym_test::op_names(serial_f).size() == 2);  // each sum fused with its elementwise work
    const auto serial = serial_f(X, Y);
    long double s = 0, m = 0;  // the serial sums against a long double loop
    for (std::size_t i = 0; i < X.size(); ++i) {
      s += static_cast<long double>(X.flat(i)) * Y.flat(i) + 1;
      m += std::exp(static_cast<long double>(X.flat(i))) - Y.flat(i);
    }
    CHECK(std::get<0>(serial) == Approx(static_cast<double>(s)).epsilon(1e-13));
    CHECK(std::get<1>(serial) == Approx(static_cast<double>(m / X.size())).epsilon(1e-12));
    INFO(r << " x " << c);
    on_each_thread_count(make, [&](auto& f) {
      const auto got = f(X, Y);
      CHECK(same_bits(std::get<0>(got), std::get<0>(serial)));
      CHECK(same_bits(std::get<1>(got), std::get<1>(serial)));
    });
  }
}
#endif

TEST_CASE("careduce_fusion: excluded by name or tag, under DebugMode, openmp, into and a bad shape",
          "[compile][reduce_fusion][modes]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(9);
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto cost = mean(sqr(x - y));
  for (const char* excluded : {"careduce_fusion", "fusion"}) {
    auto f = xsym::function("f", xsym::inputs(x, y), cost, xsym::optimizer_excluding(excluded));
    const auto fn = xsym_test::op_names(f);
    CHECK(std::count(fn.begin(), fn.end(), "Mean") == 1);
  }
  const auto X = random_array<double, 1>({30011}, rng), Y = random_array<double, 1>({30011}, rng);
  auto plain = xsym::function("f", xsym::inputs(x, y), cost);
  const double want = plain(X, Y);
  auto debug = xsym::function("f", xsym::inputs(x, y), cost, xsym::mode("DebugMode"));
  CHECK(same_bits(debug(X, Y), want));
#ifdef _OPENMP
  // Threads compute the value and the loop reduces it: the same bits for any thread count.
  xsym::config.openmp = true;
  xsym::config.openmp_elemwise_minsize = 1;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);  // read when a function is built
    auto threaded = xsym::function("f", xsym::inputs(x, y), cost);
    CHECK(same_bits(threaded(X, Y), want));
  }
  omp_set_num_threads(2);
  xsym::config.openmp = false;
#endif
  double dest = 0;
  plain.into(dest)(X, Y);
  CHECK(same_bits(dest, want));
  // Operands of different lengths: a shape error naming the fused node and both shapes.
  const auto short_y = random_array<double, 1>({30010}, rng);
  const std::string what = xsym_test::message_of([&] { (void)plain(X, short_y); });
  INFO(what);
  CHECK(what.find("Mean{Composite{sqr((i0 - i1))}}") != std::string::npos);
  CHECK(what.find("(30011,)") != std::string::npos);
  CHECK(what.find("(30010,)") != std::string::npos);
}

}  // namespace reduce_fusion_test
