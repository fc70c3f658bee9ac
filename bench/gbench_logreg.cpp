// The logistic regression's xsym / Eigen ratio timed by Google Benchmark, for the comparison
// in docs/performance.md ("Why a round-robin timer"): each benchmark runs its repetitions
// (interleaved with --benchmark_enable_random_interleaving=true), and the ratio is of the
// two medians. bench.cpp times the same two steps round-robin and pairs them per round.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xsym/xsym.hpp>

#include "bench_util.hpp"
#include "eigen_logreg.hpp"

namespace {
constexpr int n = 400, feats = 784;

struct data {
  std::vector<float, xsimd::aligned_allocator<float, 64>> X =
      std::vector<float, xsimd::aligned_allocator<float, 64>>(std::size_t(n) * feats);  // as bench.cpp's
  xt::xtensor<float, 1> Y = xt::empty<float>({n}), w0 = xt::empty<float>({feats});
  data() {
    std::mt19937 rng(42);
    std::normal_distribution<double> normal;
    std::bernoulli_distribution coin(0.5);
    for (auto& v : X) v = static_cast<float>(normal(rng));
    for (auto& v : Y) v = coin(rng) ? 1.0f : 0.0f;
    for (auto& v : w0) v = static_cast<float>(normal(rng));
  }
};
const data& the_data() {
  static const data d;
  return d;
}

void xsym_step(benchmark::State& state) {
  const data& d = the_data();
  auto X = xt::adapt(d.X.data(), d.X.size(), xt::no_ownership(), std::array<std::size_t, 2>{n, feats});
  auto train = std::get<0>(bench::seeds_train(d.w0));
  auto pred = xt::xtensor<bool, 1>::from_shape({std::size_t(n)});
  auto xent_out = xt::xtensor<float, 1>::from_shape({std::size_t(n)});
  for (auto _ : state) train.into(pred, xent_out)(X, d.Y);
}

void eigen_step(benchmark::State& state) {
  const data& d = the_data();
  bench::eigen_logreg<float> e(d.X.data(), d.Y.data(), n, feats);
  e.reset(d.w0.data());
  for (auto _ : state) {
    e.step();
    benchmark::DoNotOptimize(e.w.data());
  }
}
}  // namespace

BENCHMARK(xsym_step)->Name("logreg/xsym/float32")->Unit(benchmark::kMicrosecond);
BENCHMARK(eigen_step)->Name("logreg/eigen/float32")->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
