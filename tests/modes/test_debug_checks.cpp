// DebugMode's own checks: its reference graph, how it compares values, and the kernels it
// compares against.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include "compile/compile_util.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {
using Catch::Matchers::Contains;
using xsym_test::message_of;

struct debug_guard {
  debug_guard() { xsym::config.reset(); }
  ~debug_guard() { xsym::config.reset(); }
};

// A rewrite that turns every Elemwise `from` into `to`: a deliberately wrong one.
xsym::rewrite_registration op_becomes(const std::string& name, std::vector<std::string> tags, xsym::scalar_op from,
                                      xsym::scalar_op to) {
  return xsym::register_rewrite(
      {name, std::move(tags), 48,
       [from, to](const std::vector<xsym::var_ptr>& roots, xsym::rewrite_record&) {
         return xsym::detail::rebuild(roots, [&](const xsym::var_ptr& v, std::vector<xsym::var_ptr>& ins, bool changed) {
           if (v->kind == xsym::var_kind::apply && v->fn->kind == xsym::op_kind::elemwise && v->fn->scalar == from)
             return xsym::detail::elemwise(to, ins);
           return xsym::detail::with_inputs(v, ins, changed);
         });
       },
       {}});
}
}  // namespace

TEST_CASE("DebugMode's reference is the plain FAST_COMPILE graph, whatever the function includes or requires",
          "[modes][debug]") {
  debug_guard guard;
  // A wrong rewrite outside fast_run, as one being tried out would be.
  const auto registration = op_becomes("experimental_add_becomes_sub", {"experimental"}, xsym::scalar_op::add,
                                       xsym::scalar_op::sub);
  auto x = xsym::vector<double>("x");
  const xt::xtensor<double, 1> a{1, 2};
  // Included, it runs: x + 1 gives x - 1.
  auto included = xsym::function("included", xsym::inputs(x), x + 1, xsym::optimizer_including("experimental"));
  REQUIRE(included(a)(0) == 0.0);
  // DebugMode compares against the graph without it, included by option or by flag.
  auto by_option = xsym::function("by_option", xsym::inputs(x), x + 1, xsym::mode("DebugMode"),
                                  xsym::optimizer_including("experimental"));
  CHECK_THROWS_AS(by_option(a), xsym::debug_mode_error);
  CHECK_THAT(message_of([&] { by_option(a); }),
             Contains("differs from the graph without optimizations") && Contains("0 instead of 2"));
  xsym::config.optimizer_including = "experimental";
  auto by_flag = xsym::function("by_flag", xsym::inputs(x), x + 1, xsym::mode("DebugMode"));
  xsym::config.optimizer_including = "";
  CHECK_THAT(message_of([&] { by_flag(a); }), Contains("differs from the graph without optimizations"));
  // Requiring a FAST_RUN rewrite is about the function: its reference need not run it.
  auto required = xsym::function("required", xsym::inputs(x), exp(x) * 2 + 1, xsym::mode("DebugMode"),
                                 xsym::optimizer_requiring("fusion"));
  CHECK(required(a)(1) == Approx(2 * std::exp(2.0) + 1).epsilon(1e-15));
}

