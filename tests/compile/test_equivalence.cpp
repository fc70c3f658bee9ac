// Rewrites and linkers change how a function runs, never what it computes: random graphs
// (tests/compile/random_graph.hpp), each compiled under every option set and compared with an
// independent interpreter. And a cvm_nogc function allocates nothing once it is warm.
//
// XSYM_RANDOM_GRAPHS sets how many graphs (1000; make test-long: 50000), XSYM_TEST_SEED the
// seed. A failure prints how to run that graph alone: XSYM_TEST_SEED=<seed> XSYM_GRAPH=<index>,
// or XSYM_GRAPH_DUMP='<dump>' to run a graph from its dump (edited by hand, say, to shrink it).
#include "compile_util.hpp"
#include "compile/random_graph.hpp"

#include <algorithm>
#include <map>
#include <utility>

using namespace xsym_test;

namespace {

std::uint64_t env_number(const char* name, std::uint64_t otherwise) {
  const char* v = std::getenv(name);
  return v && *v ? std::stoull(v) : otherwise;
}

}  // namespace

TEST_CASE("fusion, inplace, merge, the other rewrites and every linker give the same values", "[compile][rewrites][random_graphs]") {
  clean_config guard;
  const std::uint64_t seed = env_number("XSYM_TEST_SEED", 314159);
  const std::uint64_t wanted = env_number("XSYM_RANDOM_GRAPHS", 1000);
  const char* one = std::getenv("XSYM_GRAPH");
  const char* dump_text = std::getenv("XSYM_GRAPH_DUMP");
  const auto sets = rg::all_option_sets();
  REQUIRE(sets[0].name == "default");
  REQUIRE(sets[1].name == "no fusion");
  REQUIRE(sets[3].name == "no fusion, no inplace");

  std::size_t fused_nodes = 0, unfused_nodes = 0;
  int with_composite = 0, with_inplace = 0, with_special = 0, raising = 0;
  std::map<rg::elem, int> by_type;
  std::map<rg::gop, int> by_op;
  rg::compare_counts counts;
  auto check = [&](const rg::graph& g, const std::string& replay) {
    const rg::run_report rep = rg::run_graph(g, sets);
    INFO(replay);
    INFO("or: XSYM_GRAPH_DUMP='" << rg::dump(g) << "'");
    for (const std::string& f : rep.failures) FAIL_CHECK(f);
    if (rep.options.size() != sets.size()) return;
    fused_nodes += rep.options[0].nodes;
    unfused_nodes += rep.options[3].nodes;
    with_composite += rep.options[0].composite;
    with_inplace += rep.options[1].inplace;
    with_special += g.specials;
    raising += rep.calls_raising > 0;
    ++by_type[g.type];
    for (const rg::step& s : g.steps) ++by_op[s.op];
    counts.compared += rep.counts.compared;
    counts.unknown += rep.counts.unknown;
    counts.special += rep.counts.special;
  };
  if (dump_text) {
    check(rg::parse(dump_text), "the graph of XSYM_GRAPH_DUMP");
    return;
  }
  const std::uint64_t first = one ? std::stoull(one) : 0, end = one ? first + 1 : wanted;
  for (std::uint64_t i = first; i < end; ++i) {
    rg::seeded_chooser ch(rg::graph_seed(seed, i));
    check(rg::make_graph(ch), "replay: XSYM_TEST_SEED=" + std::to_string(seed) + " XSYM_GRAPH=" + std::to_string(i));
  }
  if (one || wanted < 1000) return;
  // The options really produced different graphs.
  CHECK(fused_nodes < unfused_nodes);
  CHECK(with_composite > 50);  // by default
  CHECK(with_inplace > 50);    // without fusion
  // And the graphs cover what they are meant to: every type and op, special values, calls that
  // must raise, and most elements compared (not unknown).
  for (int t = 0; t < 4; ++t) CHECK(by_type[static_cast<rg::elem>(t)] > 100);
  for (int o = 0; o < static_cast<int>(rg::gop::count); ++o) {
    INFO(rg::info(static_cast<rg::gop>(o)).name);
    CHECK(by_op[static_cast<rg::gop>(o)] > 30);
  }
  CHECK(with_special > 200);
  CHECK(raising > 0);
  CHECK(counts.special > 10000);
  CHECK(counts.unknown * 50 < counts.compared);
}

