// The profiler: report structure on the seeds' example, limits, sums, memory numbers,
// exports, scopes and thread safety. Timings are never asserted, only structure and counts.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <xsym/xsym.hpp>

namespace {

struct config_guard {
  config_guard() { xsym::config.reset(); }
  ~config_guard() { xsym::config.reset(); }
};

std::shared_ptr<xsym::profile_stats> quiet_stats(const std::string& name) {
  return std::make_shared<xsym::profile_stats>(name, false);
}

// The seeds' profiling example, profiled into `stats`, called `calls` times.
template <class... Options>
auto seeds_example(const std::shared_ptr<xsym::profile_stats>& stats, int calls, Options... options) {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  auto f = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs((x + y + z) * 2),
                          xsym::profile(stats), options...);
  const xt::xtensor<double, 1> a{1}, b{2}, c{3};
  for (int i = 0; i < calls; ++i) {
    auto [r] = f(a, b, c);
    REQUIRE(r(0) == 12.0);
  }
  return f;
}

std::string report(const xsym::profile_stats& s) {
  std::ostringstream os;
  s.print_summary(os);
  return os.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report of the seeds' example without fusion has the seed's sections and nodes", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("");
  seeds_example(stats, 3, xsym::optimizer_excluding("fusion:inplace"));
  const std::string r = report(*stats);
  for (const char* section : {"Function profiling", "Message: profiling_example", "Time in 3 calls to Function.__call__",
                              "Time in Function.fn.__call__", "Time in thunks", "Total compilation time",
                              "Number of Apply nodes: 3", "\nClass\n---", "\nOps\n---", "\nApply\n------",
                              "<% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <Class name>",
                              "<Op name>"})
    CHECK(r.find(section) != std::string::npos);
  // Classes merge all three nodes; Ops merge the two adds; Apply lists each node.
  CHECK(r.find("     9       3   xsym::Elemwise") != std::string::npos);
  CHECK(r.find("     6       2   Elemwise{add,no_inplace}") != std::string::npos);
  CHECK(r.find("     3       1   Elemwise{mul,no_inplace}") != std::string::npos);
  CHECK(r.find("Elemwise{add,no_inplace}(x, y)") != std::string::npos);
  CHECK(r.find("Elemwise{add,no_inplace}(Elemwise{add,no_inplace}.0, z)") != std::string::npos);
  CHECK(r.find("Elemwise{mul,no_inplace}(Elemwise{add,no_inplace}.0, TensorConstant{(1,) of 2.0})") != std::string::npos);
  CHECK(r.find("remaining 0 Apply instances") != std::string::npos);
  CHECK(count(r, "input 0: dtype=float64, shape=(1,), strides=c") == 3);
}

TEST_CASE("report of the seeds' example with fusion has one Composite node", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("");
  seeds_example(stats, 2);
  const std::string r = report(*stats);
  CHECK(r.find("Number of Apply nodes: 1") != std::string::npos);
  CHECK(r.find("Elemwise{Composite{((i0 + i1 + i2) * i3)}}(x, y, z, TensorConstant{(1,) of 2.0})") != std::string::npos);
  CHECK(r.find("absorbed: Elemwise{add,no_inplace} x2 Elemwise{mul,no_inplace}") != std::string::npos);
  CHECK(r.find("Time in 2 calls") != std::string::npos);
}

TEST_CASE("n_apply and n_ops cut the sections with a remaining line", "[profile]") {
  config_guard guard;
  xsym::config.profiling.n_apply = 1;
  xsym::config.profiling.n_ops = 1;
  auto stats = quiet_stats("");
  seeds_example(stats, 1, xsym::optimizer_excluding("fusion:inplace"));
  const std::string r = report(*stats);
  CHECK(r.find("remaining 1 Ops account for") != std::string::npos);
  CHECK(r.find("remaining 2 Apply instances account for") != std::string::npos);
  CHECK(count(r, "input 0: dtype") == 1);
}

TEST_CASE("profile_stats shared by two functions sums their calls and nodes", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("both");
  seeds_example(stats, 2, xsym::optimizer_excluding("fusion:inplace"));
  seeds_example(stats, 5);
  REQUIRE(stats->functions().size() == 2);
  const std::string r = report(*stats);
  CHECK(r.find("Message: both") != std::string::npos);
  CHECK(r.find("Time in 7 calls to Function.__call__") != std::string::npos);
  CHECK(r.find("Number of Apply nodes: 4") != std::string::npos);
  // The class row sums 2 calls x 3 nodes and 5 calls x 1 node.
  CHECK(r.find("    11       4   xsym::Elemwise") != std::string::npos);
}