TEST_CASE("DebugMode's comparison: an infinity must be matched, integers exactly", "[modes][debug]") {
  debug_guard guard;
  auto vec = [](auto... e) {
    using T = std::common_type_t<decltype(e)...>;
    xsym::shape_t s;
    s.rank = 1;
    s[0] = sizeof...(e);
    auto arr = xsym::ndarray::empty(xsym::dtype_of<T>(), s);
    T* p = arr.template data_as<T>();
    ((*p++ = e), ...);
    return arr;
  };
  auto text = [](const xsym::ndarray& got, const xsym::ndarray& want) {
    const auto m = xsym::detail::compare_arrays(got, want);
    return m ? xsym::detail::describe_mismatch(got, *m) : std::string("no mismatch");
  };
  // A finite value where the reference is an infinity, however large, is a difference.
  CHECK_THAT(text(vec(1.0, 1e308), vec(1.0, INFINITY)),
             Contains("a finite value where the reference has +inf") && Contains("index (1,)"));
  CHECK_THAT(text(vec(-1.0f, 2.0f), vec(-INFINITY, 2.0f)), Contains("a finite value where the reference has -inf"));
  CHECK_THAT(text(vec(1.0, 2.0), vec(1.0, std::nan(""))), Contains("a finite value where the reference has NaN"));
  CHECK(text(vec(INFINITY, -INFINITY), vec(INFINITY, -INFINITY)) == "no mismatch");
  // int64 values that one double cannot tell apart.
  const std::int64_t big = std::int64_t{1} << 60;
  CHECK_THAT(text(vec(std::int64_t{7}, big - 1), vec(std::int64_t{7}, big + 1)),
             Contains("index (1,)") && Contains("1152921504606846975 instead of 1152921504606846977"));
  CHECK(text(vec(std::int64_t{7}, big + 1), vec(std::int64_t{7}, big + 1)) == "no mismatch");
  CHECK_THAT(text(vec(std::int32_t{3}, std::int32_t{-5}), vec(std::int32_t{3}, std::int32_t{-4})),
             Contains("-5 instead of -4"));

  // The same through DebugMode: wrong rewrites that the old comparison let through.
  auto x = xsym::vector<double>("x");
  {
    const auto registration = op_becomes("exp_becomes_tanh", {"fast_run"}, xsym::scalar_op::exp, xsym::scalar_op::tanh);
    auto f = xsym::function("overflow", xsym::inputs(x), exp(x), xsym::debug_mode{false});
    CHECK_THAT(message_of([&] { f(xt::xtensor<double, 1>{1000}); }),
               Contains("differs from the graph without optimizations") && Contains("where the reference has +inf"));
  }
  {
    const auto registration = op_becomes("add_becomes_sub", {"fast_run"}, xsym::scalar_op::add, xsym::scalar_op::sub);
    auto i = xsym::vector<std::int64_t>("i");
    auto f = xsym::function("int64", xsym::inputs(i), i + 1, xsym::debug_mode{});
    CHECK_THAT(message_of([&] { f(xt::xtensor<std::int64_t, 1>{big}); }),
               Contains("1152921504606846975 instead of 1152921504606846977"));
  }
}

namespace {
// Restores the fault in force (XSYM_TEST_FAULT's, under tests/oracle/mutation.sh) however the test ends.
struct fault_guard {
  std::string saved = xsym::cpu::testing::current_fault().name;
  ~fault_guard() { xsym::cpu::testing::set_fault(saved); }
};
}  // namespace

