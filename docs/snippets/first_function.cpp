#include <iostream>

#include <xtensor/xio.hpp>
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto z = xsym::vector<double>("z");
  auto f = xsym::function("f", xsym::inputs(x, y, z), xsym::outputs((x + y + z) * 2));

  auto [r] = f(xt::xtensor<double, 1>{1}, xt::xtensor<double, 1>{2}, xt::xtensor<double, 1>{3});
  std::cout << r << "\n";  // { 12.}
}