TEST_CASE("memory profile equals hand-computed bytes and min_memory_size cuts it", "[profile]") {
  config_guard guard;
  xsym::config.profile_memory = true;
  auto stats = quiet_stats("");
  auto x = xsym::vector<double>("x");
  // exp(x) (1000 doubles) then sum: unfused, no in-place: 8000 bytes then 8 bytes.
  auto f = xsym::function("mem", xsym::inputs(x), xsym::sum(exp(x)), xsym::profile(stats),
                          xsym::optimizer_excluding("fusion:inplace"));
  f(xt::xtensor<double, 1>(xt::ones<double>({1000})));
  const std::string r = report(*stats);
  CHECK(r.find("Memory Profile") != std::string::npos);
  CHECK(r.find("8000B  [(1000,)] c Elemwise{exp,no_inplace}(x)") != std::string::npos);
  // Peak: both outputs alive at once at the Sum (8008 bytes, printed as 8KB).
  CHECK(r.find("CPU: 8KB") != std::string::npos);
  xsym::config.profiling.min_memory_size = 100;
  const std::string cut = report(*stats);
  CHECK(cut.find("8B  [()] c Sum(") == std::string::npos);
  CHECK(cut.find("remaining 1 Apply account for      8B/8008B") != std::string::npos);
}

// The simulated peak (outputs alive at once, replayed node by node) against the allocator's
// measured peak of the same call: in-place outputs take over the bytes of the input they
// overwrite, which stay alive with them.
TEST_CASE("memory profile: the simulated peak is the measured one, in-place nodes included", "[profile]") {
  config_guard guard;
  xsym::config.profile_memory = true;
  const auto peaks = [](const xsym::profile_stats& stats) {
    std::ostringstream os;
    xsym::write_json(stats, os);
    const auto j = nlohmann::json::parse(os.str());
    const auto& m = j["functions"][0]["memory"];
    return std::pair{m["peak_current_bytes"].get<double>(), m["measured_peak_bytes"].get<double>()};
  };
  const std::size_t n = 100000;  // 800 KB a vector: the scalars and small buffers are noise
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  {
    auto stats = quiet_stats("chain");
    // exp writes into x * 2's buffer; y * 3 needs another while it is alive: two vectors.
    auto f = xsym::function("chain", xsym::inputs(x, y), exp(x * 2) + y * 3, xsym::profile(stats),
                            xsym::optimizer_excluding("fusion"));
    f(xt::xtensor<double, 1>(xt::ones<double>({n})), xt::xtensor<double, 1>(xt::ones<double>({n})));
    const auto [simulated, measured] = peaks(*stats);
    CHECK(simulated == 2.0 * 8 * n);
    CHECK(measured == Approx(simulated).epsilon(0.01));
  }
  {
    auto stats = quiet_stats("pair");
    auto a = xsym::matrix<double>("a"), b = xsym::matrix<double>("b");
    const auto p = exp(xsym::dot(a, b));
    // One Composite writes exp into the product's buffer and log1p(exp) into a new one.
    auto f = xsym::function("pair", xsym::inputs(a, b), xsym::outputs(p, log(p + 1)), xsym::profile(stats));
    f(xt::xtensor<double, 2>(xt::ones<double>({300, 10}) * 0.01), xt::xtensor<double, 2>(xt::ones<double>({10, 300}) * 0.01));
    const auto [simulated, measured] = peaks(*stats);
    CHECK(simulated == 2.0 * 8 * 300 * 300);
    CHECK(measured == Approx(simulated).epsilon(0.01));
  }
  const double m = 8.0 * 300 * 300;  // one 300 x 300 matrix of doubles
  const xt::xtensor<double, 2> ones = xt::ones<double>({300, 300});
  auto X = xsym::matrix<double>("X"), Y = xsym::matrix<double>("Y");
  {
    // A view keeps its base alive: exp(X)'s buffer is read through a slice of it until the
    // sum, when exp(v) and the sum's output are alive too. (A transpose would be read through
    // a scratch copy here, which the simulation does not count.)
    auto stats = quiet_stats("view");
    const auto v = exp(X)(xsym::range(0, 300));
    auto f = xsym::function("view", xsym::inputs(X), exp(v) + v, xsym::profile(stats),
                            xsym::optimizer_excluding("fusion:inplace"));
    for (int call = 0; call < 3; ++call) f(ones);  // the later calls take buffers from the pool
    const auto [simulated, measured] = peaks(*stats);
    CHECK(simulated == 3 * m);
    CHECK(measured == Approx(simulated).epsilon(0.01));
  }
  {
    // A view that is an output keeps its base for the rest of the call.
    auto stats = quiet_stats("view_out");
    auto f = xsym::function("view_out", xsym::inputs(X, Y), xsym::outputs(exp(X)(xsym::range(0, 300)), sin(exp(Y))),
                            xsym::profile(stats), xsym::optimizer_excluding("fusion:inplace"));
    f(ones, ones);
    const auto [simulated, measured] = peaks(*stats);
    CHECK(simulated == 3 * m);
    CHECK(measured == Approx(simulated).epsilon(0.01));
  }
  {
    // A reshape copies an input that is not C-contiguous: the copy is a buffer of its own (alive
    // with exp(r) and the sum), the memory list marks it c; of a C-contiguous input, a view.
    for (const bool transposed : {true, false}) {
      auto stats = quiet_stats("reshape");
      const auto r = xsym::flatten(transposed ? X.T() : X);
      auto f = xsym::function("reshape", xsym::inputs(X), exp(r) + r, xsym::profile(stats),
                              xsym::optimizer_excluding("fusion:inplace"));
      f(ones);
      const auto [simulated, measured] = peaks(*stats);
      CHECK(simulated == (transposed ? 3 : 2) * m);
      CHECK(measured == Approx(simulated).epsilon(0.01));
      CHECK(report(*stats).find(transposed ? "720000B  [(90000,)] c Reshape{1}("
                                           : "720000B  [(90000,)] v Reshape{1}(X)") != std::string::npos);
    }
  }
  {
    // Both numbers describe the calls at the last recorded sizes, not the largest call.
    auto stats = quiet_stats("shapes");
    auto x1 = xsym::vector<double>("x");
    auto f = xsym::function("shapes", xsym::inputs(x1), exp(x1) * 2.0, xsym::profile(stats), xsym::optimizer_excluding("fusion"));
    f(xt::xtensor<double, 1>(xt::ones<double>({100000})));
    for (int call = 0; call < 4; ++call) f(xt::xtensor<double, 1>(xt::ones<double>({1000})));
    const auto [simulated, measured] = peaks(*stats);
    CHECK(simulated == 8 * 1000);
    CHECK(measured == Approx(simulated).epsilon(0.01));
  }
}

