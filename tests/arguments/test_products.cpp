// The arguments area's products and shared-variable updates (arguments_util.hpp).
#include "arguments_util.hpp"

#include <sys/mman.h>

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

// BLAS takes int sizes and leading dimensions. With the limit lowered to 6, the same products
// run the paths of larger ones: a leading dimension over it copies the operand, a size over it
// takes the 64-bit loop.
TEST_CASE("arguments: matrix products whose sizes or leading dimensions BLAS's int cannot hold", "[arguments]") {
  clean_config guard;
  INFO("XSYM_TEST_SEED=" << run_seed());
  auto rng = case_rng(6);
  struct restore {
    ~restore() { xsym::cpu::testing::blas_int_limit() = std::numeric_limits<int>::max(); }
  } at_exit;
  xsym::cpu::testing::blas_int_limit() = 6;
  for (int mode = 0; mode < 3; ++mode) {
    products<double, true>(mode, rng, 14);
    products<float, false>(mode, rng, 10);
  }
}

// The same at its real size: rows 2^31 floats apart (address space reserved, two pages touched).
TEST_CASE("arguments: a matrix product of rows 2^31 elements apart", "[arguments]") {
  clean_config guard;
  const std::size_t apart = std::size_t{1} << 31, bytes = 2 * apart * sizeof(float);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    WARN("no 16 GiB of address space to reserve: not run");
    return;
  }
  float* m = static_cast<float*>(p);
  m[0] = 1, m[1] = 2, m[apart] = 3, m[apart + 1] = 4;
  {
    const auto full = xt::adapt(m, 2 * apart, xt::no_ownership(), std::vector<std::size_t>{2, apart});
    const auto a = xt::view(full, xt::all(), xt::range(0, 2));  // [[1, 2], [3, 4]], strides (2^31, 1)
    auto A = xsym::matrix<float>("A"), B = xsym::matrix<float>("B");
    auto f = xsym::function("f", xsym::inputs(A, B), xsym::dot(A, B));
    const xt::xtensor<float, 2> b = {{1, 0}, {0, 1}};
    for (int call = 0; call < 2; ++call) {
      const auto r = f(a, b);
      CHECK(r == xt::xtensor<float, 2>{{1, 2}, {3, 4}});
      const auto t = f(b, xt::transpose(a));  // A.T read with a column stride of 2^31
      CHECK(t == xt::xtensor<float, 2>{{1, 3}, {2, 4}});
    }
  }
  munmap(p, bytes);
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
