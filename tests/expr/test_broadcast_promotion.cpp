// Numpy broadcasting (by rank, by dimshuffle, by size-1 dimensions at call time, through
// non-contiguous operands) and numpy's dtype promotion, checked against explicit loops.
#include "expr_util.hpp"

#include <cstring>

#include <xtensor/xview.hpp>

using namespace xsym_test;

namespace {

// Element (i, j) of a (rows x cols) row-major buffer broadcast to a larger shape.
struct grid {
  const double* data;
  std::size_t rows, cols;
  double operator()(std::size_t i, std::size_t j) const { return data[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)]; }
};

template <class T, std::size_t N>
std::vector<double> flat(const xt::xtensor<T, N>& a) {
  return to_doubles(a);
}

template <class E, class V>
void check_type(const V&) {
  CHECK(std::is_same_v<typename V::value_type, E>);
}

}  // namespace

TEST_CASE("a matrix broadcasts with a row vector, a column and an outer sum", "[expr][broadcast]") {
  for_each_type(numeric_types{}, []<class T>() {
    INFO(type_name<T>());
    std::mt19937 rng(11);
    auto m = xsym::matrix<T>("m");
    auto v = xsym::vector<T>("v");  // length cols: a row
    auto u = xsym::vector<T>("u");  // length rows: made a column with dimshuffle(u, 0, 'x')
    auto row = m + v;
    auto col = m * xsym::dimshuffle(u, 0, 'x');
    auto outer = xsym::dimshuffle(v, 'x', 0) - xsym::dimshuffle(u, 0, 'x');
    auto fused = (m + v) * xsym::dimshuffle(u, 0, 'x') - v;
    CHECK(decltype(row)::rank == 2);
    CHECK(decltype(outer)::rank == 2);
    for (const char* l : {"cvm", "py"}) {
      auto f = xsym::function("bcast", xsym::inputs(m, v, u), xsym::outputs(row, col, outer, fused), xsym::linker(l));
      for (auto [r, c] : {std::pair<std::size_t, std::size_t>{3, 5}, {1, 7}, {6, 1}, {33, 17}, {2, 300}}) {
        INFO("linker " << l << ", shape (" << r << ", " << c << ")");
        const auto M = random_tensor<T, 2>(rng, {r, c}, -20, 20);
        const auto V = random_tensor<T, 1>(rng, {c}, -20, 20);
        const auto U = random_tensor<T, 1>(rng, {r}, -20, 20);
        auto [a, b, o, fu] = f(M, V, U);
        REQUIRE(shape_vector(a.shape()) == std::vector<std::size_t>{r, c});
        REQUIRE(shape_vector(o.shape()) == std::vector<std::size_t>{r, c});
        std::vector<double> ea, eb, eo, ef;
        for (std::size_t i = 0; i < r; ++i)
          for (std::size_t j = 0; j < c; ++j) {
            const double mij = static_cast<double>(M(i, j)), vj = static_cast<double>(V(j)), ui = static_cast<double>(U(i));
            ea.push_back(mij + vj);
            eb.push_back(mij * ui);
            eo.push_back(vj - ui);
            ef.push_back((mij + vj) * ui - vj);
          }
        CHECK(differences(a, ea) == "");
        CHECK(differences(b, eb) == "");
        CHECK(differences(o, eo) == "");
        CHECK(differences(fu, ef) == "");
      }
    }
  });
}

// A block that repeats (a row against a matrix, a matrix against a stack of them) is copied
// end to end and run in spans of whole periods, many rows per kernel call: every element must
// be the one the same function computes on full contiguous copies (one flat span), bit for bit,
// and match a float64 loop; the periods' least common multiple sets the span.
TEST_CASE("repeated blocks run in spans of whole periods with the full copies' bits", "[expr][broadcast]") {
  for_each_type(type_list<float, double, std::int32_t>{}, []<class T>() {
    INFO(type_name<T>());
    std::mt19937 rng(23);
    auto t = xsym::tensor3<T>("t");
    auto m = xsym::matrix<T>("m");  // (B, C): repeats every B * C elements
    auto v = xsym::vector<T>("v");  // (C): repeats every C
    auto build = [&](auto mm, auto vv) {
      if constexpr (std::is_floating_point_v<T>)
        return xsym::function("periods", xsym::inputs(t, mm, vv),
                              xsym::outputs((t + mm) * vv - mm, t > vv, exp(vv * T(0.01)) * t));
      else
        return xsym::function("periods", xsym::inputs(t, mm, vv), xsym::outputs((t + mm) * vv - mm, t > vv, vv * t));
    };
    auto f = build(m, v);
    auto t_full = xsym::tensor3<T>("m_full"), u_full = xsym::tensor3<T>("v_full");
    auto full = build(t_full, u_full);
    for (auto [A, B, C] : {std::array<std::size_t, 3>{200, 7, 3}, {2, 5, 17}, {300, 1, 16}, {1, 7, 16}, {90, 3, 33},
                           {5000, 1, 1}, {3, 700, 5}}) {
      INFO("shape (" << A << ", " << B << ", " << C << ")");
      const auto X = random_tensor<T, 3>(rng, {A, B, C}, -20, 20);
      const auto M = random_tensor<T, 2>(rng, {B, C}, -20, 20);
      const auto V = random_tensor<T, 1>(rng, {C}, -20, 20);
      auto [r0, r1, r2] = f(X, M, V);
      xt::xtensor<T, 3> Mf = xt::broadcast(M, {A, B, C}), Vf = xt::broadcast(V, {A, B, C});
      auto [e0, e1, e2] = full(X, Mf, Vf);
      CHECK(bool(r0 == e0));
      CHECK(bool(r1 == e1));
      CHECK(bool(r2 == e2));
      {  // streamed (non-temporal stores, the next block asked for): the same bits
        struct restore_threshold {
          std::int64_t saved = xsym::cpu::streaming_min_bytes();
          ~restore_threshold() { xsym::cpu::streaming_min_bytes() = saved; }
        } restore;
        xsym::cpu::streaming_min_bytes() = 0;
        auto [s0, s1, s2] = f(X, M, V);
        CHECK(bool(s0 == e0));
        CHECK(bool(s1 == e1));
        CHECK(bool(s2 == e2));
      }
      std::vector<double> w0, w1, w2;
      for (std::size_t i = 0; i < A; ++i)
        for (std::size_t j = 0; j < B; ++j)
          for (std::size_t k = 0; k < C; ++k) {
            const double x = double(X(i, j, k)), mm = double(M(j, k)), vv = double(V(k));
            w0.push_back((x + mm) * vv - mm);
            w1.push_back(x > vv);
            w2.push_back(std::is_floating_point_v<T> ? std::exp(vv * 0.01) * x : vv * x);
          }
      CHECK(differences(r0, w0) == "");
      CHECK(differences(r1, w1) == "");
      CHECK(differences(r2, w2, {}, std::is_floating_point_v<T> ? 4 * tolerance<T>::rtol : 0) == "");
    }
  });
}

