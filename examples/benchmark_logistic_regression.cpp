// The seeds' training step as a Google Benchmark, float32 and float64, with xsym's counters per
// op class and per op beside the benchmark's own time:
//
//   ./benchmark_logistic_regression --benchmark_out=step.json --benchmark_out_format=json
//   python3 scripts/xsym-prof diff before.json step.json     # which op moved between two runs
//
// XSYM_BENCH_PROFILE=<file> also writes each benchmark's last run's xsym profile (JSON) to
// <file>, where "{dtype}" becomes float32 or float64.
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include <xsym/benchmark.hpp>

namespace {
template <class T>
void train_step(benchmark::State& state) {
  const std::size_t n = 400, feats = 784;
  std::mt19937 rng(42);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution coin(0.5);
  xt::xtensor<T, 2> X = xt::empty<T>({n, feats});
  xt::xtensor<T, 1> Y = xt::empty<T>({n});
  xt::xtensor<T, 1> w0 = xt::empty<T>({feats});
  for (auto& v : X) v = static_cast<T>(normal(rng));
  for (auto& v : Y) v = coin(rng) ? T(1) : T(0);
  for (auto& v : w0) v = static_cast<T>(normal(rng));

  auto x = xsym::matrix<T>("x");
  auto y = xsym::vector<T>("y");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(T(0), "b");
  auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
  auto cost = mean(xent) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, b);
  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                              xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(b, b - 0.01 * gb)));
  train(X, Y);  // warm-up, outside the profiled scope

  const std::string dtype = sizeof(T) == 4 ? "float32" : "float64";
  xsym::benchmark::scope profiled("logreg_step/" + dtype);
  for (auto _ : state) benchmark::DoNotOptimize(train(X, Y));
  xsym::benchmark::report(state, profiled, {.classes = true, .ops = true, .top_ops = 3});  // every class, 3 ops
  if (const char* path = std::getenv("XSYM_BENCH_PROFILE")) {
    std::string file = path;
    if (const auto at = file.find("{dtype}"); at != std::string::npos) file.replace(at, 7, dtype);
    std::ofstream out(file);
    xsym::write_json(profiled.stats(), out);
  }
}
}  // namespace

BENCHMARK_TEMPLATE(train_step, float)->Name("logreg_step/float32")->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(train_step, double)->Name("logreg_step/float64")->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
