// one_pass_gemv: a gradient step's two products and the elementwise work between them become
// one OnePassGemv node that reads X once, with the results of the nodes it replaced.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <tuple>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <xsym/xsym.hpp>
#include <xtensor/xview.hpp>

#include "compile_util.hpp"
#include "expr/typed_util.hpp"

namespace {

// Runs the one pass on any size of X while it lives (by default only X beyond the caches).
struct one_pass_everywhere {
  std::int64_t saved = xsym::cpu::one_pass_min_bytes();
  one_pass_everywhere() { xsym::cpu::one_pass_min_bytes() = 0; }
  ~one_pass_everywhere() { xsym::cpu::one_pass_min_bytes() = saved; }
};

// The seeds' step with a per-row offset c: outputs the prediction and the cross-entropy;
// updates w (the weight decay folded into the product as beta) and b.
template <class T>
auto make_step(const xt::xtensor<T, 1>& w0, const std::string& excluding) {
  auto x = xsym::matrix<T>("x");
  auto y = xsym::vector<T>("y");
  auto c = xsym::vector<T>("c");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(T(0), "b");
  auto p_1 = 1 / (1 + exp(-(dot(x, w) + b + c)));
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
  auto cost = mean(xent) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, b);
  auto f = xsym::function("train", xsym::inputs(x, y, c), xsym::outputs(p_1 > 0.5, xent),
                          xsym::updates(xsym::update(w, w - 0.1 * gw), xsym::update(b, b - 0.1 * gb)),
                          xsym::optimizer_excluding(excluding));
  return std::tuple{f, w, b};
}

template <class T>
struct step {
  decltype(make_step<T>(std::declval<const xt::xtensor<T, 1>&>(), std::string())) parts;
  step(const xt::xtensor<T, 1>& w0, const std::string& excluding) : parts(make_step<T>(w0, excluding)) {}
  auto& f() { return std::get<0>(parts); }
  auto& w() { return std::get<1>(parts); }
  auto& b() { return std::get<2>(parts); }
};

template <class T>
int count_class(const T& f, const std::string& name) {
  int n = 0;
  for (const auto& node : f.toposort()) n += node.class_name() == name;
  return n;
}

// The step in float64 loops: new w, new b, xent.
struct reference_step {
  std::vector<double> w, xent;
  double b;
};
template <class M, class V>
reference_step reference(const M& X, const V& Y, const V& C, const std::vector<double>& w, double b) {
  const std::size_t n = X.shape(0), k = X.shape(1);
  std::vector<double> g(n), xent(n);
  double gb = 0;
  for (std::size_t r = 0; r < n; ++r) {
    double u = 0;
    for (std::size_t j = 0; j < k; ++j) u += double(X(r, j)) * w[j];
    const double z = u + b + double(C(r)), p = 1 / (1 + std::exp(-z)), y = double(Y(r));
    xent[r] = -y * std::log(p) - (1 - y) * std::log(1 - p);
    g[r] = (p - y) / double(n);
    gb += g[r];
  }
  std::vector<double> nw(k);
  for (std::size_t j = 0; j < k; ++j) {
    double s = 0;
    for (std::size_t r = 0; r < n; ++r) s += double(X(r, j)) * g[r];
    nw[j] = w[j] - 0.1 * (s + 0.02 * w[j]);
  }
  return {nw, xent, b - 0.1 * gb};
}

// Random data for a step: X ~ N(0, 1), labels 0 or 1, offsets ~ N(0, c_scale), w0 ~ N(0, w_scale).
template <class T>
struct step_data {
  xt::xtensor<T, 2> X;
  xt::xtensor<T, 1> Y, C, w0;
  step_data(std::size_t rows, std::size_t feats, std::mt19937& rng, double c_scale, double w_scale)
      : X(xt::empty<T>({rows, feats})), Y(xt::empty<T>({rows})), C(xt::empty<T>({rows})), w0(xt::empty<T>({feats})) {
    std::normal_distribution<double> normal;
    for (auto& v : X) v = static_cast<T>(normal(rng));
    for (auto& v : Y) v = rng() % 2 ? T(1) : T(0);
    for (auto& v : C) v = static_cast<T>(c_scale * normal(rng));
    for (auto& v : w0) v = static_cast<T>(w_scale * normal(rng));
  }
};

