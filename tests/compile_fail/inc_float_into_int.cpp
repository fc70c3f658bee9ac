// expect: a floating-point value added into an integer tensor would be truncated
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<int>("x");
  auto y = xsym::inc_subtensor(x(xsym::range(1, xsym::placeholders::_)), 2.7);
  (void)y;
}
