#include <iostream>

#include <xsym/xsym.hpp>

int main() {
  // Assignment in code: highest precedence, checked at once.
  xsym::config.profiling.n_apply = 10;
  xsym::config.set("optimizer_excluding", "fusion:inplace");  // by name, from text

  std::cout << xsym::config.get("profiling.n_apply") << " (from " << xsym::config.profiling.n_apply.origin()
            << ")\n";
  std::cout << xsym::config;  // every flag: its value, where the value comes from, what it does

  try {
    xsym::config.set("profiling.napply", "5");
  } catch (const xsym::config_error& e) {
    std::cout << e.what() << "\n";
  }
}