// The step as an Eigen user writes it, the gradient by hand: g = (sigmoid(u + b + c) - y) / m
// is a typed tree, whose kernel computes the OnePassGemv's g for its blocks of rows.
template <class T, class... Options>
auto make_hand_step(const xt::xtensor<T, 1>& w0, std::size_t rows, const std::string& excluding,
                    const Options&... options) {
  auto x = xsym::matrix<T>("x");
  auto y = xsym::vector<T>("y");
  auto c = xsym::vector<T>("c");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(T(0), "b");
  auto z = dot(x, w) + b + c;
  auto xent = y * softplus(-z) + (1 - y) * softplus(z);
  auto g = (sigmoid(z) - y) / static_cast<T>(rows);
  auto f = xsym::function("hand", xsym::inputs(x, y, c), xsym::outputs(sigmoid(z) > 0.5, xent),
                          xsym::updates(xsym::update(w, w - T(0.1) * (dot(x.T(), g) + T(0.02) * w)),
                                        xsym::update(b, b - T(0.1) * sum(g))),
                          xsym::optimizer_excluding(excluding), options...);
  return std::tuple{f, w, b};
}

template <class T>
void check_hand_step(std::size_t rows, std::size_t feats, std::mt19937& rng) {
  const step_data<T> d(rows, feats, rng, 0.1, 0.2);
  const auto& [X, Y, C, w0] = d;
  const auto stats = std::make_shared<xsym::profile_stats>("hand", false);
  auto [f, w, b] = make_hand_step<T>(w0, rows, "", xsym::profile(stats));
  auto [f_u, w_u, b_u] = make_hand_step<T>(w0, rows, "one_pass_gemv");
  INFO(rows << " x " << feats << " " << (sizeof(T) == 4 ? "float32" : "float64"));
  REQUIRE(count_class(f, "xsym::OnePassGemv") == 1);
  const auto types = xsym_test::node_types(f, "hand");
  std::size_t at = 0;
  for (const auto& node : f.toposort()) {
    // Its g by the tree's kernel; with one row, canonicalize takes `/ 1` away (a rule that needs
    // the value, run-time only), so no tree has g's text and the steps run.
    if (node.class_name() == "xsym::OnePassGemv") CHECK(types.at(at) == (rows > 1 ? "typed" : "cpu"));
    ++at;
  }
  const double tol = sizeof(T) == 4 ? 2e-4 : 1e-11;
  std::vector<double> wr(w0.begin(), w0.end());
  double br = 0;
  for (int it = 0; it < 3; ++it) {
    auto [pred, xent] = f(X, Y, C);
    auto [pred_u, xent_u] = f_u(X, Y, C);
    const auto want = reference(X, Y, C, wr, br);
    INFO("step " << it);
    const auto nw = w.get_value(), nw_u = w_u.get_value();
    double scale = 1;
    for (double v : want.w) scale = std::max(scale, std::abs(v));
    for (std::size_t j = 0; j < feats; ++j) {
      REQUIRE(std::abs(double(nw(j)) - want.w[j]) <= tol * scale);
      REQUIRE(std::abs(double(nw(j)) - double(nw_u(j))) <= tol * scale);
    }
    REQUIRE(std::abs(double(b.get_value()()) - want.b) <= tol);
    for (std::size_t r = 0; r < rows; ++r) {
      REQUIRE(std::abs(double(xent(r)) - want.xent[r]) <= tol * std::max(1.0, std::abs(want.xent[r])));
      REQUIRE(xent(r) == xent_u(r));
      REQUIRE(pred(r) == pred_u(r));
    }
    wr.assign(nw.begin(), nw.end());
    br = double(b.get_value()());
    w_u.set_value(nw);
    b_u.set_value(b.get_value()());
  }
}