TEST_CASE("the measured peak leaves out the call ignore_first_call skips", "[profile]") {
  config_guard guard;
  xsym::config.profile_memory = true;
  xsym::config.profiling.ignore_first_call = true;
  auto stats = quiet_stats("");
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("skip", xsym::inputs(x), exp(x) + 1.0, xsym::profile(stats));
  f(xt::xtensor<double, 1>(xt::ones<double>({100000})));  // skipped: 800 KB
  f(xt::xtensor<double, 1>(xt::ones<double>({1000})));
  const auto fns = stats->functions();
  REQUIRE(fns.size() == 1);
  CHECK(fns[0]->calls == 1);
  CHECK(fns[0]->measured_peak_bytes >= 8 * 1000);
  CHECK(fns[0]->measured_peak_bytes < 8 * 100000);
}

TEST_CASE("a profiled call that throws leaves the thread's peak as high as it was", "[profile]") {
  config_guard guard;
  xsym::config.profile_memory = true;
  auto stats = quiet_stats("");
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y");
  // The shapes disagree at the last node, after two have run.
  auto f = xsym::function("throws", xsym::inputs(x, y), sin(exp(x)) + y, xsym::profile(stats),
                          xsym::optimizer_excluding("fusion:inplace"));
  {
    // 8 MB, freed with the function (which keeps its buffers): the peak is above what is held now.
    auto g = xsym::function("big", xsym::inputs(x), exp(x) + 1.0);
    g(xt::xtensor<double, 1>(xt::ones<double>({1000000})));
  }
  const auto before = xsym::allocated_by_this_thread().peak;
  REQUIRE(before >= 8 * 1000000);
  CHECK_THROWS(f(xt::xtensor<double, 1>(xt::ones<double>({10})), xt::xtensor<double, 1>(xt::ones<double>({11}))));
  CHECK(xsym::allocated_by_this_thread().peak >= before);
}

