// The arguments area's destinations: into() and set_value (arguments_util.hpp).
#include "arguments_util.hpp"

TEST_CASE("into: destinations in every layout and kind get the plain call's results and nothing else",
          "[arguments][into]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(6);
  const auto run = [&]<class T, bool EveryKind>() {
    for (int mode = 0; mode < 3; ++mode) {
      auto x = xsym::matrix<T>("x"), y = xsym::matrix<T>("y");
      const auto fused = build(mode, "fused", xsym::inputs(x, y), xsym::outputs(x * y + 1, x - y * 3));
      const auto sums = sums_function<T>(mode);
      const auto dots = dots_function<T>(mode);
      const auto gemm = gemm_function<T>(mode);
      for (int t = 0; t < (EveryKind ? 14 : 8); ++t) {
        INFO("trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode]);
        const auto s = pick_shape2(rng);
        const std::size_t m = s[0], k = s[1], n = pick<std::size_t>(rng, {0, 1, 3, 17});
        const int rot = rotation(t, mode);
        check_into<EveryKind>(fused, std::tuple{values_of<T>(rng, s), values_of<T>(rng, s)}, rng, rot);
        // The kinds of scalar destinations come with dots' u . v.
        check_into<false>(sums, std::tuple{values_of<T>(rng, s), values_of<T>(rng, sh<T, 1>{pick_len(rng)})}, rng, rot);
        check_into<EveryKind>(dots,
                              std::tuple{values_of<T>(rng, sh<T, 2>{m, k}), values_of<T>(rng, sh<T, 2>{k, n}),
                                         values_of<T>(rng, sh<T, 2>{m, n}), values_of<T>(rng, sh<T, 1>{k}),
                                         values_of<T>(rng, sh<T, 1>{k}), values_of<T>(rng, sh<T, 1>{m})},
                              rng, rot);
        check_into<false>(gemm, std::tuple{values_of<T>(rng, sh<T, 2>{m, k}), values_of<T>(rng, sh<T, 2>{k, n}),
                                           values_of<T>(rng, sh<T, 1>{k}), values_of<T>(rng, sh<T, 1>{m}),
                                           values_of<T>(rng, sh<T, 2>{m, n})}, rng, rot);
        if constexpr (is_float<T>) {
          const descent<T> d(mode, k, rng);
          check_into<EveryKind>(d.f, std::tuple{values_of<T>(rng, s, -1, 1), values_of<T>(rng, sh<T, 1>{m})}, rng, rot,
                                d.hooks());
        }
      }
    }
  };
  run.operator()<double, true>();
  run.operator()<float, false>();
  run.operator()<std::int64_t, false>();
}

TEST_CASE("set_value: from every layout and kind of expression", "[arguments][set_value]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(7);
  check_set_value<double, 1>(rng, 40);
  check_set_value<double, 2>(rng, 40);
  check_set_value<std::int64_t, 2>(rng, 40);
}
