// expect: this flag takes a whole number (an integer flag) or true/false (a bool flag)
#include <xsym/xsym.hpp>
int main() {
  xsym::config.profiling.n_apply = 2.7;  // would be truncated to 2
}
