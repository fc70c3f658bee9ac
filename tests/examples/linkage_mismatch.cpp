// Built with settings other than its runtime's (XSYM_PROFILING=0, or other vector instructions): this must not link.
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2);
  return f(xt::xtensor<double, 1>{1.0})(0) == 2.0 ? 0 : 1;
}
