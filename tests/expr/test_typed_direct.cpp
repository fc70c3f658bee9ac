// into(...)'s short path (function_runtime::run_direct): a function that is one typed kernel
// runs it straight on the caller's arrays. Its results are the call loop's, bit for bit
// (the profiled call takes the loop), and every argument it does not take (views, broadcasting,
// a destination that is an argument, numbers, other element types) goes through the loop.
#include "expr_util.hpp"

#include <cstring>
#include <thread>

#include <xtensor/xadapt.hpp>
#include <xtensor/xview.hpp>

using namespace xsym_test;

namespace {

template <class T, class A, class B>
bool same_bits(const A& a, const B& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const T x = a.data()[i], y = b.data()[i];
    if (std::memcmp(&x, &y, sizeof(T)) != 0) return false;
  }
  return true;
}

template <class T>
xt::xtensor<T, 1> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  xt::xtensor<T, 1> a = xt::empty<T>({n});
  for (auto& v : a) v = static_cast<T>(u(rng));
  return a;
}

TEMPLATE_TEST_CASE("a function that is one typed kernel writes into(...) straight, with the call loop's bits",
                   "[expr][typed]", float, double) {
  using T = TestType;
  auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
  auto e = xsym::sigmoid(x * 0.75 - y) * 2 + xsym::log1p(xsym::abs(z));
  auto f = xsym::function("direct", xsym::inputs(x, y, z), e);
  const auto stats = std::make_shared<xsym::profile_stats>("direct", false);
  auto looped = xsym::function("looped", xsym::inputs(x, y, z), e, xsym::profile(stats));
  REQUIRE(f.runtime()->has_direct());
  REQUIRE(looped.runtime()->has_direct());  // the same plan; its profile sends each call through the loop

  // Every length up to 70 (each tail length after whole batches of 2 to 16 lanes, and spans
  // shorter than one batch), then two long ones.
  std::vector<std::size_t> sizes{1000, 1003};
  for (std::size_t n = 1; n <= 70; ++n) sizes.push_back(n);
  for (std::size_t n : sizes) {
    const auto a = random_vector<T>(n, 1), b = random_vector<T>(n, 2), c = random_vector<T>(n, 3);
    xt::xtensor<T, 1> out = xt::zeros<T>({n}), want = xt::zeros<T>({n});
    f.into(out)(a, b, c);
    looped.into(want)(a, b, c);
    INFO("n = " << n);
    CHECK(same_bits<T>(out, want));
    for (std::size_t i = 0; i < n; ++i) {  // and the value, against a float64 loop
      const double v = 2.0 / (1.0 + std::exp(-(double(a(i)) * 0.75 - double(b(i))))) + std::log1p(std::abs(double(c(i))));
      CHECK(double(out(i)) == Approx(v).epsilon(std::is_same_v<T, float> ? 1e-5 : 1e-13));
    }
  }
}

TEMPLATE_TEST_CASE("a lone op writes into(...) straight from two elements, with the call loop's bits", "[expr][typed]",
                   float, double) {
  using T = TestType;
  auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y");
  const auto stats = std::make_shared<xsym::profile_stats>("lone", false);
  auto check = [&](const auto& e, auto value) {
    auto f = xsym::function("lone", xsym::inputs(x, y), e);
    auto looped = xsym::function("lone_looped", xsym::inputs(x, y), e, xsym::profile(stats));
    REQUIRE(f.runtime()->has_direct());
    for (std::size_t n : {1, 2, 3, 8, 9, 1000, 1001}) {
      const auto a = random_vector<T>(n, 11), b = random_vector<T>(n, 12);
      xt::xtensor<T, 1> out = xt::zeros<T>({n}), want = xt::zeros<T>({n});
      f.into(out)(a, b);
      looped.into(want)(a, b);
      INFO("n = " << n);
      CHECK(same_bits<T>(out, want));
      for (std::size_t i = 0; i < n; ++i)
        CHECK(double(out(i)) == Approx(value(double(a(i)), double(b(i)))).epsilon(std::is_same_v<T, float> ? 1e-6 : 1e-14));
    }
  };
  check(x - y, [](double p, double q) { return p - q; });
  check(xsym::maximum(x, y), [](double p, double q) { return std::max(p, q); });
  // One input: the stabilised 1 / (1 + exp(-x)) is one sigmoid; x * 0.5 reads a constant.
  for (int which = 0; which < 2; ++which) {
    auto e = which == 0 ? xsym::var<T, 1>(1 / (1 + xsym::exp(-x))) : xsym::var<T, 1>(x * 0.5);
    auto f = xsym::function("lone1", xsym::inputs(x), e);
    auto looped = xsym::function("lone1_looped", xsym::inputs(x), e, xsym::profile(stats));
    REQUIRE(f.runtime()->has_direct());
    REQUIRE(f.toposort().size() == 1);
    for (std::size_t n : {2, 7, 1000}) {
      const auto a = random_vector<T>(n, 13);
      xt::xtensor<T, 1> out = xt::zeros<T>({n}), want = xt::zeros<T>({n});
      f.into(out)(a);
      looped.into(want)(a);
      CHECK(same_bits<T>(out, want));
      for (std::size_t i = 0; i < n; ++i) {
        const double v = which == 0 ? 1 / (1 + std::exp(-double(a(i)))) : double(a(i)) * 0.5;
        CHECK(double(out(i)) == Approx(v).epsilon(std::is_same_v<T, float> ? 1e-6 : 1e-14));
      }
    }
  }
}