// Other layouts with short rows run in spans of whole rows too, each input gathered row by row:
// a column's values repeated along their rows, a middle axis broadcast or a view with a row
// stride copied, a row beside them copied end to end once. Every element must be the one the same function computes on full contiguous
// copies, bit for bit, and match a float64 loop; spans end inside a matrix of the stack and
// across matrices.
TEST_CASE("columns, middle broadcasts and strided rows run in gathered spans with the full copies' bits",
          "[expr][broadcast]") {
  for_each_type(type_list<float, double, std::int32_t>{}, []<class T>() {
    INFO(type_name<T>());
    std::mt19937 rng(29);
    auto t = xsym::tensor3<T>("t");
    auto c = xsym::tensor<T, 3>("c", {false, false, true});    // (A, B, 1): a column per matrix
    auto mid = xsym::tensor<T, 3>("mid", {false, true, false});  // (A, 1, C)
    auto f = xsym::function("gathered", xsym::inputs(t, c, mid), xsym::outputs((t + c) * mid - c, t > c));
    auto v = xsym::vector<T>("v");  // (C): a row, copied into the spans once
    auto g = xsym::function("columns", xsym::inputs(t, c, v), xsym::outputs(t * c + v));
    auto tf = xsym::tensor3<T>("t"), cf = xsym::tensor3<T>("c_full"), mf = xsym::tensor3<T>("mid_full");
    auto f_full = xsym::function("gathered", xsym::inputs(tf, cf, mf), xsym::outputs((tf + cf) * mf - cf, tf > cf));
    auto vf = xsym::tensor3<T>("v_full");
    auto g_full = xsym::function("columns", xsym::inputs(tf, cf, vf), xsym::outputs(tf * cf + vf));
    for (auto [A, B, C] : {std::array<std::size_t, 3>{300, 7, 3}, {2, 5, 17}, {1, 600, 4}, {90, 3, 33}, {3, 700, 5},
                           {40, 9, 200}, {7, 11, 63}, {2, 2, 1000}}) {
      INFO("shape (" << A << ", " << B << ", " << C << ")");
      // t is a view with a row stride: the first C of every row of a wider array.
      const auto wide = random_tensor<T, 3>(rng, {A, B, C + 5}, -20, 20);
      const auto X = xt::view(wide, xt::all(), xt::all(), xt::range(0, C));
      const auto Cv = random_tensor<T, 3>(rng, {A, B, 1}, -20, 20);
      const auto Mv = random_tensor<T, 3>(rng, {A, 1, C}, -20, 20);
      auto [r0, r1] = f(X, Cv, Mv);
      const auto Vv = random_tensor<T, 1>(rng, {C}, -20, 20);
      auto [q0] = g(X, Cv, Vv);
      const xt::xtensor<T, 3> Xf = X, Cf = xt::broadcast(Cv, {A, B, C}), Mf = xt::broadcast(Mv, {A, B, C});
      auto [e0, e1] = f_full(Xf, Cf, Mf);
      const xt::xtensor<T, 3> Vf = xt::broadcast(Vv, {A, B, C});
      auto [h0] = g_full(Xf, Cf, Vf);
      CHECK(bool(r0 == e0));
      CHECK(bool(r1 == e1));
      CHECK(bool(q0 == h0));
      std::vector<double> w0, w1, w2;
      for (std::size_t i = 0; i < A; ++i)
        for (std::size_t j = 0; j < B; ++j)
          for (std::size_t k = 0; k < C; ++k) {
            const double x = double(wide(i, j, k)), cc = double(Cv(i, j, 0)), mm = double(Mv(i, 0, k));
            w0.push_back((x + cc) * mm - cc);
            w1.push_back(x > cc);
            w2.push_back(x * cc + double(Vv(k)));
          }
      CHECK(differences(r0, w0) == "");
      CHECK(differences(r1, w1) == "");
      CHECK(differences(q0, w2) == "");
    }
  });
}

