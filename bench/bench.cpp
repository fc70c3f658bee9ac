// xsym's benchmarks against hand-written Eigen, xtensor and plain loops, measured in one run.
// Prints one JSON object per result on stdout; bench/run.py collects them into
// bench/results/latest.json and prints the table with the bars.
//
// Built twice: as bench_xsym (impl names xsym, xsym_profiled) and with XSYM_PROFILING=0 as
// bench_xsym_noprof (impl name xsym_noprof, the xsym rows only).
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>
#include <xsym/xsym.hpp>

#include "bench_util.hpp"
#include "call_overhead.hpp"
#include "eigen_logreg.hpp"

namespace {

using namespace bench;

// ---- logistic regression: seconds per training step ---------------------------------------
// X starts `offset` elements past a cache line: 0, or 4 floats as xtensor's default allocator
// (16-byte aligned, where this bench's XTENSOR_USE_XSIMD gives 64) leaves a large matrix here.
template <class T>
struct logreg_data {
  static constexpr int feats = 784;
  int n;  // rows: the seeds' 400, or a data set that does not fit the caches
  using matrix_view = decltype(xt::adapt(static_cast<T*>(nullptr), std::size_t{}, xt::no_ownership(),
                                         std::array<std::size_t, 2>{}));
  std::vector<T, xsimd::aligned_allocator<T, 64>> storage;
  matrix_view X;
  xt::xtensor<T, 1> Y;
  xt::xtensor<T, 1> w0 = xt::empty<T>({feats});
  explicit logreg_data(std::size_t offset, int rows = 400, double w_scale = 1)
      : n(rows),
        storage(std::size_t(n) * feats + 16),
        X(xt::adapt(storage.data() + offset, std::size_t(n) * feats, xt::no_ownership(),
                    std::array<std::size_t, 2>{std::size_t(n), std::size_t(feats)})),
        Y(xt::empty<T>({std::size_t(n)})) {
    std::mt19937 rng(42);
    std::normal_distribution<double> normal;
    std::bernoulli_distribution coin(0.5);
    for (auto& v : X) v = static_cast<T>(normal(rng));
    for (auto& v : Y) v = coin(rng) ? T(1) : T(0);
    for (auto& v : w0) v = static_cast<T>(w_scale * normal(rng));
  }
};

// `saturated`: weights 4 times larger, so that most rows' sigmoids saturate and their gradients
// (times the learning rate) are subnormal numbers, as in training from a large initialisation.
template <class T>
void bench_logreg(const char* dtype, int steps, std::size_t offset = 0, bool saturated = false) {
  // The misaligned and the saturated cases compare xsym and Eigen only.
  const bool full = offset == 0 && !saturated;
  const char* name = saturated ? "logreg_saturated" : full ? "logreg" : "logreg_offset16";
  logreg_data<T> d(offset, 400, saturated ? 4.0 : 1.0);
  const int n = d.n, feats = logreg_data<T>::feats;
  std::vector<T> final_w;  // every implementation must end at the same weights
  auto compare = [&](const T* w, const char* who) {
    if (final_w.empty()) {
      final_w.assign(w, w + feats);
      return;
    }
    double err = 0, scale = 0;
    for (int i = 0; i < feats; ++i) {
      err = std::max(err, std::abs(double(w[i]) - double(final_w[i])));
      scale = std::max(scale, std::abs(double(final_w[i])));
    }
    check(err <= (sizeof(T) == 4 ? 1e-2 : 1e-8) * std::max(1.0, scale), who);
  };

  // Every implementation is registered, then timed round-robin (one run of each per round):
  // this VM drifts by tens of percent over seconds, and interleaving spreads that drift over
  // all of them instead of favouring whichever ran in a quiet moment.
  struct runner {
    std::string impl;
    std::function<void()> run;      // `steps` training steps from the initial weights
    std::function<void()> finish;   // checks the final weights
  };
  std::vector<runner> runners;

  // xsym, then profiled, then with openmp=True (OMP_NUM_THREADS threads; needs -fopenmp), then
  // with its fused programs compiled by cxx.
  for (int variant : {0, 1, 2, 3}) {
    const bool profiled = variant == 1, openmp = variant == 2, cxx = variant == 3;
    if ((profiled || cxx) && noprof_build()) continue;
    if (openmp && !xsym::cpu::openmp_compiled_in) continue;
    if (!full && variant != 0) continue;
    xsym::config.profile = false;
    xsym::config.openmp = openmp;
    xsym::config.cxx = cxx ? bench_cxx() : "";
    const auto setup = seeds_train(d.w0, bench_profile(profiled));
    auto train = std::get<0>(setup);
    auto w = std::get<1>(setup);
    auto b = std::get<2>(setup);
    // The outputs go into preallocated arrays, as Eigen's and xtensor's below do.
    runners.push_back({openmp ? "xsym_openmp" : cxx ? "xsym_cxx" : xsym_impl(profiled),
                       [&d, w, b, train, steps, pred = xt::xtensor<bool, 1>::from_shape({std::size_t(n)}),
                        xent_out = xt::xtensor<T, 1>::from_shape({std::size_t(n)})]() mutable {
                         w.set_value(d.w0);
                         b.set_value(T(0));
                         for (int i = 0; i < steps; ++i) train.into(pred, xent_out)(d.X, d.Y);
                       },
                       [&compare, w] { compare(w.get_value().data(), "xsym logreg"); }});
    xsym::config.openmp = false;
    xsym::config.cxx = "";
  }

  // The gradient written by hand (bench_util.hpp's hand_train), as Eigen's step computes it.
  if (full && !noprof_build()) {
    xsym::config.profile = false;
    const auto setup = hand_train(d.w0, static_cast<std::size_t>(n));
    auto train = std::get<0>(setup);
    auto w = std::get<1>(setup);
    auto b = std::get<2>(setup);
    runners.push_back({"xsym_hand",
                       [&d, w, b, train, steps, pred = xt::xtensor<bool, 1>::from_shape({std::size_t(n)}),
                        xent_out = xt::xtensor<T, 1>::from_shape({std::size_t(n)})]() mutable {
                         w.set_value(d.w0);
                         b.set_value(T(0));
                         for (int i = 0; i < steps; ++i) train.into(pred, xent_out)(d.X, d.Y);
                       },
                       [&compare, w] { compare(w.get_value().data(), "xsym logreg, gradient by hand"); }});
  }

  // Eigen (eigen_logreg.hpp).
  eigen_logreg<T> eig(d.X.data(), d.Y.data(), n, feats);
  if (!noprof_build()) {
    runners.push_back({"eigen", [&] {
      eig.reset(d.w0.data());
      for (int i = 0; i < steps; ++i) eig.step();
    }, [&] { compare(eig.w.data(), "eigen logreg"); }});
  }
  // xtensor, with its xsimd-vectorised expressions and a hand loop for the products.
  xt::xtensor<T, 1> xw = d.w0, xz = xt::empty<T>({n}), xp = xt::empty<T>({n}), xg = xt::empty<T>({n}),
                    xxent = xt::empty<T>({n}), xgw = xt::empty<T>({feats});
  xt::xtensor<bool, 1> xpred = xt::empty<bool>({n});
  T xb = 0;
  if (!noprof_build() && full) {
    runners.push_back({"xtensor", [&, &w = xw, &z = xz, &p = xp, &g = xg, &xent = xxent, &gw = xgw, &pred = xpred,
                                   &b = xb] {
      w = d.w0;
      b = 0;
      for (int i = 0; i < steps; ++i) {
        for (int r = 0; r < n; ++r) {
          T s = 0;
          const T* row = d.X.data() + r * feats;
          for (int c = 0; c < feats; ++c) s += row[c] * w(c);
          z(r) = s + b;
        }
        xt::noalias(p) = T(1) / (T(1) + xt::exp(-z));
        xt::noalias(pred) = p > T(0.5);
        xt::noalias(xent) = d.Y * (xt::maximum(-z, T(0)) + xt::log1p(xt::exp(-xt::abs(z)))) +
                            (T(1) - d.Y) * (xt::maximum(z, T(0)) + xt::log1p(xt::exp(-xt::abs(z))));
        xt::noalias(g) = (p - d.Y) / T(n);
        const T gb = xt::sum(g)();
        gw.fill(0);
        for (int r = 0; r < n; ++r) {
          const T* row = d.X.data() + r * feats;
          const T gr = g(r);
          for (int c = 0; c < feats; ++c) gw(c) += row[c] * gr;
        }
        xt::noalias(w) = T(1 - 0.01 * 0.02) * w - T(0.01) * gw;
        b -= T(0.01) * gb;
      }
    }, [&] { compare(xw.data(), "xtensor logreg"); }});
  }

  for (auto& r : runners) r.run();  // warm-up
  const int repeats = 9;
  std::vector<std::vector<double>> seconds(runners.size());
  for (int rep = 0; rep < repeats; ++rep)
    for (std::size_t k = 0; k < runners.size(); ++k) {
      const auto t0 = clock_type::now();
      runners[k].run();
      seconds[k].push_back(std::chrono::duration<double>(clock_type::now() - t0).count() / steps);
    }
  // Each implementation's time over Eigen's in the same round, median over rounds: the VM's
  // drift moves both runs of a round together, and two medians taken over different rounds
  // do not cancel it.
  std::size_t eigen = runners.size();
  for (std::size_t k = 0; k < runners.size(); ++k)
    if (runners[k].impl == "eigen") eigen = k;
  for (std::size_t k = 0; k < runners.size(); ++k) {
    runners[k].finish();
    std::string extra;
    if (eigen < runners.size()) {
      std::vector<double> ratios;
      for (int rep = 0; rep < repeats; ++rep) ratios.push_back(seconds[k][rep] / seconds[eigen][rep]);
      std::sort(ratios.begin(), ratios.end());
      extra = ", \"paired_ratio_to_eigen\": " + std::to_string(ratios[ratios.size() / 2]);
    }
    auto& t = seconds[k];
    std::sort(t.begin(), t.end());
    emit(name, runners[k].impl, dtype, steps, {t[t.size() / 2], t.front(), repeats}, extra.c_str());
  }
}

// ---- logistic regression on data that outgrow the caches: xsym (one pass over X per step,
// rewrite one_pass_gemv) against Eigen (two), round-robin, the paired ratio per round --------
template <class T>
void bench_logreg_rows(const char* dtype, int rows) {
  logreg_data<T> d(0, rows);
  const int feats = logreg_data<T>::feats;
  const int steps = std::max(2, static_cast<int>(4e7 / (double(rows) * feats)));
  xsym::config.profile = false;
  auto [train, w, b] = seeds_train(d.w0);
  auto pred = xt::xtensor<bool, 1>::from_shape({std::size_t(rows)});
  auto xent_out = xt::xtensor<T, 1>::from_shape({std::size_t(rows)});
  eigen_logreg<T> eig(d.X.data(), d.Y.data(), rows, feats);
  auto run_xsym = [&] {
    w.set_value(d.w0);
    b.set_value(T(0));
    for (int i = 0; i < steps; ++i) train.into(pred, xent_out)(d.X, d.Y);
  };
  auto run_eigen = [&] {
    eig.reset(d.w0.data());
    for (int i = 0; i < steps; ++i) eig.step();
  };
  run_xsym();
  run_eigen();
  const auto wx = w.get_value();
  double err = 0, scale = 0;
  for (int i = 0; i < feats; ++i) {
    err = std::max(err, std::abs(double(wx(i)) - double(eig.w(i))));
    scale = std::max(scale, std::abs(double(eig.w(i))));
  }
  check(err <= (sizeof(T) == 4 ? 1e-3 : 1e-9) * std::max(1.0, scale), "xsym logreg_rows against Eigen");
  const int repeats = 7;
  std::vector<double> tx, te, ratios;
  for (int rep = 0; rep < repeats; ++rep) {
    auto t0 = clock_type::now();
    run_xsym();
    tx.push_back(std::chrono::duration<double>(clock_type::now() - t0).count() / steps);
    t0 = clock_type::now();
    run_eigen();
    te.push_back(std::chrono::duration<double>(clock_type::now() - t0).count() / steps);
    ratios.push_back(tx.back() / te.back());
  }
  std::sort(tx.begin(), tx.end());
  std::sort(te.begin(), te.end());
  std::sort(ratios.begin(), ratios.end());
  const std::string extra = ", \"paired_ratio_to_eigen\": " + std::to_string(ratios[ratios.size() / 2]);
  emit("logreg_rows", "xsym", dtype, rows, {tx[tx.size() / 2], tx.front(), repeats}, extra.c_str());
  emit("logreg_rows", "eigen", dtype, rows, {te[te.size() / 2], te.front(), repeats});
}

// Runs `run` once more over an output of NaNs and checks a thousand of its elements against
// the scalar function of X, Y and Z, within tol relative to max(1, |expected|).
void check_elementwise(const std::function<void()>& run, xt::xtensor<float, 1>& out, const xt::xtensor<float, 1>& X,
                       const xt::xtensor<float, 1>& Y, const xt::xtensor<float, 1>& Z,
                       const std::function<float(float, float, float)>& scalar, float tol, const char* what) {
  out.fill(std::numeric_limits<float>::quiet_NaN());
  run();
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; i += std::max<std::size_t>(1, n / 1000)) {
    const float want = scalar(X(i), Y(i), Z(i));
    check(std::abs(out(i) - want) <= tol * std::max(1.0f, std::abs(want)), what);
  }
}

