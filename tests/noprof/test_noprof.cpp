// Built with XSYM_PROFILING=0: every timer compiles out. This proves the switch: the
// profiler records nothing and the region macro is an empty statement.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

static_assert(!xsym::profiling_compiled_in, "this test must be built with XSYM_PROFILING=0");

TEST_CASE("with XSYM_PROFILING=0 nothing is recorded", "[noprof]") {
  auto stats = std::make_shared<xsym::profile_stats>("off", false);
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2, xsym::profile(stats));
  {
    xsym::profile_scope scope("scope", false);
    XSYM_PROFILE_SCOPE("region");
    CHECK(f(xt::xtensor<double, 1>{1, 2})(1) == 4.0);
    CHECK(scope.stats().functions().empty());
    CHECK(scope.stats().regions().empty());
  }
  CHECK(stats->functions().empty());
}
