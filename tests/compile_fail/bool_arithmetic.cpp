// expect: arithmetic is not defined on bool tensors
#include <xsym/xsym.hpp>
int main() {
  auto b = xsym::vector<bool>("b");
  auto e = b + b;
  (void)e;
}
