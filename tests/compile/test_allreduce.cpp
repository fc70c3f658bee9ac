// The AllReduce node without MPI: its name and class, its values, where the rewrites leave it,
// its profile lines and JSON, DebugMode, and the errors of what it cannot do. The same node
// over MPI ranks is tests/mpi's.
#include <catch2/catch.hpp>

#include <sstream>

#include "compile/compile_util.hpp"
#include "compile/replicas.hpp"

using xsym_test::message_of;
using xsym_test::replicas;

TEST_CASE("AllReduce is one Apply node whose value is the communicator's reduction", "[allreduce]") {
  xsym_test::clean_config clean;
  auto group = std::make_shared<replicas>(3);
  auto x = xsym::matrix<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), xsym::allreduce(x * 2, group) + 1);
  const auto names = xsym_test::op_names(f);
  REQUIRE(std::count(names.begin(), names.end(), "AllReduce{sum}") == 1);
  for (const auto& n : f.toposort())
    if (n.op_name() == "AllReduce{sum}") CHECK(n.class_name() == "xsym::AllReduce");
  // A strided argument: the transpose of a (3, 4) array.
  xt::xtensor<double, 2> a = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
  const xt::xtensor<double, 2> got = f(xt::transpose(a));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(got(i, j) == 3 * 2 * a(j, i) + 1);
  CHECK(group->calls == 1);
}

TEST_CASE("AllReduce's reductions, and its dtype and broadcast pattern are its input's", "[allreduce]") {
  xsym_test::clean_config clean;
  auto group = std::make_shared<replicas>(2);
  auto v = xsym::vector<std::int32_t>("v");
  auto b = xsym::vector<bool>("b");
  auto r = xsym::row<float>("r");
  auto rr = xsym::allreduce(r, group);
  CHECK(rr.node()->broadcastable == r.node()->broadcastable);
  auto g = xsym::function("g", xsym::inputs(v, b), xsym::outputs(xsym::allreduce(v, group, xsym::reduce_op::prod),
                                                                 xsym::allreduce(b, group, xsym::reduce_op::min)));
  auto [p, m] = g(xt::xtensor<std::int32_t, 1>{-3, 4}, xt::xtensor<bool, 1>{true, false});
  CHECK((p == xt::xtensor<std::int32_t, 1>{9, 16}));
  CHECK((m == xt::xtensor<bool, 1>{true, false}));
}

TEST_CASE("merge keeps one of two equal AllReduces, never two communicators' as one", "[allreduce]") {
  xsym_test::clean_config clean;
  auto one = std::make_shared<replicas>(2), other = std::make_shared<replicas>(2);
  auto x = xsym::vector<double>("x");
  auto same = xsym::function("same", xsym::inputs(x), xsym::allreduce(x, one) * xsym::allreduce(x, one));
  auto names = xsym_test::op_names(same);
  CHECK(std::count(names.begin(), names.end(), "AllReduce{sum}") == 1);
  auto two = xsym::function("two", xsym::inputs(x), xsym::allreduce(x, one) * xsym::allreduce(x, other));
  names = xsym_test::op_names(two);
  CHECK(std::count(names.begin(), names.end(), "AllReduce{sum}") == 2);
  CHECK((two(xt::xtensor<double, 1>{1, 3}) == xt::xtensor<double, 1>{4, 36}));
}

TEST_CASE("the profile shows AllReduce's ranks, bytes and wait, as text and JSON", "[allreduce][profile]") {
  xsym_test::clean_config clean;
  auto group = std::make_shared<replicas>(4);
  auto stats = std::make_shared<xsym::profile_stats>("collective", false);
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("f", xsym::inputs(x), xsym::allreduce(exp(x), group), xsym::profile(stats));
  const xt::xtensor<float, 1> in = xt::ones<float>({250});
  for (int i = 0; i < 5; ++i) (void)f(in);
  std::ostringstream text;
  stats->print_summary(text);
  INFO(text.str());
  CHECK(text.str().find("xsym::AllReduce") != std::string::npos);
  CHECK(text.str().find("allreduce: 4 ranks of replicas, 1000 bytes per rank per call") != std::string::npos);
  const auto& prof = *stats->functions()[0];
  double wait = 0;
  for (std::size_t i = 0; i < prof.node_wait_ticks.size(); ++i) wait += prof.node_wait_time(i);
  CHECK(wait == Approx(5 * replicas::wait_per_call * xsym::detail::seconds_per_tick()).epsilon(1e-12));
  std::ostringstream json;
  xsym::write_json(*stats, json);
  CHECK(json.str().find("\"class\": \"xsym::AllReduce\"") != std::string::npos);
  CHECK(json.str().find("\"wait_s\": ") != std::string::npos);
  CHECK(json.str().find("\"rank_min_s\"") == std::string::npos);  // not a merged profile
}

TEST_CASE("DebugMode and FAST_COMPILE run AllReduce as FAST_RUN does", "[allreduce]") {
  xsym_test::clean_config clean;
  auto group = std::make_shared<replicas>(2);
  auto x = xsym::vector<double>("x");
  const xt::xtensor<double, 1> in = {0.5, -1, 2};
  auto fast = xsym::function("fast", xsym::inputs(x), xsym::allreduce(sigmoid(x), group) * 3);
  auto debug = xsym::function("debug", xsym::inputs(x), xsym::allreduce(sigmoid(x), group) * 3, xsym::mode("DebugMode"));
  auto compile = xsym::function("compile", xsym::inputs(x), xsym::allreduce(sigmoid(x), group) * 3, xsym::mode("FAST_COMPILE"));
  const xt::xtensor<double, 1> want = fast(in);
  // DebugMode reduces once a call, as FAST_RUN does: its reference and its unoptimised twin
  // take the node's result (another collective would pair with another rank's next call).
  const int before = group->calls;
  CHECK((debug(in) == want));
  CHECK(group->calls == before + 1);
  CHECK((compile(in) == want));
  for (std::size_t i = 0; i < in.size(); ++i) CHECK(want(i) == Approx(2 * 3 / (1 + std::exp(-in(i)))));
}

TEST_CASE("what AllReduce cannot do is an error naming it", "[allreduce]") {
  xsym_test::clean_config clean;
  auto group = std::make_shared<replicas>(2);
  auto v = xsym::vector<double>("v");
  auto b = xsym::vector<bool>("b");
  CHECK_THAT(message_of([&] { (void)xsym::allreduce(b, group); }), Catch::Contains("sum and prod are not defined on bool"));
  CHECK_THAT(message_of([&] { (void)xsym::allreduce(v, group, xsym::reduce_op::mean); }),
             Catch::Contains("divide the sum by the count"));
  CHECK_THAT(message_of([&] { (void)xsym::allreduce(v, nullptr); }), Catch::Contains("no communicator"));
  CHECK_THAT(message_of([&] { (void)xsym::grad(sum(xsym::allreduce(v, group)), v); }),
             Catch::Contains("no gradient through AllReduce{sum}"));
  // Below an AllReduce, a gradient flows as usual: the data-parallel step.
  auto [gv] = xsym::grad(sum(v * v), v);
  auto f = xsym::function("f", xsym::inputs(v), xsym::allreduce(gv, group));
  CHECK((f(xt::xtensor<double, 1>{1, 2}) == xt::xtensor<double, 1>{4, 8}));
}