TEST_CASE("a random graph's dump parses back to the same graph", "[compile][random_graphs]") {
  for (std::uint64_t i = 0; i < 300; ++i) {
    rg::seeded_chooser ch(rg::graph_seed(7, i));
    const rg::graph g = rg::make_graph(ch);
    INFO(rg::dump(g));
    CHECK(rg::check_graph(g) == "");
    const rg::graph back = rg::parse(rg::dump(g));
    CHECK(rg::dump(back) == rg::dump(g));
    CHECK(back.steps.size() == g.steps.size());
    for (std::size_t k = 0; k < g.steps.size(); ++k) {
      const rg::step &s = g.steps[k], &b = back.steps[k];
      CHECK((s.op == b.op && s.a == b.a && s.b == b.b && s.c == b.c && s.k == b.k && s.p == b.p && s.axis == b.axis));
    }
  }
  // Fuzzer bytes are graphs too, however short or odd.
  for (std::uint8_t fill : {0, 7, 255}) {
    const std::vector<std::uint8_t> bytes(300, fill);
    for (std::size_t n : {0, 1, 5, 40, 300}) {
      rg::byte_chooser ch(bytes.data(), n);
      CHECK(rg::check_graph(rg::make_graph(ch)) == "");
    }
  }
  const std::string good = "float64 specials=0 data=5 shapes=1x1,3x7,2x37 inter=5 | add 0 1";
  CHECK(rg::dump(rg::parse(good)) == good);
  for (const char* bad : {"float16 data=1", "float64 shapes=1x1 | add 0 1", "float64 inter=5 | add 0 9",
                          "float64 inter=5 | frobnicate 0", "float64 inter=5 | dot_mm left 0 2 1",
                          "int32 inter=5 | tanh 0", "float64 inter=5 | reduce sum 0 axis=2", "float64 inter=6 | add 0 1",
                          "float64 inter=5 | add 0 1 k=2", "float64 inter=5 | weak_add 0 k=x"}) {
    INFO(bad);
    CHECK_THROWS_AS(rg::parse(bad), std::invalid_argument);
  }
}

TEST_CASE("random graphs are compared by mask and by each element's error bound", "[compile][random_graphs]") {
  const rg::interpreter f32(rg::elem::float32), i32(rg::elem::int32);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto diff = [](const rg::interpreter& in, const rg::num& want, auto got) {
    rg::compare_counts counts;
    return rg::differences(rg::value{1, 1, {want}}, &got, 1, in.fmt(), counts);
  };
  // One correctly rounded float32 op: within its bound; ten ulps off: not.
  const rg::num third = f32.div(rg::interpreter::constant(1), rg::interpreter::constant(3));
  CHECK(diff(f32, third, 1.0f / 3.0f) == "");
  CHECK(diff(f32, third, 1.0f / 3.0f + 10 * std::numeric_limits<float>::epsilon()) != "");
  // NaN only where the reference has one, infinities of the same sign, zeros of either sign.
  CHECK(diff(f32, {std::numeric_limits<long double>::quiet_NaN(), 0}, nan) == "");
  CHECK(diff(f32, {std::numeric_limits<long double>::quiet_NaN(), 0}, 1.0f) != "");
  CHECK(diff(f32, {1, 0}, nan) != "");
  CHECK(diff(f32, {std::numeric_limits<long double>::infinity(), 0}, inf) == "");
  CHECK(diff(f32, {std::numeric_limits<long double>::infinity(), 0}, -inf) != "");
  CHECK(diff(f32, {1e30L, 1e22L}, inf) != "");
  CHECK(diff(f32, {0, 0}, -0.0f) == "");
  // An unknown element (a comparison too close to call) is not compared.
  CHECK(diff(f32, rg::interpreter::unk(), nan) == "");
  // Overflow to infinity in float32, unknown at the edge.
  CHECK(std::isinf(f32.mul(rg::interpreter::constant(1e30L), rg::interpreter::constant(1e30L)).v));
  CHECK(rg::unknown(f32.mul(rg::interpreter::constant(std::numeric_limits<float>::max()), {1, 1e-7L})));
  // x > x is false whatever x's error; x > y within both errors is unknown.
  CHECK(f32.compare(0, {1, 1e-3L}, {1, 1e-3L}, true) == 0);
  CHECK(f32.compare(0, {1, 1e-3L}, {1.0005L, 1e-3L}) == -1);
  CHECK(f32.compare(0, {1, 1e-3L}, {1.5L, 1e-3L}) == 0);
  // Integers exactly, wrapping at their width.
  CHECK(diff(i32, {-2147483648.0L, 0}, std::int32_t(-2147483647 - 1)) == "");
  CHECK(diff(i32, {5, 0}, std::int32_t(6)) != "");
  rg::step add;
  CHECK(i32.int_step(add, {2147483647, 0}, {1, 0}, {}).v == -2147483648.0L);
}