// ---- fused elementwise: seconds per element ------------------------------------------------
void bench_elemwise(std::size_t n) {
  using T = float;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.05f, 0.95f);
  xt::xtensor<T, 1> X = xt::empty<T>({n}), Y = xt::empty<T>({n}), Z = xt::empty<T>({n}), out = xt::empty<T>({n});
  for (std::size_t i = 0; i < n; ++i) {
    X(i) = u(rng);
    Y(i) = u(rng) > 0.5f ? 1.0f : 0.0f;
    Z(i) = u(rng);
  }
  const int repeats = n >= 10000000 ? 7 : n >= 100000 ? 30 : 300;
  // Several calls per timing below 1e7: in the round robin, the implementation before (the
  // plain loop most of all) leaves part of the arrays out of L2, and one cold call per timing
  // would not measure the L2 case.
  const int inner = n >= 10000000 ? 1 : static_cast<int>(std::max<std::size_t>(10, 100000 / n));
  auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z");
  struct kernel {
    const char* name;
    std::function<T(T, T, T)> scalar;
  };
  const kernel kernels[] = {
      {"elemwise_add3mul", [](T a, T b, T c) { return (a + b + c) * 2; }},
      {"elemwise_sigmoid", [](T a, T, T) { return 1 / (1 + std::exp(-a)); }},
      {"elemwise_xent", [](T p, T yy, T) { return -yy * std::log(p) - (1 - yy) * std::log(1 - p); }},
  };
  for (const auto& k : kernels) {
    const std::string name = k.name;
    std::function<void()> run_xsym;
    // The three expressions as a user writes them.
    auto f3 = xsym::function("add3mul", xsym::inputs(x, y, z), (x + y + z) * 2);
    auto fs = xsym::function("sigmoid", xsym::inputs(x), 1 / (1 + exp(-x)), xsym::linker("cvm_nogc"));
    auto fx = xsym::function("xent", xsym::inputs(x, y), -y * log(x) - (1 - y) * log(1 - x), xsym::linker("cvm_nogc"));
    // The same with cxx: each fused program compiled into one loop (a lone op, as sigmoid is,
    // stays one precompiled kernel).
    xsym::config.cxx = noprof_build() ? "" : bench_cxx();
    auto f3c = xsym::function("add3mul", xsym::inputs(x, y, z), (x + y + z) * 2);
    auto fsc = xsym::function("sigmoid", xsym::inputs(x), 1 / (1 + exp(-x)), xsym::linker("cvm_nogc"));
    auto fxc = xsym::function("xent", xsym::inputs(x, y), -y * log(x) - (1 - y) * log(1 - x), xsym::linker("cvm_nogc"));
    xsym::config.cxx = "";
    // Every implementation writes the same preallocated output (as Eigen and xt::noalias write
    // theirs): with an output each, where the OS placed each one's pages decided how much of
    // the 1e5 case's arrays stayed in L2 (two loops that tie writing one buffer differed by up
    // to 9% writing one each, in one process), and which implementation ran before decided
    // whether its output was still cached.
    if (name == "elemwise_add3mul") run_xsym = [&] { for (int i = 0; i < inner; ++i) f3.into(out)(X, Y, Z); };
    if (name == "elemwise_sigmoid") run_xsym = [&] { for (int i = 0; i < inner; ++i) fs.into(out)(X); };
    if (name == "elemwise_xent") run_xsym = [&] { for (int i = 0; i < inner; ++i) fx.into(out)(X, Y); };
    std::function<void()> run_cxx;
    if (name == "elemwise_add3mul") run_cxx = [&] { for (int i = 0; i < inner; ++i) f3c.into(out)(X, Y, Z); };
    if (name == "elemwise_sigmoid") run_cxx = [&] { for (int i = 0; i < inner; ++i) fsc.into(out)(X); };
    if (name == "elemwise_xent") run_cxx = [&] { for (int i = 0; i < inner; ++i) fxc.into(out)(X, Y); };
    const double per = static_cast<double>(n) * inner;
    std::vector<std::string> impls{xsym_impl(false)};
    std::vector<std::function<void()>> runs{run_xsym};
    Eigen::Map<const Eigen::ArrayXf> ex(X.data(), n), ey(Y.data(), n), ez(Z.data(), n);
    Eigen::Map<Eigen::ArrayXf> eo(out.data(), n);
    if (!noprof_build()) {
      std::function<void()> run_eigen, run_xt;
      if (name == "elemwise_add3mul") run_eigen = [&] { for (int i = 0; i < inner; ++i) eo = (ex + ey + ez) * 2.0f; };
      if (name == "elemwise_sigmoid") run_eigen = [&] { for (int i = 0; i < inner; ++i) eo = 1.0f / (1.0f + (-ex).exp()); };
      if (name == "elemwise_xent")
        run_eigen = [&] { for (int i = 0; i < inner; ++i) eo = -ey * ex.log() - (1.0f - ey) * (1.0f - ex).log(); };
      if (name == "elemwise_add3mul") run_xt = [&] { for (int i = 0; i < inner; ++i) xt::noalias(out) = (X + Y + Z) * 2.0f; };
      if (name == "elemwise_sigmoid")
        run_xt = [&] { for (int i = 0; i < inner; ++i) xt::noalias(out) = 1.0f / (1.0f + xt::exp(-X)); };
      if (name == "elemwise_xent")
        run_xt = [&] { for (int i = 0; i < inner; ++i) xt::noalias(out) = -Y * xt::log(X) - (1.0f - Y) * xt::log(1.0f - X); };
      std::function<void()> run_loop = [&] {
        for (int i = 0; i < inner; ++i)
          for (std::size_t j = 0; j < n; ++j) out(j) = k.scalar(X(j), Y(j), Z(j));
      };
      impls.insert(impls.end(), {"xsym_cxx", "eigen", "xtensor", "loop"});
      runs.insert(runs.end(), {run_cxx, run_eigen, run_xt, run_loop});
    }
    const auto times = measure_round_robin(runs, repeats, per);
    // After timing, each implementation runs once more over an output of NaNs and is checked.
    for (std::size_t j = 0; j < runs.size(); ++j) {
      emit(k.name, impls[j], "float32", static_cast<double>(n), times[j]);
      check_elementwise(runs[j], out, X, Y, Z, k.scalar, 1e-4f, (impls[j] + " elemwise").c_str());
    }
  }
}

