// The arguments area's products and shared-variable updates (arguments_util.hpp).
#include "arguments_util.hpp"

TEST_CASE("arguments: dot in all its forms, plain and with scale and accumulate", "[arguments]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(4);
  for (int mode = 0; mode < 3; ++mode) {
    products<double, true>(mode, rng, 20);
    products<float, false>(mode, rng, 14);
    products<std::int32_t, false>(mode, rng, 14);
  }
}

TEST_CASE("arguments: shared-variable updates and the logistic-regression step", "[arguments]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(5);
  const auto run = [&]<class T, bool EveryKind>() {
    for (int mode = 0; mode < 3; ++mode)
      for (int t = 0; t < (EveryKind ? 14 : 8); ++t) {
        const auto s = pick_shape2(rng);
        {
          const descent<T> d(mode, s[1], rng);
          const auto vals = std::tuple{values_of<T>(rng, s, -1, 1), values_of<T>(rng, sh<T, 1>{s[0]})};
          INFO("descent, trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes "
                                 << shapes_text(vals));
          check_arguments<EveryKind>(
              d, vals, rng, [&](const auto& v) { return d.oracle(v); }, {false, false}, rotation(t, mode));
        }
        const std::size_t m = std::max<std::size_t>(s[0], 1);  // a mean over no rows is NaN
        const logreg<T> l(mode, s[1], rng);
        auto vals = std::tuple{values_of<T>(rng, sh<T, 2>{m, s[1]}, -1, 1), values_of<T>(rng, sh<T, 1>{m}, 0, 1)};
        for (auto& y : std::get<1>(vals)) y = y > T(0.5) ? T(1) : T(0);
        INFO("logreg, trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes "
                              << shapes_text(vals));
        check_arguments<EveryKind>(
            l, vals, rng, [&](const auto& v) { return l.oracle(v); }, {true, false, false, false}, rotation(t, mode));
      }
  };
  run.operator()<double, true>();
  run.operator()<float, false>();
}
