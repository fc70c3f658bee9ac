// Building an expression allocates nothing: a typed expression holds its leaves and builds its
// run-time nodes when first used as a var (expr/var.hpp). Counted by replacing operator new.
#include "expr_util.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_news{0};
thread_local bool g_counting = false;
}  // namespace

// GCC sees free() given what operator new returned, not that this operator new is malloc's.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (g_counting) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// The operator news on this thread while f runs.
template <class F>
long news_in(F&& f) {
  const long before = g_news.load();
  g_counting = true;
  f();
  g_counting = false;
  return g_news.load() - before;
}

TEST_CASE("building and copying typed expressions allocates nothing; using one as a var builds its nodes once",
          "[expr][typed]") {
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y"), z = xsym::vector<float>("z");
  auto w = xsym::vector<double>("w"), t = xsym::vector<double>("t");
  { auto warm = x + y; (void)warm; }  // the first expression reads the flags (compute_test_value)
  // The test itself must be able to see an allocation.
  REQUIRE(news_in([&] { xsym::var<float, 1> v = x + y; (void)v; }) > 0);

  CHECK(news_in([&] {
          auto e = (x + y + z) * 2;
          auto s = xsym::sigmoid(-e) + 1.5;
          auto p = 1 / (1 + xsym::exp(-w * 0.5));
          auto xent = -t * xsym::log(p) - (1 - t) * xsym::log(1 - p);
          auto copy = xent;
          (void)s;
          (void)copy;
        }) == 0);

  // Nothing is built for an expression never used: the next node's id follows the last one's.
  const std::uint64_t before = xsym::detail::next_variable_id();
  { auto unused = xsym::tanh(x * y - z); (void)unused; }
  CHECK(xsym::detail::next_variable_id() == before + 1);

  auto e = (x + y + z) * 2;
  const xsym::var_ptr& built = e.node();
  CHECK(built->fn->scalar == xsym::scalar_op::mul);
  CHECK(e.node() == built);  // built once
  xsym::var<float, 1> as_var = e;
  CHECK(as_var.node() == built);
  auto copy = e;
  CHECK(copy.node() == built);
  // A subtree that was built already is reused where the bigger tree is built.
  auto f = e - x;
  CHECK(f.node()->inputs[0] == built);
}

TEST_CASE("a typed expression's nodes carry the lines of the operators that made them", "[expr][typed]") {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  const int first = __LINE__ + 1;
  auto e = x + y;
  const int second = __LINE__ + 1;
  auto f = xsym::exp(e) * 3;
  const xsym::var_ptr& mul = f.node();
  CHECK(mul->where.line() == static_cast<unsigned>(second));
  const xsym::var_ptr& ex = mul->inputs[0];
  CHECK(ex->where.line() == static_cast<unsigned>(second));
  CHECK(ex->inputs[0]->where.line() == static_cast<unsigned>(first));
}

TEST_CASE("an expression used twice in a tree is computed once by the compiled function", "[expr][typed]") {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  auto e = x * y + 1;
  auto f = xsym::function("twice", xsym::inputs(x, y), e * e - e);
  xt::xtensor<double, 1> a = {1.0, -2.0, 0.5, 3.0, 4.0}, b = {2.0, 0.25, -1.0, 1.5, -0.5};
  const xt::xtensor<double, 1> r = f(a, b);
  REQUIRE(r.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double v = a(i) * b(i) + 1;
    CHECK(r(i) == Approx(v * v - v).epsilon(1e-15));
  }
}

}  // namespace