TEST_CASE("JSON export parses and agrees with the profile", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("json");
  seeds_example(stats, 4, xsym::optimizer_excluding("fusion:inplace"));
  std::ostringstream os;
  xsym::write_json(*stats, os);
  const auto j = nlohmann::json::parse(os.str());
  REQUIRE(j["functions"].size() == 1);
  const auto& f = j["functions"][0];
  CHECK(f["name"] == "profiling_example");
  CHECK(f["calls"] == 4);
  REQUIRE(f["nodes"].size() == 3);
  double node_sum = 0;
  for (const auto& n : f["nodes"]) {
    CHECK(n["calls"] == 4);
    node_sum += n["time_s"].get<double>();
  }
  CHECK(node_sum == Approx(f["thunk_time_s"].get<double>()).epsilon(1e-6));
  CHECK(f["nodes"][0]["apply"] == "Elemwise{add,no_inplace}(x, y)");
  CHECK(f["nodes"][0]["inputs"][0]["shape"] == nlohmann::json::array({1}));
}

TEST_CASE("Chrome trace has one event per node run", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("trace");
  stats->enable_trace();
  seeds_example(stats, 5, xsym::optimizer_excluding("fusion:inplace"));
  std::ostringstream os;
  xsym::write_chrome_trace(*stats, os);
  const auto j = nlohmann::json::parse(os.str());
  REQUIRE(j["traceEvents"].size() == 15);
  for (const auto& e : j["traceEvents"]) {
    CHECK(e["ph"] == "X");
    CHECK(e["dur"].get<double>() >= 0);
  }
}

TEST_CASE("Graphviz export names every node and edge", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("dot");
  auto f = seeds_example(stats, 1, xsym::optimizer_excluding("fusion:inplace"));
  std::ostringstream os;
  xsym::write_dot(f.graph(), os, stats->functions()[0].get());
  const std::string d = os.str();
  CHECK(d.rfind("digraph", 0) == 0);
  CHECK(count(d, "shape=box") == 3);
  CHECK(count(d, " -> n") == 6);  // 2 + 2 + 2 inputs
}

TEST_CASE("a scope aggregates every call made inside it, on every thread", "[profile][threads]") {
  config_guard guard;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), exp(x) + 1);  // not profiled itself
  auto g = xsym::function("g", xsym::inputs(x), xsym::sum(x));
  const xt::xtensor<double, 1> a = xt::ones<double>({64});
  xsym::profile_scope scope("epoch", false);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        f(a);
        g(a);
      }
    });
  for (auto& t : threads) t.join();
  {
    XSYM_PROFILE_SCOPE("user work");
  }
  const auto fns = scope.stats().functions();
  REQUIRE(fns.size() == 2);
  for (const auto& p : fns) {
    CHECK(p->calls == 1000);
    for (auto c : p->node_calls) CHECK(c == 1000);
  }
  const auto regions = scope.stats().regions();
  REQUIRE(regions.size() == 1);
  CHECK(regions[0].first == "user work");
  CHECK(regions[0].second.calls == 1);
  CHECK(report(scope.stats()).find("xsym::UserRegion") != std::string::npos);
}

TEST_CASE("threads calling one profiled function give exact counts", "[profile][threads]") {
  config_guard guard;
  auto stats = quiet_stats("threads");
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), x * 2, xsym::profile(stats));
  const xt::xtensor<double, 1> a = xt::ones<double>({16});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) REQUIRE(f(a)(3) == 2.0);
    });
  for (auto& t : threads) t.join();
  CHECK(stats->functions()[0]->calls == 2000);
}

TEST_CASE("ignore_first_call leaves the warm-up call out", "[profile]") {
  config_guard guard;
  xsym::config.profiling.ignore_first_call = true;
  auto stats = quiet_stats("");
  seeds_example(stats, 3);
  CHECK(stats->functions()[0]->calls == 2);
}

TEST_CASE("optimizer profile lists each rewrite with node counts", "[profile]") {
  config_guard guard;
  xsym::config.profile_optimizer = true;
  auto stats = quiet_stats("");
  seeds_example(stats, 1);
  const std::string r = report(*stats);
  CHECK(r.find("Optimizer Profile") != std::string::npos);
  CHECK(r.find("elemwise_fusion") != std::string::npos);
  CHECK(r.find("fused 3 elementwise ops into Composite{((i0 + i1 + i2) * i3)}") != std::string::npos);
  CHECK(r.find("Apply nodes 3 -> 1") != std::string::npos);
}

