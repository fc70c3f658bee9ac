// What docs/scaling.md reports, measured on this machine's ranks (run it under mpirun):
//   1. AllReduce{sum} against a bare MPI_Allreduce of the same floats, both into the same
//      array (the function adds its call, the shape agreement: one exchange of 20 int64);
//   2. the seeds' training step (784 features, float32, one pass, default flags) per row on
//      one rank, and the step over all ranks with X's rows split, at several total row counts.
//
//   bash tests/mpi/run.sh mpiexec 2 build-bench/bench/bench_mpi_scaling
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <xsym/mpi.hpp>

namespace {
using clock_type = std::chrono::steady_clock;

// Median seconds per call of f over `reps` calls, in 7 rounds; with `together`, every rank runs
// the same rounds and the slowest rank's median is returned.
template <class F>
double median_seconds(F&& f, int reps, bool together = true) {
  std::vector<double> rounds;
  for (int r = 0; r < 7; ++r) {
    if (together) MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = clock_type::now();
    for (int i = 0; i < reps; ++i) f();
    rounds.push_back(std::chrono::duration<double>(clock_type::now() - t0).count() / reps);
  }
  std::sort(rounds.begin(), rounds.end());
  double worst = rounds[3];
  if (together) MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

struct step_data {
  xt::xtensor<float, 2> X;
  xt::xtensor<float, 1> Y, w0;
};

step_data make_data(std::size_t rows, std::size_t feats) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  step_data d{xt::empty<float>({rows, feats}), xt::empty<float>({rows}), xt::empty<float>({feats})};
  for (auto& v : d.X) v = normal(rng);
  for (auto& v : d.Y) v = normal(rng) > 0 ? 1.0f : 0.0f;
  for (auto& v : d.w0) v = normal(rng);
  return d;
}

// The seeds' step over `total` rows; with `shards`, gradients summed over the ranks.
double step_seconds(const step_data& d, std::size_t total, bool shards, int reps) {
  auto x = xsym::matrix<float>("x");
  auto y = xsym::vector<float>("y");
  auto w = xsym::shared(d.w0, "w");
  auto b = xsym::shared(0.0f, "b");
  auto p1 = 1 / (1 + exp(-dot(x, w) - b));
  auto xent = -y * log(p1) - (1 - y) * log(1 - p1);
  auto [gws, gbs] = xsym::grad(sum(xent), w, b);
  auto gw = (shards ? xsym::mpi::allreduce(gws) : gws) / float(total) + 0.02f * w;
  auto gb = (shards ? xsym::mpi::allreduce(gbs) : gbs) / float(total);
  auto train = xsym::function("train", xsym::inputs(x, y), p1 > 0.5f,
                              xsym::updates(xsym::update(w, w - 0.01f * gw), xsym::update(b, b - 0.01f * gb)));
  return median_seconds([&] { (void)train(d.X, d.Y); }, reps, shards);
}
}  // namespace

int main(int argc, char** argv) {
  xsym::mpi::environment env(argc, argv);
  const int me = env.rank(), p = env.size();
  if (me == 0) std::printf("ranks: %d\n\nAllReduce{sum} of float32, seconds per call (slowest rank's median)\n", p);
  if (me == 0) std::printf("%10s %12s %12s %8s\n", "floats", "MPI", "xsym node", "ratio");
  for (std::size_t n : {1u, 784u, 16384u, 262144u, 4194304u}) {
    xt::xtensor<float, 1> in = xt::ones<float>({n}), out = xt::empty<float>({n});
    const int reps = n > 100000 ? 20 : 2000;
    const double raw = median_seconds(
        [&] { MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }, reps);
    auto v = xsym::vector<float>("v");
    auto f = xsym::function("allreduce", xsym::inputs(v), xsym::mpi::allreduce(v));
    auto call = f.into(out);  // written by the node itself, as MPI_Allreduce writes `out`
    const double node = median_seconds([&] { call(in); }, reps);
    if (me == 0) std::printf("%10zu %12.3e %12.3e %8.2f\n", n, raw, node, node / raw);
  }
  const std::size_t feats = 784;
  if (me == 0)
    std::printf("\nThe seeds' step (float32, %zu features), seconds per step\n%10s %14s %14s %14s %9s\n", feats, "rows",
                "one rank", "per row", "all ranks", "speedup");
  for (std::size_t total : {400u, 4000u, 40000u}) {
    const step_data whole = make_data(total, feats);
    const int reps = total > 10000 ? 20 : 200;
    // One rank alone (the others wait at the barrier), then the rows split over every rank.
    double alone = 0;
    if (me == 0) alone = step_seconds(whole, total, false, reps);
    MPI_Bcast(&alone, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const std::size_t lo = total * static_cast<std::size_t>(me) / static_cast<std::size_t>(p);
    const std::size_t hi = total * static_cast<std::size_t>(me + 1) / static_cast<std::size_t>(p);
    step_data shard{xt::empty<float>({hi - lo, feats}), xt::empty<float>({hi - lo}), whole.w0};
    std::copy(whole.X.begin() + static_cast<std::ptrdiff_t>(lo * feats),
              whole.X.begin() + static_cast<std::ptrdiff_t>(hi * feats), shard.X.begin());
    std::copy(whole.Y.begin() + static_cast<std::ptrdiff_t>(lo), whole.Y.begin() + static_cast<std::ptrdiff_t>(hi),
              shard.Y.begin());
    const double split = step_seconds(shard, total, true, reps);
    if (me == 0)
      std::printf("%10zu %14.3e %14.3e %14.3e %9.2f\n", total, alone, alone / static_cast<double>(total), split, alone / split);
  }
  return 0;
}
