#include <iostream>

#include <xtensor/xio.hpp>
#include <xsym/xsym.hpp>

int main() {
  xsym::config.compute_test_value = "raise";  // or XSYM_FLAGS=compute_test_value=raise

  auto X = xsym::matrix<double>("X");
  auto w = xsym::vector<double>("w");
  xsym::set_test_value(X, xt::xtensor<double, 2>{{1, 2, 3}, {4, 5, 6}});
  xsym::set_test_value(w, xt::xtensor<double, 1>{1, 1});

  auto h = xsym::tanh(X * 0.5);  // computed now, on the test values
  std::cout << xsym::get_test_value(h) << "\n";
  try {
    auto y = xsym::dot(h, w);  // (2, 3) times (2,): raised here, not at the first call
  } catch (const xsym::shape_error& e) {
    std::cout << e.what() << "\n";  // names this file and line
  }
}
