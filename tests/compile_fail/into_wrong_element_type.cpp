// expect: xsym: into(...): a destination's element type must equal its output's
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2);
  xt::xtensor<float, 1> a = xt::zeros<float>({3});
  xt::xtensor<double, 1> out = xt::zeros<double>({3});  // a float32 output into float64 memory
  f.into(out)(a);
}
