// expect: the cost must be a scalar
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<double>("x");
  auto g = xsym::grad(x * 2, x);
  (void)g;
}
