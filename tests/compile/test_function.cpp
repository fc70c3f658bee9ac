// function(): results, updates, shared variables, the seeds' example graphs, errors, and the
// printed graph (toposort, debugprint).
#include "compile_util.hpp"

#include <sstream>

using namespace xsym_test;
using Catch::Matchers::Contains;

TEST_CASE("function returns a tuple of outputs, or one value in the single-output form", "[compile][function]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto f = xsym::function("pair", xsym::inputs(x, y), xsym::outputs(x + y, x * y, xsym::sum(x)));
  auto g = xsym::function("single", xsym::inputs(x, y), x - y);
  const xt::xtensor<double, 1> a{1, 2, 3}, b{10, 20, 30};
  const auto [s, p, total] = f(a, b);
  CHECK(differences(s, {11, 22, 33}) == "");
  CHECK(differences(p, {10, 40, 90}) == "");
  CHECK(total == 6.0);
  CHECK(std::is_same_v<std::remove_cvref_t<decltype(total)>, double>);
  const auto d = g(a, b);
  CHECK(std::is_same_v<std::remove_cvref_t<decltype(d)>, xt::xtensor<double, 1>>);
  CHECK(differences(d, {-9, -18, -27}) == "");
}

TEST_CASE("calling a function again, with other shapes, recomputes everything", "[compile][function]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  // Intermediates that the inplace rewrite may write over: inputs must never be.
  auto e = xsym::exp(x) * y + (x - y) * 2.0;
  for (const char* l : {"cvm", "cvm_nogc", "py"}) {
    INFO("linker " << l);
    auto f = xsym::function("again", xsym::inputs(x, y), xsym::outputs(e, xsym::sum(e)), xsym::linker(l));
    std::mt19937 rng(2);
    for (std::size_t n : {5, 1000, 5, 0, 33}) {
      INFO("size " << n);
      const auto a = random_tensor<double, 1>(rng, {n}, -2, 2);
      const auto b = random_tensor<double, 1>(rng, {n}, -2, 2);
      const xt::xtensor<double, 1> a0 = a, b0 = b;
      for (int call = 0; call < 2; ++call) {
        auto [r, total] = f(a, b);
        std::vector<double> expected;
        double t = 0;
        for (std::size_t i = 0; i < n; ++i) {
          expected.push_back(std::exp(a(i)) * b(i) + (a(i) - b(i)) * 2.0);
          t += expected.back();
        }
        CHECK(differences(r, expected) == "");
        CHECK(total == Approx(t).margin(1e-9));
      }
      CHECK(a == a0);  // arguments are read, never written
      CHECK(b == b0);
    }
  }
}

// The merge rewrite makes two updates to one expression read one slot: each variable gets
// its own copy of the value, call after call.
TEST_CASE("two shared variables updated to the same expression both get its value", "[compile][function][shared]") {
  clean_config guard;
  auto a = xsym::shared(xt::xtensor<double, 1>{0, 0}, "a"), b = xsym::shared(xt::xtensor<double, 1>{0, 0}, "b");
  auto x = xsym::vector<double>("x");
  for (const char* l : {"cvm", "cvm_nogc", "py"}) {
    INFO("linker " << l);
    auto f = xsym::function("f", xsym::inputs(x), xsym::sum(x), xsym::updates(xsym::update(a, x * 2.0), xsym::update(b, x * 2.0)),
                            xsym::linker(l));
    for (double k : {1.0, 3.0, 5.0}) {
      f(xt::xtensor<double, 1>{k, k + 1});
      CHECK(differences(a.get_value(), {2 * k, 2 * k + 2}) == "");
      CHECK(differences(b.get_value(), {2 * k, 2 * k + 2}) == "");
    }
    // Each holds a buffer of its own.
    a.set_value(xt::xtensor<double, 1>{-1, -1});
    CHECK(differences(b.get_value(), {10, 12}) == "");
  }
}

