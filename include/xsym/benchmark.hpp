#ifndef XSYM_BENCHMARK_HPP
#define XSYM_BENCHMARK_HPP

/// @brief xsym inside Google Benchmark: the xsym calls of one benchmark run profiled into a
/// scope of their own, and reported as the benchmark's counters, per op class and per op.
///
///     static void BM_train(benchmark::State& state) {
///       xsym::benchmark::scope profiled("train");
///       for (auto _ : state) train(X, Y);
///       xsym::benchmark::report(state, profiled);
///     }
///
/// Counters are named `<class|op>:<name>:<metric>`: `share%` (of the time xsym's nodes and user
/// regions took), `time` (seconds per iteration, Google Benchmark's kAvgIterations), `GB/s` and
/// `Gflop/s` (bytes and flops over the group's own time, where the profile counts them).
/// With XSYM_PROFILING=0 the scope records nothing and report() adds no counter.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "xsym.hpp"

namespace xsym::benchmark {

/// @brief Which counters report() adds.
struct counters {
  bool classes = true;   ///< a group per op class (xsym::Gemv, xsym::Elemwise, ...)
  bool ops = true;       ///< a group per op (Elemwise{Composite{...}}, Gemv{inplace}, ...)
  std::size_t top_ops = 0;  ///< only the `top_ops` ops that took the most time (0: all)
};

/// @brief Profiles every xsym call made while it lives, on any thread, without printing.
/// Make it where the timed loop starts, after any warm-up call.
class scope {
 public:
  explicit scope(std::string name = "benchmark") : m_scope(std::move(name), false) {}
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

  profile_stats& stats() { return m_scope.stats(); }
  const profile_stats& stats() const { return *m_scope.shared_stats(); }

 private:
  profile_scope m_scope;
};

/// @brief The scope's classes (by_class) or ops, as the profile's Class and Ops sections sum
/// them, the most time first.
inline std::vector<detail::summary_row> groups(const profile_stats& stats, bool by_class) {
  auto [classes, ops] = detail::summary_rows(stats.snapshot(), stats.regions());
  auto& v = by_class ? classes : ops;
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.time > b.time; });
  return std::move(v);
}

/// @brief Adds the scope's counters to the benchmark (see the header's comment for their names).
inline void report(::benchmark::State& state, const scope& s, const counters& which = {}) {
  if constexpr (!profiling_compiled_in) {
    (void)state, (void)s, (void)which;
  } else {
    for (const bool by_class : {true, false}) {
      if (!(by_class ? which.classes : which.ops)) continue;
      const auto gs = groups(s.stats(), by_class);
      double total = 0;
      for (const auto& g : gs) total += g.time;
      std::size_t shown = 0;
      for (const auto& g : gs) {
        if (!by_class && which.top_ops && shown++ >= which.top_ops) break;
        const std::string prefix = std::string(by_class ? "class:" : "op:") + g.key + ":";
        state.counters[prefix + "share%"] = total > 0 ? 100.0 * g.time / total : 0.0;
        state.counters[prefix + "time"] = ::benchmark::Counter(g.time, ::benchmark::Counter::kAvgIterations);
        if (g.bytes > 0 && g.time > 0) state.counters[prefix + "GB/s"] = g.bytes / g.time / 1e9;
        if (g.flops > 0 && g.time > 0) state.counters[prefix + "Gflop/s"] = g.flops / g.time / 1e9;
      }
    }
  }
}

}  // namespace xsym::benchmark

#endif
