// expect: the new value's element type must equal the shared variable's
#include <xsym/xsym.hpp>
int main() {
  auto w = xsym::shared(xt::xtensor<float, 1>{1, 2}, "w");
  auto d = xsym::vector<double>("d");
  auto u = xsym::update(w, d * 2);
  (void)u;
}