TEST_CASE("updates read the old value of every shared variable", "[compile][function][shared]") {
  clean_config guard;
  SECTION("two shared variables swap") {
    auto a = xsym::shared(xt::xtensor<double, 1>{1, 2, 3}, "a");
    auto b = xsym::shared(xt::xtensor<double, 1>{10, 20, 30}, "b");
    auto x = xsym::vector<double>("x");
    for (const char* l : {"cvm", "cvm_nogc", "py"}) {
      INFO("linker " << l);
      a.set_value(xt::xtensor<double, 1>{1, 2, 3});
      b.set_value(xt::xtensor<double, 1>{10, 20, 30});
      // Plain swap of the shared values, then a swap through expressions.
      auto swap = xsym::function("swap", xsym::inputs(), xsym::outputs(a, b), xsym::updates(xsym::update(a, b), xsym::update(b, a)),
                                 xsym::linker(l));
      auto [ra, rb] = swap();
      CHECK(differences(ra, {1, 2, 3}) == "");  // outputs are the values before the updates
      CHECK(differences(rb, {10, 20, 30}) == "");
      CHECK(differences(a.get_value(), {10, 20, 30}) == "");
      CHECK(differences(b.get_value(), {1, 2, 3}) == "");
      swap();
      CHECK(differences(a.get_value(), {1, 2, 3}) == "");
      CHECK(differences(b.get_value(), {10, 20, 30}) == "");
      auto swap_expr = xsym::function("swap_expr", xsym::inputs(x), xsym::outputs(a + x),
                                      xsym::updates(xsym::update(a, b * 1.0 + x), xsym::update(b, a - x)), xsym::linker(l));
      const xt::xtensor<double, 1> X{0.5, 0.5, 0.5};
      const auto r = std::get<0>(swap_expr(X));
      CHECK(differences(r, {1.5, 2.5, 3.5}) == "");
      CHECK(differences(a.get_value(), {10.5, 20.5, 30.5}) == "");
      CHECK(differences(b.get_value(), {0.5, 1.5, 2.5}) == "");
    }
  }
  SECTION("Fibonacci: a, b = b, a + b, over many calls") {
    for (const char* l : {"cvm", "cvm_nogc", "py"}) {
      INFO("linker " << l);
      auto a = xsym::shared(xt::xtensor<std::int64_t, 1>{0, 2}, "a");
      auto b = xsym::shared(xt::xtensor<std::int64_t, 1>{1, 1}, "b");
      auto step = xsym::function("fib", xsym::inputs(), xsym::outputs(a + 0), xsym::updates(xsym::update(a, b), xsym::update(b, a + b)),
                                 xsym::linker(l));
      std::int64_t fa[2] = {0, 2}, fb[2] = {1, 1};
      for (int i = 0; i < 40; ++i) {
        const auto out = std::get<0>(step());
        CHECK(differences(out, {double(fa[0]), double(fa[1])}) == "");
        for (int k = 0; k < 2; ++k) {
          const std::int64_t next = fa[k] + fb[k];
          fa[k] = fb[k];
          fb[k] = next;
        }
      }
      CHECK(differences(a.get_value(), {double(fa[0]), double(fa[1])}) == "");
      CHECK(differences(b.get_value(), {double(fb[0]), double(fb[1])}) == "");
    }
  }
  SECTION("a scalar shared variable updated from a number and from itself") {
    auto s = xsym::shared(2.0, "s");
    auto n = xsym::shared(std::int32_t{0}, "n");
    auto x = xsym::vector<double>("x");
    auto f = xsym::function("scale", xsym::inputs(x), x * s, xsym::updates(xsym::update(s, s * 3.0), xsym::update(n, n + 1)));
    const xt::xtensor<double, 1> X{1, 2};
    CHECK(differences(f(X), {2, 4}) == "");
    CHECK(differences(f(X), {6, 12}) == "");
    CHECK(s.get_value()() == 18.0);
    CHECK(n.get_value()() == 2);
    auto reset = xsym::function("reset", xsym::inputs(), xsym::outputs(s), xsym::update(s, 1.0));
    CHECK(std::get<0>(reset()) == 18.0);
    CHECK(s.get_value()() == 1.0);
  }
}