// cxx compiles each fused program into one loop (backend/cpu/jit.hpp). Random float64
// elementwise graphs, eight per function so that each function is one compile: the compiled
// kernels must give the reference interpreter's values and the interpreted steps' values, on
// whole arrays and row by row.
TEST_CASE("kernels compiled by cxx give the interpreted steps' values on random graphs", "[compile][cxx]") {
  clean_config guard;
  cxx_on cxx("graphs");
  const rg::leaf_symbols<double> sy;
  const rg::interpreter ref(rg::elem::float64);
  rg::gen_options opts;
  opts.types = {false, true, false, false};
  opts.reductions = opts.products = opts.specials = false;
  rg::seeded_chooser rng(271828);
  constexpr int per_function = 8, functions = 5;
  int compiled_programs = 0, row_kernels = 0, flat_graphs = 0;
  for (int fn = 0; fn < functions; ++fn) {
    // Shapes: a lone element, SIMD tails, rows longer than several SIMD batches.
    std::vector<rg::dataset<double>> datasets;
    for (rg::shape2 sh : {rg::shape2{1, 1}, rg::shape2{3, 7}, rg::shape2{9, 61}})
      datasets.push_back(rg::make_data<double>(sh, rng.bits64(), false));
    std::vector<rg::graph> graphs;
    std::vector<xsym::var<double, 2>> roots;
    std::vector<std::vector<rg::value>> refs(datasets.size());
    std::string dumps;
    for (int i = 0; i < per_function; ++i) {
      const rg::graph g = rg::make_graph(rng, opts);
      std::vector<xsym::var<double, 2>> pool = sy.pool();
      for (const rg::step& s : g.steps) pool.push_back(rg::build<double>(s, pool));
      roots.push_back(pool.back());
      graphs.push_back(g);
      dumps += "\n  " + rg::dump(g);
      for (std::size_t k = 0; k < datasets.size(); ++k) refs[k].push_back(ref.run(g, rg::leaf_values(datasets[k])).pool.back());
      // No row or column leaf in play: only the whole-array kernel runs.
      flat_graphs += std::none_of(g.steps.begin(), g.steps.end(), [](const rg::step& s) {
        return s.a == 1 || s.a == 2 || s.b == 1 || s.b == 2 || s.c == 1 || s.c == 2;
      });
    }
    auto make = [&](const auto&... options) {
      return xsym::function("cxx_graphs", xsym::inputs(sy.a, sy.b, sy.c, sy.d, sy.e),
                            xsym::outputs(roots[0], roots[1], roots[2], roots[3], roots[4], roots[5], roots[6], roots[7]),
                            xsym::ignore_unused_inputs{}, options...);
    };
    auto compiled = make();
    compiled_programs += compiled.runtime()->compiled_kernels().kernels;
    row_kernels += compiled.runtime()->compiled_kernels().row_kernels;
    CHECK(compiled.runtime()->compiled_kernels().compiled == 1);  // one library per function
    xsym::config.cxx = "";
    auto interpreted = make();
    REQUIRE(interpreted.runtime()->compiled_kernels().kernels == 0);
    xsym::config.cxx = XSYM_TEST_CXX;
    for (std::size_t k = 0; k < datasets.size(); ++k) {
      const rg::dataset<double>& x = datasets[k];
      const auto got = compiled(x.a, x.b, x.c, x.d, x.e);
      const auto want = interpreted(x.a, x.b, x.c, x.d, x.e);
      auto check = [&](const auto& r, const auto& w, int i) {
        INFO("function " << fn << ", output " << i << ", data set " << k << ": " << xsym::toposort_text(compiled));
        INFO("graphs (XSYM_GRAPH_DUMP):" << dumps);
        const rg::value& expected = refs[k][static_cast<std::size_t>(i)];
        rg::compare_counts counts;
        CHECK(rg::differences(expected, r.data(), r.size(), ref.fmt(), counts) == "");
        CHECK(rg::differences(expected, w.data(), w.size(), ref.fmt(), counts) == "");
        // The same expressions: only contraction into fused multiply-adds and the vector width
        // differ. The bound e holds for any order of the graph's roundings, with one skipped
        // too, so each result is within e of the exact value and the two within 2e of each
        // other, closer than either has to agree with the reference (differences allows 2e
        // and the library's smallest normal besides).
        std::size_t apart = 0;
        for (std::size_t j = 0; j < r.size(); ++j) {
          const double a = r.data()[j], b = w.data()[j];
          apart += !(a == b || (std::isnan(a) && std::isnan(b)) ||
                     std::abs(a - b) <= 2 * static_cast<double>(expected.x[j].e) + 1e-300);
        }
        CHECK(apart == 0);
      };
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (check(std::get<I>(got), std::get<I>(want), static_cast<int>(I)), ...);
      }(std::make_index_sequence<per_function>{});
    }
  }
  // Most fused programs are ones the generator handles (float64 throughout); whole-array and
  // row-by-row spans both ran compiled code.
  CHECK(compiled_programs >= functions * 3);
  CHECK(row_kernels >= functions);
  CHECK(flat_graphs >= 3);
}

