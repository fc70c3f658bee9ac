// openmp=True: split nodes and products give one thread's results. Threads calling functions
// concurrently are tested in tests/threads (built again under ThreadSanitizer).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <xsym/xsym.hpp>
#include <xtensor/xadapt.hpp>

#include "compile_util.hpp"

#ifdef _OPENMP
// openmp=True (this area is compiled with -fopenmp): large elementwise nodes and products are
// split among threads at boundaries that change no result, so every output must equal the
// serial run's bit for bit, and both must match a float64 recomputation.
TEST_CASE("openmp=True splits elementwise nodes and products without changing any result", "[compile][openmp]") {
  REQUIRE(xsym::cpu::openmp_compiled_in);
  xsym_test::clean_config guard;
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  // Sizes around the split grains: rows not a multiple of 8, columns not of 16, odd lengths.
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{403, 787}, {64, 2048}, {1000, 37}, {9, 4000}}) {
    xt::xtensor<float, 2> X = xt::empty<float>({rows, cols});
    xt::xtensor<float, 1> v = xt::empty<float>({cols}), u = xt::empty<float>({rows});
    for (auto& e : X) e = static_cast<float>(normal(rng));
    for (auto& e : v) e = static_cast<float>(normal(rng));
    for (auto& e : u) e = static_cast<float>(normal(rng));
    auto x = xsym::matrix<float>("x");
    auto a = xsym::vector<float>("a");
    auto b = xsym::vector<float>("b");
    auto build = [&] {
      return xsym::function("f", xsym::inputs(x, a, b),
                            xsym::outputs(xsym::dot(x, a), xsym::dot(x.T(), b), b + xsym::dot(x, a) * 0.5f,
                                          exp(-x) * x + 1, x * xsym::dimshuffle(b, 0, 'x'), exp(x * 0.1f) + a));
    };
    xsym::config.openmp = false;
    auto serial = build()(X, v, u);
    xsym::config.openmp = true;
    xsym::config.openmp_elemwise_minsize = 1;  // split even small nodes
    for (int threads : {2, 3, 4}) {
      omp_set_num_threads(threads);  // read when a function is built
      auto parallel = build()(X, v, u);
      CHECK(bool(std::get<0>(parallel) == std::get<0>(serial)));
      CHECK(bool(std::get<1>(parallel) == std::get<1>(serial)));
      CHECK(bool(std::get<2>(parallel) == std::get<2>(serial)));
      CHECK(bool(std::get<3>(parallel) == std::get<3>(serial)));
      CHECK(bool(std::get<4>(parallel) == std::get<4>(serial)));
      CHECK(bool(std::get<5>(parallel) == std::get<5>(serial)));  // a row repeated: spans of whole rows
    }
    omp_set_num_threads(2);
    xsym::config.openmp = false;
    // The serial results against a float64 recomputation.
    double err0 = 0, err1 = 0, scale = 1;
    for (std::size_t r = 0; r < rows; ++r) {
      double s = 0;
      for (std::size_t c = 0; c < cols; ++c) s += double(X(r, c)) * double(v(c));
      err0 = std::max(err0, std::abs(s - double(std::get<0>(serial)(r))));
      scale = std::max(scale, std::abs(s));
    }
    for (std::size_t c = 0; c < cols; ++c) {
      double s = 0;
      for (std::size_t r = 0; r < rows; ++r) s += double(X(r, c)) * double(u(r));
      err1 = std::max(err1, std::abs(s - double(std::get<1>(serial)(c))));
      scale = std::max(scale, std::abs(s));
    }
    CHECK(err0 <= 1e-5 * scale * std::sqrt(double(cols)));
    CHECK(err1 <= 1e-5 * scale * std::sqrt(double(rows)));
    const auto& e = std::get<3>(serial);
    for (std::size_t i = 0; i < X.size(); i += 97)
      CHECK(std::abs(double(e.flat(i)) - (std::exp(-double(X.flat(i))) * double(X.flat(i)) + 1)) <= 1e-5 * (1 + std::abs(double(e.flat(i)))));
  }
}

TEST_CASE("openmp=True: the column product of a matrix off a cache line is the serial one, bit for bit", "[compile][openmp]") {
  // Its first elements are summed apart to align the loads; threads must split after them.
  xsym_test::clean_config guard;
  const std::size_t rows = 300, cols = 1024;
  std::vector<float> storage(rows * cols + 64);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (auto& e : storage) e = normal(rng);
  float* line = storage.data();
  while (reinterpret_cast<std::uintptr_t>(line) % 64 != 0) ++line;
  xt::xtensor<float, 1> b = xt::empty<float>({rows});
  for (auto& e : b) e = normal(rng);
  auto x = xsym::matrix<float>("x");
  auto v = xsym::vector<float>("v");
  xsym::config.openmp = false;
  auto serial_f = xsym::function("cols", xsym::inputs(x, v), xsym::dot(x.T(), v));
  xsym::config.openmp = true;
  auto parallel_f = xsym::function("cols", xsym::inputs(x, v), xsym::dot(x.T(), v));
  xsym::config.openmp = false;
  for (std::size_t offset : {0, 1, 4, 13}) {
    INFO("offset " << offset);
    auto a = xt::adapt(line + offset, rows * cols, xt::no_ownership(), std::array<std::size_t, 2>{rows, cols});
    const xt::xtensor<float, 1> serial = serial_f(a, b);
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      CHECK(bool(parallel_f(a, b) == serial));
    }
    omp_set_num_threads(2);
  }
}

TEST_CASE("openmp=True: a function called from several threads at once still gets exact results", "[compile][openmp]") {
  xsym_test::clean_config guard;
  xsym::config.openmp = true;
  xsym::config.openmp_elemwise_minsize = 1000;
  auto x = xsym::matrix<double>("x");
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("f", xsym::inputs(x, v), xsym::outputs(xsym::dot(x, v), tanh(x) * 3));
  xt::xtensor<double, 2> X = xt::empty<double>({300, 200});
  xt::xtensor<double, 1> V = xt::empty<double>({200});
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& e : X) e = u(rng);
  for (auto& e : V) e = u(rng);
  xsym::config.openmp = false;
  auto serial = xsym::function("g", xsym::inputs(x, v), xsym::outputs(xsym::dot(x, v), tanh(x) * 3))(X, V);
  std::vector<int> failures(3, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int c = 0; c < 20; ++c) {
        auto r = f(X, V);
        failures[static_cast<std::size_t>(t)] += !(std::get<0>(r) == std::get<0>(serial) && std::get<1>(r) == std::get<1>(serial));
      }
    });
  for (auto& th : threads) th.join();
  for (int n : failures) CHECK(n == 0);
}
#endif
