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
