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
#include <map>
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

/// @brief One class's or op's totals over a scope.
struct group {
  std::string name;
  double seconds = 0;
  std::int64_t calls = 0;
  double flops = 0, bytes = 0;  // summed over calls, from each node's last recorded shapes
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

/// @brief The scope's classes (by_class) or ops, as the profile's Class and Ops sections sum them.
inline std::vector<group> groups(const profile_stats& stats, bool by_class) {
  std::map<std::string, group> m;
  for (const auto& f : stats.functions())
    for (const auto& r : detail::apply_rows(*f, false, nullptr)) {
      const std::string key = by_class ? r.apply().class_name() : r.apply().op_name();
      group& g = m[key];
      g.name = key;
      g.seconds += r.time;
      g.calls += r.calls;
      g.flops += r.flops * static_cast<double>(r.calls);
      g.bytes += r.bytes * static_cast<double>(r.calls);
    }
  for (const auto& [name, reg] : stats.regions()) {
    group& g = m[by_class ? std::string("xsym::UserRegion") : name];
    g.name = by_class ? "xsym::UserRegion" : name;
    g.seconds += static_cast<double>(reg.ticks) * detail::seconds_per_tick();
    g.calls += reg.calls;
  }
  std::vector<group> v;
  for (auto& [k, g] : m) v.push_back(std::move(g));
  std::stable_sort(v.begin(), v.end(), [](const group& a, const group& b) { return a.seconds > b.seconds; });
  return v;
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
      for (const auto& g : gs) total += g.seconds;
      std::size_t shown = 0;
      for (const auto& g : gs) {
        if (!by_class && which.top_ops && shown++ >= which.top_ops) break;
        const std::string prefix = std::string(by_class ? "class:" : "op:") + g.name + ":";
        state.counters[prefix + "share%"] = total > 0 ? 100.0 * g.seconds / total : 0.0;
        state.counters[prefix + "time"] = ::benchmark::Counter(g.seconds, ::benchmark::Counter::kAvgIterations);
        if (g.bytes > 0 && g.seconds > 0) state.counters[prefix + "GB/s"] = g.bytes / g.seconds / 1e9;
        if (g.flops > 0 && g.seconds > 0) state.counters[prefix + "Gflop/s"] = g.flops / g.seconds / 1e9;
      }
    }
  }
}

}  // namespace xsym::benchmark

#endif
