// expect: wrong number of arguments
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto f = xsym::function("f", xsym::inputs(x, y), x + y);
  f(xt::xtensor<double, 1>{1});
}