TEST_CASE("diff summary puts two profiles side by side", "[profile]") {
  config_guard guard;
  auto fused = quiet_stats("fused"), unfused = quiet_stats("unfused");
  seeds_example(fused, 2);
  seeds_example(unfused, 2, xsym::optimizer_excluding("fusion:inplace"));
  std::ostringstream os;
  fused->print_diff_summary(os, *unfused);
  const std::string d = os.str();
  CHECK(d.find("A: fused (2 calls)") != std::string::npos);
  CHECK(d.find("B: unfused (2 calls)") != std::string::npos);
  CHECK(d.find("Elemwise{Composite{((i0 + i1 + i2) * i3)}}") != std::string::npos);
  CHECK(d.find("Elemwise{mul,no_inplace}") != std::string::npos);
}

TEST_CASE("tips name float64 and pow(x, 2)", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("");
  auto x = xsym::vector<double>("x");
  // canonicalize turns pow(x, 2) into sqr(x); the tip is for graphs built without it
  auto f = xsym::function("tips", xsym::inputs(x), xsym::pow(x, 2.0), xsym::profile(stats),
                          xsym::optimizer_excluding("fusion:canonicalize"));
  f(xt::xtensor<double, 1>{1, 2});
  const std::string r = report(*stats);
  CHECK(r.find("This graph computes in float64") != std::string::npos);
  CHECK(r.find("Replace pow(x, 2) by sqr(x)") != std::string::npos);
  CHECK(r.find("cxx=g++") == std::string::npos);  // no Composite here
}

TEST_CASE("a tip names cxx for an interpreted Composite that takes much of the time, not for a typed one",
          "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("");
  auto p = xsym::vector<float>("p"), y = xsym::vector<float>("y");
  // log(p) as a plain var: the fused program's text is no tree's in this program (the typed
  // xent below multiplies in the other order), so it is interpreted.
  const xsym::var<float, 1> log_p = xsym::log(p);
  auto f = xsym::function("xent", xsym::inputs(p, y), -y * log_p - xsym::log(1 - p) * (1 - y), xsym::profile(stats));
  const xt::xtensor<float, 1> P = xt::ones<float>({1000}) * 0.25f, Y = xt::ones<float>({1000});
  f(P, Y);
  const std::string r = report(*stats);
  CHECK(r.find("A fused Composite runs one precompiled kernel per op and takes 100% of the time; with cxx=g++") !=
        std::string::npos);
  CHECK(r.find("Elemwise{Composite{(((-i0) * log(i1)) - (log((i2 - i1)) * (i2 - i0)))}}(y, p, ") != std::string::npos);
  // On a few elements the call costs more than the loop: no tip.
  auto small = quiet_stats("");
  auto g = xsym::function("xent_small", xsym::inputs(p, y), -y * xsym::log(p) - (1 - y) * xsym::log(1 - p),
                          xsym::profile(small));
  g(xt::xtensor<float, 1>{0.25f, 0.5f}, xt::xtensor<float, 1>{1, 0});
  CHECK(report(*small).find("cxx=g++") == std::string::npos);
  // The typed tree's own kernel: <type> typed, and nothing to suggest.
  auto typed_stats = quiet_stats("");
  auto t = xsym::function("xent_typed", xsym::inputs(p, y), -y * xsym::log(p) - (1 - y) * xsym::log(1 - p),
                          xsym::profile(typed_stats));
  t(P, Y);
  const std::string rt = report(*typed_stats);
  CHECK(rt.find("cxx=g++") == std::string::npos);
  CHECK(rt.find(" typed ") != std::string::npos);
}

TEST_CASE("the Class and Ops rows stay aligned when a <type> is wider than the column", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("");
  auto p = xsym::vector<float>("p"), y = xsym::vector<float>("y");
  const xsym::var<float, 1> log_p = xsym::log(p);  // a lone interpreted op: cpu
  auto f = xsym::function("mixed", xsym::inputs(p, y), xsym::outputs(log_p, p * 2 + y, xsym::sum(p)),
                          xsym::profile(stats));
  const xt::xtensor<float, 1> P = xt::ones<float>({100}), Y = xt::ones<float>({100});
  f(P, Y);
  const std::string r = report(*stats);
  REQUIRE(r.find("cpu/typed") != std::string::npos);  // Elemwise: one typed node, one interpreted
  for (const std::string section : {"Class\n---\n", "Ops\n---\n"}) {
    std::istringstream lines(r.substr(r.find(section) + section.size()));
    std::string line;
    std::getline(lines, line);  // the header
    std::set<std::size_t> call_column_ends;
    while (std::getline(lines, line) && line.find("... (remaining") == std::string::npos) {
      // Cells: <% time> <sum %> <apply time> <time per call> <type> <#call> ...; where the sixth ends.
      std::size_t end = 0;
      for (int cell = 0; cell < 6; ++cell) end = line.find(' ', line.find_first_not_of(' ', end));
      call_column_ends.insert(end);
    }
    CHECK(call_column_ends.size() == 1);
  }
}

