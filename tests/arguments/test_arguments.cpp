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

// xt::flatten and xt::ravel of an array not in their order give a view whose storage is an
// iterator: data() exists but is not memory. Such an argument is evaluated into a copy.
TEST_CASE("arguments: flatten and ravel of a non-contiguous array are read through a copy", "[arguments]") {
  clean_config guard;
  const auto run = []<class T>() {
    auto v = xsym::vector<T>("v"), u = xsym::vector<T>("u");
    auto typed = xsym::function("typed", xsym::inputs(v, u), v * 2 + u);
    auto sums = xsym::function("sums", xsym::inputs(v), xsym::sum(v * v));
    xt::xtensor<T, 2> a = xt::empty<T>({3, 5});
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<T>(i) * T(0.5) - 3;
    xt::xtensor<T, 2, xt::layout_type::column_major> cm = a;
    // numpy's a.T.ravel(): element (j, i) of a.T in C order, i.e. a(i, j) for j outer.
    xt::xtensor<T, 1> want = xt::empty<T>({a.size()}), cm_c = want, stepped = xt::empty<T>({9});
    for (std::size_t j = 0, k = 0; j < 5; ++j)
      for (std::size_t i = 0; i < 3; ++i) want(k++) = a(i, j);
    for (std::size_t i = 0, k = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 5; ++j) cm_c(k++) = a(i, j);
    for (std::size_t i = 0, k = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 5; j += 2) stepped(k++) = a(i, j);
    const auto check = [&](const auto& arg, const xt::xtensor<T, 1>& expect, const char* what) {
      INFO(what << ", " << type_name<T>());
      REQUIRE(arg.size() == expect.size());
      const xt::xtensor<T, 1> ones = xt::ones<T>({expect.size()});
      const xt::xtensor<T, 1> got = typed(arg, ones);
      double sq = 0;
      for (std::size_t k = 0; k < expect.size(); ++k) {
        CHECK(got(k) == expect(k) * 2 + 1);
        sq += static_cast<double>(expect(k)) * static_cast<double>(expect(k));
      }
      CHECK(static_cast<double>(sums(arg)) == Approx(sq).epsilon(1e-6));
    };
    check(xt::flatten(xt::transpose(a)), want, "flatten(transpose(a))");
    check(xt::flatten(cm), cm_c, "flatten(column-major a)");
    check(xt::ravel<xt::layout_type::column_major>(a), want, "ravel<column_major>(a)");
    check(xt::flatten(xt::view(a, xt::all(), xt::range(0, 5, 2))), stepped, "flatten(view(a, all, range(0, 5, 2)))");
    check(xt::flatten(a), cm_c, "flatten(a), a view of a's own memory");
  };
  run.operator()<float>();
  run.operator()<double>();
}

// A number for a float32 input is rounded to it, as a constant in an expression is; one beyond
// float32's range would become infinity, and is refused as such a constant is.
TEST_CASE("arguments: a number beyond a float32 input's range is refused, naming the input", "[arguments]") {
  clean_config guard;
  auto s = xsym::scalar<float>("s");
  auto f = xsym::function("scale", xsym::inputs(s), s * 0.5);
  for (const double bad : {1e300, -1e300, 3.5e38, -0x1.ffffffp+127}) {
    INFO(bad);
    try {
      (void)f(bad);
      FAIL("no error");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      CHECK(what.find("'scale'") != std::string::npos);
      CHECK(what.find("input 0 ('s')") != std::string::npos);
      CHECK(what.find("float32") != std::string::npos);
    }
  }
  const float most = std::numeric_limits<float>::max();
  CHECK(static_cast<float>(f(static_cast<double>(most))) == most * 0.5f);
  CHECK(static_cast<float>(f(0x1.fffffefp+127)) == most * 0.5f);  // rounds down to float32's largest
  CHECK(static_cast<float>(f(1e-50)) == 0.0f);                    // rounds to 0, as numpy's float32(1e-50)
  CHECK(static_cast<float>(f(std::numeric_limits<double>::infinity())) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(static_cast<float>(f(std::nan("")))));
  CHECK(static_cast<float>(f(std::int64_t{1} << 62)) == 0x1p61f);
}
