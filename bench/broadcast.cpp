// Programs beyond the seeds, float32, no bar: broadcasts and reductions against Eigen and the
// heat equation's step against its hand loop.
//   rowvec     x + b, b a row repeated over x's rows    (Eigen: X.rowwise() + b)
//   colvec     x * u[:, None], a column along the rows  (Eigen: X.array().colwise() * u.array())
//   center     x - mean(x, 1)[:, None], rows centred    (Eigen: X.colwise() - X.rowwise().mean())
//   colexp     exp(x - u[:, None]), a typed tree        (Eigen: (X.colwise() - u).array().exp())
//   rowsum     sum(x, 1)                                 (Eigen: X.rowwise().sum())
//   colsum     sum(x, 0), the bias gradient's shape      (Eigen: X.colwise().sum())
//   rowmax     max(x, 1)                                 (Eigen: X.rowwise().maxCoeff())
//   colmax     max(x, 0)                                 (Eigen: X.colwise().maxCoeff())
//   softmax    xsym::softmax(x, 1)                       (Eigen: the four steps by hand, its exp scalar)
//   argmax     argmax(x, 1), each row's first maximum    (Eigen: maxCoeff(&index) row by row)
//   tadd       transpose(x) + y, an operand across rows  (Eigen: X.transpose() + Y)
//   mse        mean(sqr(x - z)), reduced as computed     (Eigen: (X - Z).squaredNorm() / size)
//   rowdot     sum(x * z, 1), each row's dot product     (Eigen: (X.array() * Z.array()).rowwise().sum())
//   colsq      sum(sqr(x), 0), each column's squares     (Eigen: X.array().square().colwise().sum())
//   heat_step  set_subtensor(u[1:-1, 1:-1], stencil), examples/heat_equation.cpp's update,
//              against the hand loop with two buffers ("loop")
// xsym writes into preallocated results (`into`), Eigen into preallocated matrices. Each
// result is checked against the peer's before timing. Prints JSON rows as bench.cpp does;
// size is rows x cols (the grid's side for heat_step).
#include <cmath>
#include <cstdio>

#include <Eigen/Dense>

#include "bench_util.hpp"