TEST_CASE("the JSON export carries the report's columns: Class and Ops sums, per-call rates", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("columns");
  seeds_example(stats, 5, xsym::optimizer_excluding("fusion:inplace"));
  std::ostringstream os;
  xsym::write_json(*stats, os);
  const auto j = nlohmann::json::parse(os.str());
  const auto& nodes = j["functions"][0]["nodes"];
  REQUIRE(nodes.size() == 3);
  // Each class and op row is the sum of its nodes, as the text report's Class and Ops sections.
  std::map<std::string, double> class_time, op_time;
  std::map<std::string, int> op_applies;
  for (const auto& n : nodes) {
    class_time[n["class"]] += n["time_s"].get<double>();
    op_time[n["op"]] += n["time_s"].get<double>();
    ++op_applies[n["op"]];
    CHECK(n["time_per_call_s"].get<double>() == Approx(n["time_s"].get<double>() / 5));
    // Three float64 elements of one each: 1 flop, 24 bytes.
    CHECK(n["flops"] == 1);
    CHECK(n["bytes"] == 24);
    if (n["time_s"].get<double>() > 0) {
      CHECK(n["gflops_per_s"].get<double>() == Approx(1 / n["time_per_call_s"].get<double>() / 1e9));
      CHECK(n["gb_per_s"].get<double>() == Approx(24 / n["time_per_call_s"].get<double>() / 1e9));
    }
  }
  REQUIRE(j["classes"].size() == class_time.size());
  for (const auto& c : j["classes"]) CHECK(c["time_s"].get<double>() == Approx(class_time[c["name"]]));
  REQUIRE(j["ops"].size() == op_time.size());
  for (const auto& o : j["ops"]) {
    CHECK(o["time_s"].get<double>() == Approx(op_time[o["name"]]));
    CHECK(o["applies"] == op_applies[o["name"]]);
    CHECK(o["calls"] == 5 * op_applies[o["name"]]);
  }
  // The text report's Ops rows show the same names, with the same #apply.
  const std::string r = report(*stats);
  CHECK(r.find("      10       2   Elemwise{add,no_inplace}") != std::string::npos);
}

TEST_CASE("a profile scope shares the function's compile-time facts", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("own");
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), xsym::exp(x) * 2, xsym::profile(stats));
  const xt::xtensor<double, 1> a = xt::ones<double>({8});
  xsym::profile_scope scope("scope", false);
  f(a);
  const auto own = stats->functions(), scoped = scope.stats().functions();
  REQUIRE(own.size() == 1);
  REQUIRE(scoped.size() == 1);
  CHECK(own[0]->facts == scoped[0]->facts);  // one record of what f is, not a copy per profile
  CHECK(own[0]->name() == "f");
  CHECK(&own[0]->graph() == &f.graph());
  CHECK(own[0]->calls == 1);
  CHECK(scoped[0]->calls == 1);
}

