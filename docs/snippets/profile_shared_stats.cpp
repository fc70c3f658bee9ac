#include <memory>

#include <xtensor/xbuilder.hpp>
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::matrix<double>("x");
  auto v = xsym::vector<double>("v");
  // One profile_stats for two functions: one report that covers both (Theano's ProfileStats).
  // print_at_exit = false: we print it here, and it is left out of the report printed at exit.
  auto stats = std::make_shared<xsym::profile_stats>("forward and norm", /*print_at_exit=*/false);
  auto forward = xsym::function("forward", xsym::inputs(x, v), tanh(dot(x, v)), xsym::profile(stats));
  auto norm = xsym::function("norm", xsym::inputs(v), sqrt(sum(v * v)), xsym::profile(stats));

  const xt::xtensor<double, 2> X = xt::ones<double>({100, 50});
  const xt::xtensor<double, 1> V = xt::ones<double>({50});
  for (int i = 0; i < 100; ++i) {
    forward(X, V);
    norm(V);
  }
  stats->print_summary();
}
