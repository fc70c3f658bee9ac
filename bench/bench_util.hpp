// The helpers every benchmark program shares: round-robin timing, the JSON line bench/run.py
// reads, the impl names. Header-only for the benchmarks' own sources (bench.cpp, calls.cpp).
#ifndef XSYM_BENCH_BENCH_UTIL_HPP
#define XSYM_BENCH_BENCH_UTIL_HPP

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <xsym/xsym.hpp>

namespace bench {

using clock_type = std::chrono::steady_clock;

struct timing {
  double median, min;
  int repeats;
};

// Median and minimum of `repeats` timed runs of each of fs (after one warm-up run each),
// divided by `per`. Round-robin, one run of each per round: this VM's drift over seconds
// spreads over all of them instead of favouring one. Each round takes them in a shuffled
// order: a run starts from the cache its predecessor left, and a fixed order would give each
// the same predecessor every time.
inline std::vector<timing> measure_round_robin(const std::vector<std::function<void()>>& fs, int repeats, double per) {
  for (const auto& f : fs) f();
  std::vector<std::vector<double>> t(fs.size());
  std::vector<std::size_t> order(fs.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::mt19937 rng(12345);
  for (int r = 0; r < repeats; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (const std::size_t k : order) {
      const auto t0 = clock_type::now();
      fs[k]();
      t[k].push_back(std::chrono::duration<double>(clock_type::now() - t0).count() / per);
    }
  }
  std::vector<timing> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back({v[v.size() / 2], v.front(), repeats});
  }
  return out;
}

// Median and minimum of `repeats` timed runs of f (after one warm-up run), divided by `per`.
inline timing measure(const std::function<void()>& f, int repeats, double per) {
  return measure_round_robin({f}, repeats, per).front();
}

inline bool noprof_build() { return !xsym::profiling_compiled_in; }

// The compiler of the xsym_cxx rows (cxx=...): $XSYM_BENCH_CXX, else g++.
inline std::string bench_cxx() {
  const char* c = std::getenv("XSYM_BENCH_CXX");
  return c && *c ? c : "g++";
}

// Profiled functions record into a profile that is not printed at exit.
inline xsym::profile bench_profile(bool on) {
  return on ? xsym::profile(std::make_shared<xsym::profile_stats>("bench", false)) : xsym::profile(false);
}

inline void emit(const char* bench, const std::string& impl, const char* dtype, double size, timing t, const char* extra = "") {
  std::printf("{\"benchmark\": \"%s\", \"impl\": \"%s\", \"dtype\": \"%s\", \"size\": %.0f, \"median_s\": %.6e, "
              "\"min_s\": %.6e, \"repeats\": %d%s}\n",
              bench, impl.c_str(), dtype, size, t.median, t.min, t.repeats, extra);
  std::fflush(stdout);
}

inline std::string xsym_impl(bool profiled) { return noprof_build() ? "xsym_noprof" : profiled ? "xsym_profiled" : "xsym"; }

inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench: result check failed: %s\n", what);
    std::exit(1);
  }
}

/// The seeds' training step on element type T: {train, w, b}, train compiled with `options`
/// (its outputs: the prediction and the cross-entropy).
template <class T, class... Options>
auto seeds_train(const xt::xtensor<T, 1>& w0, const Options&... options) {
  auto x = xsym::matrix<T>("x");
  auto y = xsym::vector<T>("y");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(T(0), "b");
  auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
  auto cost = mean(xent) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, b);
  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                              xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(b, b - 0.01 * gb)),
                              options...);
  return std::tuple{train, w, b};
}

// The same step with the gradient written by hand, as Eigen's step computes it: g is a typed
// tree, whose kernel computes the one pass's g block by block without cxx.
template <class T>
auto hand_train(const xt::xtensor<T, 1>& w0, std::size_t rows) {
  auto x = xsym::matrix<T>("x");
  auto y = xsym::vector<T>("y");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(T(0), "b");
  auto z = dot(x, w) + b;
  auto xent = y * softplus(-z) + (1 - y) * softplus(z);
  auto g = (sigmoid(z) - y) / static_cast<T>(rows);
  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(sigmoid(z) > 0.5, xent),
                              xsym::updates(xsym::update(w, w - T(0.01) * (dot(x.T(), g) + T(0.02) * w)),
                                            xsym::update(b, b - T(0.01) * sum(g))));
  return std::tuple{train, w, b};
}

}  // namespace bench

#endif
