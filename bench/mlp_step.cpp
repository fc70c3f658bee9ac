// One training step of examples/mlp.cpp's network (784 -> 128 tanh -> 64 relu -> 10, softmax
// and cross-entropy, a minibatch of 128 rows gathered from 60000), float32: xsym against the
// same step written by hand in Eigen (forward, backward, update). Both start from the same
// weights and take the same batches; the program checks that they agree before timing.
// Prints JSON rows as bench.cpp does (bench/run.py reads them).
#include <cmath>
#include <cstdio>
#include <numeric>

#include <Eigen/Dense>

#include "bench_util.hpp"

namespace {
using T = float;
constexpr Eigen::Index rows = 60000, feats = 784, h1 = 128, h2 = 64, classes = 10, batch = 128;
constexpr T lr = T(0.1);
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;

struct weights {
  Mat W1, W2, W3;
  Row b1, b2, b3;
};

// The step by hand: what a careful Eigen user writes (products into preallocated matrices,
// the log-softmax shifted by each row's maximum).
struct eigen_mlp {
  const Mat& X;
  const Mat& Y;
  weights w;
  Mat xb, yb, a1, a2, z3, p, d3, d2, d1, g1, g2, g3;

  eigen_mlp(const Mat& x, const Mat& y, weights w0) : X(x), Y(y), w(std::move(w0)) {}

  T step(const std::int32_t* idx) {
    xb.resize(batch, feats);
    yb.resize(batch, classes);
    for (Eigen::Index i = 0; i < batch; ++i) {
      xb.row(i) = X.row(idx[i]);
      yb.row(i) = Y.row(idx[i]);
    }
    a1.noalias() = xb * w.W1;
    a1 = (a1.rowwise() + w.b1).array().tanh().matrix();
    a2.noalias() = a1 * w.W2;
    a2 = (a2.rowwise() + w.b2).cwiseMax(T(0));
    z3.noalias() = a2 * w.W3;
    z3.rowwise() += w.b3;
    const Eigen::Matrix<T, Eigen::Dynamic, 1> m = z3.rowwise().maxCoeff();
    p = (z3.colwise() - m).array().exp().matrix();
    const Eigen::Matrix<T, Eigen::Dynamic, 1> s = p.rowwise().sum();
    const Eigen::Matrix<T, Eigen::Dynamic, 1> lse = s.array().log().matrix() + m;
    T cost = 0;
    for (Eigen::Index i = 0; i < batch; ++i) cost -= (yb.row(i).array() * (z3.row(i).array() - lse(i))).sum();
    cost /= T(batch);
    // d cost / d z3 = (softmax * sum(y) - y) / batch.
    p.array().colwise() /= s.array();
    d3 = ((p.array().colwise() * yb.rowwise().sum().array() - yb.array()) / T(batch)).matrix();
    g3.noalias() = a2.transpose() * d3;
    d2.noalias() = d3 * w.W3.transpose();
    d2 = (a2.array() > T(0)).select(d2, T(0));
    g2.noalias() = a1.transpose() * d2;
    d1.noalias() = d2 * w.W2.transpose();
    d1 = (d1.array() * (T(1) - a1.array().square())).matrix();
    g1.noalias() = xb.transpose() * d1;
    w.b3 -= lr * d3.colwise().sum();
    w.b2 -= lr * d2.colwise().sum();
    w.b1 -= lr * d1.colwise().sum();
    w.W3 -= lr * g3;
    w.W2 -= lr * g2;
    w.W1 -= lr * g1;
    return cost;
  }
};

template <std::size_t N>
xt::xtensor<T, N> to_xt(const Mat& m) {
  xt::xtensor<T, N> a = xt::empty<T>(N == 1 ? std::vector<std::size_t>{static_cast<std::size_t>(m.size())}
                                             : std::vector<std::size_t>{static_cast<std::size_t>(m.rows()),
                                                                        static_cast<std::size_t>(m.cols())});
  std::copy(m.data(), m.data() + m.size(), a.data());
  return a;
}
}  // namespace