// Rows of 64 bytes or more go to a rows kernel, one call per run of rows: a lone +, -, * or /
// of floats, or a typed tree (from 256 bytes where it reads a column), with a column's value in
// a register or a batch for its row; maximum and minimum keep the other paths. Every element
// must be the one the same op computes on full contiguous copies, bit for bit (NaN included),
// and match a float64 loop: rows with a tail, a row stride (a view), a column on either side,
// a row beside a column, and a stack of matrices (runs end at each matrix, the odometer
// carries).
TEST_CASE("rows with a column in a register give the full copies' bits", "[expr][broadcast]") {
  for_each_type(type_list<float, double>{}, []<class T>() {
    INFO(type_name<T>());
    std::mt19937 rng(31);
    auto m = xsym::matrix<T>("m");
    auto u = xsym::vector<T>("u");
    auto v = xsym::vector<T>("v");
    const auto col = xsym::dimshuffle(u, 0, 'x');
    auto lone = xsym::function("lone", xsym::inputs(m, u, v),
                               xsym::outputs(m + col, col - m, m * col, col / m, xsym::maximum(m, col),
                                             xsym::minimum(col, m), xsym::dimshuffle(v, 'x', 0) - col,
                                             exp(m - col) * T(0.5) + v));
    auto mf = xsym::matrix<T>("m"), cf = xsym::matrix<T>("col_full"), vf = xsym::matrix<T>("v_full");
    auto full = xsym::function("full", xsym::inputs(mf, cf, vf),
                               xsym::outputs(mf + cf, cf - mf, mf * cf, cf / mf, xsym::maximum(mf, cf),
                                             xsym::minimum(cf, mf), vf - cf, exp(mf - cf) * T(0.5) + vf));
    auto same_bits = [](const auto& a, const auto& b) {
      return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
    };
    for (auto [r, c] : {std::pair<std::size_t, std::size_t>{2, 16}, {3, 17}, {5, 33}, {4, 64}, {7, 100}, {40, 1000},
                        {300, 24}, {1, 50}}) {
      INFO("shape (" << r << ", " << c << ")");
      // m is a view with a row stride: the middle c of every row of a wider array.
      auto wide = random_tensor<T, 2>(rng, {r, c + 3}, -4, 4);
      auto U = random_tensor<T, 1>(rng, {r}, -4, 4);
      const auto V = random_tensor<T, 1>(rng, {c}, -4, 4);
      wide(0, c) = std::numeric_limits<T>::quiet_NaN();  // m's last element of row 0: a tail or a batch
      U(r - 1) = std::numeric_limits<T>::quiet_NaN();    // a whole row against a NaN
      const auto outs = lone(xt::view(wide, xt::all(), xt::range(1, c + 1)), U, V);
      const xt::xtensor<T, 2> Mf = xt::view(wide, xt::all(), xt::range(1, c + 1));
      const xt::xtensor<T, 2> Cf = xt::broadcast(xt::view(U, xt::all(), xt::newaxis()), {r, c});
      const xt::xtensor<T, 2> Vf = xt::broadcast(V, {r, c});
      const auto want = full(Mf, Cf, Vf);
      auto lone_outs = std::apply([](const auto&... a) { return std::vector<xt::xtensor<T, 2>>{a...}; }, outs);
      auto full_outs = std::apply([](const auto&... a) { return std::vector<xt::xtensor<T, 2>>{a...}; }, want);
      for (std::size_t k = 0; k < lone_outs.size(); ++k) {
        INFO("output " << k);
        CHECK(same_bits(lone_outs[k], full_outs[k]));
      }
      std::vector<std::vector<double>> w(8);
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < c; ++j) {
          const double x = double(wide(i, j + 1)), uu = double(U(i)), vv = double(V(j));
          w[0].push_back(x + uu);
          w[1].push_back(uu - x);
          w[2].push_back(x * uu);
          w[3].push_back(uu / x);
          w[6].push_back(vv - uu);
          w[7].push_back(std::exp(x - uu) * 0.5 + vv);
        }
      for (std::size_t k : {0, 1, 2, 3, 6}) {
        INFO("output " << k);
        CHECK(differences(lone_outs[k], w[k]) == "");
      }
      CHECK(differences(lone_outs[7], w[7], {}, 8 * tolerance<T>::rtol) == "");
    }
  });
  // In place over a product's result (its buffer dies there): the output is an input, so each
  // row's tail comes from copies, not from a batch over elements already written.
  for_each_type(type_list<float, double>{}, []<class T>() {
    INFO(type_name<T>());
    std::mt19937 rng(41);
    auto m = xsym::matrix<T>("m"), k = xsym::matrix<T>("k");
    auto u = xsym::vector<T>("u"), v = xsym::vector<T>("v");
    auto f = xsym::function("in_place", xsym::inputs(m, k, u, v),
                            (xsym::dot(m, k) - xsym::dimshuffle(u, 0, 'x')) * T(2) + v);
    bool in_place = false;
    for (const auto& node : f.toposort()) in_place |= node.class_name() == "xsym::Elemwise" && !node.fn->destroy_map.empty();
    CHECK(in_place);
    auto mf = xsym::matrix<T>("m"), kf = xsym::matrix<T>("k"), cf = xsym::matrix<T>("c"), vf = xsym::matrix<T>("v");
    auto full = xsym::function("full", xsym::inputs(mf, kf, cf, vf), (xsym::dot(mf, kf) - cf) * T(2) + vf);
    for (auto [r, c] : {std::pair<std::size_t, std::size_t>{5, 17}, {9, 63}, {3, 100}}) {
      INFO("shape (" << r << ", " << c << ")");
      const auto M = random_tensor<T, 2>(rng, {r, 4}, -2, 2);
      const auto K = random_tensor<T, 2>(rng, {4, c}, -2, 2);
      const auto U = random_tensor<T, 1>(rng, {r}, -2, 2);
      const auto V = random_tensor<T, 1>(rng, {c}, -2, 2);
      const xt::xtensor<T, 2> got = f(M, K, U, V);
      const xt::xtensor<T, 2> Cf = xt::broadcast(xt::view(U, xt::all(), xt::newaxis()), {r, c});
      const xt::xtensor<T, 2> Vf = xt::broadcast(V, {r, c});
      const xt::xtensor<T, 2> want = full(M, K, Cf, Vf);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0);
    }
  });
  // A stack: each matrix's rows one run; a column per matrix row, a row per matrix.
  std::mt19937 rng(37);
  auto t = xsym::tensor3<float>("t");
  auto cc = xsym::tensor<float, 3>("c", {false, false, true});
  auto mid = xsym::tensor<float, 3>("mid", {false, true, false});
  auto f = xsym::function("stack", xsym::inputs(t, cc, mid), xsym::outputs(t * cc, t - mid, (t - cc) * mid));
  for (auto [A, B, C] : {std::array<std::size_t, 3>{3, 5, 40}, {2, 1, 20}, {4, 3, 17}, {1, 9, 16}}) {
    INFO("shape (" << A << ", " << B << ", " << C << ")");
    const auto X = random_tensor<float, 3>(rng, {A, B, C}, -4, 4);
    const auto Cv = random_tensor<float, 3>(rng, {A, B, 1}, -4, 4);
    const auto Mv = random_tensor<float, 3>(rng, {A, 1, C}, -4, 4);
    auto [a, b, d] = f(X, Cv, Mv);
    for (std::size_t i = 0; i < A; ++i)
      for (std::size_t j = 0; j < B; ++j)
        for (std::size_t k = 0; k < C; ++k) {
          INFO(i << ", " << j << ", " << k);
          REQUIRE(a(i, j, k) == X(i, j, k) * Cv(i, j, 0));
          REQUIRE(b(i, j, k) == X(i, j, k) - Mv(i, 0, k));
          REQUIRE(d(i, j, k) == (X(i, j, k) - Cv(i, j, 0)) * Mv(i, 0, k));
        }
  }
}

