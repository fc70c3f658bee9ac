// The smallest program: one function, x + y on float32 vectors. run.py times its compile
// (build_oneline), the cost a user pays before the first line of their own.
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y");
  auto f = xsym::function("f", xsym::inputs(x, y), x + y);
  return static_cast<int>(f(xt::xtensor<float, 1>{1}, xt::xtensor<float, 1>{2})(0)) - 3;
}