TEST_CASE("a OnePassGemv node lists what it absorbed, with the flops of its parts and X's bytes once", "[profile]") {
  config_guard guard;
  const std::size_t rows = 37, feats = 11;
  xt::xtensor<double, 2> X = xt::empty<double>({rows, feats});
  xt::xtensor<double, 1> Y = xt::empty<double>({rows}), w0 = xt::empty<double>({feats});
  for (std::size_t i = 0; i < X.size(); ++i) X.flat(i) = std::sin(double(i));
  for (std::size_t i = 0; i < rows; ++i) Y(i) = double(i % 2);
  for (std::size_t i = 0; i < feats; ++i) w0(i) = 0.1 * std::cos(double(i));
  auto one = quiet_stats("one"), three = quiet_stats("three");
  for (auto& stats : {one, three}) {
    auto x = xsym::matrix<double>("x");
    auto y = xsym::vector<double>("y");
    auto w = xsym::shared(w0, "w");
    auto p_1 = 1 / (1 + exp(-dot(x, w)));
    auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
    auto [gw] = xsym::grad(mean(xent), w);
    auto f = xsym::function("train", xsym::inputs(x, y), xsym::outputs(xent), xsym::updates(xsym::update(w, w - 0.1 * gw)),
                            xsym::profile(stats), xsym::optimizer_excluding(stats == one ? "" : "one_pass_gemv"));
    f(X, Y);
  }
  auto nodes_of = [](const xsym::profile_stats& s) {
    std::ostringstream os;
    xsym::write_json(s, os);
    return nlohmann::json::parse(os.str())["functions"][0]["nodes"];
  };
  double flops3 = 0, bytes3 = 0;
  int products = 0;
  for (const auto& n : nodes_of(*three))
    if (n["class"] == "xsym::Gemv" || n["op"].get<std::string>().rfind("Elemwise{Composite", 0) == 0) {
      flops3 += n["flops"].get<double>();
      bytes3 += n["bytes"].get<double>();
      products += n["class"] == "xsym::Gemv";
    }
  REQUIRE(products == 2);
  int found = 0;
  for (const auto& n : nodes_of(*one)) {
    if (n["class"] != "xsym::OnePassGemv") continue;
    ++found;
    CHECK(n["flops"].get<double>() == flops3);
    // The three nodes read X twice, write and read u = X w, read the gradient per row again,
    // and read w twice (both products): the one node reads each of its inputs once.
    CHECK(n["bytes"].get<double>() == bytes3 - 8.0 * (rows * feats + 3 * rows + feats));
    const auto absorbed = n["absorbed"].dump();
    CHECK(absorbed.find("Gemv{no_inplace}") != std::string::npos);
    CHECK(absorbed.find("alpha=-0.1") != std::string::npos);
  }
  CHECK(found == 1);
  const std::string text = report(*one);
  CHECK(text.find("xsym::OnePassGemv") != std::string::npos);
  CHECK(text.find("absorbed: Elemwise") != std::string::npos);
}

// profiling.destination=*.json: the report is the JSON export (what scripts/xsym-prof reads),
// and each report writes the file anew.
TEST_CASE("a destination named *.json gets the report as JSON", "[profile]") {
  config_guard guard;
  const std::string path = (std::filesystem::temp_directory_path() / "xsym_profile_destination.json").string();
  xsym::config.profiling.destination = path;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("exported", xsym::inputs(x), exp(x) * 2);
  for (int round = 1; round <= 2; ++round) {
    {
      xsym::profile_scope scope("json scope", true);
      for (int i = 0; i < round; ++i) f(xt::xtensor<double, 1>{1, 2});
    }
    std::ifstream in(path);
    const auto j = nlohmann::json::parse(in);
    CHECK(j["message"] == "json scope");
    REQUIRE(j["functions"].size() == 1);
    CHECK(j["functions"][0]["calls"] == round);
  }
  std::filesystem::remove(path);
}

// The shapes (and the flops and bytes from them) are those of the calls that ran: recorded again
// when the inputs change shape, and on a function's first call in a scope.
TEST_CASE("the profile's shapes follow the inputs' shapes, in a function's profile and in a scope", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("shapes");
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("resized", xsym::inputs(x), exp(x) * 2, xsym::profile(stats));
  auto g = xsym::function("scoped", xsym::inputs(x), exp(x) * 3);
  const xt::xtensor<double, 1> small = xt::ones<double>({10}), big = xt::ones<double>({1000});
  for (int i = 0; i < 5; ++i) f(small);
  for (int i = 0; i < 3; ++i) f(big);
  const std::string r = report(*stats);
  CHECK(r.find("shape=(1000,)") != std::string::npos);
  CHECK(r.find("shape=(10,)") == std::string::npos);
  for (int i = 0; i < 5; ++i) g(big);  // before the scope: not its shapes
  xsym::profile_scope scope("small calls", false);
  for (int i = 0; i < 3; ++i) g(small);
  const std::string s = report(scope.stats());
  CHECK(s.find("shape=(10,)") != std::string::npos);
  CHECK(s.find("shape=(1000,)") == std::string::npos);
}

// Two Composites whose programs differ but print alike once shortened ("Composite{...}") are two
// ops: the Ops section has a row for each (ops that compare equal share one, not equal names).
TEST_CASE("the Ops section keeps apart ops whose printed names are shortened alike", "[profile]") {
  config_guard guard;
  auto stats = quiet_stats("ops");
  auto x = xsym::vector<double>("x");
  auto a = xsym::function("a", xsym::inputs(x), exp(x) * 2 + sin(x) * 3 + cos(x) * 4 + tanh(x) * 5 + sqrt(x) * 6 + log1p(x) * 7,
                          xsym::profile(stats));
  auto b = xsym::function("b", xsym::inputs(x), sin(x) * 2 + exp(x) * 3 + cos(x) * 4 + tanh(x) * 5 + sqrt(x) * 6 + log1p(x) * 7,
                          xsym::profile(stats));
  const xt::xtensor<double, 1> v{1, 2};
  a(v);
  b(v);
  REQUIRE(a.toposort().size() == 1);
  REQUIRE(b.toposort()[0].op_name() == a.toposort()[0].op_name());  // printed alike
  std::ostringstream os;
  xsym::write_json(*stats, os);
  const auto j = nlohmann::json::parse(os.str());
  CHECK(j["ops"].size() == 2);
}

