// expect: an expression's type is its tree
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y");
  auto e = x + y;
  e = e * 2;  // another tree: declare e as xsym::var<float, 1>
}
