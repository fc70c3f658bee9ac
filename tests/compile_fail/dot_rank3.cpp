// expect: xsym::dot takes vectors and matrices
#include <xsym/xsym.hpp>
int main() {
  auto t = xsym::tensor3<float>("t");
  auto v = xsym::vector<float>("v");
  auto e = xsym::dot(t, v);
  (void)e;
}
