// The seeds' 3-node function, (x + y + z) * 2, called on 1-element arrays: ns per call,
// returning a new xt::xtensor and writing into a preallocated one, against the same call
// written by hand with xtensor. `name` is the benchmark's name: what the result's allocation
// costs depends on the program's xtensor allocator, so each program says which it measured.
#ifndef XSYM_BENCH_CALL_OVERHEAD_HPP
#define XSYM_BENCH_CALL_OVERHEAD_HPP

#include <string>

#include <xtensor/xtensor.hpp>
#include <xsym/xsym.hpp>

#include "bench_util.hpp"

namespace bench {

inline void bench_calls(const std::string& name) {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  const xt::xtensor<double, 1> a{1}, b{2}, c{3};
  const int calls = 200000;
  for (bool profiled : {false, true}) {
    if (profiled && noprof_build()) continue;
    auto f = xsym::function("f", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::profile(bench_profile(profiled)));
    double sink = 0;
    auto t = measure([&] { for (int i = 0; i < calls; ++i) sink += f(a, b, c)(0); }, 15, calls);
    check(sink > 0, "call overhead result");
    emit(name.c_str(), xsym_impl(profiled), "float64", 1, t);
    // The same call writing into a preallocated result: the function's own overhead, without
    // the allocation of the xt::xtensor it returns.
    xt::xtensor<double, 1> r{0};
    sink = 0;
    t = measure([&] { for (int i = 0; i < calls; ++i) { f.into(r)(a, b, c); sink += r(0); } }, 15, calls);
    check(sink == 12.0 * 16 * calls, "call overhead (into) result");
    emit((name + "_into").c_str(), xsym_impl(profiled), "float64", 1, t);
  }
  if (!noprof_build()) {
    // Baseline: the same expression hand-written with xtensor, returning a fresh xt::xtensor.
    auto hand = [](const xt::xtensor<double, 1>& p, const xt::xtensor<double, 1>& q, const xt::xtensor<double, 1>& s) {
      xt::xtensor<double, 1> out = (p + q + s) * 2.0;
      return out;
    };
    double sink = 0;
    auto t = measure([&] { for (int i = 0; i < calls; ++i) sink += hand(a, b, c)(0); }, 15, calls);
    check(sink == 12.0 * 16 * calls, "call overhead (xtensor) result");
    emit(name.c_str(), "xtensor", "float64", 1, t);
  }
}

}  // namespace bench

#endif
