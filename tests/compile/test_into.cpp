// f.into(out...)(args...): outputs written into the caller's arrays. Results equal the plain
// call's on fused, multi-output, broadcasting and in-place graphs; strided destinations; a
// destination that is also an argument; shared-variable updates; shape errors; and a warm
// into-call allocates nothing.
#include "compile_util.hpp"

#include <xtensor/xadapt.hpp>
#include <xtensor/xview.hpp>

using namespace xsym_test;
using Catch::Matchers::Contains;

namespace {
// Element-for-element equality (xtensor's == is not decomposable by Catch).
template <class A, class B>
bool same(const A& a, const B& b) {
  return static_cast<bool>(a == b);
}

// Every linker and mode an into-call must give the plain call's results under.
const char* const linkers[] = {"cvm", "cvm_nogc", "py"};
}  // namespace

TEST_CASE("into writes a fused function's output into the caller's array, without moving it", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y"), z = xsym::vector<float>("z");
  std::mt19937 rng(3);
  for (const char* l : linkers) {
    INFO("linker " << l);
    auto f = xsym::function("add3mul", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::linker(l));
    auto s = xsym::function("sigmoid", xsym::inputs(x), 1 / (1 + exp(-x)), xsym::linker(l));
    for (std::size_t n : {1, 7, 256, 1000, 4099}) {
      INFO("size " << n);
      const auto a = random_tensor<float, 1>(rng, {n}, -2, 2);
      const auto b = random_tensor<float, 1>(rng, {n}, -2, 2);
      const auto c = random_tensor<float, 1>(rng, {n}, -2, 2);
      xt::xtensor<float, 1> out = xt::empty<float>({n});
      const float* where = out.data();
      f.into(out)(a, b, c);
      CHECK(same(out, f(a, b, c)));
      CHECK(same(out.data(), where));
      s.into(out)(a);
      CHECK(same(out, s(a)));
    }
  }
}

TEST_CASE("into fills every output of a multi-output function, a number for a scalar one", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto e = exp(x) * y + (x - y) * 2.0;
  std::mt19937 rng(5);
  const auto a = random_tensor<double, 1>(rng, {300}, -2, 2);
  const auto b = random_tensor<double, 1>(rng, {300}, -2, 2);
  for (const char* l : linkers) {
    INFO("linker " << l);
    auto f = xsym::function("multi", xsym::inputs(x, y), xsym::outputs(x + y, e, xsym::sum(e), x * y), xsym::linker(l));
    const auto [s, v, total, p] = f(a, b);
    xt::xtensor<double, 1> s2 = xt::zeros<double>({300}), v2 = s2, p2 = s2;
    double total2 = 0;
    for (int call = 0; call < 3; ++call) {  // warm calls reuse what the first one set up
      f.into(s2, v2, total2, p2)(a, b);
      CHECK(same(s2, s));
      CHECK(same(v2, v));
      CHECK(same(total2, total));
      CHECK(same(p2, p));
    }
    // A rank-0 xtensor receives a scalar output too.
    auto g = xsym::function("total", xsym::inputs(x, y), xsym::sum(e), xsym::linker(l));
    xt::xtensor<double, 0> t0;
    g.into(t0)(a, b);
    CHECK(same(t0(), g(a, b)));
    // Plain calls after into-calls still return their own copies.
    const auto [s3, v3, total3, p3] = f(a, b);
    CHECK(same(s3, s));
    CHECK(same(total3, total));
  }
}