TEST_CASE("a scalar tensor and C++ numbers broadcast against any rank", "[expr][broadcast]") {
  auto s = xsym::scalar<double>("s");
  auto t = xsym::tensor3<double>("t");
  auto f = xsym::function("scalar_bcast", xsym::inputs(s, t), xsym::outputs(s + t, t - s, 2.5 * t, 1 - t, t / 4, 3 - s * t));
  std::mt19937 rng(3);
  const auto T3 = random_tensor<double, 3>(rng, {2, 3, 5}, -4, 4);
  const double S = -1.75;
  auto [a, b, c, d, e, g] = f(S, T3);
  CHECK(shape_vector(a.shape()) == std::vector<std::size_t>{2, 3, 5});
  std::vector<double> ea, eb, ec, ed, ee, eg;
  for (double x : T3) {
    ea.push_back(S + x);
    eb.push_back(x - S);
    ec.push_back(2.5 * x);
    ed.push_back(1 - x);
    ee.push_back(x / 4);
    eg.push_back(3 - S * x);
  }
  CHECK(differences(a, ea) == "");
  CHECK(differences(b, eb) == "");
  CHECK(differences(c, ec) == "");
  CHECK(differences(d, ed) == "");
  CHECK(differences(e, ee) == "");
  CHECK(differences(g, eg) == "");
}