template <class T>
void check_against_reference(std::size_t rows, std::size_t feats, std::mt19937& rng) {
  const step_data<T> d(rows, feats, rng, 0.1, 0.2);
  const auto& [X, Y, C, w0] = d;
  step<T> fused(w0, "");
  step<T> unfused(w0, "one_pass_gemv");
  REQUIRE(count_class(fused.f(), "xsym::OnePassGemv") == 1);
  REQUIRE(count_class(fused.f(), "xsym::Gemv") == 0);
  REQUIRE(count_class(unfused.f(), "xsym::Gemv") == 2);
  std::vector<double> w(w0.begin(), w0.end());
  double b = 0;
  const double tol = sizeof(T) == 4 ? 2e-4 : 1e-11;
  for (int it = 0; it < 3; ++it) {
    auto [pred, xent] = fused.f()(X, Y, C);
    auto [pred_u, xent_u] = unfused.f()(X, Y, C);
    const auto want = reference(X, Y, C, w, b);
    INFO(rows << " x " << feats << " " << (sizeof(T) == 4 ? "float32" : "float64") << ", step " << it);
    const auto nw = fused.w().get_value(), nw_u = unfused.w().get_value();
    double scale = 1;
    for (double v : want.w) scale = std::max(scale, std::abs(v));
    for (std::size_t j = 0; j < feats; ++j) {
      REQUIRE(std::abs(double(nw(j)) - want.w[j]) <= tol * scale);
      REQUIRE(std::abs(double(nw(j)) - double(nw_u(j))) <= tol * scale);
    }
    REQUIRE(std::abs(double(fused.b().get_value()()) - want.b) <= tol);
    for (std::size_t r = 0; r < rows; ++r) {
      REQUIRE(std::abs(double(xent(r)) - want.xent[r]) <= tol * std::max(1.0, std::abs(want.xent[r])));
      REQUIRE(xent(r) == xent_u(r));  // the same Composite on the same u, up to u's sum order
      REQUIRE(pred(r) == pred_u(r));
    }
    w = want.w;
    b = want.b;
    // The next step starts both from the reference's weights.
    xt::xtensor<T, 1> wt = xt::empty<T>({feats});
    for (std::size_t j = 0; j < feats; ++j) wt(j) = static_cast<T>(w[j]);
    for (auto* s : {&fused, &unfused}) {
      s->w().set_value(wt);
      s->b().set_value(static_cast<T>(b));
    }
    w.assign(wt.begin(), wt.end());
    b = static_cast<double>(static_cast<T>(b));
  }
}

}  // namespace

TEST_CASE("one_pass_gemv: a training step's products and elementwise work are one node", "[compile][one_pass]") {
  xsym_test::clean_config guard;
  xt::xtensor<double, 1> w0 = xt::zeros<double>({5});
  step<double> s(w0, "");
  REQUIRE(count_class(s.f(), "xsym::OnePassGemv") == 1);
  REQUIRE(count_class(s.f(), "xsym::Gemv") == 0);
  for (const auto& node : s.f().toposort()) {
    CHECK(node.op_name() != "InplaceDimShuffle{1,0}");  // x's transpose went with its product
    if (node.class_name() == "xsym::OnePassGemv") {
      const auto& absorbed = node.fn->fused->absorbed;
      CHECK(absorbed.front() == "Gemv{no_inplace}");
      CHECK(absorbed.back() == "Gemv{no_inplace,alpha=-0.1,beta=0.998}");
      CHECK(node.op_name().rfind("OnePassGemv{Composite{", 0) == 0);
    }
  }
  // Excluded by its name, or with fusion: the two products again.
  step<double> off(w0, "one_pass_gemv");
  CHECK(count_class(off.f(), "xsym::OnePassGemv") == 0);
  CHECK(count_class(off.f(), "xsym::Gemv") == 2);
  step<double> nofusion(w0, "fusion");
  CHECK(count_class(nofusion.f(), "xsym::OnePassGemv") == 0);
}

TEST_CASE("one pass starts at the LLC's streaming share on AMD, at two L2s (at least 4 MiB) elsewhere",
          "[compile][one_pass]") {
  // The vendor as Linux's /proc/cpuinfo names it, against the library's cpuid test.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line))
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  if (vendor.empty()) {
    WARN("no vendor_id in /proc/cpuinfo on this machine: nothing to compare");
    return;
  }
  INFO("vendor_id " << vendor);
  CHECK(xsym::cpu::detail::llc_near_core() == (vendor == "AuthenticAMD"));
  const std::int64_t share = xsym::cpu::detail::default_streaming_min_bytes();
  const std::int64_t l2s = std::max<std::int64_t>(2 * xsym::cpu::detail::l2_cache_bytes(), std::int64_t{4} << 20);
  CHECK(xsym::cpu::one_pass_min_bytes() == (vendor == "AuthenticAMD" ? share : std::min(share, l2s)));
}

TEST_CASE("one_pass_gemv matches float64 loops and the unfused graph on many shapes", "[compile][one_pass]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(11);
  // One row; rows around the 16-row column blocks; several groups of rows (a group is a
  // quarter of L2: 256 rows of 1 KiB here on a 1 MiB L2) and parts not of equal groups.
  const std::pair<std::size_t, std::size_t> shapes[] = {{1, 7}, {5, 1}, {17, 33}, {100, 3}, {333, 64}, {1000, 256}, {2100, 256}, {4100, 300}};
  for (bool forced : {true, false}) {  // the one pass, and the two products in a row (small X)
    std::optional<one_pass_everywhere> everywhere;
    if (forced) everywhere.emplace();
    for (auto [rows, feats] : shapes) {
      check_against_reference<float>(rows, feats, rng);
      check_against_reference<double>(rows, feats / 2 + 1, rng);
    }
  }
}