// The products and reductions of the fast graph are checked against kernels of their own: a
// fault in the product or reduction kernels shows. Integers, compared exactly, show the fault
// hook's change of one (a float's 2^-42 relative change is within DebugMode's tolerance).
TEST_CASE("DebugMode checks products and reductions against kernels of its own", "[modes][debug]") {
  debug_guard guard;
  fault_guard faults;
  namespace ft = xsym::cpu::testing;
  auto m = xsym::matrix<std::int64_t>("m");
  auto n = xsym::matrix<std::int64_t>("n");
  auto v = xsym::vector<std::int64_t>("v");
  auto w = xsym::vector<std::int64_t>("w");
  xt::xtensor<std::int64_t, 2> M = xt::xtensor<std::int64_t, 2>::from_shape({5, 3});
  xt::xtensor<std::int64_t, 2> N = xt::xtensor<std::int64_t, 2>::from_shape({3, 4});
  for (std::size_t k = 0; k < M.size(); ++k) M.data()[k] = static_cast<std::int64_t>(k) - 6;
  for (std::size_t k = 0; k < N.size(); ++k) N.data()[k] = 2 * static_cast<std::int64_t>(k) - 5;
  const xt::xtensor<std::int64_t, 1> V{1, -2, 3}, W{4, 0, -1};
  struct product_case {
    const char* fault;
    std::function<void()> call;
  };
  auto f_gemv = xsym::function("gemv", xsym::inputs(m, v), dot(m, v), xsym::debug_mode{});
  auto f_gemv_t = xsym::function("gemv_t", xsym::inputs(m, v), dot(m.T(), dot(m, v)), xsym::debug_mode{});
  auto f_dot = xsym::function("dot", xsym::inputs(v, w), dot(v, w), xsym::debug_mode{});
  auto f_dot22 = xsym::function("dot22", xsym::inputs(m, n), dot(m, n), xsym::debug_mode{});
  auto f_sum = xsym::function("sum", xsym::inputs(m), sum(m, 1), xsym::debug_mode{});
  auto f_sum_t = xsym::function("sum_t", xsym::inputs(m), sum(m.T(), 0) * 2, xsym::debug_mode{});
  auto f_max = xsym::function("max", xsym::inputs(m), max(m, 0), xsym::debug_mode{});
  auto f_prod = xsym::function("prod", xsym::inputs(m), prod(m + 7, 1), xsym::debug_mode{});
  const std::vector<product_case> cases = {
      {"gemv", [&] { f_gemv(M, V); }},       {"gemv", [&] { f_gemv_t(M, V); }}, {"dot", [&] { f_dot(V, W); }},
      {"dot22", [&] { f_dot22(M, N); }},     {"reduce_sum", [&] { f_sum(M); }}, {"reduce_sum", [&] { f_sum_t(M); }},
      {"reduce_max", [&] { f_max(M); }},     {"reduce_prod", [&] { f_prod(M); }},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    INFO("case " << c << ", fault " << cases[c].fault);
    ft::set_fault("");
    REQUIRE_NOTHROW(cases[c].call());  // correct kernels pass
    ft::set_fault(cases[c].fault);
    const std::string msg = message_of(cases[c].call);
    CHECK_THAT(msg, Contains("xsym DebugMode") && Contains("differs from the reference kernels"));
  }
  ft::set_fault("");
  // The reference kernels give the right numbers themselves.
  const xt::xtensor<std::int64_t, 1> mv = f_gemv(M, V);
  for (std::size_t r = 0; r < 5; ++r) CHECK(mv(r) == M(r, 0) * V(0) + M(r, 1) * V(1) + M(r, 2) * V(2));
}

TEST_CASE("DebugMode compares a Max or Min of the node's inputs exactly", "[modes][debug]") {
  debug_guard guard;
  fault_guard faults;
  namespace ft = xsym::cpu::testing;
  auto m = xsym::matrix<double>("m");
  xt::xtensor<double, 2> M = xt::xtensor<double, 2>::from_shape({4, 6});
  for (std::size_t k = 0; k < M.size(); ++k) M.data()[k] = 1 + 0.1 * static_cast<double>(k);
  auto f_max = xsym::function("max", xsym::inputs(m), max(m, 1), xsym::debug_mode{});
  auto f_min = xsym::function("min", xsym::inputs(m), min(m.T(), 0) * 2, xsym::debug_mode{});
  ft::set_fault("");
  const xt::xtensor<double, 1> r = f_max(M);
  for (std::size_t i = 0; i < 4; ++i) CHECK(r(i) == M(i, 5));
  REQUIRE_NOTHROW(f_min(M));
  // The fault hook moves one result by 2^-42 relative: within the float64 tolerance of a sum,
  // not of a maximum.
  ft::set_fault("reduce_max");
  CHECK_THAT(message_of([&] { f_max(M); }), Contains("differs from the reference kernels"));
  ft::set_fault("reduce_min");
  CHECK_THAT(message_of([&] { f_min(M); }), Contains("differs from the reference kernels"));
}
