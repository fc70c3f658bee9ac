#include <iostream>

#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<double>("x");

  // DebugMode: every node checked against the reference kernels, the whole result against
  // the graph built without fusion, in-place or BLAS rewrites, and outputs checked for NaN/Inf.
  auto f = xsym::function("f", xsym::inputs(x), 10 * x, xsym::mode("DebugMode"));
  f(xt::xtensor<double, 1>{5});
  f(xt::xtensor<double, 1>{0});
  f(xt::xtensor<double, 1>{7});

  // NanGuardMode: raise at the first node that produces NaN, Inf or a value above 1e10.
  auto g = xsym::function("g", xsym::inputs(x), log(x) * 2, xsym::nan_guard_mode{});
  try {
    g(xt::xtensor<double, 1>{1, -1});
  } catch (const xsym::nan_guard_error& e) {
    std::cout << e.what() << "\n";
  }

  // MonitorMode: your callbacks before and after every Apply node (without them, each node
  // and a summary of its values is printed to stderr).
  auto after = [](const xsym::node_event& e) {
    std::cout << e.text() << " -> " << e.outputs[0]->flat_as_double(0) << "\n";
  };
  auto h = xsym::function("h", xsym::inputs(x), exp(x) + 1, xsym::monitor_mode{nullptr, after});
  h(xt::xtensor<double, 1>{0});
}