TEST_CASE("into(...) arguments the short path does not take give the call loop's results", "[expr][typed]") {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto f = xsym::function("add_mul", xsym::inputs(x, y), (x + y) * 3);
  REQUIRE(f.runtime()->has_direct());
  const std::size_t n = 37;
  xt::xtensor<double, 1> a = random_vector<double>(n, 4), b = random_vector<double>(n, 5);
  auto expect = [&](const auto& p, const auto& q) {
    xt::xtensor<double, 1> r = xt::empty<double>({p.size()});
    for (std::size_t i = 0; i < p.size(); ++i) r(i) = (p(i) + q(i)) * 3;
    return r;
  };
  SECTION("the destination is an argument") {
    const xt::xtensor<double, 1> want = expect(a, b);
    f.into(a)(a, b);
    CHECK(same_bits<double>(a, want));
  }
  SECTION("the destination overlaps an argument, shifted") {
    xt::xtensor<double, 1> buf = random_vector<double>(n + 1, 6);
    auto head = xt::adapt(buf.data(), n, xt::no_ownership(), std::array<std::size_t, 1>{n});
    auto tail = xt::adapt(buf.data() + 1, n, xt::no_ownership(), std::array<std::size_t, 1>{n});
    const xt::xtensor<double, 1> want = expect(xt::xtensor<double, 1>(tail), b);
    f.into(head)(tail, b);
    CHECK(same_bits<double>(xt::xtensor<double, 1>(head), want));
  }
  SECTION("the destination and an argument in one buffer, at every shift either way") {
    // Shifts below n overlap (the loop's own buffer); n and beyond are apart (the kernel in place).
    for (std::size_t shift : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{8}, n - 1, n, n + 5}) {
      for (bool dest_first : {true, false}) {
        xt::xtensor<double, 1> buf = random_vector<double>(n + shift, 8);
        double* dp = buf.data() + (dest_first ? 0 : shift);
        double* ap = buf.data() + (dest_first ? shift : 0);
        const std::array<std::size_t, 1> sh{n};
        auto dest = xt::adapt(dp, n, xt::no_ownership(), sh);
        auto arg = xt::adapt(ap, n, xt::no_ownership(), sh);
        const xt::xtensor<double, 1> want = expect(xt::xtensor<double, 1>(arg), b);
        f.into(dest)(arg, b);
        INFO("shift " << shift << (dest_first ? ", destination first" : ", argument first"));
        CHECK(same_bits<double>(xt::xtensor<double, 1>(dest), want));
      }
    }
  }
  SECTION("a strided view") {
    xt::xtensor<double, 1> wide = random_vector<double>(2 * n, 7);
    auto every_other = xt::view(wide, xt::range(0, 2 * n, 2));
    xt::xtensor<double, 1> out = xt::zeros<double>({n});
    f.into(out)(every_other, b);
    CHECK(same_bits<double>(out, expect(xt::xtensor<double, 1>(every_other), b)));
  }
  SECTION("another element type, converted") {
    xt::xtensor<float, 1> af = xt::cast<float>(a);
    xt::xtensor<double, 1> out = xt::zeros<double>({n});
    f.into(out)(af, b);
    CHECK(same_bits<double>(out, expect(xt::xtensor<double, 1>(xt::cast<double>(af)), b)));
  }
  SECTION("a wrong shape is the loop's shape_error") {
    xt::xtensor<double, 1> shorter = random_vector<double>(n - 1, 8), out = xt::zeros<double>({n});
    CHECK_THROWS_AS(f.into(out)(shorter, b), xsym::shape_error);
  }
}

