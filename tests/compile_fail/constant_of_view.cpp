// expect: xsym::constant takes an xt::xtensor<T, N>
#include <xtensor/xview.hpp>
#include <xsym/xsym.hpp>
int main() {
  const xt::xtensor<double, 2> m{{1.0, 2.0}, {3.0, 4.0}};
  auto c = xsym::constant(xt::view(m, 0, xt::all()));  // a view's rank is not a type
}