TEST_CASE("declared broadcastable dimensions broadcast at call time", "[expr][broadcast]") {
  // Theano's rule: a dimension broadcasts where it is declared broadcastable (row, col,
  // tensor<T, N>(name, {...}), dimshuffle 'x'); a size-1 dimension of a plain matrix does not.
  std::mt19937 rng(8);
  auto c = xsym::col<double>("c");  // (rows, 1)
  auto r = xsym::row<double>("r");  // (1, cols)
  auto m = xsym::matrix<double>("m");
  auto f = xsym::function("call_bcast", xsym::inputs(c, r, m), xsym::outputs(c + r, m * r - c, xsym::maximum(c, m)));
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{3, 4}, {1, 1}, {1, 9}, {7, 1}, {40, 300}}) {
    INFO("rows " << rows << ", cols " << cols);
    const auto C = random_tensor<double, 2>(rng, {rows, 1}, -3, 3);
    const auto R = random_tensor<double, 2>(rng, {1, cols}, -3, 3);
    const auto M = random_tensor<double, 2>(rng, {rows, cols}, -3, 3);
    auto [s, p, mx] = f(C, R, M);
    REQUIRE(shape_vector(s.shape()) == std::vector<std::size_t>{rows, cols});
    REQUIRE(shape_vector(p.shape()) == std::vector<std::size_t>{rows, cols});
    REQUIRE(shape_vector(mx.shape()) == std::vector<std::size_t>{rows, cols});
    const grid gc{C.data(), rows, 1}, gr{R.data(), 1, cols}, gm{M.data(), rows, cols};
    std::vector<double> es, ep, em;
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        es.push_back(gc(i, j) + gr(i, j));
        ep.push_back(gm(i, j) * gr(i, j) - gc(i, j));
        em.push_back(std::max(gc(i, j), gm(i, j)));
      }
    CHECK(differences(s, es) == "");
    CHECK(differences(p, ep) == "");
    CHECK(differences(mx, em) == "");
  }

  SECTION("rank 3 with declared patterns on both sides") {
    auto x = xsym::tensor<float, 3>("x", {false, true, false});
    auto y = xsym::tensor<float, 3>("y", {true, false, true});
    auto g = xsym::function("bcast3", xsym::inputs(x, y), xsym::maximum(x, y) + x);
    const auto X = random_tensor<float, 3>(rng, {2, 1, 4}, -3, 3);
    const auto Y = random_tensor<float, 3>(rng, {1, 3, 1}, -3, 3);
    const xt::xtensor<float, 3> res = g(X, Y);
    REQUIRE(shape_vector(res.shape()) == std::vector<std::size_t>{2, 3, 4});
    std::vector<double> e;
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t k = 0; k < 4; ++k) e.push_back(static_cast<double>(std::max(X(i, 0, k), Y(0, j, 0)) + X(i, 0, k)));
    CHECK(differences(res, e) == "");
  }

  SECTION("shapes that do not match throw shape_error") {
    const xt::xtensor<double, 2> C = xt::zeros<double>({3, 1}), R = xt::zeros<double>({1, 4});
    const xt::xtensor<double, 2> M = xt::zeros<double>({3, 5});
    CHECK_THROWS_AS(f(C, R, M), xsym::shape_error);
    // A declared-broadcastable dimension must have size 1.
    const xt::xtensor<double, 2> C2 = xt::zeros<double>({3, 2}), M4 = xt::zeros<double>({3, 4});
    CHECK_THROWS_AS(f(C2, R, M4), xsym::shape_error);
  }

  SECTION("a size-1 dimension that is not declared broadcastable does not broadcast") {
    auto a = xsym::matrix<double>("a");
    auto b = xsym::matrix<double>("b");
    auto g = xsym::function("plain", xsym::inputs(a, b), a + b);
    const xt::xtensor<double, 2> A = xt::ones<double>({3, 1}), B = xt::ones<double>({1, 4});
    CHECK_THROWS_WITH(g(A, B), Catch::Matchers::Contains("broadcastable"));
    const xt::xtensor<double, 2> A2 = xt::ones<double>({1, 4});
    const xt::xtensor<double, 2> ok = g(A2, B);  // equal shapes, size 1 included, are fine
    CHECK(differences(ok, {2, 2, 2, 2}) == "");
  }
}
TEST_CASE("transposed (non-contiguous) operands give the values of the transpose", "[expr][broadcast]") {
  std::mt19937 rng(21);
  auto m = xsym::matrix<double>("m");    // (cols, rows): used transposed
  auto m2 = xsym::matrix<double>("m2");  // (rows, cols)
  auto v = xsym::vector<double>("v");    // (cols)
  auto t3 = xsym::tensor3<double>("t3");
  auto plus = xsym::transpose(m) + m2;
  auto fused = m.T() * m2 - xsym::exp(m.T());
  auto with_row = m.T() + v;
  auto t3t = xsym::transpose(t3) * 2.0;  // (d2, d1, d0)
  for (const char* l : {"cvm", "py"}) {
    auto f = xsym::function("transposed", xsym::inputs(m, m2, v), xsym::outputs(plus, fused, with_row), xsym::linker(l));
    auto g = xsym::function("transposed3", xsym::inputs(t3), t3t, xsym::linker(l));
    for (auto [r, c] : {std::pair<std::size_t, std::size_t>{3, 5}, {1, 4}, {4, 1}, {33, 65}}) {
      INFO("linker " << l << ", rows " << r << ", cols " << c);
      const auto M = random_tensor<double, 2>(rng, {c, r}, -2, 2);
      const auto M2 = random_tensor<double, 2>(rng, {r, c}, -2, 2);
      const auto V = random_tensor<double, 1>(rng, {c}, -2, 2);
      auto [p, fu, wr] = f(M, M2, V);
      REQUIRE(shape_vector(p.shape()) == std::vector<std::size_t>{r, c});
      std::vector<double> ep, ef, ew;
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < c; ++j) {
          ep.push_back(M(j, i) + M2(i, j));
          ef.push_back(M(j, i) * M2(i, j) - std::exp(M(j, i)));
          ew.push_back(M(j, i) + V(j));
        }
      CHECK(differences(p, ep) == "");
      CHECK(differences(fu, ef) == "");
      CHECK(differences(wr, ew) == "");
    }
    const auto T3 = random_tensor<double, 3>(rng, {2, 3, 4}, -2, 2);
    const xt::xtensor<double, 3> r3 = g(T3);
    REQUIRE(shape_vector(r3.shape()) == std::vector<std::size_t>{4, 3, 2});
    std::vector<double> e3;
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t k = 0; k < 2; ++k) e3.push_back(2 * T3(k, j, i));
    CHECK(differences(r3, e3) == "");
  }
}