TEST_CASE("into(...) destinations of every layout get the call loop's bits", "[expr][typed]") {
  auto m = xsym::matrix<double>("m"), k = xsym::matrix<double>("k");
  auto f = xsym::function("add_mul", xsym::inputs(m, k), (m - k) * 0.5);
  REQUIRE(f.runtime()->has_direct());
  const std::size_t rows = 5, cols = 7;
  xt::xtensor<double, 2> a = xt::empty<double>({rows, cols}), b = a;
  for (std::size_t i = 0; i < a.size(); ++i) {
    a.data()[i] = std::sin(1.0 + static_cast<double>(i));
    b.data()[i] = std::cos(2.0 * static_cast<double>(i));
  }
  auto check_against_loop = [&](const auto& out) {
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) CHECK(out(i, j) == (a(i, j) - b(i, j)) * 0.5);
  };
  SECTION("row-major xtensor and xarray") {
    xt::xtensor<double, 2> out = xt::zeros<double>({rows, cols});
    f.into(out)(a, b);
    check_against_loop(out);
    xt::xarray<double> xa = xt::zeros<double>({rows, cols});
    f.into(xa)(a, b);
    check_against_loop(xa);
  }
  SECTION("column-major") {
    xt::xtensor<double, 2, xt::layout_type::column_major> out = xt::zeros<double>(std::array<std::size_t, 2>{rows, cols});
    f.into(out)(a, b);
    check_against_loop(out);
  }
  SECTION("adapted memory at an offset, and rows of a larger matrix") {
    std::vector<double> buffer(rows * cols + 3, -1.0);
    auto adapted = xt::adapt(buffer.data() + 3, rows * cols, xt::no_ownership(), std::array<std::size_t, 2>{rows, cols});
    f.into(adapted)(a, b);
    check_against_loop(adapted);
    CHECK(buffer[2] == -1.0);
    xt::xtensor<double, 2> big = xt::zeros<double>({rows + 2, cols});
    auto middle = xt::view(big, xt::range(1, rows + 1), xt::all());
    f.into(middle)(a, b);
    check_against_loop(middle);
    for (std::size_t j = 0; j < cols; ++j) CHECK((big(0, j) == 0.0 && big(rows + 1, j) == 0.0));
  }
  SECTION("a strided view, columns of a wider matrix") {
    xt::xtensor<double, 2> wide = xt::zeros<double>({rows, 2 * cols});
    auto every_other = xt::view(wide, xt::all(), xt::range(0, 2 * cols, 2));
    f.into(every_other)(a, b);
    check_against_loop(every_other);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 1; j < 2 * cols; j += 2) CHECK(wide(i, j) == 0.0);
  }
  SECTION("a destination of another rank or shape is refused, naming it") {
    xt::xarray<double> rank3 = xt::zeros<double>({rows, cols, std::size_t{1}});
    CHECK_THROWS_WITH(f.into(rank3)(a, b), Catch::Matchers::Contains("rank 3"));
    xt::xtensor<double, 2> wrong = xt::zeros<double>({rows, cols + 1});
    CHECK_THROWS_AS(f.into(wrong)(a, b), xsym::shape_error);
    CHECK(xt::all(xt::equal(wrong, 0.0)));
  }
}

