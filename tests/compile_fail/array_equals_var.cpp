// expect: wrap the array in xsym::constant(array)
#include <xsym/xsym.hpp>
int main() {
  auto v = xsym::vector<double>("v");
  const xt::xtensor<double, 1> c{1, 2, 3};
  auto e = (c == v);  // a comparison too, not only arithmetic
}
