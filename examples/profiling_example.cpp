// The seeds' profiling example: (x + y + z) * 2 on three float64 vectors, called once.
//
//   XSYM_FLAGS=profile=True ./profiling_example
//   XSYM_FLAGS=optimizer_excluding=fusion:inplace,profile=True ./profiling_example
#include <iostream>

#include <xtensor/xio.hpp>
#include <xsym/xsym.hpp>

int main() try {
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto z = xsym::vector<double>("z");
  auto f = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs((x + y + z) * 2));

  const xt::xtensor<double, 1> a{1}, b{2}, c{3};
  auto [r] = f(a, b, c);
  std::cout << "f([1],[2],[3]) = " << r << "\n";
  std::cout << "toposort:\n";
  for (const auto& node : f.toposort()) std::cout << "   " << f.graph().node_text(node) << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
