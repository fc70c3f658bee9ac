// What the profile records and counts, checked against numbers the tests work out from the
// shapes and calls they choose, never against the report's own.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <iostream>
#include <sstream>
#include <string>

#include <xsym/xsym.hpp>

namespace {

struct records_config_guard {
  records_config_guard() { xsym::config.reset(); }
  ~records_config_guard() { xsym::config.reset(); }
};

std::shared_ptr<xsym::profile_stats> records_stats(const std::string& name) {
  return std::make_shared<xsym::profile_stats>(name, false);
}

nlohmann::json records_json(const xsym::profile_stats& s) {
  std::ostringstream os;
  xsym::write_json(s, os);
  return nlohmann::json::parse(os.str());  // throws on invalid JSON, invalid UTF-8 included
}

}  // namespace

// Functions destroyed and rebuilt inside one scope (a new one often at a freed one's address)
// each get a record of their own, sized for their own graph.
TEST_CASE("a scope keeps one record per function, even where a new function reuses an old one's address", "[profile]") {
  records_config_guard guard;
  xsym::profile_scope scope("rebuilt", false);
  auto x = xsym::vector<double>("x");
  const xt::xtensor<double, 1> a = xt::ones<double>({100});
  std::vector<std::size_t> node_counts;
  for (int k = 0; k < 3; ++k) {
    {
      auto small = xsym::function("small", xsym::inputs(x), xsym::outputs(x * 2.0));
      node_counts.push_back(small.graph().nodes.size());
      small(a);
    }
    {
      auto big = xsym::function("big", xsym::inputs(x),
                                xsym::outputs(exp(x) + sin(x) * cos(x) + tanh(x) * xsym::sum(x * x)),
                                xsym::optimizer_excluding("fusion:inplace"));
      node_counts.push_back(big.graph().nodes.size());
      big(a);
    }
  }
  const auto fns = scope.stats().functions();
  REQUIRE(fns.size() == node_counts.size());
  for (std::size_t k = 0; k < fns.size(); ++k) {
    CHECK(fns[k]->name() == (k % 2 ? "big" : "small"));
    CHECK(fns[k]->calls == 1);
    CHECK(fns[k]->node_ticks.size() == node_counts[k]);
    for (auto c : fns[k]->node_calls) CHECK(c == 1);
  }
}

TEST_CASE("a node reading one array twice counts its bytes once", "[profile]") {
  records_config_guard guard;
  auto stats = records_stats("twice");
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("twice", xsym::inputs(x), xsym::outputs(x * x, dot(x, x)), xsym::profile(stats),
                          xsym::optimizer_excluding("fusion:inplace"));
  const std::int64_t n = 1000, vec = n * 4;  // float32
  const xt::xtensor<float, 1> a = xt::ones<float>({static_cast<std::size_t>(n)});
  for (int i = 0; i < 3; ++i) f(a);
  bool saw_mul = false, saw_dot = false;
  const auto j = records_json(*stats);  // held: a loop over a temporary's member would dangle
  for (const auto& node : j["functions"][0]["nodes"]) {
    const std::string apply = node["apply"];
    if (apply.find("(x, x)") == std::string::npos) continue;
    if (node["op"].get<std::string>().find("mul") != std::string::npos) {
      saw_mul = true;
      CHECK(node["bytes"].get<double>() == static_cast<double>(vec + vec));  // x once, the product
    } else {
      saw_dot = true;
      CHECK(node["bytes"].get<double>() == static_cast<double>(vec + 4));  // x once, a float32 scalar
    }
  }
  CHECK(saw_mul);
  CHECK(saw_dot);
}

// A call that throws records nothing; the next call of the thrown call's shapes is that
// function's first recorded at them, so the profile takes its shapes.
TEST_CASE("the profile's shapes are the last recorded call's after a call that threw", "[profile]") {
  records_config_guard guard;
  auto stats = records_stats("throws");
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("checked", xsym::inputs(x), xsym::outputs(xsym::check(exp(x) * 2.0, "positive", all(x > 0.0)) + 1.0),
                          xsym::profile(stats));
  const xt::xtensor<double, 1> small = xt::ones<double>({100});
  const xt::xtensor<double, 1> negative = -xt::ones<double>({200}), positive = xt::ones<double>({200});
  for (int i = 0; i < 3; ++i) f(small);
  CHECK_THROWS(f(negative));
  f(positive);
  const auto& p = *stats->functions()[0];
  CHECK(p.calls == 4);
  int vectors = 0;
  for (const auto& ins : p.node_inputs)
    for (const auto& v : ins)
      if (v.shape.rank == 1 && v.shape[0] != 1) {
        ++vectors;
        CHECK(v.shape[0] == 200);
      }
  CHECK(vectors > 0);
}

