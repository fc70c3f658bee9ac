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

// A destination whose elements share memory (a stride 0, strides that interleave) would keep
// one value of several: refused before anything is written. Interleaved strides whose
// elements are still distinct are a destination like any other.
TEST_CASE("into: a destination whose elements share memory is refused, and nothing is written", "[arguments][into]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto m = xsym::matrix<double>("m");
  auto f = xsym::function("twice", xsym::inputs(x), x * 2);
  auto g = xsym::function("twice_m", xsym::inputs(m), m * 2);
  const xt::xtensor<double, 1> xs = {1, 2, 3, 4};
  const xt::xtensor<double, 2> ms = {{1, 2, 3}, {4, 5, 6}};
  using st = std::vector<std::ptrdiff_t>;
  using sz = std::vector<std::size_t>;
  const auto refused = [](auto&& call, const std::vector<double>& buf, const char* what) {
    INFO(what);
    const std::vector<double> before = buf;
    try {
      call();
      FAIL("no error");
    } catch (const std::invalid_argument& e) {
      const std::string text = e.what();
      CHECK(text.find("share memory") != std::string::npos);
      CHECK(text.find("output 0") != std::string::npos);
    }
    CHECK(buf == before);
  };
  std::vector<double> b(16, -1.0);  // xt::adapt takes the shape's size as the buffer's
  auto zero = xt::adapt(b.data(), 4, xt::no_ownership(), sz{4}, st{0});
  refused([&] { f.into(zero)(xs); }, b, "a vector of stride 0");
  auto rows = xt::adapt(b.data(), 6, xt::no_ownership(), sz{2, 3}, st{0, 1});
  refused([&] { g.into(rows)(ms); }, b, "rows of stride 0");
  auto diagonal = xt::adapt(b.data(), 6, xt::no_ownership(), sz{2, 3}, st{1, 1});
  refused([&] { g.into(diagonal)(ms); }, b, "strides (1, 1)");
  auto folded = xt::adapt(b.data(), 6, xt::no_ownership(), sz{2, 3}, st{2, 1});
  refused([&] { g.into(folded)(ms); }, b, "strides (2, 1) over rows of 3");
  {
    auto twin = xt::adapt(b.data(), 6, xt::no_ownership(), sz{2, 3}, st{3, 1});
    auto zero_out = xt::adapt(b.data() + 6, 6, xt::no_ownership(), sz{2, 3}, st{1, 0});
    auto h = xsym::function("pair", xsym::inputs(m), xsym::outputs(m + 1, m * 2));
    INFO("the second of two destinations");
    const std::vector<double> before = b;
    CHECK_THROWS_WITH(h.into(twin, zero_out)(ms), Catch::Contains("output 1") &&
                                                      Catch::Contains("share memory"));
    CHECK(b == before);
  }
  // Strides (3, 2) and (2, 3) interleave: offsets 0 2 4 3 5 7 for (3, 2) over (2, 3), all distinct.
  std::vector<double> c(8, -1.0);
  auto interleaved = xt::adapt(c.data(), 6, xt::no_ownership(), sz{2, 3}, st{3, 2});
  g.into(interleaved)(ms);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(c[3 * i + 2 * j] == ms(i, j) * 2);
  CHECK(c[1] == -1.0);
  CHECK(c[6] == -1.0);
}