// ---- a typed tree beside its neighbours: merged at run time, or kept --------------------------
// An expression stored in a `var` loses its type; run-time fusion then merges its nodes with the
// expression that uses it into one program, whose text no tree in this program has: it runs
// interpreted. Kept apart, each part is its own typed kernel and the intermediate goes through
// memory. "whole" is the same computation as one typed tree (a text of its own: (2 * (x + y))).
void bench_typed_merge(std::size_t n) {
  using T = float;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  xt::xtensor<T, 1> X = xt::empty<T>({n}), Y = X, Z = X, tmp = X, out = X;
  for (auto* v : {&X, &Y, &Z})
    for (auto& e : *v) e = u(rng);
  auto x = xsym::vector<T>("x"), y = xsym::vector<T>("y"), z = xsym::vector<T>("z"), t = xsym::vector<T>("t");
  const xsym::var<T, 1> a1 = (x + y) * 2, a2 = x * y + z;
  struct variant {
    const char* name;
    std::function<T(T, T, T)> scalar;
    std::function<void()> merged, kept, whole;
  };
  auto m1 = xsym::function("merged", xsym::inputs(x, y, z), exp(a1) + z);
  auto f1 = xsym::function("first", xsym::inputs(x, y), (x + y) * 2);
  auto s1 = xsym::function("second", xsym::inputs(t, z), exp(t) + z);
  auto w1 = xsym::function("whole", xsym::inputs(x, y, z), exp(2 * (x + y)) + z);
  auto m2 = xsym::function("merged", xsym::inputs(x, y, z), a2 * x - y);
  auto f2 = xsym::function("first", xsym::inputs(x, y, z), x * y + z);
  auto s2 = xsym::function("second", xsym::inputs(t, x, y), t * x - y);
  auto w2 = xsym::function("whole", xsym::inputs(x, y, z), x * (x * y + z) - y);
  const int inner = n >= 10000000 ? 1 : static_cast<int>(std::max<std::size_t>(10, 100000 / n));
  const int repeats = n >= 10000000 ? 7 : n >= 100000 ? 30 : 300;
  const variant variants[] = {
      {"typed_merge_exp", [](T a, T b, T c) { return std::exp((a + b) * 2) + c; },
       [&] { for (int i = 0; i < inner; ++i) m1.into(out)(X, Y, Z); },
       [&] { for (int i = 0; i < inner; ++i) { f1.into(tmp)(X, Y); s1.into(out)(tmp, Z); } },
       [&] { for (int i = 0; i < inner; ++i) w1.into(out)(X, Y, Z); }},
      {"typed_merge_arith", [](T a, T b, T c) { return (a * b + c) * a - b; },
       [&] { for (int i = 0; i < inner; ++i) m2.into(out)(X, Y, Z); },
       [&] { for (int i = 0; i < inner; ++i) { f2.into(tmp)(X, Y, Z); s2.into(out)(tmp, X, Y); } },
       [&] { for (int i = 0; i < inner; ++i) w2.into(out)(X, Y, Z); }},
  };
  for (const auto& v : variants) {
    const std::vector<std::function<void()>> runs{v.merged, v.kept, v.whole};
    const char* impls[] = {"xsym_merged", "xsym_kept", "xsym_whole"};
    const auto times = measure_round_robin(runs, repeats, static_cast<double>(n) * inner);
    for (std::size_t j = 0; j < runs.size(); ++j) {
      emit(v.name, impls[j], "float32", static_cast<double>(n), times[j]);
      check_elementwise(runs[j], out, X, Y, Z, v.scalar, 1e-5f, impls[j]);
    }
  }
}