TEST_CASE("strided views passed as arguments are read through their strides", "[expr][broadcast]") {
  auto m = xsym::matrix<double>("m");
  auto f = xsym::function("view_arg", xsym::inputs(m), m * 10.0 + 1.0);
  const xt::xtensor<double, 2> base{{1, 2, 3}, {4, 5, 6}};
  const xt::xtensor<double, 2> transposed = xt::transpose(base);
  const xt::xtensor<double, 2> r = f(transposed);
  CHECK(differences(r, {11, 41, 21, 51, 31, 61}) == "");
  // A column-major container: strides other than C order.
  xt::xtensor<double, 2, xt::layout_type::column_major> cm({2, 3});
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) cm(i, j) = base(i, j);
  const xt::xtensor<double, 2> rc = f(cm);
  CHECK(differences(rc, {11, 21, 31, 41, 51, 61}) == "");
}

TEST_CASE("result dtypes follow numpy's promotion rules", "[expr][dtype]") {
  auto b = xsym::vector<bool>("b");
  auto i32 = xsym::vector<std::int32_t>("i32");
  auto i64 = xsym::vector<std::int64_t>("i64");
  auto f32 = xsym::vector<float>("f32");
  auto f64 = xsym::vector<double>("f64");

  // Two tensors: the smallest type that holds both exactly.
  check_type<std::int32_t>(i32 + i32);
  check_type<std::int64_t>(i32 + i64);
  check_type<std::int64_t>(i64 * i32);
  check_type<double>(i32 + f32);  // float32 cannot hold every int32
  check_type<double>(f32 - i64);
  check_type<double>(f32 + f64);
  check_type<float>(f32 * f32);
  check_type<double>(i32 * f64);
  check_type<std::int32_t>(xsym::maximum(i32, i32));
  check_type<double>(xsym::minimum(i32, f32));

  // Float-only functions on integers compute in float64.
  check_type<double>(i32 / i32);
  check_type<double>(i64 / i32);
  check_type<float>(f32 / f32);
  check_type<double>(i32 / f32);
  check_type<double>(xsym::exp(i32));
  check_type<double>(xsym::sqrt(i64));
  check_type<float>(xsym::tanh(f32));
  check_type<double>(xsym::pow(i32, i32));
  check_type<float>(xsym::pow(f32, 2));
  check_type<std::int32_t>(xsym::abs(i32));
  check_type<std::int64_t>(-i64);

  // C++ numbers are weak: they take the tensor's type unless a fraction meets integers.
  check_type<float>(0.5 * f32);
  check_type<float>(f32 + 1);
  check_type<float>(1 - f32);
  check_type<double>(0.5f * f64);
  check_type<std::int32_t>(2 * i32);
  check_type<std::int32_t>(i32 - std::int64_t{3});
  check_type<std::int64_t>(i64 + 1);
  check_type<double>(0.5 * i32);
  check_type<double>(i64 - 1.5);
  check_type<double>(1 / i32);
  check_type<float>(1 / f32);

  // Comparisons give bool, whatever they compare.
  check_type<bool>(i32 > f32);
  check_type<bool>(f64 == 1.5);
  check_type<bool>(b != b);
  check_type<bool>(i64 <= 2);

  // Reductions: sum and prod of integers (and bool) accumulate in int64, mean of them is float64.
  check_type<std::int64_t>(xsym::sum(i32));
  check_type<std::int64_t>(xsym::sum(b));
  check_type<std::int64_t>(xsym::prod(i32));
  check_type<float>(xsym::sum(f32));
  check_type<double>(xsym::mean(i32));
  check_type<double>(xsym::mean(b));
  check_type<float>(xsym::mean(f32));
  check_type<std::int32_t>(xsym::max(i32));
  check_type<bool>(xsym::min(b));
  check_type<float>(xsym::max(f32));

  // dot promotes like +; cast forces a type.
  check_type<double>(xsym::dot(i32, f32));
  check_type<std::int32_t>(xsym::dot(i32, i32));
  check_type<float>(xsym::dot(f32, f32));
  check_type<std::int64_t>(xsym::dot(i32, i64));
  check_type<float>(xsym::cast<float>(i64));
  check_type<bool>(xsym::cast<bool>(f64));
}

TEST_CASE("floor, ceil and round of integers are the integers, in their own dtype (numpy's)", "[expr][dtype]") {
  auto x = xsym::vector<std::int64_t>("x");
  auto k = xsym::vector<std::int32_t>("k");
  static_assert(std::is_same_v<decltype(xsym::floor(x)), xsym::var<std::int64_t, 1>>);
  static_assert(std::is_same_v<decltype(xsym::round(k)), xsym::var<std::int32_t, 1>>);
  auto f = xsym::function("f", xsym::inputs(x, k),
                          xsym::outputs(xsym::floor(x), xsym::ceil(x - 1), xsym::round(x * 2), xsym::round(k) + 1));
  constexpr std::int64_t big = (std::int64_t{1} << 53) + 1;  // not a float64
  const xt::xtensor<std::int64_t, 1> X{big, -big, std::numeric_limits<std::int64_t>::max(),
                                       std::numeric_limits<std::int64_t>::min() + 1, 0, -7};
  const xt::xtensor<std::int32_t, 1> K{2147483646, -2147483647 - 1, 5, -5, 0, 1};
  auto [a, b, c, d] = f(X, K);
  static_assert(std::is_same_v<std::decay_t<decltype(a)>::value_type, std::int64_t>);
  static_assert(std::is_same_v<std::decay_t<decltype(d)>::value_type, std::int32_t>);
  for (std::size_t i = 0; i < X.size(); ++i) {
    INFO(i);
    CHECK(a(i) == X(i));
    CHECK(b(i) == static_cast<std::int64_t>(static_cast<std::uint64_t>(X(i)) - 1));
    CHECK(c(i) == static_cast<std::int64_t>(static_cast<std::uint64_t>(X(i)) * 2));  // wraps, as x * 2 does
    CHECK(d(i) == static_cast<std::int32_t>(static_cast<std::uint32_t>(K(i)) + 1));
  }
}

