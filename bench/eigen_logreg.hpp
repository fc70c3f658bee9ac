// The seeds' training step in Eigen, written as a careful user would: two matrix-vector
// products per step, the cross-entropy in the softplus forms xsym's stabilised graph computes.
// The baseline of bench.cpp (round-robin) and gbench_logreg.cpp (Google Benchmark).
#ifndef XSYM_BENCH_EIGEN_LOGREG_HPP
#define XSYM_BENCH_EIGEN_LOGREG_HPP

#include <Eigen/Dense>

namespace bench {

template <class T>
struct eigen_logreg {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  Eigen::Map<const Mat> X;
  Eigen::Map<const Vec> Y;
  Vec w, z, p, g, xent;
  Eigen::Array<bool, Eigen::Dynamic, 1> pred;
  T b = 0;

  eigen_logreg(const T* x, const T* y, Eigen::Index n, Eigen::Index feats)
      : X(x, n, feats), Y(y, n), w(feats), z(n), p(n), g(n), xent(n), pred(n) {}

  void reset(const T* w0) {
    w = Eigen::Map<const Vec>(w0, X.cols());
    b = 0;
  }

  void step() {
    const auto n = static_cast<T>(X.rows());
    z.noalias() = X * w;
    z.array() += b;
    p = (T(1) / (T(1) + (-z.array()).exp())).matrix();
    pred = p.array() > T(0.5);
    xent = (Y.array() * ((-z.array()).max(T(0)) + (-(z.array().abs())).exp().log1p()) +
            (T(1) - Y.array()) * (z.array().max(T(0)) + (-(z.array().abs())).exp().log1p()))
               .matrix();
    g = ((p - Y) / n);
    const T gb = g.sum();
    w = T(1 - 0.01 * 0.02) * w;
    w.noalias() -= T(0.01) * (X.transpose() * g);
    b -= T(0.01) * gb;
  }
};

}  // namespace bench

#endif