namespace {

// Library allocations of ten calls after two warm-up calls (results are xtensors, made by
// xtensor's allocator: not counted).
template <class F, class... A>
std::int64_t steady_allocations(const F& f, const A&... args) {
  f(args...);
  f(args...);
  const auto before = xsym::allocated();
  for (int i = 0; i < 10; ++i) f(args...);
  const auto after = xsym::allocated();
  CHECK(after.current == before.current);  // and nothing leaks
  return after.allocations - before.allocations;
}

struct nogc_fixture {
  xsym::var<double, 2> x = xsym::matrix<double>("x");
  xsym::var<double, 1> v = xsym::vector<double>("v");
  xsym::shared_var<double, 1> w = xsym::shared(xt::xtensor<double, 1>{0.1, -0.2, 0.3, 0.4, -0.5}, "w");
  xsym::shared_var<double, 0> s = xsym::shared(1.0, "s");
  xt::xtensor<double, 2> X;
  xt::xtensor<double, 1> V;
  nogc_fixture() {
    std::mt19937 rng(17);
    X = random_tensor<double, 2>(rng, {8, 5}, -1, 1);
    V = random_tensor<double, 1>(rng, {5}, -1, 1);
  }
  // Intermediates of every kind: a fused kernel read twice, a reduction of it, a gemv, a
  // vector-matrix product, and an elementwise node whose inputs all die there.
  auto outputs() const {
    auto e1 = xsym::exp(x * v) - x;
    auto s1 = xsym::sum(e1 * 2.0, 1);
    auto d1 = xsym::dot(x, w);
    auto o = xsym::tanh(s1 + d1);
    return xsym::outputs(o, xsym::dot(o, x), xsym::mean(e1));
  }
};

}  // namespace