TEST_CASE("shared variables: get_value copies, set_value replaces the value and may change its shape",
          "[compile][function][shared]") {
  clean_config guard;
  auto w = xsym::shared(xt::xtensor<float, 2>{{1, 2}, {3, 4}}, "w");
  auto x = xsym::vector<float>("x");
  auto f = xsym::function("mv", xsym::inputs(x), xsym::dot(w, x));
  CHECK(w.name() == "w");
  auto v = w.get_value();
  v(0, 0) = 100;  // a copy: the shared value does not change
  CHECK(w.get_value()(0, 0) == 1.0f);
  CHECK(differences(f(xt::xtensor<float, 1>{1, 1}), {3, 7}) == "");
  w.set_value(xt::xtensor<float, 2>{{1, 0, 0}, {0, 2, 0}, {0, 0, 3}});
  CHECK(differences(f(xt::xtensor<float, 1>{1, 1, 1}), {1, 2, 3}) == "");
  // The value passed to set_value is copied too.
  xt::xtensor<float, 2> mine{{5}};
  w.set_value(mine);
  mine(0, 0) = -1;
  CHECK(differences(f(xt::xtensor<float, 1>{2}), {10}) == "");
  auto s = xsym::shared(1.5f, "s");
  s.set_value(2.5f);
  CHECK(s.get_value()() == 2.5f);
}

TEST_CASE("constants, inputs and shared variables can be outputs", "[compile][function]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto w = xsym::shared(xt::xtensor<double, 1>{7, 8}, "w");
  for (const char* l : {"cvm", "cvm_nogc", "py"}) {
    INFO("linker " << l);
    w.set_value(xt::xtensor<double, 1>{7, 8});
    auto g = xsym::function("outs", xsym::inputs(x),
                            xsym::outputs(x, xsym::constant(3.0), xsym::constant(xt::xtensor<std::int32_t, 1>{4, 5, 6}), w, x * 2.0,
                                          x * 2.0),
                            xsym::update(w, w + 1.0), xsym::linker(l));
    xt::xtensor<double, 1> X{1, 2};
    for (int call = 0; call < 2; ++call) {
      auto [rx, c, ci, rw, d1, d2] = g(X);
      CHECK(differences(rx, {1, 2}) == "");
      CHECK(c == 3.0);
      CHECK(differences(ci, {4, 5, 6}) == "");
      CHECK(differences(rw, {7.0 + call, 8.0 + call}) == "");
      CHECK(differences(d1, {2, 4}) == "");
      CHECK(differences(d2, {2, 4}) == "");
      rx(0) = 99;  // the results are the caller's own copies
    }
    CHECK(X(0) == 1);
    CHECK(differences(w.get_value(), {9, 10}) == "");
  }
  auto k = xsym::function("no_inputs", xsym::inputs(), xsym::constant(2.5) * 2.0);
  CHECK(k() == 5.0);
}

TEST_CASE("one function never confuses two variables of the same type and name", "[compile][function]") {
  clean_config guard;
  auto make = [](const char* name) { return xsym::vector<double>(name); };
  auto a = make("x");
  auto b = make("x");  // same call site, same name, same type: a distinct variable
  auto f = xsym::function("distinct", xsym::inputs(a, b), xsym::outputs(a - b, b * 10.0));
  auto [d, s] = f(xt::xtensor<double, 1>{5}, xt::xtensor<double, 1>{2});
  CHECK(d(0) == 3.0);
  CHECK(s(0) == 20.0);
  std::vector<xsym::shared_var<double, 0>> layers;
  for (int i = 0; i < 3; ++i) layers.push_back(xsym::shared(double(i + 1), "w"));
  auto g = xsym::function("layers", xsym::inputs(), (layers[0] + layers[1] * 10.0) + layers[2] * 100.0);
  CHECK(g() == 321.0);
}