TEST_CASE("into with broadcasting, in-place nodes, unfused graphs and DebugMode", "[compile][into]") {
  clean_config guard;
  auto m = xsym::matrix<double>("m");
  auto r = xsym::row<double>("r");
  auto v = xsym::vector<double>("v");
  std::mt19937 rng(9);
  const auto M = random_tensor<double, 2>(rng, {6, 5}, -1, 1);
  const auto R = random_tensor<double, 2>(rng, {1, 5}, -1, 1);
  const auto V = random_tensor<double, 1>(rng, {5}, -1, 1);
  // In-place nodes: without fusion every elementwise op is its own node, most writing over
  // the intermediate they consume, the last one producing the output.
  auto expr = exp(m + r) * 3.0 - (m * r + 1.0) / 2.0 + xsym::dimshuffle(v, 'x', 0);
  struct setting {
    const char* what;
    std::function<decltype(xsym::function("f", xsym::inputs(m, r, v), expr))()> make;
  };
  const setting settings[] = {
      {"fused", [&] { return xsym::function("f", xsym::inputs(m, r, v), expr); }},
      {"unfused in-place", [&] { return xsym::function("f", xsym::inputs(m, r, v), expr, xsym::optimizer_excluding("fusion")); }},
      {"unfused nogc", [&] {
         return xsym::function("f", xsym::inputs(m, r, v), expr, xsym::optimizer_excluding("fusion"), xsym::linker("cvm_nogc"));
       }},
      {"FAST_COMPILE", [&] { return xsym::function("f", xsym::inputs(m, r, v), expr, xsym::mode("FAST_COMPILE")); }},
      {"DebugMode", [&] { return xsym::function("f", xsym::inputs(m, r, v), expr, xsym::mode("DebugMode")); }},
  };
  for (const auto& s : settings) {
    INFO(s.what);
    auto f = s.make();
    const auto want = f(M, R, V);
    xt::xtensor<double, 2> out = xt::zeros<double>({6, 5});
    for (int call = 0; call < 2; ++call) {
      f.into(out)(M, R, V);
      CHECK(same(differences(out, to_doubles(want)), ""));
    }
  }
}

TEST_CASE("into writes strided destinations, xarray and adapted memory", "[compile][into]") {
  clean_config guard;
  auto m = xsym::matrix<double>("m");
  auto f = xsym::function("f", xsym::inputs(m), xsym::outputs(m * 2.0 + 1.0, m.T()));
  std::mt19937 rng(11);
  const auto M = random_tensor<double, 2>(rng, {4, 3}, -1, 1);
  const auto [want, want_t] = f(M);
  // Column-major destinations: not C-contiguous, so the result is copied in.
  xt::xtensor<double, 2, xt::layout_type::column_major> cm = xt::zeros<double>({4, 3});
  xt::xtensor<double, 2, xt::layout_type::column_major> cm_t = xt::zeros<double>({3, 4});
  f.into(cm, cm_t)(M);
  CHECK(same(xt::xtensor<double, 2>(cm), want));
  CHECK(same(xt::xtensor<double, 2>(cm_t), want_t));
  // xt::xarray (rank checked at run time) and xt::adapt over a std::vector.
  xt::xarray<double> xa = xt::zeros<double>({4, 3});
  std::vector<double> buffer(12, 0.0);
  auto adapted = xt::adapt(buffer, std::array<std::size_t, 2>{3, 4});
  f.into(xa, adapted)(M);
  CHECK(same(xt::xtensor<double, 2>(xa), want));
  CHECK(same(xt::xtensor<double, 2>(adapted), want_t));
  xt::xarray<double> rank3 = xt::zeros<double>({4, 3, 1});
  CHECK_THROWS_WITH(f.into(rank3, cm_t)(M), Contains("output 0 has rank 2, its destination has rank 3"));
}

TEST_CASE("into is correct when a destination is also an argument", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  std::mt19937 rng(13);
  const auto A = random_tensor<double, 1>(rng, {50}, -1, 1);
  const auto B = random_tensor<double, 1>(rng, {50}, -1, 1);
  for (const char* l : linkers) {
    INFO("linker " << l);
    // Unfused: x + y runs before x * y, which still reads x: writing x + y into x's memory
    // right away would change what x * y reads.
    auto f = xsym::function("f", xsym::inputs(x, y), xsym::outputs(x + y, x * y), xsym::optimizer_excluding("fusion"),
                            xsym::linker(l));
    const auto [s, p] = f(A, B);
    auto a = A, b = B;
    xt::xtensor<double, 1> prod = xt::zeros<double>({50});
    f.into(a, prod)(a, b);  // a's memory is both input x and output 0's destination
    CHECK(same(a, s));
    CHECK(same(prod, p));
    // x * 2 into x itself, fused, and an output that is the input itself.
    auto g = xsym::function("g", xsym::inputs(x), xsym::outputs(x * 2.0, x), xsym::linker(l));
    auto c = A;
    xt::xtensor<double, 1> passed = xt::zeros<double>({50});
    g.into(c, passed)(c);
    CHECK(same(c, xt::xtensor<double, 1>(A * 2.0)));
    CHECK(same(passed, A));
    // The transpose of an input written back into that input.
    auto m = xsym::matrix<double>("m");
    auto h = xsym::function("h", xsym::inputs(m), m.T(), xsym::linker(l));
    xt::xtensor<double, 2> sq = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
    h.into(sq)(sq);
    CHECK(same(sq, xt::xtensor<double, 2>{{1, 4, 7}, {2, 5, 8}, {3, 6, 9}}));
  }
}