// <Mflops> and <GB/s> of a node are its mean call's: every call's work at that call's shapes.
TEST_CASE("flops and bytes of calls of several shapes are each call's, over the calls", "[profile]") {
  records_config_guard guard;
  auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y");
  auto mean_call = [&](const std::vector<std::size_t>& sizes) {
    auto stats = records_stats("sizes");
    auto f = xsym::function("mul", xsym::inputs(x, y), xsym::outputs(x * y), xsym::profile(stats));
    double elements = 0;
    for (std::size_t n : sizes) {
      const xt::xtensor<float, 1> a = xt::ones<float>({n});
      f(a, a);
      elements += static_cast<double>(n);
    }
    const auto j = records_json(*stats);
    const auto& nodes = j["functions"][0]["nodes"];
    REQUIRE(nodes.size() == 1);
    const double calls = static_cast<double>(sizes.size());
    CHECK(nodes[0]["flops"].get<double>() == Approx(elements / calls));  // one multiplication per element
    CHECK(nodes[0]["bytes"].get<double>() == Approx(3 * 4 * elements / calls));  // x, y and the product, float32
  };
  std::vector<std::size_t> sizes(9, 1 << 20);
  sizes.push_back(10);  // 9 large calls, then a small one: the small one's shapes are the last
  mean_call(sizes);
  mean_call({10, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16});  // unsampled calls after the change
  mean_call({100, 200, 100, 200, 300});
}

TEST_CASE("JSON of names that are not UTF-8 is valid, with U+FFFD for the bytes that are not", "[profile]") {
  records_config_guard guard;
  auto stats = records_stats(std::string("bad\xff\xfe" "utf"));
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc0\xaf \xed\xa0\x80", xsym::inputs(x), xsym::outputs(x * 3.0f),
                          xsym::profile(stats));
  const xt::xtensor<float, 1> a = xt::ones<float>({10});
  f(a);
  const auto j = records_json(*stats);
  const std::string fffd = "\xef\xbf\xbd";
  CHECK(j["message"] == "bad" + fffd + fffd + "utf");
  // Valid two-, three- and four-byte sequences stay; an overlong form and a surrogate do not.
  CHECK(j["functions"][0]["name"] == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 " + fffd + fffd + " " + fffd + fffd + fffd);
}

TEST_CASE("print_summary(n_apply, n_ops) also cuts the memory profile's list at n_apply", "[profile]") {
  records_config_guard guard;
  xsym::config.profile_memory = true;
  xsym::config.profiling.min_memory_size = 0;
  auto stats = records_stats("limits");
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("limits", xsym::inputs(x), xsym::outputs(exp(x) + sin(x) + cos(x)), xsym::profile(stats),
                          xsym::optimizer_excluding("fusion:inplace"));
  const xt::xtensor<float, 1> a = xt::ones<float>({1000});
  f(a);
  const std::size_t nodes = f.graph().nodes.size();
  REQUIRE(nodes > 2);
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());
  stats->print_summary(1, 1);
  std::cout.rdbuf(old);
  const std::string r = captured.str();
  const auto list = r.find("<Sum apply outputs (bytes)>");
  REQUIRE(list != std::string::npos);
  const auto end = r.find("... (remaining", list);
  REQUIRE(end != std::string::npos);
  int listed = 0;
  for (auto p = r.find("B  [", list); p != std::string::npos && p < end; p = r.find("B  [", p + 1)) ++listed;
  CHECK(listed == 1);
  CHECK(r.find("... (remaining " + std::to_string(nodes - 1) + " Apply account for", list) == end);
}

TEST_CASE("ignore_first_call leaves the warm-up call out of a scope's record too", "[profile]") {
  records_config_guard guard;
  xsym::config.profiling.ignore_first_call = true;
  auto stats = records_stats("own");
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("warm", xsym::inputs(x), xsym::outputs(x * 3.0f), xsym::profile(stats));
  const xt::xtensor<float, 1> a = xt::ones<float>({10});
  xsym::profile_scope scope("scope", false);
  for (int i = 0; i < 5; ++i) f(a);
  CHECK(stats->functions()[0]->calls == 4);
  const auto scoped = scope.stats().functions();
  REQUIRE(scoped.size() == 1);
  CHECK(scoped[0]->calls == 4);
  for (auto c : scoped[0]->node_calls) CHECK(c == 4);
  // The record still has the shapes of the calls it counts.
  REQUIRE(!scoped[0]->node_inputs.empty());
  REQUIRE(!scoped[0]->node_inputs[0].empty());
  CHECK(scoped[0]->node_inputs[0][0].shape[0] == 10);
}

TEST_CASE("a user region named like an op is a row apart from that op's in the Ops section", "[profile]") {
  records_config_guard guard;
  xsym::profile_scope scope("regions", false);
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("e", xsym::inputs(x), xsym::outputs(exp(x)), xsym::optimizer_excluding("fusion:inplace"));
  REQUIRE(f.graph().nodes.size() == 1);
  const std::string name = f.graph().nodes[0].op_name();
  const xt::xtensor<float, 1> a = xt::ones<float>({10});
  for (int i = 0; i < 3; ++i) {
    XSYM_PROFILE_SCOPE(name.c_str());
    f(a);
  }
  const auto j = records_json(scope.stats());
  int op_rows = 0, region_rows = 0;
  for (const auto& row : j["ops"]) {
    if (row["name"] != name) continue;
    CHECK(row["calls"] == 3);
    CHECK(row["applies"] == 1);
    (row["type"] == "user" ? region_rows : op_rows) += 1;
  }
  CHECK(op_rows == 1);
  CHECK(region_rows == 1);
}
