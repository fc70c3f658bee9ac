// Rewrites as registered rows: a program's own rewrite runs where its position and tags put
// it, the optimizer flags choose it by name or tag, and a misplaced or duplicate one is refused.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::vector<xsym::var_ptr> same_roots(const std::vector<xsym::var_ptr>& roots, xsym::rewrite_record&) { return roots; }

}  // namespace

TEST_CASE("the pipeline runs xsym's rows in position order, gpu_placement only with device=cuda", "[modes][rewrites]") {
  xsym::config.reset();
  const auto rows = xsym::rewrite_rows();
  REQUIRE(rows.size() >= 11);
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i - 1]->position <= rows[i]->position);
  std::vector<std::string> names;
  for (const auto& r : rows) {
    names.push_back(r->name);
    CHECK(static_cast<bool>(r->on_vars) != static_cast<bool>(r->on_graph));
    CHECK((r->on_vars ? r->position < xsym::graph_build_position : r->position > xsym::graph_build_position));
  }
  CHECK(std::find(names.begin(), names.end(), "gpu_placement") != names.end());
  CHECK(std::find(names.begin(), names.end(), "constant_folding") != names.end());
  auto x = xsym::vector<double>("x");
  // Without device=cuda, requiring gpu_placement says why it cannot run.
  CHECK_THAT(error_of([&] {
               xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer_requiring("gpu_placement"));
             }),
             Catch::Matchers::Contains("runs only with device=cuda"));
  // And excluding it on the CPU changes nothing.
  auto f = xsym::function("f", xsym::inputs(x), (x + 1) * 2, xsym::optimizer_excluding("gpu_placement"));
  CHECK(f(xt::xtensor<double, 1>{1, 2})(1) == 6);
}

TEST_CASE("a registered rewrite runs in its mode, by name or tag, until its registration ends", "[modes][rewrites]") {
  xsym::config.reset();
  int vars_runs = 0, graph_runs = 0;
  auto x = xsym::vector<double>("x");
  {
    auto r1 = xsym::register_rewrite({"count_vars",
                                      {"fast_run", "counting"},
                                      20,
                                      [&](const std::vector<xsym::var_ptr>& roots, xsym::rewrite_record& rec) {
                                        ++vars_runs;
                                        return same_roots(roots, rec);
                                      },
                                      {}});
    auto r2 = xsym::register_rewrite(
        {"count_graph", {"counting"}, 65, {}, [&](xsym::function_graph&, xsym::rewrite_record&) { ++graph_runs; }});
    xsym::function("a", xsym::inputs(x), x * 2);  // FAST_RUN: count_vars (fast_run), not count_graph
    CHECK(vars_runs == 1);
    CHECK(graph_runs == 0);
    xsym::function("b", xsym::inputs(x), x * 2, xsym::optimizer_including("counting"));
    CHECK(vars_runs == 2);
    CHECK(graph_runs == 1);
    xsym::function("c", xsym::inputs(x), x * 2, xsym::optimizer_including("count_graph"),
                   xsym::optimizer_excluding("count_vars"));
    CHECK(vars_runs == 2);
    CHECK(graph_runs == 2);
    xsym::function("d", xsym::inputs(x), x * 2, xsym::mode("FAST_COMPILE"));  // no fast_compile tag
    CHECK(vars_runs == 2);
    // The flags' error for an unknown name lists the registered rows too.
    CHECK_THAT(error_of([&] { xsym::function("e", xsym::inputs(x), x * 2, xsym::optimizer_excluding("nosuch")); }),
               Catch::Matchers::Contains("count_graph"));
  }
  xsym::function("f", xsym::inputs(x), x * 2, xsym::optimizer_including("fast_run"));
  CHECK(vars_runs == 2);
  CHECK_THAT(error_of([&] { xsym::function("g", xsym::inputs(x), x * 2, xsym::optimizer_including("counting")); }),
             Catch::Matchers::Contains("'counting', which is no rewrite name or tag"));
  // A typo of a tag is answered with the tag.
  CHECK_THAT(error_of([&] { xsym::function("h", xsym::inputs(x), x * 2, xsym::optimizer_excluding("fusoin")); }),
             Catch::Matchers::Contains("'fusoin', which is no rewrite name or tag; did you mean 'fusion'?"));
}