TEST_CASE("promoted results are computed in the promoted type", "[expr][dtype]") {
  SECTION("int32 + float32 is exact in float64") {
    auto x = xsym::vector<std::int32_t>("x");
    auto y = xsym::vector<float>("y");
    auto f = xsym::function("i32_plus_f32", xsym::inputs(x, y), x + y);
    // 2^24 + 1 is not a float32; neither is the sum with 0.5: only float64 gets these right.
    const xt::xtensor<std::int32_t, 1> X{16777217, -16777217, 2147483647, 3, 0, 123456789, -7};
    const xt::xtensor<float, 1> Y{0.5f, -0.25f, 0.5f, 0.1f, 1e-3f, 0.75f, 1e30f};
    const xt::xtensor<double, 1> r = f(X, Y);
    std::vector<double> e;
    for (std::size_t i = 0; i < X.size(); ++i) e.push_back(static_cast<double>(X(i)) + static_cast<double>(Y(i)));
    CHECK(differences(r, e, {}, 0, 0) == "");
  }
  SECTION("int / int is true division in float64") {
    auto x = xsym::vector<std::int32_t>("x");
    auto y = xsym::vector<std::int64_t>("y");
    auto f = xsym::function("int_div", xsym::inputs(x, y), xsym::outputs(x / y, 1 / x, x / 4));
    const xt::xtensor<std::int32_t, 1> X{7, -7, 1, 2147483647, 5};
    const xt::xtensor<std::int64_t, 1> Y{2, 2, 3, 3, -8};
    auto [q, inv, quarter] = f(X, Y);
    CHECK(differences(q, {3.5, -3.5, 1.0 / 3.0, 2147483647.0 / 3.0, -0.625}, {}, 0, 0) == "");
    CHECK(differences(inv, {1.0 / 7, -1.0 / 7, 1.0, 1.0 / 2147483647.0, 0.2}, {}, 0, 0) == "");
    CHECK(differences(quarter, {1.75, -1.75, 0.25, 2147483647.0 / 4, 1.25}, {}, 0, 0) == "");
  }
  SECTION("int64 arithmetic keeps all 64 bits") {
    auto x = xsym::vector<std::int64_t>("x");
    auto y = xsym::vector<std::int32_t>("y");
    auto f = xsym::function("i64", xsym::inputs(x, y), xsym::outputs(x + y, x * 3, xsym::sum(x)));
    const std::int64_t big = (std::int64_t{1} << 60) + 1;  // beyond float64's 53 bits
    const xt::xtensor<std::int64_t, 1> X{big, -big, std::int64_t{1} << 40};
    const xt::xtensor<std::int32_t, 1> Y{1, -1, 2147483647};
    auto [s, t, total] = f(X, Y);
    CHECK(s(0) == big + 1);
    CHECK(s(1) == -big - 1);
    CHECK(s(2) == (std::int64_t{1} << 40) + 2147483647);
    CHECK(t(0) == big * 3 - 0);
    CHECK(total == (std::int64_t{1} << 40));
  }
  SECTION("sum of int32 accumulates in int64; mean of ints is float64") {
    auto x = xsym::vector<std::int32_t>("x");
    auto f = xsym::function("i32_sum", xsym::inputs(x), xsym::outputs(xsym::sum(x), xsym::mean(x), xsym::prod(x)));
    const xt::xtensor<std::int32_t, 1> X{2000000000, 2000000000, 2000000000, -1};
    auto [s, m, p] = f(X);
    CHECK(s == std::int64_t{5999999999});
    CHECK(m == 5999999999.0 / 4);
    // 8e27 does not fit in int64: the product wraps around, as numpy's does.
    const auto wrapped = static_cast<std::int64_t>(static_cast<unsigned __int128>(
        static_cast<__int128>(2000000000) * 2000000000 * 2000000000 * -1));
    CHECK(p == wrapped);
    const xt::xtensor<std::int32_t, 1> Y{100000, 100000, -3, 1, 7};
    auto [s2, m2, p2] = f(Y);
    CHECK(s2 == 200005);
    CHECK(m2 == 40001.0);
    CHECK(p2 == std::int64_t{-210000000000});  // beyond int32
  }
  SECTION("int32 and int64 arithmetic wraps around on overflow, as numpy's does") {
    // Against the same arithmetic done exactly in a wider type, then narrowed (modular).
    auto check_wrap = []<class T, class Wide>(T, Wide) {
      auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y");
      auto f = xsym::function("wrap", xsym::inputs(x, y),
                              xsym::outputs(x + y, x - y, x * y, -x, xsym::sqr(x), xsym::abs(x)));
      constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
      const T h = T(1) << (sizeof(T) * 4);  // its square is 2^bits: wraps to 0
      const xt::xtensor<T, 1> X{hi, lo, h, T(-3), lo, hi};
      const xt::xtensor<T, 1> Y{T(1), T(1), h, T(5), lo, hi};
      auto [sum, diff, prod, neg, sq, ab] = f(X, Y);
      for (std::size_t i = 0; i < X.size(); ++i) {
        const Wide a = X(i), b = Y(i);
        INFO(sizeof(T) * 8 << "-bit, x = " << +X(i) << ", y = " << +Y(i));
        CHECK(sum(i) == static_cast<T>(a + b));
        CHECK(diff(i) == static_cast<T>(a - b));
        CHECK(prod(i) == static_cast<T>(a * b));
        CHECK(neg(i) == static_cast<T>(-a));
        CHECK(sq(i) == static_cast<T>(a * a));
        CHECK(ab(i) == static_cast<T>(a < 0 ? -a : a));
      }
    };
    check_wrap(std::int32_t{}, std::int64_t{});
    check_wrap(std::int64_t{}, __int128{});
    auto v = xsym::vector<std::int64_t>("v");
    auto total = xsym::function("total", xsym::inputs(v), xsym::sum(v));
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    const xt::xtensor<std::int64_t, 1> V{big, big, big, 5, 7};
    CHECK(total(V) == static_cast<std::int64_t>(static_cast<__int128>(big) * 3 + 12));
  }
  SECTION("float32 + float64 is computed in float64") {
    auto x = xsym::vector<float>("x");
    auto y = xsym::vector<double>("y");
    auto f = xsym::function("f32_f64", xsym::inputs(x, y), x + y);
    const xt::xtensor<float, 1> X{0.1f, 1e-8f, 3.0f};
    const xt::xtensor<double, 1> Y{0.2, 1.0, 1e-12};
    const xt::xtensor<double, 1> r = f(X, Y);
    CHECK(differences(r, {double(0.1f) + 0.2, double(1e-8f) + 1.0, 3.0 + 1e-12}, {}, 0, 0) == "");
  }
  SECTION("weak C++ numbers: float32 stays float32, a fraction next to ints gives float64") {
    auto x = xsym::vector<float>("x");
    auto i = xsym::vector<std::int32_t>("i");
    auto f = xsym::function("weak", xsym::inputs(x, i), xsym::outputs(x + 0.1, 0.5 * i, i * 3));
    const xt::xtensor<float, 1> X{1.0f, 1e8f, -3.3f};
    const xt::xtensor<std::int32_t, 1> I{3, -5, 700000001};
    auto [a, b, c] = f(X, I);
    // Computed in float32, as numpy does for a float32 array and a Python float.
    CHECK(differences(a, {double(1.0f + 0.1f), double(1e8f + 0.1f), double(-3.3f + 0.1f)}, {}, 0, 0) == "");
    CHECK(differences(b, {1.5, -2.5, 350000000.5}, {}, 0, 0) == "");
    CHECK(differences(c, {9, -15, 2100000003}, {}, 0, 0) == "");
  }
  SECTION("comparisons across dtypes compare the promoted values") {
    auto i = xsym::vector<std::int32_t>("i");
    auto x = xsym::vector<float>("x");
    auto f = xsym::function("cmp", xsym::inputs(i, x), xsym::outputs(i > x, i == x, i <= 2.5));
    // As a float32, 16777217 would equal 16777216.
    const xt::xtensor<std::int32_t, 1> I{16777217, 2, 3, -1};
    const xt::xtensor<float, 1> X{16777216.0f, 2.0f, 3.5f, -1.5f};
    auto [gt, eq, le] = f(I, X);
    CHECK(differences(gt, {1, 0, 0, 1}) == "");
    CHECK(differences(eq, {0, 1, 0, 0}) == "");
    CHECK(differences(le, {0, 1, 0, 1}) == "");
  }
}