int main() {
  std::mt19937 rng(2026);
  std::normal_distribution<T> noise(T(0), T(1.5)), proto(T(0), T(0.15));
  Mat prototypes(classes, feats);
  for (Eigen::Index k = 0; k < prototypes.size(); ++k) prototypes.data()[k] = proto(rng);
  Mat X(rows, feats), Y = Mat::Zero(rows, classes);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(classes) - 1);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const int c = pick(rng);
    Y(i, c) = 1;
    for (Eigen::Index j = 0; j < feats; ++j) X(i, j) = prototypes(c, j) + noise(rng);
  }
  auto init = [&](Eigen::Index r, Eigen::Index c) {
    std::normal_distribution<T> n(T(0), T(1.0 / std::sqrt(double(r))));
    Mat m(r, c);
    for (Eigen::Index k = 0; k < m.size(); ++k) m.data()[k] = n(rng);
    return m;
  };
  const weights w0{init(feats, h1), init(h1, h2), init(h2, classes), Row::Zero(h1), Row::Zero(h2), Row::Zero(classes)};

  // xsym: examples/mlp.cpp's graph.
  auto Xs = xsym::shared(to_xt<2>(X), "X");
  auto Ys = xsym::shared(to_xt<2>(Y), "Y");
  auto W1 = xsym::shared(to_xt<2>(w0.W1), "W1"), W2 = xsym::shared(to_xt<2>(w0.W2), "W2"), W3 = xsym::shared(to_xt<2>(w0.W3), "W3");
  auto b1 = xsym::shared(to_xt<1>(w0.b1), "b1"), b2 = xsym::shared(to_xt<1>(w0.b2), "b2"), b3 = xsym::shared(to_xt<1>(w0.b3), "b3");
  auto idx = xsym::vector<std::int32_t>("batch");
  auto xb = xsym::take(Xs, idx);
  auto yb = xsym::take(Ys, idx);
  auto logits = dot(xsym::relu(dot(tanh(dot(xb, W1) + b1), W2) + b2), W3) + b3;
  auto cost = mean(-sum(yb * xsym::log_softmax(logits), 1));
  auto [g1, gb1, g2, gb2, g3, gb3] = xsym::grad(cost, W1, b1, W2, b2, W3, b3);
  auto train = xsym::function(
      "train", xsym::inputs(idx), cost,
      xsym::updates(xsym::update(W1, W1 - lr * g1), xsym::update(b1, b1 - lr * gb1), xsym::update(W2, W2 - lr * g2),
                    xsym::update(b2, b2 - lr * gb2), xsym::update(W3, W3 - lr * g3), xsym::update(b3, b3 - lr * gb3)));
  eigen_mlp by_hand(X, Y, w0);

  // The batches: a shuffled epoch's worth, taken in turn by both.
  std::vector<std::int32_t> order(static_cast<std::size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const std::size_t n_batches = order.size() / batch;
  std::vector<xt::xtensor<std::int32_t, 1>> batches;
  for (std::size_t b = 0; b < n_batches; ++b) {
    xt::xtensor<std::int32_t, 1> one = xt::empty<std::int32_t>({static_cast<std::size_t>(batch)});
    std::copy(order.begin() + static_cast<std::ptrdiff_t>(b * batch), order.begin() + static_cast<std::ptrdiff_t>((b + 1) * batch),
              one.begin());
    batches.push_back(std::move(one));
  }

  // The same first steps must give the same costs and weights (to float32 rounding).
  for (std::size_t b = 0; b < 3; ++b) {
    const double cx = train(batches[b]), ce = by_hand.step(batches[b].data());
    if (std::abs(cx - ce) > 1e-4 * std::abs(ce)) {
      std::fprintf(stderr, "mlp_step: xsym and Eigen disagree at step %zu: cost %.7g against %.7g\n", b, cx, ce);
      return 1;
    }
  }
  const auto w1 = W1.get_value();
  double worst = 0;
  for (Eigen::Index k = 0; k < by_hand.w.W1.size(); ++k)
    worst = std::max(worst, std::abs(double(w1.data()[k]) - double(by_hand.w.W1.data()[k])));
  if (worst > 1e-5) {
    std::fprintf(stderr, "mlp_step: W1 differs by %.3g after three steps\n", worst);
    return 1;
  }

  const int per = 50;
  std::size_t next_x = 0, next_e = 0;
  const auto t = bench::measure_round_robin(
      {[&] {
         for (int s = 0; s < per; ++s) (void)train(batches[next_x++ % n_batches]);
       },
       [&] {
         for (int s = 0; s < per; ++s) (void)by_hand.step(batches[next_e++ % n_batches].data());
       }},
      15, per);
  bench::emit("mlp_step", "xsym", "float32", batch, t[0]);
  bench::emit("mlp_step", "eigen", "float32", batch, t[1]);
  return 0;
}