TEST_CASE("register_rewrite refuses a misplaced, duplicate or empty row, naming it", "[modes][rewrites]") {
  auto keep = [](const std::vector<xsym::var_ptr>& roots, xsym::rewrite_record& rec) { return same_roots(roots, rec); };
  auto on_graph = [](xsym::function_graph&, xsym::rewrite_record&) {};
  CHECK_THAT(error_of([&] { (void)xsym::register_rewrite({"late", {"fast_run"}, 60, keep, {}}); }),
             Catch::Matchers::Contains("rewrite 'late' rewrites the symbolic graph, so its position must be below"));
  CHECK_THAT(error_of([&] { (void)xsym::register_rewrite({"early", {}, 10, {}, on_graph}); }),
             Catch::Matchers::Contains("rewrite 'early' rewrites the built graph, so its position must be above"));
  CHECK_THAT(error_of([&] { (void)xsym::register_rewrite({"both", {}, 10, keep, on_graph}); }),
             Catch::Matchers::Contains("needs exactly one of on_vars and on_graph"));
  CHECK_THAT(error_of([&] { (void)xsym::register_rewrite({"merge", {}, 10, keep, {}}); }),
             Catch::Matchers::Contains("'merge' is the name of one of xsym's rewrites"));
  auto once = xsym::register_rewrite({"once", {}, 10, keep, {}});
  CHECK_THAT(error_of([&] { (void)xsym::register_rewrite({"once", {}, 11, keep, {}}); }),
             Catch::Matchers::Contains("a rewrite named 'once' is already registered"));
  once.reset();
  CHECK_NOTHROW(xsym::register_rewrite({"once", {}, 11, keep, {}}));
}

TEST_CASE("per-function optimizer options are checked as their flags are", "[modes][rewrites]") {
  xsym::config.reset();
  auto x = xsym::vector<double>("x");
  const xt::xtensor<double, 1> forty{40};
  // A misspelt optimizer is refused with the flag's choices and suggestion, not run as "no rewrite".
  const std::string flag_msg = error_of([] { xsym::config.set("optimizer", "fast_runn"); });
  REQUIRE_THAT(flag_msg, Catch::Matchers::Contains("did you mean 'fast_run'"));
  const std::string msg = error_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer("fast_runn")); });
  CHECK_THAT(msg, Catch::Matchers::Contains("xsym::optimizer('fast_runn')") &&
                      Catch::Matchers::Contains("expected one of fast_run, fast_compile, merge, None; did you mean 'fast_run'?"));
  CHECK_THROWS_AS(xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer("fast_runn")), xsym::compile_error);
  CHECK_THROWS_AS(xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer("fusion")), xsym::compile_error);
  // Each choice builds; fast_run stabilizes log(1 - sigmoid(x)), None does not.
  auto stable = xsym::function("f", xsym::inputs(x), log(1 - sigmoid(x)), xsym::optimizer("fast_run"));
  CHECK(stable(forty)(0) == Approx(-40).epsilon(1e-12));
  auto literal = xsym::function("f", xsym::inputs(x), log(1 - sigmoid(x)), xsym::optimizer("None"));
  CHECK(std::isinf(literal(forty)(0)));
  for (const char* o : {"fast_compile", "merge"})
    CHECK(xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer(o))(forty)(0) == 41);
  // The lists take what the flags take: no empty name, no space.
  const std::string flag_list_msg = error_of([] { xsym::config.set("optimizer_excluding", "fusion::inplace"); });
  REQUIRE_THAT(flag_list_msg, Catch::Matchers::Contains("found an empty name"));
  for (const char* bad : {"fusion::inplace", "fusion:", ":fusion"}) {
    INFO(bad);
    CHECK_THAT(error_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer_excluding(bad)); }),
               Catch::Matchers::Contains("xsym::optimizer_excluding('" + std::string(bad) + "')") &&
                   Catch::Matchers::Contains("found an empty name"));
    CHECK_THAT(error_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer_including(bad)); }),
               Catch::Matchers::Contains("xsym::optimizer_including") && Catch::Matchers::Contains("found an empty name"));
    CHECK_THAT(error_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer_requiring(bad)); }),
               Catch::Matchers::Contains("xsym::optimizer_requiring") && Catch::Matchers::Contains("found an empty name"));
  }
  CHECK_THAT(error_of([&] { xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer_excluding(" fusion")); }),
             Catch::Matchers::Contains("found ' fusion' containing a space"));
  CHECK_THROWS_AS(xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer_excluding("fusion::inplace")),
                  xsym::compile_error);
  // An empty list is none, as for the flags.
  CHECK(xsym::function("f", xsym::inputs(x), x + 1, xsym::optimizer_excluding(""))(forty)(0) == 41);
  xsym::config.reset();
}

TEST_CASE("optimizer_excluding=elemwise_fusion leaves the elementwise nodes unfused", "[modes][rewrites]") {
  xsym::config.reset();
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto z = xsym::vector<double>("z");
  const auto e = (x + y + z) * 2;  // the seeds' example
  const xt::xtensor<double, 1> a{1, 2}, b{3, 4}, c{5, 6};
  auto fused = xsym::function("fused", xsym::inputs(x, y, z), e);
  CHECK(fused.graph().nodes.size() == 1);
  for (const char* excluded : {"elemwise_fusion", "fusion"}) {
    INFO(excluded);
    auto f = xsym::function("unfused", xsym::inputs(x, y, z), e, xsym::optimizer_excluding(excluded));
    const std::string topo = xsym::toposort_text(f);
    INFO(topo);
    CHECK(topo.find("Composite") == std::string::npos);
    CHECK(f.graph().nodes.size() == 3);
    const xt::xtensor<double, 1> r = f(a, b, c);
    CHECK(r(0) == 18);
    CHECK(r(1) == 24);
  }
}