TEST_CASE("row products from memory (the next rows' first lines asked for) give the same bits", "[compile][one_pass]") {
  xsym_test::clean_config guard;
  struct restore_threshold {
    std::int64_t saved = xsym::cpu::streaming_min_bytes();
    ~restore_threshold() { xsym::cpu::streaming_min_bytes() = saved; }
  } restore;
  // Rows around the 8-row blocks and a group's end; X's rows strided (a column view) too.
  const std::pair<std::size_t, std::size_t> shapes[] = {{1, 7}, {9, 33}, {203, 300}, {1000, 256}};
  auto run = [&](auto tag, bool forced, std::size_t rows, std::size_t feats, bool strided, bool from_memory) {
    using T = decltype(tag);
    std::mt19937 local(static_cast<unsigned>(rows * 31 + feats));
    const step_data<T> d(rows, feats + (strided ? 3 : 0), local, 0.1, 0.2);
    std::optional<one_pass_everywhere> everywhere;
    if (forced) everywhere.emplace();
    xsym::cpu::streaming_min_bytes() = from_memory ? 0 : std::int64_t{1} << 60;
    const xt::xtensor<T, 1> w0 = xt::view(d.w0, xt::range(0, feats));
    step<T> s(w0, "");
    auto X = xt::view(d.X, xt::all(), xt::range(0, feats));
    auto [pred, xent] = s.f()(X, d.Y, d.C);
    return std::tuple{xt::xtensor<bool, 1>(pred), xt::xtensor<T, 1>(xent), s.w().get_value(), s.b().get_value()()};
  };
  for (bool forced : {true, false})
    for (auto [rows, feats] : shapes)
      for (bool strided : {false, true}) {
        INFO(rows << " x " << feats << (strided ? " strided" : "") << (forced ? ", one pass" : ", two products"));
        auto check = [&](auto tag) {
          const auto cached = run(tag, forced, rows, feats, strided, false);
          const auto memory = run(tag, forced, rows, feats, strided, true);
          REQUIRE(std::get<0>(cached) == std::get<0>(memory));
          REQUIRE(std::get<1>(cached) == std::get<1>(memory));
          REQUIRE(std::get<2>(cached) == std::get<2>(memory));
          REQUIRE(std::get<3>(cached) == std::get<3>(memory));
        };
        check(float{});
        check(double{});
      }
}

TEST_CASE("one_pass_gemv on rows that start and end off a vector's boundary gives a contiguous copy's bits", "[compile][one_pass]") {
  xsym_test::clean_config guard;
  one_pass_everywhere everywhere;
  // Rows whose stride is whole vectors but whose first element is not on one (the loads start
  // after a peel of scalar elements), and a last partial vector: the row sums and the column
  // product's FMA chains are the same element by element, so the bits are a copy's. Several
  // groups of rows, so that most column products run inside the next group's row product.
  auto check = [](auto tag, std::size_t feats, std::size_t cols, std::size_t offset) {
    using T = decltype(tag);
    std::mt19937 rng(static_cast<unsigned>(feats * 7 + offset));
    const std::size_t rows = 4100;
    const step_data<T> d(rows, cols, rng, 0.1, 0.2);
    const xt::xtensor<T, 1> w0 = xt::view(d.w0, xt::range(0, feats));
    auto Xv = xt::view(d.X, xt::all(), xt::range(offset, offset + feats));
    const xt::xtensor<T, 2> Xc = Xv;
    step<T> on_view(w0, ""), on_copy(w0, "");
    REQUIRE(count_class(on_view.f(), "xsym::OnePassGemv") == 1);
    for (int it = 0; it < 2; ++it) {
      auto [p1, e1] = on_view.f()(Xv, d.Y, d.C);
      auto [p2, e2] = on_copy.f()(Xc, d.Y, d.C);
      INFO(feats << " of " << cols << " columns from " << offset << ", step " << it);
      CHECK(bool(p1 == p2));
      CHECK(bool(e1 == e2));
      CHECK(bool(on_view.w().get_value() == on_copy.w().get_value()));
    }
  };
  check(float{}, 300, 320, 1);
  check(float{}, 45, 64, 3);
  check(double{}, 150, 160, 1);
  check(double{}, 150, 160, 0);
}

