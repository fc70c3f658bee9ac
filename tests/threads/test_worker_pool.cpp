// openmp=True's worker threads (backend/cpu/parallel.hpp): every element of a split range is
// run once, at grain boundaries, whoever claims it; a throwing chunk reaches the caller and
// leaves the pool usable; callers on several threads at once (one gets the pool, the others run
// alone) and more threads than cores give one thread's results. Under ThreadSanitizer
// (`make test-tsan`) a claim or a result read without ordering fails here.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <xsym/xsym.hpp>

#include "compile/compile_util.hpp"

#ifdef _OPENMP
TEST_CASE("parallel_chunks runs every index once, in chunks that start at multiples of the grain", "[threads][pool]") {
  for (const std::int64_t n : {1, 7, 8, 9, 63, 64, 65, 1000, 4099}) {
    for (const std::int64_t grain : {1, 8, 16}) {
      for (const int threads : {1, 2, 3, 4, 8}) {
        std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
        std::atomic<int> bad_start{0};
        xsym::cpu::parallel_chunks(n, grain, threads, [&](std::int64_t lo, std::int64_t hi) {
          if (lo % grain != 0 || lo >= hi || hi > n) ++bad_start;
          for (std::int64_t i = lo; i < hi; ++i) ++seen[static_cast<std::size_t>(i)];
        });
        INFO("n " << n << " grain " << grain << " threads " << threads);
        CHECK(bad_start == 0);
        int wrong = 0;
        for (auto& s : seen) wrong += s.load() != 1;
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("a chunk that throws reaches the caller; the pool runs the next job", "[threads][pool]") {
  for (int round = 0; round < 20; ++round) {
    CHECK_THROWS_WITH(xsym::cpu::parallel_chunks(1000, 8, 4,
                                                 [&](std::int64_t lo, std::int64_t) {
                                                   if (lo >= 496) throw std::runtime_error("chunk failed");
                                                 }),
                      "chunk failed");
    std::atomic<std::int64_t> total{0};
    xsym::cpu::parallel_chunks(1000, 8, 4, [&](std::int64_t lo, std::int64_t hi) { total += hi - lo; });
    CHECK(total == 1000);
  }
}

TEST_CASE("callers on several threads at once each get all of their range", "[threads][pool]") {
  constexpr int callers = 3, jobs = 300;
  std::vector<int> failures(callers, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < callers; ++t)
    ts.emplace_back([&, t] {
      for (int j = 0; j < jobs; ++j) {
        const std::int64_t n = 100 + 37 * ((j + t) % 11);
        std::vector<double> out(static_cast<std::size_t>(n), 0.0);
        xsym::cpu::parallel_chunks(n, 4, 4, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t i = lo; i < hi; ++i) out[static_cast<std::size_t>(i)] = std::sqrt(static_cast<double>(i + t));
        });
        for (std::int64_t i = 0; i < n; ++i)
          failures[static_cast<std::size_t>(t)] += out[static_cast<std::size_t>(i)] != std::sqrt(static_cast<double>(i + t));
      }
    });
  for (auto& th : ts) th.join();
  for (int f : failures) CHECK(f == 0);
}

TEST_CASE("openmp=True on more threads than cores: the step equals one thread's, call after call", "[threads][pool]") {
  xsym_test::clean_config guard;
  const int before = omp_get_max_threads();
  omp_set_num_threads(4);
  auto x = xsym::matrix<double>("x");
  auto w = xsym::vector<double>("w");
  xt::xtensor<double, 2> X = xt::empty<double>({400, 300});
  xt::xtensor<double, 1> W = xt::empty<double>({300});
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& e : X) e = u(rng);
  for (auto& e : W) e = u(rng);
  auto p = 1 / (1 + exp(-xsym::dot(x, w)));
  auto g = xsym::dot(x.T(), p - 0.5);  // both products split (the matrix has 120000 elements)
  auto serial = xsym::function("serial", xsym::inputs(x, w), g)(X, W);
  for (std::size_t j = 0; j < 300; j += 37) {  // and the serial run is the formula's
    double want = 0;
    for (std::size_t i = 0; i < 400; ++i) {
      double d = 0;
      for (std::size_t k = 0; k < 300; ++k) d += X(i, k) * W(k);
      want += X(i, j) * (1 / (1 + std::exp(-d)) - 0.5);
    }
    CHECK(serial(j) == Approx(want).epsilon(1e-10));
  }
  xsym::config.openmp = true;
  auto parallel = xsym::function("parallel", xsym::inputs(x, w), g);
  int different = 0;
  for (int c = 0; c < xsym_test::iterations(200); ++c) different += !(parallel(X, W) == serial);
  CHECK(different == 0);
  omp_set_num_threads(before);
}
#endif
