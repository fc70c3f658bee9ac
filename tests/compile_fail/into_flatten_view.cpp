// expect: not a lazy expression or a view without strides of its own
#include <xsym/xsym.hpp>
#include <xtensor/xmanipulation.hpp>
int main() {
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2);
  xt::xtensor<float, 1> a = xt::zeros<float>({6});
  xt::xtensor<float, 2> out = xt::zeros<float>({2, 3});
  auto flat = xt::flatten(xt::transpose(out));  // its storage is an iterator, not memory
  f.into(flat)(a);
}
