// expect: xsym::shared takes an xt::xtensor<T, N>
#include <xtensor/xarray.hpp>
#include <xsym/xsym.hpp>
int main() {
  const xt::xarray<double> w0{{1.0, 2.0}};
  auto w = xsym::shared(w0, "w");  // the rank of an xarray is not a type
}
