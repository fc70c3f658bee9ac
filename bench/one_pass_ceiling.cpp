// What one pass over X can reach on the seeds' float32 step (400 x 784) on this machine: the
// step written by hand with the gradient's elementwise work compiled into a loop over blocks of
// 4 rows, against Eigen's step (eigen_logreg.hpp), paired in one process. Not xsym: the target
// of OnePassGemv's blocks (one_pass_blocks, the lag below), which xsym reaches with cxx=g++
// compiling g and would without it from a kernel of the gradient's typed tree (issue "One pass
// over X", docs/performance.md). Prints each variant's median time and its median ratio to Eigen's.
//
//   lag:    block b's row product and block b-1's column product in one loop over the columns
//           (b-1's rows from L1 while b's come in);
//   no lag: block b's row product, its g, then its column product from L1.
//
// Usage: bench_one_pass_ceiling [rows (a multiple of 4, default 400)]
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "eigen_logreg.hpp"

namespace {

using T = float;
using B = xsimd::batch<T>;
constexpr int lanes = static_cast<int>(B::size);
template <class U>
using aligned_vector = std::vector<U, xsimd::aligned_allocator<U, 64>>;

struct one_pass_step {
  const T* X;
  const T* Y;
  int m, k;
  aligned_vector<T> w, sums, u, p, xent;
  std::vector<char> pred;
  T b = 0;

  one_pass_step(const T* x, const T* y, int rows, int cols)
      : X(x), Y(y), m(rows), k(cols), w(cols), sums(cols), u(rows), p(rows), xent(rows), pred(rows) {}

  // g = (sigmoid(u) - y) / m for rows r0..r0+3, inline (the gradient's Composite, compiled),
  // on one 4-lane batch where there is one.
  [[gnu::always_inline]] void g4(int r0, T* g) const {
#if XSIMD_WITH_SSE4_2
    using B4 = xsimd::batch<T, xsimd::sse4_2>;
    const B4 one(T(1)), z = B4::load_unaligned(&u[r0]);
    ((one / (one + xsimd::exp(-z)) - B4::load_unaligned(Y + r0)) / B4(T(m))).store_unaligned(g);
#else
    for (int j = 0; j < 4; ++j) g[j] = (T(1) / (T(1) + std::exp(-u[r0 + j])) - Y[r0 + j]) / T(m);
#endif
  }
  // sums[e..] += the 4 rows at q, columns e.., times g0..g3.
  [[gnu::always_inline]] void add_rows(int e, const T* q, B g0, B g1, B g2, B g3) {
    B s = B::load_aligned(&sums[e]);
    s = xsimd::fma(B::load_unaligned(q + e), g0, s);
    s = xsimd::fma(B::load_unaligned(q + k + e), g1, s);
    s = xsimd::fma(B::load_unaligned(q + 2 * k + e), g2, s);
    s = xsimd::fma(B::load_unaligned(q + 3 * k + e), g3, s);
    s.store_aligned(&sums[e]);
  }
  // The row product of rows r0..r0+3, and with `q` the column product of the 4 rows at q with
  // coefficients g, in the same loop over the columns.
  template <bool Column>
  [[gnu::always_inline]] void rows(int r0, const T* q, const T* g) {
    const T* a = X + static_cast<std::size_t>(r0) * k;
    B c0(T(0)), c1(T(0)), c2(T(0)), c3(T(0)), g0(T(0)), g1(T(0)), g2(T(0)), g3(T(0));
    if (Column) g0 = B(g[0]), g1 = B(g[1]), g2 = B(g[2]), g3 = B(g[3]);
    for (int e = 0; e < k; e += lanes) {
      const B x = B::load_aligned(&w[e]);
      c0 = xsimd::fma(B::load_unaligned(a + e), x, c0);
      c1 = xsimd::fma(B::load_unaligned(a + k + e), x, c1);
      c2 = xsimd::fma(B::load_unaligned(a + 2 * k + e), x, c2);
      c3 = xsimd::fma(B::load_unaligned(a + 3 * k + e), x, c3);
      if (Column) add_rows(e, q, g0, g1, g2, g3);
    }
    u[r0] = xsimd::hadd(c0) + b;
    u[r0 + 1] = xsimd::hadd(c1) + b;
    u[r0 + 2] = xsimd::hadd(c2) + b;
    u[r0 + 3] = xsimd::hadd(c3) + b;
  }
  void column(const T* q, const T* g) {
    const B g0(g[0]), g1(g[1]), g2(g[2]), g3(g[3]);
    for (int e = 0; e < k; e += lanes) add_rows(e, q, g0, g1, g2, g3);
  }