TEST_CASE("a warm cvm_nogc function with intermediates allocates nothing per call", "[compile][memory]") {
  clean_config guard;
  nogc_fixture t;
  const auto no_inplace = xsym::optimizer_excluding("inplace");
  auto nogc = xsym::function("nogc", xsym::inputs(t.x, t.v), t.outputs(), xsym::linker("cvm_nogc"), no_inplace);
  auto gc = xsym::function("gc", xsym::inputs(t.x, t.v), t.outputs(), xsym::linker("cvm"), no_inplace);
  REQUIRE(nogc.toposort().size() >= 5);
  // The counter sees the buffers a cold function allocates on its first call...
  const auto cold = xsym::allocated().allocations;
  nogc(t.X, t.V);
  CHECK(xsym::allocated().allocations - cold >= 5);
  // ...and a warm cvm_nogc function keeps and reuses them.
  CHECK(steady_allocations(nogc, t.X, t.V) == 0);
  const auto [o1, p1, m1] = nogc(t.X, t.V);
  const auto [o2, p2, m2] = gc(t.X, t.V);
  CHECK(differences(o1, to_doubles(o2)) == "");
  CHECK(differences(p1, to_doubles(p2)) == "");
  CHECK(m1 == m2);
}

// Known bug: an in-place node takes its input's buffer and drops its own previous one, so
// the producer of that input allocates a new buffer on every call.
TEST_CASE("a warm cvm_nogc function with in-place nodes allocates nothing per call", "[compile][memory]") {
  clean_config guard;
  nogc_fixture t;
  auto f = xsym::function("nogc_inplace", xsym::inputs(t.x, t.v), t.outputs(), xsym::linker("cvm_nogc"));
  bool inplace = false;
  for (const auto& n : f.toposort()) inplace |= n.get_op().is_inplace();
  REQUIRE(inplace);
  CHECK(steady_allocations(f, t.X, t.V) == 0);
}

// Known bug: apply_updates keeps the shared variable's old buffer for the next call only when
// its use count is 1, but the function's own slot for the shared variable still holds it at
// that point (it is released afterwards), so the buffer is dropped and reallocated every call.
TEST_CASE("a warm cvm_nogc function with updates allocates nothing per call", "[compile][memory]") {
  clean_config guard;
  nogc_fixture t;
  auto f = xsym::function("nogc_updates", xsym::inputs(t.x, t.v), xsym::outputs(xsym::sum(t.x * t.v, 1)),
                          xsym::updates(xsym::update(t.w, t.w - 0.01 * xsym::sum(t.x, 0)), xsym::update(t.s, t.s * 0.99)),
                          xsym::linker("cvm_nogc"), xsym::optimizer_excluding("inplace"));
  CHECK(steady_allocations(f, t.X, t.V) == 0);
  CHECK(t.s.get_value()() == Approx(std::pow(0.99, 12)));
}

// Known gap: an elementwise input whose last dimension is not contiguous (a transposed view)
// is copied to a fresh contiguous buffer on every call.
TEST_CASE("a warm cvm_nogc function with transposed operands allocates nothing per call", "[compile][memory]") {
  clean_config guard;
  auto x = xsym::matrix<double>("x");
  auto y = xsym::matrix<double>("y");
  auto f = xsym::function("nogc_transposed", xsym::inputs(x, y), xsym::outputs(x.T() * 2.0 + y), xsym::linker("cvm_nogc"),
                          xsym::optimizer_excluding("inplace"));
  std::mt19937 rng(18);
  const auto X = random_tensor<double, 2>(rng, {6, 4}, -1, 1);
  const auto Y = random_tensor<double, 2>(rng, {4, 6}, -1, 1);
  CHECK(steady_allocations(f, X, Y) == 0);
}