TEST_CASE("the seeds' profiling example compiles to the graphs Theano shows", "[compile][seeds]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto z = xsym::vector<double>("z");
  auto e = (x + y + z) * 2;
  const xt::xtensor<double, 1> one{1}, two{2}, three{3};
  std::mt19937 rng(42);
  const auto a = random_tensor<double, 1>(rng, {1000}, -5, 5), b = random_tensor<double, 1>(rng, {1000}, -5, 5),
             c = random_tensor<double, 1>(rng, {1000}, -5, 5);
  std::vector<double> expected;
  for (std::size_t i = 0; i < 1000; ++i) expected.push_back((a(i) + b(i) + c(i)) * 2);
  auto check_values = [&](const auto& f) {
    CHECK(std::get<0>(f(one, two, three))(0) == 12.0);
    CHECK(differences(std::get<0>(f(a, b, c)), expected) == "");
  };

  SECTION("default flags: one fused Composite") {
    auto f = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs(e));
    CHECK(op_names(f) == std::vector<std::string>{"Elemwise{Composite{((i0 + i1 + i2) * i3)}}"});
    CHECK(f.toposort()[0].class_name() == "xsym::Elemwise");
    CHECK_THAT(f.graph().node_text(f.toposort()[0]), Contains("(x, y, z, "));
    check_values(f);
  }
  SECTION("optimizer_excluding=fusion:inplace: add, add, mul") {
    auto f = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs(e), xsym::optimizer_excluding("fusion:inplace"));
    CHECK(op_names(f) == std::vector<std::string>{"Elemwise{add,no_inplace}", "Elemwise{add,no_inplace}", "Elemwise{mul,no_inplace}"});
    CHECK(f.graph().node_text(f.toposort()[0]) == "Elemwise{add,no_inplace}(x, y)");
    CHECK(f.graph().node_text(f.toposort()[1]) == "Elemwise{add,no_inplace}(Elemwise{add,no_inplace}.0, z)");
    check_values(f);
  }
  SECTION("optimizer_excluding=fusion alone: the later nodes write in place") {
    auto f = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs(e), xsym::optimizer_excluding("fusion"));
    REQUIRE(f.toposort().size() == 3);
    CHECK_FALSE(f.toposort()[0].get_op().is_inplace());  // its inputs are the caller's
    CHECK(f.toposort()[2].get_op().is_inplace());
    check_values(f);
  }
  SECTION("the same exclusion from XSYM_FLAGS") {
    ::setenv("XSYM_FLAGS", "optimizer_excluding=fusion:inplace", 1);
    xsym::config.reset();
    auto f = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs(e));
    CHECK(op_names(f) == std::vector<std::string>{"Elemwise{add,no_inplace}", "Elemwise{add,no_inplace}", "Elemwise{mul,no_inplace}"});
    check_values(f);
    // An option given in code wins over XSYM_FLAGS.
    auto g = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs(e), xsym::optimizer_excluding("inplace"));
    CHECK(g.toposort().size() == 1);
  }
  SECTION("mode FAST_COMPILE: no fusion, reference kernels") {
    auto f = xsym::function("profiling_example", xsym::inputs(x, y, z), xsym::outputs(e), xsym::mode("FAST_COMPILE"));
    CHECK(f.toposort().size() == 3);
    check_values(f);
  }
}

