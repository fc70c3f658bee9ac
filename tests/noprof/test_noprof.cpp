// Built with XSYM_PROFILING=0: every timer compiles out. This proves the switch: the
// profiler records nothing and the region macro is an empty statement; where Google Benchmark
// is found (XSYM_TEST_BENCHMARK), xsym::benchmark::report adds no counter.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>
#ifdef XSYM_TEST_BENCHMARK
#include <xsym/benchmark.hpp>

#include <map>
#include <string>
#include <vector>
#endif

static_assert(!xsym::profiling_compiled_in, "this test must be built with XSYM_PROFILING=0");

TEST_CASE("with XSYM_PROFILING=0 nothing is recorded", "[noprof]") {
  auto stats = std::make_shared<xsym::profile_stats>("off", false);
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2, xsym::profile(stats));
  {
    xsym::profile_scope scope("scope", false);
    XSYM_PROFILE_SCOPE("region");
    CHECK(f(xt::xtensor<double, 1>{1, 2})(1) == 4.0);
    CHECK(scope.stats().functions().empty());
    CHECK(scope.stats().regions().empty());
  }
  CHECK(stats->functions().empty());
}

#ifdef XSYM_TEST_BENCHMARK
namespace {
// Keeps what each run reports instead of printing it.
struct keep_runs : benchmark::BenchmarkReporter {
  std::vector<Run> runs;
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& r) override { runs.insert(runs.end(), r.begin(), r.end()); }
};
}  // namespace

TEST_CASE("with XSYM_PROFILING=0 a benchmark's report adds no xsym counter", "[noprof][benchmark]") {
  // The seeds' training step, as examples/benchmark_logistic_regression.cpp times it.
  const std::size_t n = 40, feats = 16;
  xt::xtensor<double, 2> X = xt::zeros<double>({n, feats});
  xt::xtensor<double, 1> Y = xt::zeros<double>({n});
  for (std::size_t i = 0; i < n; ++i) {
    Y(i) = static_cast<double>(i % 2);
    for (std::size_t j = 0; j < feats; ++j) X(i, j) = 0.01 * static_cast<double>((i * 7 + j * 3) % 11) - 0.05;
  }
  auto x = xsym::matrix<double>("x");
  auto y = xsym::vector<double>("y");
  auto w = xsym::shared(xt::xtensor<double, 1>(xt::zeros<double>({feats})), "w");
  auto b = xsym::shared(0.0, "b");
  auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
  auto cost = mean(xent) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, b);
  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                              xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(b, b - 0.01 * gb)));
  benchmark::RegisterBenchmark("noprof_step", [&](benchmark::State& state) {
    xsym::benchmark::scope profiled("noprof_step");
    for (auto _ : state) benchmark::DoNotOptimize(train(X, Y));
    xsym::benchmark::report(state, profiled);
    CHECK(profiled.stats().functions().empty());
  })->Iterations(20);
  keep_runs kept;
  benchmark::RunSpecifiedBenchmarks(&kept);
  REQUIRE(kept.runs.size() == 1);
  CHECK(kept.runs[0].iterations == 20);
  std::vector<std::string> names;
  for (const auto& [name, counter] : kept.runs[0].counters) names.push_back(name);
  INFO("counters: " << names.size());
  CHECK(names.empty());
  // The step still trained: the weights moved from zero.
  CHECK(xt::amax(xt::abs(w.get_value()))() > 0.0);
}
#endif