TEST_CASE("a C++ integer outside an integer tensor's range is an error, not a wrapped constant", "[expr][dtype]") {
  auto x = xsym::vector<std::int32_t>("x");
  auto msg = [](auto&& build) -> std::string {
    try {
      build();
    } catch (const xsym::graph_error& e) {
      return e.what();
    }
    return "";
  };
  const std::string m = msg([&] { (void)(x + std::int64_t(3000000000)); });
  CHECK_THAT(m, Catch::Matchers::Contains("3000000000") && Catch::Matchers::Contains("int32"));
  CHECK_THROWS_AS(x > std::int64_t(3000000000), xsym::graph_error);
  CHECK_THROWS_AS(x == std::int64_t(4294967297), xsym::graph_error);
  CHECK_THROWS_AS(std::int64_t(-2147483649) - x, xsym::graph_error);
  CHECK_THROWS_AS(xsym::switch_(x > 0, x, std::int64_t(4000000000)), xsym::graph_error);
  // The edges of the range still build, and compute what they say.
  auto f = xsym::function("edges", xsym::inputs(x),
                          xsym::outputs(x + std::int64_t(2147483647), x > std::int64_t(-2147483648)));
  auto [a, b] = f(xt::xtensor<std::int32_t, 1>{0, -1});
  CHECK(a(0) == 2147483647);
  CHECK(a(1) == 2147483646);
  CHECK(b(0));
  // int64 tensors take any int64 number.
  auto y = xsym::vector<std::int64_t>("y");
  auto g = xsym::function("wide", xsym::inputs(y), y + std::int64_t(3000000000));
  CHECK(g(xt::xtensor<std::int64_t, 1>{1})(0) == 3000000001);
}