TEST_CASE("a shape mismatch at call time names the function, the node and the shapes", "[compile][errors]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto w = xsym::shared(xt::xtensor<double, 1>{1, 2, 3}, "w");
  auto v = xsym::shared(xt::xtensor<double, 1>{0, 0, 0}, "v");
  for (const char* excluding : {"fusion:inplace", "inplace"}) {
    INFO("optimizer_excluding " << excluding);
    w.set_value(xt::xtensor<double, 1>{1, 2, 3});
    v.set_value(xt::xtensor<double, 1>{0, 0, 0});
    auto f = xsym::function("adder", xsym::inputs(x, y), xsym::outputs((x + y) * 2.0),
                            xsym::updates(xsym::update(v, v + 1.0), xsym::update(w, w + x)), xsym::optimizer_excluding(excluding));
    const xt::xtensor<double, 1> three{1, 1, 1}, four{1, 1, 1, 1};
    std::string message;
    try {
      f(three, four);
    } catch (const xsym::shape_error& e) {
      message = e.what();
    }
    INFO("message: " << message);
    REQUIRE_FALSE(message.empty());
    CHECK_THAT(message, Contains("adder"));
    CHECK_THAT(message, Contains("Apply node"));
    CHECK_THAT(message, Contains("(3,)"));
    CHECK_THAT(message, Contains("(4,)"));
    bool names_op = false;
    for (const auto& n : f.toposort()) names_op |= message.find(n.op_name()) != std::string::npos;
    CHECK(names_op);
    // Nothing was updated, not even the update that could have been computed.
    CHECK(differences(w.get_value(), {1, 2, 3}) == "");
    CHECK(differences(v.get_value(), {0, 0, 0}) == "");
    // And the function still works.
    auto [r] = f(three, three);
    CHECK(differences(r, {4, 4, 4}) == "");
    CHECK(differences(w.get_value(), {2, 3, 4}) == "");
    CHECK(differences(v.get_value(), {1, 1, 1}) == "");
  }
  SECTION("a rank mismatch of a dynamically ranked argument is a shape_error naming the input") {
    auto g = xsym::function("ranked", xsym::inputs(x), x * 2.0);
    const xt::xarray<double> matrix = xt::ones<double>({2, 2});
    CHECK_THROWS_AS(g(matrix), xsym::shape_error);
    CHECK_THROWS_WITH(g(matrix), Contains("'x'") && Contains("ranked") &&
                                     Contains("has rank 1, got an argument of rank 2"));
    const xt::xarray<double> vec = xt::ones<double>({2});
    CHECK(differences(g(vec), {2, 2}) == "");
  }
  SECTION("a dot with misaligned shapes names the dot node") {
    auto m = xsym::matrix<double>("m");
    auto g = xsym::function("mv", xsym::inputs(m, x), xsym::dot(m, x));
    const xt::xtensor<double, 2> m23 = xt::ones<double>({2, 3});
    const xt::xtensor<double, 1> v4 = xt::ones<double>({4});
    CHECK_THROWS_WITH(g(m23, v4), Contains("mv") && Contains("Apply node") && Contains("(4,)"));
  }
}

TEST_CASE("function() rejects missing, unused and repeated inputs by name", "[compile][errors]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("why");
  auto w = xsym::shared(xt::xtensor<double, 1>{1}, "w");
  CHECK_THROWS_AS(xsym::function("missing", xsym::inputs(x), x + y), xsym::compile_error);
  CHECK_THROWS_WITH(xsym::function("missing", xsym::inputs(x), x + y), Contains("'why'") && Contains("missing"));
  CHECK_THROWS_AS(xsym::function("unused", xsym::inputs(x, y), x * 2.0), xsym::compile_error);
  CHECK_THROWS_WITH(xsym::function("unused", xsym::inputs(x, y), x * 2.0), Contains("'why'"));
  CHECK_NOTHROW(xsym::function("unused", xsym::inputs(x, y), x * 2.0, xsym::ignore_unused_inputs{}));
  // An input used only by an update is used.
  CHECK_NOTHROW(xsym::function("update_only", xsym::inputs(x, y), x * 2.0, xsym::update(w, w + y)));
  CHECK_THROWS_AS(xsym::function("twice", xsym::inputs(x, x), x * 2.0), xsym::compile_error);
  CHECK_THROWS_WITH(xsym::function("twice", xsym::inputs(x, x), x * 2.0), Contains("'x'"));
  CHECK_THROWS_AS(xsym::function("shared_input", xsym::inputs(w), w * 2.0), xsym::compile_error);
  CHECK_THROWS_AS(xsym::function("updated_twice", xsym::inputs(x), x + w, xsym::updates(xsym::update(w, w + x), xsym::update(w, w - x))),
                  xsym::compile_error);
}

TEST_CASE("unknown rewrite names, linkers and modes are rejected by name", "[compile][errors]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  CHECK_THROWS_AS(xsym::function("f", xsym::inputs(x), x + 1.0, xsym::optimizer_excluding("fusoin")), xsym::compile_error);
  CHECK_THROWS_WITH(xsym::function("f", xsym::inputs(x), x + 1.0, xsym::optimizer_excluding("inplace:fusoin")), Contains("fusoin"));
  CHECK_THROWS_WITH(xsym::function("f", xsym::inputs(x), x + 1.0, xsym::optimizer_including("nope")), Contains("nope"));
  CHECK_THROWS_WITH(xsym::function("f", xsym::inputs(x), x + 1.0, xsym::linker("c|pyy")), Contains("c|pyy"));
  CHECK_THROWS_AS(xsym::function("f", xsym::inputs(x), x + 1.0, xsym::mode("FAST_WALK")), xsym::compile_error);
  // Bad flags in XSYM_FLAGS are config errors.
  ::setenv("XSYM_FLAGS", "linker=fast", 1);
  xsym::config.reset();
  CHECK_THROWS_AS(xsym::function("f", xsym::inputs(x), x + 1.0), xsym::config_error);
}