// ---- overheads --------------------------------------------------------------------------------
void bench_overheads() {
  // With this program's XTENSOR_USE_XSIMD, a result is a 64-byte aligned allocation (glibc's
  // posix_memalign): reported apart from the bar's calls (bench/calls.cpp).
  bench_calls("call_overhead_aligned");
  if (noprof_build()) return;
  // Per-node overhead: a 64-node chain of scalar ops, profiled minus unprofiled, per node.
  auto chain = [&](bool profiled) {
    auto s = xsym::scalar<double>("s");
    xsym::var<double, 0> e = s;
    for (int i = 0; i < 64; ++i) e = i % 2 ? xsym::var<double, 0>(e * 1.0001) : xsym::var<double, 0>(e + 0.5);
    return xsym::function("chain", xsym::inputs(s), e, xsym::profile(bench_profile(profiled)),
                          xsym::optimizer_excluding("fusion:inplace"));
  };
  auto f0 = chain(false), f1 = chain(true);
  const int n_calls = 20000, rounds = 15;
  double sink = 0;
  // Paired rounds (unprofiled, then profiled, back to back): the median of the differences
  // cancels the VM's drift, which two medians measured a second apart do not.
  auto time_calls = [&](auto& f) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < n_calls; ++i) sink += f(1.0);
    return std::chrono::duration<double>(clock_type::now() - t0).count() / n_calls;
  };
  time_calls(f0);
  time_calls(f1);
  std::vector<double> diffs, mins0, mins1;
  for (int r = 0; r < rounds; ++r) {
    const double a = time_calls(f0), b = time_calls(f1);
    diffs.push_back(b - a);
    mins0.push_back(a);
    mins1.push_back(b);
  }
  std::sort(diffs.begin(), diffs.end());
  const double nodes = static_cast<double>(f1.toposort().size());
  emit("profile_node_overhead", "xsym_profiled", "float64", nodes,
       {diffs[diffs.size() / 2] / nodes,
        (*std::min_element(mins1.begin(), mins1.end()) - *std::min_element(mins0.begin(), mins0.end())) / nodes,
        rounds});
  check(sink > 0, "chain result");

  // Building `train` (the function object) from its expressions.
  using T = float;
  auto xx = xsym::matrix<T>("x");
  auto yy = xsym::vector<T>("y");
  auto w = xsym::shared(xt::xtensor<T, 1>(xt::zeros<T>({784})), "w");
  auto bb = xsym::shared(T(0), "b");
  auto p_1 = 1 / (1 + exp(-dot(xx, w) - bb));
  auto xent = -yy * log(p_1) - (1 - yy) * log(1 - p_1);
  auto cost = mean(xent) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, bb);
  auto t = measure([&] {
    auto train = xsym::function("train", xsym::inputs(xx, yy), xsym::outputs(p_1 > 0.5, xent),
                                xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(bb, bb - 0.01 * gb)));
    check(train.toposort().size() > 3, "train built");
  }, 51, 1);
  emit("compile_function", "xsym", "float32", 1, t);
  // With cxx: the first build compiles (or loads the library kept in compiledir); the timed
  // builds find it loaded in this process.
  if (!noprof_build()) {
    xsym::config.cxx = bench_cxx();
    const auto t_cxx = measure([&] {
      auto train = xsym::function("train", xsym::inputs(xx, yy), xsym::outputs(p_1 > 0.5, xent),
                                  xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(bb, bb - 0.01 * gb)));
      check(train.runtime()->compiled_kernels().kernels > 0, "train built with cxx");
    }, 51, 1);
    xsym::config.cxx = "";
    emit("compile_function", "xsym_cxx", "float32", 1, t_cxx);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string only = argc > 1 ? argv[1] : "";
  const int steps = std::getenv("XSYM_BENCH_STEPS") ? std::atoi(std::getenv("XSYM_BENCH_STEPS")) : 1000;
  if (only.empty() || only == "logreg") {
    bench_logreg<float>("float32", steps);
    bench_logreg<double>("float64", steps);
    bench_logreg<float>("float32", steps, 4);
    bench_logreg<float>("float32", steps, 0, true);
  }
  if ((only.empty() || only == "logreg_rows") && !noprof_build()) {
    // 2000: X of 6.3 MB (float32), beyond L2, within L3. Other row counts: bench_xsym logreg_rows 3000 8000
    std::vector<int> row_counts{2000, 20000, 100000};
    if (argc > 2) row_counts.clear();
    for (int i = 2; i < argc; ++i) {
      char* end = nullptr;
      const long r = std::strtol(argv[i], &end, 10);
      if (end == argv[i] || *end != '\0' || r < 1 || r > 10000000) throw std::invalid_argument(std::string("logreg_rows: row count '") + argv[i] + "' is not a positive integer");
      row_counts.push_back(static_cast<int>(r));
    }
    for (int rows : row_counts) {
      bench_logreg_rows<float>("float32", rows);
      bench_logreg_rows<double>("float64", rows);
    }
  }
  if (only.empty() || only == "elemwise")
    for (std::size_t n : {std::size_t(1000), std::size_t(100000), std::size_t(10000000)}) bench_elemwise(n);
  if (only.empty() || only == "overhead") bench_overheads();
  if (only.empty() || only == "typed_merge")
    for (std::size_t n : {std::size_t(1000), std::size_t(100000), std::size_t(10000000)}) bench_typed_merge(n);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench: %s\n", e.what());
  return 1;
}