TEST_CASE("one_pass_gemv takes views, strided and offset arguments, and names bad shapes", "[compile][one_pass]") {
  xsym_test::clean_config guard;
  one_pass_everywhere everywhere;
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  const std::size_t rows = 300, feats = 40;
  xt::xtensor<double, 2> big = xt::empty<double>({2 * rows, feats + 3});
  for (auto& v : big) v = normal(rng);
  xt::xtensor<double, 1> Y = xt::empty<double>({2 * rows}), C = xt::zeros<double>({rows}), w0 = xt::zeros<double>({feats});
  for (auto& v : Y) v = rng() % 2 ? 1.0 : 0.0;
  for (auto& v : w0) v = 0.1 * normal(rng);
  // X: every other row, columns from the second (strided, offset); Xᵀ's transpose (columns
  // contiguous); y: every other element.
  auto Xv = xt::view(big, xt::range(0, 2 * rows, 2), xt::range(1, feats + 1));
  auto Yv = xt::view(Y, xt::range(0, 2 * rows, 2));
  const xt::xtensor<double, 2> Xc = Xv;
  const xt::xtensor<double, 1> Yc = Yv;
  xt::xtensor<double, 2> XT = xt::transpose(Xc);
  auto Xt = xt::transpose(XT);
  step<double> s(w0, "");
  step<double> want(w0, "one_pass_gemv");
  auto [p1, e1] = s.f()(Xv, Yv, C);
  auto [p2, e2] = want.f()(Xc, Yc, C);
  CHECK(bool(p1 == p2));
  CHECK(xt::allclose(e1, e2, 1e-13, 1e-13));
  CHECK(xt::allclose(s.w().get_value(), want.w().get_value(), 1e-13, 1e-13));
  auto [p3, e3] = s.f()(Xt, Yc, C);
  auto [p4, e4] = want.f()(Xc, Yc, C);
  CHECK(bool(p3 == p4));
  CHECK(xt::allclose(e3, e4, 1e-13, 1e-13));
  CHECK(xt::allclose(s.w().get_value(), want.w().get_value(), 1e-12, 1e-12));
  // y of another length: the error names the node and the shapes, and no shared variable moves.
  const auto w_before = s.w().get_value();
  const xt::xtensor<double, 1> short_y = xt::zeros<double>({rows - 1});
  const std::string msg = xsym_test::message_of([&] { s.f()(Xc, short_y, C); });
  INFO(msg);
  CHECK(msg.find("OnePassGemv") != std::string::npos);
  CHECK(msg.find("(300,)") != std::string::npos);
  CHECK(msg.find("(299,)") != std::string::npos);
  CHECK(bool(s.w().get_value() == w_before));
  const xt::xtensor<double, 2> narrow = xt::zeros<double>({rows, feats - 1});
  const std::string msg2 = xsym_test::message_of([&] { s.f()(narrow, Yc, C); });
  INFO(msg2);
  CHECK(msg2.find("matrix-vector product") != std::string::npos);
  CHECK(msg2.find("(300, 39)") != std::string::npos);
}

TEST_CASE("DebugMode checks a OnePassGemv against the reference kernels", "[compile][one_pass][modes]") {
  xsym_test::clean_config guard;
  one_pass_everywhere everywhere;
  std::mt19937 rng(9);
  const step_data<float> d(700, 90, rng, 0, 0.1);
  const auto& [X, Y, C, w0] = d;
  step<float> fast(w0, "");
  xsym::config.mode = "DebugMode";
  step<float> debug(w0, "");
  xsym::config.mode = "FAST_RUN";
  REQUIRE(count_class(debug.f(), "xsym::OnePassGemv") == 1);
  for (int i = 0; i < 3; ++i) {
    auto [p1, e1] = fast.f()(X, Y, C);
    auto [p2, e2] = debug.f()(X, Y, C);  // throws where a node differs from its reference
    CHECK(bool(p1 == p2));
    CHECK(bool(e1 == e2));
  }
  CHECK(bool(fast.w().get_value() == debug.w().get_value()));
}

