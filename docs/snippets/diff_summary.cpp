#include <iostream>
#include <memory>

#include <xsym/xsym.hpp>

int main() {
  auto fused_stats = std::make_shared<xsym::profile_stats>("fused", /*print_at_exit=*/false);
  auto unfused_stats = std::make_shared<xsym::profile_stats>("unfused", false);
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  auto fast = xsym::function("fast", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::profile(fused_stats));
  auto slow = xsym::function("slow", xsym::inputs(x, y, z), (x + y + z) * 2 + x, xsym::profile(unfused_stats),
                             xsym::optimizer_excluding("fusion:inplace"));
  const xt::xtensor<double, 1> a{1}, b{2}, c{3};
  for (int i = 0; i < 3; ++i) {
    fast(a, b, c);
    slow(a, b, c);
  }
  // A is this profile, B the other; n_apply and n_ops cut the tables (-1, the default: all).
  fused_stats->print_diff_summary(std::cout, *unfused_stats, /*n_apply=*/10, /*n_ops=*/10);
}
