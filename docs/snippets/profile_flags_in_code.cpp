#include <xtensor/xbuilder.hpp>
#include <xsym/xsym.hpp>

int main() {
  // As XSYM_FLAGS=profile=True,profile_memory=True,profile_optimizer=True,... would do.
  // Read when a function is built: set them before.
  xsym::config.profile = true;                      // profile every function, print at exit
  xsym::config.profile_memory = true;               // add the memory profile
  xsym::config.profile_optimizer = true;            // add the optimizer profile
  xsym::config.profiling.ignore_first_call = true;  // leave each function's first call out
  // Read when a report is printed.
  xsym::config.profiling.n_apply = 5;             // Apply nodes listed (default 20)
  xsym::config.profiling.n_ops = 5;               // classes and ops listed (default 20)
  xsym::config.profiling.min_memory_size = 4096;  // memory profile: nodes with >= 4096 bytes of outputs
  xsym::config.profiling.destination = "stdout";  // stderr (default), stdout or a file path

  auto x = xsym::matrix<float>("x");
  auto w = xsym::vector<float>("w");
  auto scores = xsym::function("scores", xsym::inputs(x, w), sigmoid(dot(x, w)) * 2 - 1);

  const xt::xtensor<float, 2> X = xt::ones<float>({1000, 100});
  const xt::xtensor<float, 1> W = xt::ones<float>({100});
  for (int i = 0; i < 100; ++i) scores(X, W);
}  // the report is printed when the program exits
