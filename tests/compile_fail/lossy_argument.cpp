// expect: would lose precision
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2);
  f(xt::xtensor<double, 1>{1.5});
}
