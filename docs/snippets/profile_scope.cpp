#include <xtensor/xbuilder.hpp>
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("softplus_sum", xsym::inputs(x), sum(softplus(x)));  // not profiled itself

  {
    // Records every function call made while it lives, on any thread, and prints one report
    // when it ends (to profiling.destination).
    xsym::profile_scope epoch("epoch 1");
    for (int step = 0; step < 100; ++step) {
      xt::xtensor<float, 1> batch;
      {
        XSYM_PROFILE_SCOPE("make batch");  // times the rest of this block as a user region
        batch = xt::linspace<float>(-1.0f, 1.0f, 4096);
      }
      f(batch);
    }
  }
}