namespace {
using T = float;
std::string only;  // argv[1]: run only the benchmarks whose name it is

bool wanted(const char* name) { return only.empty() || only == name; }
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;
using Col = Eigen::Matrix<T, Eigen::Dynamic, 1>;

template <class A, class W>
double worst_difference(const A& got, const W& want) {
  double worst = 0;
  for (Eigen::Index k = 0; k < want.size(); ++k)
    worst = std::max(worst, std::abs(double(got.data()[k]) - double(want.data()[k])));
  return worst;
}

void broadcasts(std::size_t rows, std::size_t cols, std::mt19937& rng) {
  std::normal_distribution<T> n;
  const auto r = static_cast<Eigen::Index>(rows), c = static_cast<Eigen::Index>(cols);
  Mat X(r, c);
  Row b(c);
  Col u(r);
  for (Eigen::Index k = 0; k < X.size(); ++k) X.data()[k] = n(rng);
  for (Eigen::Index k = 0; k < c; ++k) b(k) = n(rng);
  for (Eigen::Index k = 0; k < r; ++k) u(k) = n(rng);
  xt::xtensor<T, 2> xx = xt::empty<T>({rows, cols}), out = xt::empty<T>({rows, cols});
  xt::xtensor<T, 1> xb = xt::empty<T>({cols}), xu = xt::empty<T>({rows});
  std::copy(X.data(), X.data() + X.size(), xx.data());
  std::copy(b.data(), b.data() + c, xb.data());
  std::copy(u.data(), u.data() + r, xu.data());

  auto x = xsym::matrix<T>("x");
  auto bv = xsym::vector<T>("b"), uv = xsym::vector<T>("u");
  auto rowvec = xsym::function("rowvec", xsym::inputs(x, bv), x + bv);
  auto colvec = xsym::function("colvec", xsym::inputs(x, uv), x * xsym::dimshuffle(uv, 0, 'x'));
  auto center = xsym::function("center", xsym::inputs(x), x - xsym::dimshuffle(mean(x, 1), 0, 'x'));
  auto colexp = xsym::function("colexp", xsym::inputs(x, uv), exp(x - xsym::dimshuffle(uv, 0, 'x')));

  auto rowsum = xsym::function("rowsum", xsym::inputs(x), sum(x, 1));
  auto colsum = xsym::function("colsum", xsym::inputs(x), sum(x, 0));
  auto rowmax = xsym::function("rowmax", xsym::inputs(x), max(x, 1));
  auto colmax = xsym::function("colmax", xsym::inputs(x), max(x, 0));
  auto softmax = xsym::function("softmax", xsym::inputs(x), xsym::softmax(x, 1));
  auto argmax = xsym::function("argmax", xsym::inputs(x), xsym::argmax(x, 1));
  auto yt = xsym::matrix<T>("y");
  auto tadd = xsym::function("tadd", xsym::inputs(x, yt), xsym::transpose(x) + yt);
  auto zv = xsym::matrix<T>("z");
  auto mse = xsym::function("mse", xsym::inputs(x, zv), mean(sqr(x - zv)));
  auto rowdot = xsym::function("rowdot", xsym::inputs(x, zv), sum(x * zv, 1));
  auto colsq = xsym::function("colsq", xsym::inputs(x), sum(sqr(x), 0));

  Mat E(r, c);
  Col Er(r);
  Row Ec(c);
  xt::xtensor<T, 1> out_r = xt::empty<T>({rows}), out_c = xt::empty<T>({cols});
  const double size = static_cast<double>(rows * cols);
  const int per = std::max(1, static_cast<int>(2e6 / size));
  const int repeats = 21;
  // worst(): the largest difference between xsym's result and the peer's, after one call each.
  auto run = [&](const char* name, auto&& xsym_call, auto&& eigen_call, auto&& worst, double bound) {
    if (!wanted(name)) return;
    xsym_call();
    eigen_call();
    const double w = worst();
    if (!(w <= bound)) {
      std::fprintf(stderr, "broadcast: %s %zu x %zu: xsym and Eigen differ by %.3g\n", name, rows, cols, w);
      std::exit(1);
    }
    const auto t = bench::measure_round_robin(
        {[&] {
           for (int k = 0; k < per; ++k) xsym_call();
         },
         [&] {
           for (int k = 0; k < per; ++k) eigen_call();
         }},
        repeats, per);
    const std::string extra = ", \"rows\": " + std::to_string(rows) + ", \"cols\": " + std::to_string(cols);
    bench::emit(name, "xsym", "float32", size, t[0], extra.c_str());
    bench::emit(name, "eigen", "float32", size, t[1], extra.c_str());
  };
  auto matrix = [&] { return worst_difference(out, E); };
  auto per_row = [&] { return worst_difference(out_r, Er); };
  auto per_col = [&] { return worst_difference(out_c, Ec); };
  run("rowvec", [&] { rowvec.into(out)(xx, xb); }, [&] { E.noalias() = X.rowwise() + b; }, matrix, 0.0);
  run("colvec", [&] { colvec.into(out)(xx, xu); }, [&] { E.array() = X.array().colwise() * u.array(); }, matrix, 0.0);
  // The means are sums in another order: a few ulps of the rows' magnitudes.
  run("center", [&] { center.into(out)(xx); }, [&] { E.noalias() = X.colwise() - X.rowwise().mean(); }, matrix, 1e-5);
  // Two exp implementations: a few ulps of values up to about e^8.
  run("colexp", [&] { colexp.into(out)(xx, xu); }, [&] { E.array() = (X.colwise() - u).array().exp(); }, matrix, 1e-2);
  // Sums in another order (xsym's in double): a few ulps of sums up to about 4 sqrt(rows).
  const double sum_bound = 1e-6 * static_cast<double>(std::max(rows, cols));
  run("rowsum", [&] { rowsum.into(out_r)(xx); }, [&] { Er.noalias() = X.rowwise().sum(); }, per_row, sum_bound);
  run("colsum", [&] { colsum.into(out_c)(xx); }, [&] { Ec.noalias() = X.colwise().sum(); }, per_col, sum_bound);
  run("rowmax", [&] { rowmax.into(out_r)(xx); }, [&] { Er.noalias() = X.rowwise().maxCoeff(); }, per_row, 0.0);
  run("colmax", [&] { colmax.into(out_c)(xx); }, [&] { Ec.noalias() = X.colwise().maxCoeff(); }, per_col, 0.0);
  run("softmax", [&] { softmax.into(out)(xx); },
      [&] {
        Er.noalias() = X.rowwise().maxCoeff();
        E.array() = (X.colwise() - Er).array().exp();
        Er.noalias() = E.rowwise().sum();
        E.array().colwise() /= Er.array();
      },
      matrix, 1e-6);
  xt::xtensor<std::int64_t, 1> out_i = xt::empty<std::int64_t>({rows});
  Eigen::Matrix<Eigen::Index, Eigen::Dynamic, 1> Ei(r);
  run("argmax", [&] { argmax.into(out_i)(xx); },
      [&] {
        for (Eigen::Index k = 0; k < r; ++k) X.row(k).maxCoeff(&Ei(k));
      },
      [&] {
        double w = 0;
        for (Eigen::Index k = 0; k < r; ++k) w = std::max(w, std::abs(double(out_i(k)) - double(Ei(k))));
        return w;
      },
      0.0);
  Mat Y(c, r), Et(c, r);
  for (Eigen::Index k = 0; k < Y.size(); ++k) Y.data()[k] = n(rng);
  xt::xtensor<T, 2> yy = xt::empty<T>({cols, rows}), out_t = xt::empty<T>({cols, rows});
  std::copy(Y.data(), Y.data() + Y.size(), yy.data());
  run("tadd", [&] { tadd.into(out_t)(xx, yy); }, [&] { Et.noalias() = X.transpose() + Y; },
      [&] { return worst_difference(out_t, Et); }, 0.0);
  Mat Z(r, c);
  for (Eigen::Index k = 0; k < Z.size(); ++k) Z.data()[k] = n(rng);
  xt::xtensor<T, 2> zz = xt::empty<T>({rows, cols});
  std::copy(Z.data(), Z.data() + Z.size(), zz.data());
  xt::xtensor<T, 0> out_s = xt::xtensor<T, 0>(T(0));
  T Es = 0;
  // Eigen sums in float: its error, a few ulps of the mean square (about 2).
  run("mse", [&] { mse.into(out_s)(xx, zz); }, [&] { Es = (X - Z).squaredNorm() / T(size); },
      [&] { return std::abs(double(out_s()) - double(Es)); }, 1e-4);
  run("rowdot", [&] { rowdot.into(out_r)(xx, zz); }, [&] { Er.noalias() = (X.array() * Z.array()).rowwise().sum().matrix(); },
      per_row, sum_bound);
  run("colsq", [&] { colsq.into(out_c)(xx); }, [&] { Ec.noalias() = X.array().square().colwise().sum().matrix(); }, per_col,
      4 * sum_bound);
}

void heat_step(std::size_t n, int steps) {
  const T r = T(0.2);
  xt::xtensor<T, 2> start = xt::zeros<T>({n, n});
  for (std::size_t i = n / 4; i < 3 * n / 4; ++i)
    for (std::size_t j = n / 4; j < 3 * n / 4; ++j) start(i, j) = T(100);
  using xsym::range;
  using xsym::placeholders::_;
  auto u = xsym::shared(start, "u");
  const auto inner = u(range(1, -1), range(1, -1));
  const auto up = u(range(_, -2), range(1, -1)), down = u(range(2, _), range(1, -1));
  const auto left = u(range(1, -1), range(_, -2)), right = u(range(1, -1), range(2, _));
  auto next = xsym::set_subtensor(inner, inner + r * (up + down + left + right - T(4) * inner));
  auto step = xsym::function("step", xsym::inputs(), xsym::outputs(), xsym::updates(xsym::update(u, next)));
  xt::xtensor<T, 2> a = start, b = start;
  // Row pointers marked restrict: the loop a careful C++ programmer writes, vectorised.
  auto loop = [&] {
    const T* __restrict from = a.data();
    T* __restrict to = b.data();
    for (std::size_t i = 1; i + 1 < n; ++i) {
      const T *up = from + (i - 1) * n, *mid = from + i * n, *down = from + (i + 1) * n;
      T* row = to + i * n;
      for (std::size_t j = 1; j + 1 < n; ++j)
        row[j] = mid[j] + r * (up[j] + down[j] + mid[j - 1] + mid[j + 1] - T(4) * mid[j]);
    }
    std::swap(a, b);
  };
  // Both grids after the same first steps: the same sums in the same order, up to contraction.
  for (int s = 0; s < 3; ++s) {
    step();
    loop();
  }
  const xt::xtensor<T, 2> got = u.get_value();
  double worst = 0;
  for (std::size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::abs(double(got.data()[k]) - double(a.data()[k])));
  if (!(worst <= 100.0 * 64 * 1.2e-7)) {
    std::fprintf(stderr, "broadcast: heat_step %zu: xsym and the loop differ by %.3g\n", n, worst);
    std::exit(1);
  }
  const auto t = bench::measure_round_robin(
      {[&] {
         for (int s = 0; s < steps; ++s) step();
       },
       [&] {
         for (int s = 0; s < steps; ++s) loop();
       }},
      15, steps);
  bench::emit("heat_step", "xsym", "float32", static_cast<double>(n), t[0]);
  bench::emit("heat_step", "loop", "float32", static_cast<double>(n), t[1]);
}
}  // namespace

int main(int argc, char** argv) try {
  if (argc > 1) only = argv[1];
  std::mt19937 rng(7);
  for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1000, 3}, {1000, 16}, {1000, 48}, {100, 160}, {16, 1000}, {10000, 64}})
    broadcasts(rows, cols, rng);
  for (auto [n, steps] : {std::pair<std::size_t, int>{128, 100}, {256, 50}, {512, 20}, {1024, 5}})
    if (wanted("heat_step")) heat_step(n, steps);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "broadcast: %s\n", e.what());
  return 1;
}
