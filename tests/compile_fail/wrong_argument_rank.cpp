// expect: an argument's rank differs from the input's rank
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2);
  f(xt::xtensor<double, 2>{{1, 2}});
}
