// Concurrency: threads calling one compiled function and different functions at once get the
// same results as one thread; a shared variable read by calls while set_value and another
// function's updates replace it is never seen torn. `make test-tsan` runs this area under
// ThreadSanitizer, so an unlocked access fails there even when no wrong value shows.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include <xsym/xsym.hpp>

#include "compile/compile_util.hpp"

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

// w always holds n copies of one value (set_value and the update both keep it so): a call that
// read half an old and half a new value would see a sum that is not n times one element.
TEST_CASE("calls read shared variables whole while set_value and updates replace them", "[threads][shared]") {
  xsym_test::clean_config guard;
  constexpr std::size_t n = 64;
  auto w = xsym::shared(xt::xtensor<double, 1>(xt::ones<double>({n})), "w");
  auto b = xsym::shared(0.0, "b");
  auto x = xsym::vector<double>("x");
  // Readers: the sum of w and its first element, in one call.
  auto read = xsym::function("read", xsym::inputs(x), xsym::outputs(xsym::sum(w * 1.0), xsym::max(w) + x * 0.0));
  // Writers through a function: w <- w + 1 (every element alike), b <- b + 1.
  auto bump = xsym::function("bump", xsym::inputs(), xsym::outputs(xsym::sum(w)),
                             xsym::updates(xsym::update(w, w + 1.0), xsym::update(b, b + 1.0)));
  constexpr int rounds = 2000;
  std::atomic<int> torn{0}, done{0}, ready{0};
  // Every thread starts once all four exist, so the writes overlap the reads.
  auto start_together = [&] {
    ++ready;
    while (ready.load() < 4) std::this_thread::yield();
  };
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    start_together();
    for (int i = 0; i < rounds; ++i) bump();
    ++done;
  });
  threads.emplace_back([&] {
    start_together();
    for (int i = 0; i < rounds; ++i) w.set_value(xt::xtensor<double, 1>(xt::ones<double>({n}) * double(-i)));
    ++done;
  });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&] {
      const xt::xtensor<double, 1> one = xt::zeros<double>({1});
      start_together();
      while (done.load() < 2) {
        auto [s, m] = read(one);
        if (s != static_cast<double>(n) * m(0)) ++torn;
        const auto v = w.get_value();
        for (double e : v)
          if (e != v(0)) ++torn;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(torn.load() == 0);
  CHECK(b.get_value()() == rounds);  // every update of b applied once: no lost update
}