TEST_CASE("into with shared-variable updates matches the plain call", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  for (const char* l : linkers) {
    INFO("linker " << l);
    auto w1 = xsym::shared(xt::xtensor<double, 1>{1, 2, 3}, "w");
    auto w2 = xsym::shared(xt::xtensor<double, 1>{1, 2, 3}, "w");
    // The output is the update's new value: it goes to the shared variable and to `out`.
    auto f1 = xsym::function("f1", xsym::inputs(x), xsym::outputs(w1 * x + 1.0, w1 + x),
                             xsym::updates(xsym::update(w1, w1 + x)), xsym::linker(l));
    auto f2 = xsym::function("f2", xsym::inputs(x), xsym::outputs(w2 * x + 1.0, w2 + x),
                             xsym::updates(xsym::update(w2, w2 + x)), xsym::linker(l));
    const xt::xtensor<double, 1> X{0.5, -1, 2};
    xt::xtensor<double, 1> out = xt::zeros<double>({3}), nw = xt::zeros<double>({3});
    for (int call = 0; call < 4; ++call) {
      f1.into(out, nw)(X);
      const auto [o2, n2] = f2(X);
      CHECK(same(out, o2));
      CHECK(same(nw, n2));
      CHECK(same(w1.get_value(), w2.get_value()));
    }
    // The shared variable does not share memory with the destination.
    nw.fill(-100);
    CHECK(same(w1.get_value(), w2.get_value()));
  }
}

TEST_CASE("an update whose value is an argument, or a view of one, gets the argument's old values when a destination "
          "is that argument", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  const xt::xtensor<double, 1> A{1, 2, 3}, B{-1, 0.5, 4};
  for (const char* mode : {"FAST_RUN", "FAST_COMPILE", "DebugMode"})
    for (const char* l : linkers) {
      INFO("mode " << mode << ", linker " << l);
      auto w = xsym::shared(xt::xtensor<double, 1>{0, 0, 0}, "w");
      auto v = xsym::shared(xt::xtensor<double, 1>{0, 0}, "v");
      auto u = xsym::shared(xt::xtensor<double, 1>{0, 0, 0}, "u");
      // The argument itself, a slice of it, and a reshape of the other output's argument.
      auto f = xsym::function("f", xsym::inputs(x, y), xsym::outputs(x * 2.0, y - x),
                              xsym::updates(xsym::update(w, x), xsym::update(v, x(xsym::range(1, 3))),
                                            xsym::update(u, xsym::reshape(y, {3}))),
                              xsym::mode(mode), xsym::linker(l));
      auto a = A, b = B;
      f.into(a, b)(a, b);  // a is input x and output 0's destination; b is input y and output 1's
      CHECK(same(a, xt::xtensor<double, 1>(A * 2.0)));
      CHECK(same(b, xt::xtensor<double, 1>(B - A)));
      CHECK(same(w.get_value(), A));
      CHECK(same(v.get_value(), xt::xtensor<double, 1>{2, 3}));
      CHECK(same(u.get_value(), B));
    }
}