TEST_CASE("bad axes and patterns are graph errors when the expression is built", "[compile][errors]") {
  auto m = xsym::matrix<double>("m");
  CHECK_THROWS_AS(xsym::sum(m, 2), xsym::graph_error);
  CHECK_THROWS_AS(xsym::mean(m, {1, -1}), xsym::graph_error);
  CHECK_THROWS_AS(xsym::dimshuffle(m, 1), xsym::graph_error);
}

TEST_CASE("toposort puts producers before users, and debugprint shows ops and inputs", "[compile][graph]") {
  clean_config guard;
  auto x = xsym::matrix<double>("xmat");
  auto v = xsym::vector<double>("vee");
  auto w = xsym::shared(xt::xtensor<double, 1>{1, 2}, "w");
  auto h = xsym::tanh(xsym::dot(x, w) + 1.0);
  auto e = xsym::sum(h * v, 0) + xsym::mean(x);
  for (const char* excluding : {"", "fusion:inplace"}) {
    INFO("optimizer_excluding '" << excluding << "'");
    auto f = xsym::function("graph", xsym::inputs(x, v), xsym::outputs(e, h), xsym::update(w, w * 0.5),
                            xsym::optimizer_excluding(excluding));
    const auto& g = f.graph();
    const auto& nodes = f.toposort();
    REQUIRE(nodes.size() >= 3);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      CHECK(nodes[i].id == static_cast<int>(i));
      for (int in : nodes[i].inputs) {
        const int owner = g.slots[static_cast<std::size_t>(in)].owner;
        CHECK(owner < static_cast<int>(i));  // -1 for inputs, shared variables and constants
      }
    }
    std::ostringstream os;
    xsym::debugprint(f, os);
    const std::string text = os.str();
    INFO(text);
    for (const auto& n : nodes) CHECK_THAT(text, Contains(n.op_name()));
    CHECK_THAT(text, Contains("xmat"));
    CHECK_THAT(text, Contains("vee"));
    CHECK_THAT(text, Contains("update w"));
    const std::string topo = xsym::toposort_text(f);
    CHECK(topo.front() == '[');
    CHECK_THAT(topo, Contains(g.node_text(nodes.back())));
    // The names the profile's Class section prints.
    bool has_gemv = false;
    for (const auto& n : nodes) has_gemv |= n.class_name() == "xsym::Gemv";
    CHECK(has_gemv);
  }
}

