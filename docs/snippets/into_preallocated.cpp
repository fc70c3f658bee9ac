#include <iostream>

#include <xtensor/xio.hpp>
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<float>("x");
  auto y = xsym::vector<float>("y");
  auto f = xsym::function("f", xsym::inputs(x, y), xsym::outputs(x * y + 1, xsym::sum(x)));

  const xt::xtensor<float, 1> a = {1, 2, 3}, b = {4, 5, 6};
  xt::xtensor<float, 1> prod = xt::empty<float>({3});  // allocated once, by the caller
  float total = 0;
  for (int step = 0; step < 100; ++step) f.into(prod, total)(a, b);  // no allocation once warm
  std::cout << prod << " " << total << "\n";  // {  5.,  11.,  19.} 6
}
