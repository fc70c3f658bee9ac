// Concurrency: threads calling one compiled function (no updates) and different functions at
// once get the same results as one thread. Calls on one function object are serialised by
// its lock; different functions run in parallel.
#include <catch2/catch.hpp>

#include <random>
#include <thread>

#include <xsym/xsym.hpp>

#include "compile_util.hpp"

TEST_CASE("threads calling the same function and different functions get correct results", "[compile][threads]") {
  xsym_test::clean_config guard;
  auto x = xsym::matrix<double>("x");
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("f", xsym::inputs(x, v), xsym::outputs(xsym::dot(x, v) + xsym::sum(x, 1), exp(-x) * 2));
  auto g = xsym::function("g", xsym::inputs(v), xsym::sum(v * v));
  constexpr int n_threads = 4, calls = 200;
  std::vector<std::thread> threads;
  std::vector<int> failures(n_threads, 0);
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_real_distribution<double> u(-1, 1);
      for (int c = 0; c < calls; ++c) {
        const std::size_t rows = 1 + (c + t) % 9, cols = 1 + (c * 7 + t) % 13;
        xt::xtensor<double, 2> X = xt::empty<double>({rows, cols});
        xt::xtensor<double, 1> V = xt::empty<double>({cols});
        for (auto& e : X) e = u(rng);
        for (auto& e : V) e = u(rng);
        auto [a, b] = f(X, V);
        for (std::size_t i = 0; i < rows; ++i) {
          double want = 0;
          for (std::size_t j = 0; j < cols; ++j) {
            want += X(i, j) * V(j) + X(i, j);
            if (std::abs(b(i, j) - 2 * std::exp(-X(i, j))) > 1e-12) ++failures[static_cast<std::size_t>(t)];
          }
          if (std::abs(a(i) - want) > 1e-12) ++failures[static_cast<std::size_t>(t)];
        }
        double want_g = 0;
        for (double e : V) want_g += e * e;
        if (std::abs(g(V) - want_g) > 1e-12) ++failures[static_cast<std::size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < n_threads; ++t) CHECK(failures[static_cast<std::size_t>(t)] == 0);
}
