// An element's bits do not depend on where it sits in a span: in a SIMD batch, in the span's
// last elements short of a batch (tail_batch), alone in a one-element call, or at another
// offset. Each kind of kernel that vectorises: a lone op's, a chain with exp and log, a typed
// tree's (through the call loop and into(...)'s short path) and an interpreted Composite from
// run-time fusion. The values: exp and log, whose batch and C library forms differ.
#include "expr_util.hpp"

#include <cstring>

#include <xtensor/xview.hpp>

using namespace xsym_test;

namespace {

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("every vectorised kernel gives an element the same bits wherever it sits", "[expr][tail]", float,
                   double) {
  using T = TestType;
  auto x = xsym::vector<T>("x");
  const xsym::var<T, 1> e = xsym::exp(x);  // a var: fusion merges it with what reads it, at run time
  std::vector<std::pair<std::string, xsym::var<T, 1>>> cases{
      {"lone sigmoid", xsym::var<T, 1>(1 / (1 + xsym::exp(-x)))},
      {"lone exp", xsym::var<T, 1>(xsym::exp(x))},
      {"typed tree", xsym::var<T, 1>(xsym::log1p(xsym::abs(x)) * x + xsym::exp(-x))},
      {"run-time Composite", e * 0.5 - xsym::log(e + 1)},
  };
  const std::size_t n = 1000 + 7;  // 62 or 125 batches, then 15 or 7 elements
  std::mt19937 rng(21);
  const auto a = random_tensor<T, 1>(rng, {n}, -6.0, 6.0);
  for (const auto& [name, expr] : cases) {
    INFO(name << ", " << type_name<T>());
    auto f = xsym::function("positions", xsym::inputs(x), expr);
    const xt::xtensor<T, 1> whole = f(a);
    xt::xtensor<T, 1> into_whole = xt::zeros<T>({n});
    f.into(into_whole)(a);
    int differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += !same_bits(whole(i), into_whole(i));
    CHECK(differ == 0);
    // Every element alone, and spans of 1 to 40 elements from every 37th position.
    differ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const xt::xtensor<T, 1> one{a(i)};
      differ += !same_bits(f(one)(0), whole(i));
    }
    CHECK(differ == 0);
    differ = 0;
    for (std::size_t start = 0; start < n; start += 37)
      for (std::size_t len = 1; len <= 40 && start + len <= n; ++len) {
        const xt::xtensor<T, 1> part = xt::view(a, xt::range(start, start + len));
        const xt::xtensor<T, 1> got = f(part);
        xt::xtensor<T, 1> got_into = xt::zeros<T>({len});
        f.into(got_into)(part);
        for (std::size_t j = 0; j < len; ++j)
          differ += !same_bits(got(j), whole(start + j)) + !same_bits(got_into(j), whole(start + j));
      }
    CHECK(differ == 0);
  }
}