TEMPLATE_TEST_CASE("a rank-0 input, broadcast by its DimShuffle{x}, takes the short path with the call loop's bits",
                   "[expr][typed]", float, double) {
  using T = TestType;
  auto a = xsym::scalar<T>("a");
  auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y");
  const auto stats = std::make_shared<xsym::profile_stats>("rank0", false);
  // A typed tree and a lone op, each also profiled (which takes the call loop).
  auto tree = xsym::function("tree", xsym::inputs(a, x, y), xsym::exp(a * x) - y);
  auto tree_looped = xsym::function("tree_looped", xsym::inputs(a, x, y), xsym::exp(a * x) - y, xsym::profile(stats));
  auto lone = xsym::function("lone", xsym::inputs(a, x), a * x);
  auto lone_looped = xsym::function("lone_looped", xsym::inputs(a, x), a * x, xsym::profile(stats));
  REQUIRE(tree.toposort().size() == 2);  // InplaceDimShuffle{x}(a), then the elementwise node
  REQUIRE(tree.runtime()->has_direct());
  REQUIRE(lone.runtime()->has_direct());
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{17}, std::size_t{1003}}) {
    INFO("n = " << n);
    const auto p = random_vector<T>(n, 4), q = random_vector<T>(n, 5);
    xt::xtensor<T, 0> s = T(0.625);
    xt::xtensor<T, 1> out = xt::zeros<T>({n}), want = xt::zeros<T>({n});
    tree.into(out)(s, p, q);
    tree_looped.into(want)(s, p, q);
    CHECK(same_bits<T>(out, want));
    for (std::size_t i = 0; i < n; ++i) {  // against a float64 loop, relative to the terms (they may cancel)
      const double e = std::exp(0.625 * double(p(i))), v = e - double(q(i));
      CHECK(std::abs(double(out(i)) - v) <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * (e + std::abs(double(q(i)))));
    }
    lone.into(out)(s, p);
    lone_looped.into(want)(s, p);
    CHECK(same_bits<T>(out, want));
    for (std::size_t i = 0; i < n; ++i) CHECK(out(i) == T(0.625) * p(i));
    // A scalar that is an element of the destination: read before anything is written.
    xt::xtensor<T, 1> dest = p, dest_looped = p;
    auto first = xt::adapt(dest.data(), std::size_t{1}, xt::no_ownership(), std::array<std::size_t, 0>{});
    auto first_looped = xt::adapt(dest_looped.data(), std::size_t{1}, xt::no_ownership(), std::array<std::size_t, 0>{});
    lone.into(dest)(first, p);
    lone_looped.into(dest_looped)(first_looped, p);
    CHECK(same_bits<T>(dest, dest_looped));
    CHECK(dest(n - 1) == p(0) * p(n - 1));
    // The same with a typed tree whose last elements take the tail (exp's lanes are not its
    // scalars): the tail used to read the scalar again after the loop had overwritten it.
    dest = p;
    dest_looped = p;
    tree.into(dest)(first, p, q);
    tree_looped.into(dest_looped)(first_looped, p, q);
    CHECK(same_bits<T>(dest, dest_looped));
    for (std::size_t i = 0; i < n; ++i) {
      const double e = std::exp(double(p(0)) * double(p(i))), v = e - double(q(i));
      CHECK(std::abs(double(dest(i)) - v) <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * (e + std::abs(double(q(i)))));
    }
    // Special scalars: the short path's bits are the call loop's (NaN for NaN, the sign of 0).
    for (T special : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(), T(-0.0), T(0)}) {
      const xt::xtensor<T, 0> sv = special;
      tree.into(out)(sv, p, q);
      tree_looped.into(want)(sv, p, q);
      CHECK(same_bits<T>(out, want));
      lone.into(out)(sv, p);
      lone_looped.into(want)(sv, p);
      CHECK(same_bits<T>(out, want));
    }
  }
}

TEST_CASE("functions the short path would change do not take it", "[expr][typed]") {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto w = xsym::shared(xt::xtensor<double, 1>{1.0, 2.0}, "w");
  CHECK_FALSE(xsym::function("with_shared", xsym::inputs(x), (x + w) * 2).runtime()->has_direct());
  CHECK_FALSE(xsym::function("two_nodes", xsym::inputs(x, y), xsym::sum((x + y) * 2)).runtime()->has_direct());
  auto debug = xsym::function("debug", xsym::inputs(x, y), (x + y) * 2, xsym::mode("DebugMode"));
  CHECK_FALSE(debug.runtime()->has_direct());
}

TEST_CASE("the short path takes no lock: calls from several threads into their own arrays", "[expr][typed]") {
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y");
  auto f = xsym::function("threads", xsym::inputs(x, y), xsym::exp(x - y) * 0.5);
  REQUIRE(f.runtime()->has_direct());
  const std::size_t n = 513;
  const auto a = random_vector<float>(n, 9), b = random_vector<float>(n, 10);
  xt::xtensor<float, 1> want = xt::zeros<float>({n});
  const auto stats = std::make_shared<xsym::profile_stats>("threads", false);
  auto looped = xsym::function("threads_looped", xsym::inputs(x, y), xsym::exp(x - y) * 0.5, xsym::profile(stats));
  looped.into(want)(a, b);
  std::vector<xt::xtensor<float, 1>> outs(4, xt::xtensor<float, 1>(xt::zeros<float>({n})));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < outs.size(); ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) f.into(outs[t])(a, b);
    });
  for (auto& th : threads) th.join();
  for (const auto& o : outs) CHECK(same_bits<float>(o, want));
}

}  // namespace