// A function's name longer than a line's buffer is printed whole.
TEST_CASE("the optimizer profile prints a long function name whole", "[profile]") {
  config_guard guard;
  xsym::config.profile_optimizer = true;
  auto stats = quiet_stats("");
  auto x = xsym::vector<double>("x");
  const std::string name = std::string(600, 'n') + "_END";
  auto f = xsym::function(name, xsym::inputs(x), exp(x) + 1.0, xsym::profile(stats));
  f(xt::xtensor<double, 1>{1});
  CHECK(report(*stats).find("_END': ") != std::string::npos);
}

// A scope measures the allocations of the calls it records, as a function's own profile does.
TEST_CASE("a profile scope measures the peak memory of the calls it records", "[profile]") {
  config_guard guard;
  xsym::config.profile_memory = true;
  auto x = xsym::vector<double>("x");
  auto g = xsym::function("unprofiled", xsym::inputs(x), exp(x) + 1.0);
  const xt::xtensor<double, 1> big = xt::ones<double>({100000});
  xsym::profile_scope scope("memory", false);
  g(big);
  const auto fns = scope.stats().functions();
  REQUIRE(fns.size() == 1);
  CHECK(fns[0]->measured_peak_bytes >= 8 * 100000);
}

// The measured peak counts the calling thread's allocations: another thread's, made while the
// call runs, do not show in it (here, from a MonitorMode callback in the middle of the call).
TEST_CASE("the measured peak of a call leaves out other threads' allocations", "[profile][threads]") {
  config_guard guard;
  xsym::config.profile_memory = true;
  auto stats = quiet_stats("");
  auto x = xsym::vector<double>("x");
  auto big = xsym::function("big", xsym::inputs(x), exp(x) + 1.0);
  const xt::xtensor<double, 1> large = xt::ones<double>({1000000}), small = xt::ones<double>({100});
  auto other_thread_allocates = [&](const xsym::node_event&) {
    std::thread([&] {
      const auto r = big(large);  // 8 MB, held and freed on that thread
      REQUIRE(r.size() == 1000000);
    }).join();
  };
  auto f = xsym::function("small", xsym::inputs(x), xsym::outputs(exp(x) * 2.0, sin(x)),
                          xsym::monitor_mode{other_thread_allocates, nullptr}, xsym::profile(stats),
                          xsym::optimizer_excluding("fusion"));
  f(small);
  const auto fns = stats->functions();
  REQUIRE(fns.size() == 1);
  // Its own arrays: a few of 100 doubles each.
  CHECK(fns[0]->measured_peak_bytes >= 2 * 800);
  CHECK(fns[0]->measured_peak_bytes < 100000);
}

// A buffer this thread allocated before the call and another thread frees during it (an update
// of a variable this thread's last call wrote, say) takes nothing off the call's measured peak.
TEST_CASE("the measured peak of a call counts its own buffers when earlier ones are freed during it",
          "[profile][threads]") {
  config_guard guard;
  xsym::config.profile_memory = true;
  auto stats = quiet_stats("");
  const std::size_t n = 100000;
  auto v = xsym::shared(xt::xtensor<double, 1>(xt::ones<double>({n})), "v");  // 800 KB, this thread's
  auto x = xsym::vector<double>("x");
  int node = 0;
  auto other_thread_frees = [&](const xsym::node_event&) {
    if (node++ == 0) std::thread([&] { v.set_value(xt::xtensor<double, 1>{1.0}); }).join();
  };
  // x * 2 (exp in place on it) and x * 3 are alive together: two vectors.
  auto f = xsym::function("f", xsym::inputs(x), exp(x * 2) + x * 3, xsym::profile(stats),
                          xsym::optimizer_excluding("fusion"), xsym::monitor_mode{nullptr, other_thread_frees});
  f(xt::xtensor<double, 1>(xt::ones<double>({n})));
  REQUIRE(node == 4);
  const auto fns = stats->functions();
  REQUIRE(fns.size() == 1);
  CHECK(fns[0]->measured_peak_bytes == Approx(2.0 * 8 * n).epsilon(0.01));
}
