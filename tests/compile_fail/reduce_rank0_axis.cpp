// expect: a rank-0 tensor has no axis to reduce
#include <xsym/xsym.hpp>
int main() {
  auto s = xsym::scalar<double>("s");
  auto e = xsym::sum(s, 0);
  (void)e;
}
