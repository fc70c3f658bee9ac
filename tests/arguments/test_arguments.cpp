// The arguments area's elementwise cases: fused, broadcast, reduced (arguments_util.hpp).
#include "arguments_util.hpp"

TEST_CASE("arguments: a fused elementwise function in every layout and kind of argument", "[arguments]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(1);
  for (int mode = 0; mode < 3; ++mode) {
    fused_elementwise<double, true>(mode, rng, 20);
    fused_elementwise<float, true>(mode, rng, 14);
    fused_elementwise<std::int32_t, true>(mode, rng, 14);
  }
}

TEST_CASE("arguments: broadcasting a vector and a row over a matrix", "[arguments]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(2);
  for (int mode = 0; mode < 3; ++mode) {
    broadcasting<double, true>(mode, rng, 20);
    broadcasting<float, false>(mode, rng, 12);
    broadcasting<std::int64_t, false>(mode, rng, 12);
  }
}

TEST_CASE("arguments: sums over each axis and everything, and maxima", "[arguments]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(3);
  for (int mode = 0; mode < 3; ++mode) {
    reductions<double, true>(mode, rng, 20);
    reductions<float, false>(mode, rng, 12);
    reductions<std::int32_t, false>(mode, rng, 12);
  }
}
