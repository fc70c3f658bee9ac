#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto z = xsym::vector<double>("z");
  // xsym::profile(true): profile this function whatever the profile flag says.
  auto f = xsym::function("f", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::profile(true));

  const xt::xtensor<double, 1> a{1}, b{2}, c{3};
  for (int i = 0; i < 1000; ++i) f(a, b, c);
  f.profile().print_summary();  // to std::cout; print_summary(os) writes to another stream
}  // and, like every profiled function, its report is printed again at exit
