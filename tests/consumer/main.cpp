// A user program outside the xsym tree: it must build against the installed package or a
// subdirectory copy, with nothing but the xsym::xsym target.
#include <iostream>

#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("consumer", xsym::inputs(x), xsym::sum(x * 2));
  const double r = f(xt::xtensor<double, 1>{1, 2, 3});
  std::cout << "consumer result " << r << "\n";
  return r == 12.0 ? 0 : 1;
}
