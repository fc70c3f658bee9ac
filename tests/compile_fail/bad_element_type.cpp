// expect: xsym tensors hold bool, std::int32_t, std::int64_t, float or double
#include <xsym/xsym.hpp>
int main() {
  auto x = xsym::vector<short>("x");
  (void)x;
}
