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
