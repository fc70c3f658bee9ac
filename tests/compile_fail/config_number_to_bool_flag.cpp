// expect: this flag takes a whole number (an integer flag) or true/false (a bool flag)
#include <xsym/xsym.hpp>
int main() {
  xsym::config.profile = 2;  // would become true
}