  template <bool Lag>
  void step() {
    std::fill(sums.begin(), sums.end(), T(0));
    T g[4];
    for (int r0 = 0; r0 < m; r0 += 4) {
      const T* a = X + static_cast<std::size_t>(r0) * k;
      if (Lag && r0 > 0) rows<true>(r0, a - 4 * k, g);
      else rows<false>(r0, nullptr, nullptr);
      g4(r0, g);
      if (!Lag) column(a, g);
    }
    if (Lag) column(X + static_cast<std::size_t>(m - 4) * k, g);
    // The Composite's other outputs over all rows, and the updates (as eigen_logreg's step).
    const B one(T(1)), zero(T(0)), rows_b = B(T(m));
    B gbs(T(0));
    int r = 0;
    for (; r + lanes <= m; r += lanes) {
      const B z = B::load_aligned(&u[r]), y = B::load_unaligned(Y + r), l = xsimd::log1p(xsimd::exp(-xsimd::abs(z)));
      const B pr = one / (one + xsimd::exp(-z));
      pr.store_aligned(&p[r]);
      (y * (xsimd::max(-z, zero) + l) + (one - y) * (xsimd::max(z, zero) + l)).store_aligned(&xent[r]);
      gbs += (pr - y) / rows_b;
    }
    T gb = xsimd::hadd(gbs);
    for (; r < m; ++r) {
      const T z = u[r], y = Y[r], l = std::log1p(std::exp(-std::abs(z)));
      p[r] = T(1) / (T(1) + std::exp(-z));
      xent[r] = y * (std::max(-z, T(0)) + l) + (T(1) - y) * (std::max(z, T(0)) + l);
      gb += (p[r] - y) / T(m);
    }
    for (int i = 0; i < m; ++i) pred[i] = p[i] > T(0.5);
    const B decay(T(1 - 0.01 * 0.02)), lr(T(0.01));
    for (int e = 0; e < k; e += lanes)
      (decay * B::load_aligned(&w[e]) - lr * B::load_aligned(&sums[e])).store_aligned(&w[e]);
    b -= T(0.01) * gb;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 1 ? std::atoi(argv[1]) : 400, k = 784;
  if (m < 4 || m % 4 != 0 || k % lanes != 0) {
    std::fprintf(stderr, "bench_one_pass_ceiling: rows must be a positive multiple of 4 (got %d)\n", m);
    return 2;
  }
  std::mt19937 rng(1);
  std::normal_distribution<T> normal;
  aligned_vector<T> X(static_cast<std::size_t>(m) * k), Y(m), w0(k);
  for (auto& v : X) v = normal(rng);
  for (auto& v : Y) v = static_cast<T>(rng() % 2);
  for (auto& v : w0) v = normal(rng) * T(0.05);
  bench::eigen_logreg<T> eigen(X.data(), Y.data(), m, k);
  eigen.reset(w0.data());
  one_pass_step lag(X.data(), Y.data(), m, k), no_lag(X.data(), Y.data(), m, k);
  std::copy(w0.begin(), w0.end(), lag.w.begin());
  std::copy(w0.begin(), w0.end(), no_lag.w.begin());
  // Same results first: 20 steps each, w against Eigen's.
  for (int s = 0; s < 20; ++s) eigen.step(), lag.step<true>(), no_lag.step<false>();
  double err = 0, scale = 0;
  for (int e = 0; e < k; ++e) {
    scale = std::max(scale, static_cast<double>(std::abs(eigen.w[e])));
    err = std::max({err, static_cast<double>(std::abs(eigen.w[e] - lag.w[e])),
                    static_cast<double>(std::abs(eigen.w[e] - no_lag.w[e]))});
  }
  if (!(err <= 1e-4 * std::max(1.0, scale))) {
    std::fprintf(stderr, "bench_one_pass_ceiling: w differs from Eigen's by %g after 20 steps\n", err);
    return 1;
  }
  // Rounds of 200 steps: Eigen, lag, no lag, Eigen; each ratio against the two Eigen runs around it.
  const int rounds = 21, calls = 200;
  auto per_call = [&](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  };
  std::vector<double> te, tl, tn, rl, rn;
  for (int r = 0; r < rounds; ++r) {
    const double e1 = per_call([&] { eigen.step(); });
    const double l = per_call([&] { lag.step<true>(); });
    const double n = per_call([&] { no_lag.step<false>(); });
    const double e = (e1 + per_call([&] { eigen.step(); })) / 2;
    te.push_back(e), tl.push_back(l), tn.push_back(n), rl.push_back(l / e), rn.push_back(n / e);
  }
  std::printf("float32, %d x %d, medians of %d rounds of %d steps\n", m, k, rounds, calls);
  std::printf("  Eigen's step          %8.2f us\n", median(te) * 1e6);
  std::printf("  one pass, lag         %8.2f us  %.3f of Eigen's\n", median(tl) * 1e6, median(rl));
  std::printf("  one pass, no lag      %8.2f us  %.3f of Eigen's\n", median(tn) * 1e6, median(rn));
}