TEST_CASE("into rejects wrong shapes and destinations that share memory, and updates nothing", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto w = xsym::shared(xt::xtensor<double, 1>{1, 2, 3}, "w");
  auto f = xsym::function("shaped", xsym::inputs(x), xsym::outputs(w * x, x + 1.0), xsym::updates(xsym::update(w, w * 2.0)));
  const xt::xtensor<double, 1> X{1, 1, 1};
  xt::xtensor<double, 1> a = xt::zeros<double>({3}), b = xt::zeros<double>({4});
  CHECK_THROWS_AS(f.into(a, b)(X), xsym::shape_error);
  CHECK_THROWS_WITH(f.into(a, b)(X), Contains("function 'shaped': output 1 has shape (3,) but its destination in "
                                              "into(...) has shape (4,)"));
  CHECK(same(w.get_value(), xt::xtensor<double, 1>{1, 2, 3}));  // no update was applied
  CHECK_THROWS_AS(f.into(a, a)(X), std::invalid_argument);
  CHECK_THROWS_WITH(f.into(a, a)(X), Contains("destinations of outputs 0 and 1 share memory"));
  CHECK(same(w.get_value(), xt::xtensor<double, 1>{1, 2, 3}));
  // Interleaved views share no element, but their bytes overlap: refused, and the message says so.
  xt::xtensor<double, 1> buf = xt::zeros<double>({6});
  auto even = xt::view(buf, xt::range(0, 6, 2)), odd = xt::view(buf, xt::range(1, 6, 2));
  CHECK_THROWS_WITH(f.into(even, odd)(X), Contains("interleaved views count as overlapping"));
  CHECK(same(buf, xt::xtensor<double, 1>(xt::zeros<double>({6}))));
  CHECK(same(w.get_value(), xt::xtensor<double, 1>{1, 2, 3}));
  // The function works afterwards, into and plain.
  xt::xtensor<double, 1> c = xt::zeros<double>({3});
  f.into(a, c)(X);
  CHECK(same(a, xt::xtensor<double, 1>{1, 2, 3}));
  CHECK(same(c, xt::xtensor<double, 1>{2, 2, 2}));
  const auto [p, q] = f(X);
  CHECK(same(p, xt::xtensor<double, 1>{2, 4, 6}));
}

namespace {
template <class Call>
std::int64_t warm_allocations(const Call& call) {
  call();
  call();
  const auto before = xsym::allocated();
  for (int i = 0; i < 10; ++i) call();
  const auto after = xsym::allocated();
  CHECK(after.current == before.current);
  return after.allocations - before.allocations;
}
}  // namespace

TEST_CASE("a warm into-call allocates nothing", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y"), z = xsym::vector<float>("z");
  std::mt19937 rng(17);
  const auto A = random_tensor<float, 1>(rng, {1000}, 0.1, 0.9);
  const auto B = random_tensor<float, 1>(rng, {1000}, 0.1, 0.9);
  const auto C = random_tensor<float, 1>(rng, {1000}, 0.1, 0.9);
  xt::xtensor<float, 1> out = xt::zeros<float>({1000}), out2 = out;
  float total = 0;
  for (const char* l : linkers) {
    INFO("linker " << l);
    auto f3 = xsym::function("add3mul", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::linker(l));
    auto fx = xsym::function("xent", xsym::inputs(x, y), -y * log(x) - (1 - y) * log(1 - x), xsym::linker(l));
    auto fm = xsym::function("multi", xsym::inputs(x, y), xsym::outputs(x * y, exp(x) - y, xsym::sum(x * y)),
                             xsym::linker(l));
    auto fu = xsym::function("unfused", xsym::inputs(x, y), exp(x) * y + (x - y) * 2.0f,
                             xsym::optimizer_excluding("fusion"), xsym::linker(l));
    CHECK(warm_allocations([&] { f3.into(out)(A, B, C); }) == 0);
    CHECK(warm_allocations([&] { fx.into(out)(A, B); }) == 0);
    CHECK(warm_allocations([&] { fm.into(out, out2, total)(A, B); }) == 0);
    CHECK(warm_allocations([&] { fu.into(out)(A, B); }) == 0);
    CHECK(same(out, fu(A, B)));
  }
}

TEST_CASE("into gives every output the arguments' values, whichever destinations they are", "[compile][into]") {
  clean_config guard;
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  for (const char* l : linkers) {
    INFO("linker " << l);
    // Outputs that are the inputs themselves, swapped into each other's arrays.
    auto swap = xsym::function("swap", xsym::inputs(x, y), xsym::outputs(y, x + 0.0 * y, x), xsym::linker(l),
                               xsym::optimizer_excluding("fusion"));
    xt::xtensor<double, 1> a{1, 2, 3}, b{4, 5, 6}, c = xt::zeros<double>({3});
    swap.into(a, c, b)(a, b);
    CHECK(same(a, xt::xtensor<double, 1>{4, 5, 6}));
    CHECK(same(b, xt::xtensor<double, 1>{1, 2, 3}));
    CHECK(same(c, xt::xtensor<double, 1>{1, 2, 3}));
  }
}