#ifdef _OPENMP
TEST_CASE("one_pass_gemv gives the same bits on 1 to 4 threads", "[compile][one_pass][openmp]") {
  xsym_test::clean_config guard;
  one_pass_everywhere everywhere;
  std::mt19937 rng(3);
  for (auto [rows, feats] : {std::pair<std::size_t, std::size_t>{4100, 300}, {333, 64}}) {
    const step_data<float> d(rows, feats, rng, 0.1, 0.05);
    const auto& [X, Y, C, w0] = d;
    xsym::config.openmp = false;
    step<float> serial(w0, "");
    auto [p0, e0] = serial.f()(X, Y, C);
    const auto w_serial = serial.w().get_value();
    xsym::config.openmp = true;
    for (int threads : {1, 2, 3, 4}) {
      omp_set_num_threads(threads);  // read when a function is built
      step<float> parallel(w0, "");
      auto [p, e] = parallel.f()(X, Y, C);
      INFO(rows << " rows, " << threads << " threads");
      CHECK(bool(p == p0));
      CHECK(bool(e == e0));
      CHECK(bool(parallel.w().get_value() == w_serial));
    }
    omp_set_num_threads(2);
    xsym::config.openmp = false;
  }
}
#endif

// A Composite whose g output is a typed tree's text (the gradient written by hand, as in Eigen):
// the tree's kernel computes g for each block of 4 rows, and the blocks read X once from L1
// (one_pass_blocks) where cxx is not set.
TEST_CASE("a hand-written gradient's typed tree computes the blocks' g without cxx", "[compile][one_pass]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(29);
  // One row, a block short of 4 rows, whole blocks, parts of unequal blocks (16 blocks a part).
  for (auto [rows, feats] : {std::pair<std::size_t, std::size_t>{1, 9}, {3, 40}, {4, 17}, {9, 40}, {67, 33}, {203, 64}}) {
    check_hand_step<float>(rows, feats, rng);
    check_hand_step<double>(rows, feats / 2 + 1, rng);
  }
}

namespace {
struct fault_guard {
  std::string saved = xsym::cpu::testing::current_fault().name;
  ~fault_guard() { xsym::cpu::testing::set_fault(saved); }
};
}  // namespace

// The blocks' g is the tree's kernel, not the interpreted program: a fault in typed kernels
// (each span's middle element moved, bound when the function is built) changes the weights.
TEST_CASE("the blocks' g comes from the typed tree's kernel", "[compile][one_pass]") {
  xsym_test::clean_config guard;
  fault_guard faults;
  std::mt19937 rng(31);
  const step_data<float> d(67, 40, rng, 0.1, 0.2);
  const auto& [X, Y, C, w0] = d;
  auto [f, w, b] = make_hand_step<float>(w0, 67, "");
  (void)f(X, Y, C);
  xsym::cpu::testing::set_fault("typed");
  auto [f_t, w_t, b_t] = make_hand_step<float>(w0, 67, "");
  (void)f_t(X, Y, C);
  xsym::cpu::testing::set_fault("");
  auto [f_u, w_u, b_u] = make_hand_step<float>(w0, 67, "one_pass_gemv");
  xsym::cpu::testing::set_fault("typed");
  auto [f_ut, w_ut, b_ut] = make_hand_step<float>(w0, 67, "one_pass_gemv");
  xsym::cpu::testing::set_fault("");
  (void)f_u(X, Y, C);
  (void)f_ut(X, Y, C);
  CHECK_FALSE(bool(w.get_value() == w_t.get_value()));
  CHECK(bool(w_u.get_value() == w_ut.get_value()));  // the steps' Composite has no typed kernel
}

#ifdef _OPENMP
TEST_CASE("the blocks with a typed g give the same bits on 1 to 4 threads", "[compile][one_pass][openmp]") {
  xsym_test::clean_config guard;
  std::mt19937 rng(37);
  for (std::size_t rows : {203u, 1001u}) {
    const step_data<float> d(rows, 48, rng, 0.1, 0.05);
    const auto& [X, Y, C, w0] = d;
    xsym::config.openmp = false;
    auto [f0, w_serial, b_serial] = make_hand_step<float>(w0, rows, "");
    auto [p0, e0] = f0(X, Y, C);
    xsym::config.openmp = true;
    for (int threads : {1, 2, 3, 4}) {
      omp_set_num_threads(threads);  // read when a function is built
      auto [f, w, b] = make_hand_step<float>(w0, rows, "");
      auto [p, e] = f(X, Y, C);
      INFO(rows << " rows, " << threads << " threads");
      CHECK(bool(p == p0));
      CHECK(bool(e == e0));
      CHECK(bool(w.get_value() == w_serial.get_value()));
      CHECK(b.get_value()() == b_serial.get_value()());
    }
    omp_set_num_threads(2);
    xsym::config.openmp = false;
  }
}
#endif