TEST_CASE("the per-call fast paths: changing shapes, broadcasting and errors between calls", "[compile][function]") {
  clean_config guard;
  auto x = xsym::vector<double>("x");
  auto y = xsym::vector<double>("y");
  auto z = xsym::vector<double>("z");
  SECTION("the seeds' fused function over sizes that cross the executor's 256-element blocks") {
    // One fused node; with inplace its output may take an intermediate's buffer.
    for (const char* excluding : {"", "inplace"}) {
      INFO("optimizer_excluding '" << excluding << "'");
      auto f = xsym::function("f", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::optimizer_excluding(excluding));
      std::mt19937 rng(7);
      for (std::size_t n : {1, 300, 1, 0, 513, 256, 257, 1}) {
        INFO("size " << n);
        const auto a = random_tensor<double, 1>(rng, {n}, -2, 2);
        const auto b = random_tensor<double, 1>(rng, {n}, -2, 2);
        const auto c = random_tensor<double, 1>(rng, {n}, -2, 2);
        std::vector<double> expected;
        for (std::size_t i = 0; i < n; ++i) expected.push_back((a(i) + b(i) + c(i)) * 2);
        CHECK(differences(f(a, b, c), expected) == "");
      }
    }
  }
  SECTION("a longer fused program whose last instruction writes an output in place") {
    auto e = xsym::exp(x) * y + (x - y) * 2.0;
    auto f = xsym::function("g", xsym::inputs(x, y), xsym::outputs(e * e + x, e - y));
    std::mt19937 rng(8);
    for (std::size_t n : {700, 3, 257}) {
      const auto a = random_tensor<double, 1>(rng, {n}, -1, 1);
      const auto b = random_tensor<double, 1>(rng, {n}, -1, 1);
      std::vector<double> want0, want1;
      for (std::size_t i = 0; i < n; ++i) {
        const double v = std::exp(a(i)) * b(i) + (a(i) - b(i)) * 2.0;
        want0.push_back(v * v + a(i));
        want1.push_back(v - b(i));
      }
      auto [r0, r1] = f(a, b);
      CHECK(differences(r0, want0) == "");
      CHECK(differences(r1, want1) == "");
    }
  }
  SECTION("broadcasting rows against matrices of changing shapes, then a mismatch, then a good call") {
    auto m = xsym::matrix<double>("m");
    auto r = xsym::row<double>("r");
    auto f = xsym::function("h", xsym::inputs(m, r), xsym::outputs(m * r + 1.0, m - r));
    for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{2, 3}, {4, 5}, {1, 1}, {3, 300}}) {
      INFO(rows << " x " << cols);
      xt::xtensor<double, 2> a = xt::empty<double>({rows, cols});
      xt::xtensor<double, 2> b = xt::empty<double>({std::size_t{1}, cols});
      for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = 0.5 * static_cast<double>(i);
      for (std::size_t j = 0; j < cols; ++j) b(0, j) = 1.0 + static_cast<double>(j);
      auto [p, d] = f(a, b);
      REQUIRE(p.shape() == a.shape());
      REQUIRE(d.shape() == a.shape());
      std::vector<double> want_p, want_d;
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          want_p.push_back(a(i, j) * b(0, j) + 1.0);
          want_d.push_back(a(i, j) - b(0, j));
        }
      CHECK(differences(xt::xtensor<double, 1>(xt::flatten(p)), want_p) == "");
      CHECK(differences(xt::xtensor<double, 1>(xt::flatten(d)), want_d) == "");
    }
    const xt::xtensor<double, 2> a23 = xt::ones<double>({2, 3}), b14 = xt::ones<double>({1, 4}),
                                 b23 = xt::ones<double>({2, 3}), b13 = xt::ones<double>({1, 3});
    CHECK_THROWS_AS(f(a23, b14), xsym::shape_error);
    CHECK_THROWS_WITH(f(a23, b14), Contains("'h'") && Contains("shapes do not match") && Contains("(2, 3)") &&
                                       Contains("(1, 4)") && Contains("(dimension 1: "));
    // The row is declared broadcastable in dimension 0: two rows are refused before any node runs.
    CHECK_THROWS_WITH(f(a23, b23), Contains("input 1 ('r') is declared broadcastable in dimension 0") &&
                                       Contains("(2, 3)"));
    auto [p, d] = f(a23, b13);
    CHECK(differences(xt::xtensor<double, 1>(xt::flatten(p)), {2, 2, 2, 2, 2, 2}) == "");
    CHECK(differences(xt::xtensor<double, 1>(xt::flatten(d)), {0, 0, 0, 0, 0, 0}) == "");
  }
  SECTION("an argument that fails to bind leaves nothing behind and the function keeps working") {
    auto f = xsym::function("k", xsym::inputs(x, y), x * y);
    const xt::xarray<float> converted = xt::ones<float>({3});  // bound as a float64 copy
    const xt::xarray<double> matrix = xt::ones<double>({2, 2});
    const xt::xtensor<double, 1> three{1, 2, 3};
    CHECK(differences(f(converted, three), {1, 2, 3}) == "");
    const auto before = xsym::allocated().current;
    CHECK_THROWS_WITH(f(converted, matrix), Contains("input 1 ('y')") && Contains("rank"));
    CHECK(xsym::allocated().current == before);  // the copy of argument 0 was released
    CHECK(differences(f(converted, three), {1, 2, 3}) == "");
    CHECK(differences(f(three, three), {1, 4, 9}) == "");
  }
}
